//! `crl [--refresh] [--json]`: write a new CRL (and publish it, and have MySQL re-read it), or
//! with `--refresh` only when it is due. "Nothing to do" exits 0, so it can run from cron or a
//! systemd timer; a failure (including MySQL not re-reading a new CRL, which would lock every
//! user out once the old one expires) exits 2.

use shiqi_ca::protocol::{CrlFacts, CrlResponse, PROTOCOL_VERSION, Text};
use time::format_description::well_known::Rfc3339;

use crate::audit;
use crate::crl::{self, When};
use crate::error::AgentError;
use crate::handler::Handler;
use crate::state::Context;

/// `crl`.
#[derive(Debug, clap::Args)]
pub(crate) struct CrlArgs {
    /// Only when it is due: missing, or fewer than `[crl] refresh_before_days` left.
    #[arg(long)]
    pub(crate) refresh: bool,
    /// Do not ask MySQL to re-read the CRL (the servers are about to start and read it anyway,
    /// e.g. `ExecStartPre=` before mariadbd).
    #[arg(long)]
    pub(crate) no_reload: bool,
    /// Print JSON instead of one line.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Handler for CrlArgs {
    fn action(&self) -> &'static str {
        "crl"
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Runs `crl`.
pub(crate) fn run(ctx: &Context, args: &CrlArgs) -> anyhow::Result<()> {
    let when = if args.refresh {
        When::IfDue
    } else {
        When::Always
    };
    let result = ctx.ca().and_then(|ca| crl::update(ctx, &ca, when));
    let updated = match result {
        Ok(u) => u,
        Err(e) => {
            record(ctx, None, "failed", Some(format!("{e:#}")));
            return Err(e.into());
        }
    };
    let mut warnings = Vec::new();
    let mut reload_failed = None;
    // A reload that failed earlier is retried even when the CRL did not change now: MySQL may
    // still hold the CRL from before a revocation.
    let retried = crl::reload_pending(ctx) && !updated.changed();
    let reloaded = if (updated.changed() || crl::reload_pending(ctx)) && !args.no_reload {
        match crl::reload_mysql(ctx) {
            Ok(done) => done,
            Err(e) => {
                let why = format!("{e:#}");
                warnings.push(Text::from(format!(
                    "MySQL did not re-read the new CRL: {why}"
                )));
                reload_failed = Some(why);
                None
            }
        }
    } else {
        None
    };
    if updated.changed() || retried {
        let outcome = if reload_failed.is_some() {
            "partial"
        } else {
            "ok"
        };
        record(ctx, Some(&updated.facts), outcome, reload_failed.clone());
    }

    if args.json {
        crate::commands::print_json(&CrlResponse {
            version: PROTOCOL_VERSION,
            regenerated: updated.regenerated,
            crl: updated.facts.clone(),
            mysql_reloaded_with: reloaded.clone().map(Text::from),
            warnings,
        })?;
    } else {
        let text = summary(
            &updated.facts,
            updated.regenerated,
            updated.published,
            reloaded.as_deref(),
            ctx,
        );
        crate::commands::print_text(&text)?;
    }
    match reload_failed {
        Some(why) => Err(AgentError::Mysql {
            address: crate::mysql::address(ctx),
            why: format!("the new CRL was written but the server did not re-read it: {why}"),
        }
        .into()),
        None => Ok(()),
    }
}

fn summary(
    facts: &CrlFacts,
    regenerated: bool,
    published: bool,
    reloaded: Option<&str>,
    ctx: &Context,
) -> String {
    let date = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
    let refresh_at = facts.next_update - ctx.config.crl.refresh_before();
    let what = format!(
        "CRL #{} ({} revoked serial{}, valid until {})",
        facts.number,
        facts.revoked,
        if facts.revoked == 1 { "" } else { "s" },
        date(facts.next_update)
    );
    let mut line = if regenerated {
        format!("wrote {what} to {}", facts.path)
    } else if published {
        format!("{what} is fresh; published it again")
    } else if reloaded.is_some() {
        format!("{what} is fresh, but an earlier MySQL reload had failed: retried it")
    } else {
        format!("nothing to do: {what} is fresh until {}", date(refresh_at))
    };
    if (regenerated || published)
        && let Some(p) = &facts.published
    {
        line.push_str(&format!("; published {p}"));
    }
    if let Some(statement) = reloaded {
        line.push_str(&format!("; MySQL re-read it ({statement})"));
    }
    line.push('\n');
    line
}

fn record(ctx: &Context, facts: Option<&CrlFacts>, outcome: &str, failure: Option<String>) {
    let what = facts.map(|f| format!("CRL #{} lists {} serial(s)", f.number, f.revoked));
    let reason = match (what, failure) {
        (Some(w), Some(f)) => Some(format!("{w}; {f}")),
        (w, f) => w.or(f),
    };
    audit::record(
        ctx,
        &audit::Entry {
            action: "crl",
            name: "crl",
            serial: None,
            outcome,
            reason,
        },
    );
}
