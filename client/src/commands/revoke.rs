//! `shiqi-connect revoke NAME --server DEST [--serial S] [--reason R]`: an admin revokes from the
//! laptop. It runs `shiqi-ca-agent revoke` over SSH (so the server's own rules apply: the CRL,
//! `FLUSH SSL`, the MySQL account lock and session kills, the Kafka ACLs) and shows the answer.

use std::process::ExitCode;

use anyhow::Context as _;
use shiqi_ca::crl::{Reason, parse_reason};
use shiqi_ca::protocol::RevokeResponse;
use shiqi_ca::{ProfileName, Serial};

use crate::agent::{self, AgentCommand, Revocation};
use crate::cli::{GlobalArgs, RevokeArgs};
use crate::commands::connect;
use crate::commands::print_stdout;
use crate::error::{Error, InputError};
use crate::printer::Printer;
use crate::profile::{self, Profile, Roots};
use crate::prompt::Prompter;
use crate::ssh::config::{self, Env, Target};
use crate::ssh::destination::Destination;

/// Runs `revoke`.
///
/// # Errors
/// Bad input, SSH, or the agent's refusal; exit 2 also when the agent revoked but could not
/// make it effective everywhere (its answer is printed first).
pub(crate) async fn run(
    args: &RevokeArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let prompter = Prompter::new(global.yes);
    let roots = Roots::resolve(global.shiqi_home.as_deref())?;
    let Asked { name, reason, what } = asked(args)?;
    let agent = AgentCommand::new(&args.agent_command)?;
    let (destination_text, target) = server(args, &roots, &name, &prompter)?;

    let step = printer.step(&format!("connect to {}", target.host));
    let session = connect(args.accept_new_host_key, &target, &prompter, printer)
        .await
        .with_context(|| format!("cannot log in to `{destination_text}`"))?;
    step.done(&format!(
        "logged in as {} with {}",
        target.user,
        session.auth().used
    ));
    let step = printer.step(&match &what {
        Revocation::Serial(s) => format!("revoke certificate {s} of `{name}` ({reason})"),
        Revocation::Name(n) => format!("revoke every certificate of `{n}` ({reason})"),
        Revocation::Key(n, k) => format!("revoke the certificates of `{n}` for key {k} ({reason})"),
    });
    let result = agent::revoke(&session, &agent, &what, reason).await;
    session.close().await;
    let revoked = result.with_context(|| format!("cannot revoke `{name}`"))?;
    let r = &revoked.response;
    if let Revocation::Serial(_) = what
        && r.name.as_str() != name.as_str()
    {
        printer.warn(&format!(
            "that serial belonged to `{}`, not `{name}`; it is revoked all the same",
            r.name
        ));
    }
    step.done(&format!(
        "{} certificate(s) revoked, CRL #{} lists {}",
        r.revoked.iter().filter(|c| !c.already).count(),
        r.crl.number,
        r.crl.revoked
    ));
    show(r, printer);
    print_revoked(r, global.json)?;
    match revoked.incomplete {
        Some(why) => Err(anyhow::anyhow!(
            "`{name}` is revoked and in the CRL, but not everywhere: {why}"
        )),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// What to revoke, as the flags say it.
struct Asked {
    name: ProfileName,
    reason: Reason,
    what: Revocation,
}

/// The name, the reason and the serial (or the whole name), each checked.
fn asked(args: &RevokeArgs) -> Result<Asked, Error> {
    let name: ProfileName = args.name.trim().parse().map_err(|source| Error::Ca {
        what: "use that name",
        source,
    })?;
    let reason = parse_reason(args.reason.trim()).map_err(|source| Error::Ca {
        what: "use that revocation reason",
        source,
    })?;
    let what = match args.serial.as_deref().map(str::trim) {
        Some(s) => Revocation::Serial(s.parse::<Serial>().map_err(|source| Error::Ca {
            what: "use that serial",
            source,
        })?),
        None => Revocation::Name(name.clone()),
    };
    Ok(Asked { name, reason, what })
}

/// The server to ask: `--server`, else the local profile's (reached the way setup reached it),
/// else asked on a terminal; with its destination as given.
fn server(
    args: &RevokeArgs,
    roots: &Roots,
    name: &ProfileName,
    prompter: &Prompter,
) -> anyhow::Result<(String, Target)> {
    let jump = config::check_jump(args.jump.as_deref())?;
    let local = Profile::load(&profile::dir(&roots.root, name)).ok();
    let given = args
        .server
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let (destination_text, jump) = match (given, local) {
        (Some(s), _) => (s.to_owned(), jump),
        (None, Some(p)) => (p.server.destination, jump.or(p.server.jump)),
        (None, None) => (
            prompter.server().ok_or(Error::Input(InputError::Missing {
                what: "server",
                flag: "--server HOST",
                env: "SHIQI_SERVER",
            }))?,
            jump,
        ),
    };
    let destination: Destination = destination_text.parse()?;
    let env = Env::from_process(roots.home.clone(), None).with_jump(jump.as_deref());
    let target = config::resolve(&destination, &env)
        .with_context(|| format!("cannot resolve `{destination_text}`"))?;
    Ok((destination_text, target))
}

/// The answer on stdout: JSON, or one line per certificate.
fn print_revoked(r: &RevokeResponse, json: bool) -> anyhow::Result<()> {
    if json {
        let mut text = serde_json::to_string_pretty(r).unwrap_or_default();
        text.push('\n');
        return print_stdout(&text);
    }
    let mut text = String::new();
    for c in &r.revoked {
        text.push_str(&format!(
            "{} {}{}\n",
            c.serial,
            c.reason.map_or("unspecified", Reason::as_str),
            if c.already { " (already revoked)" } else { "" }
        ));
    }
    print_stdout(&text)
}

fn show(r: &RevokeResponse, printer: &Printer) {
    if let Some(m) = &r.mysql {
        let mut parts = Vec::new();
        if m.locked {
            parts.push("account locked".to_owned());
        }
        if let Some(s) = &m.reloaded_with {
            parts.push(format!("CRL re-read (`{s}`)"));
        }
        parts.push(format!("{} session(s) ended", m.killed.len()));
        match &m.error {
            Some(e) => printer.warn(&format!("MySQL: {}; failed: {e}", parts.join(", "))),
            None => printer.note(&format!("MySQL: {}", parts.join(", "))),
        }
    }
    if let Some(k) = &r.kafka {
        match (&k.error, &k.kept_because) {
            (Some(e), _) => printer.warn(&format!("Kafka: failed: {e}")),
            (None, Some(why)) => printer.note(&format!("Kafka: ACLs kept ({why})")),
            (None, None) => printer.note(&format!(
                "Kafka: {} ACL(s) of `User:{}` deleted",
                k.deleted.len(),
                r.name
            )),
        }
    }
    if !r.still_valid.is_empty() {
        let serials: Vec<String> = r.still_valid.iter().map(ToString::to_string).collect();
        printer.note(&format!("still valid: {}", serials.join(", ")));
    }
    for w in &r.warnings {
        printer.warn(w.as_str());
    }
}
