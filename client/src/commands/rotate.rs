//! `shiqi-connect rotate [NAME] [--keep-old]` and `renew [NAME | --all]`: log in to the
//! profile's server the way the tunnel does (no questions: the host key must be known), then
//! [`ops::rotate`](crate::ops::rotate) or [`ops::renew`](crate::ops::renew), and show
//! what happened.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;
use shiqi_ca::ProfileName;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::{GlobalArgs, RenewArgs, RotateArgs};
use crate::commands::print_stdout;
use crate::error::{Error, ProfileError};
use crate::ops::renew::{self, RenewOutcome};
use crate::ops::rotate::{self, OldCertificate, Rotated};
use crate::printer::Printer;
use crate::profile::lock::PATIENCE;
use crate::profile::{self, Profile, Roots, tilde};
use crate::ssh::Session;
use crate::tunnel::Targets;

/// Runs `rotate`.
///
/// # Errors
/// The failing step's error, with context.
pub(crate) async fn run_rotate(
    args: &RotateArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let roots = Roots::resolve(global.shiqi_home.as_deref())?;
    let name = roots.pick(args.name.as_deref(), "rotate")?;
    if let Some(span) = args.lifetime {
        shiqi_ca::issue::Lifetime::Client
            .check(span)
            .map_err(|source| crate::error::Error::Ca {
                what: "use that --lifetime",
                source,
            })?;
    }
    let dir = profile::dir(&roots.root, &name);
    // Read to log in only: the rotation reads it again under the profile's lock.
    let profile = Profile::load(&dir)?;
    let session = login(&roots, &profile, printer).await?;
    let step = printer.wait("rotate the key and certificate");
    let fate = match (args.keep_old, args.compromised) {
        (_, true) => OldCertificate::Compromised,
        (true, false) => OldCertificate::Keep,
        (false, false) => OldCertificate::Supersede,
    };
    let result = rotate::rotate(&session, &dir, &name, fate, args.lifetime).await;
    session.close().await;
    let rotated = result.with_context(|| format!("cannot rotate the certificate of `{name}`"))?;
    step.done(&format!(
        "serial {} → {}, valid until {} ({})",
        rotated.old.serial,
        rotated.profile.certificate.serial,
        date(rotated.profile.certificate.not_after),
        crate::clock::lifetime(
            rotated.profile.certificate.not_before,
            rotated.profile.certificate.not_after
        )
    ));
    show(&rotated, &dir, &roots.home, printer);
    if global.json {
        print_stdout(&json(&rotated))?;
    } else {
        print_stdout(&format!("{}\n", dir.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One profile's line in `renew --json`.
#[derive(Serialize)]
struct Renewal<'a> {
    name: &'a str,
    #[serde(flatten)]
    outcome: &'a RenewOutcome,
}

/// Runs `renew`.
///
/// # Errors
/// The first profile whose renewal failed (the others are still tried).
pub(crate) async fn run_renew(
    args: &RenewArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let roots = Roots::resolve(global.shiqi_home.as_deref())?;
    let names = if args.all {
        let all = roots.profiles();
        if all.is_empty() {
            return Err(Error::Profile(ProfileError::NoProfiles { root: roots.root }).into());
        }
        all
    } else {
        vec![roots.pick(args.name.as_deref(), "renew")?]
    };
    let mut outcomes = Vec::new();
    let mut first_error = None;
    for name in &names {
        match renew_one(&roots, name, printer).await {
            Ok(o) => outcomes.push((name.clone(), o)),
            Err(e) if names.len() > 1 => {
                crate::commands::report(&e, printer);
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    if global.json {
        let lines: Vec<Renewal<'_>> = outcomes
            .iter()
            .map(|(n, o)| Renewal {
                name: n.as_str(),
                outcome: o,
            })
            .collect();
        let mut text = serde_json::to_string_pretty(&lines).unwrap_or_default();
        text.push('\n');
        print_stdout(&text)?;
    } else {
        let mut text = String::new();
        for (name, o) in &outcomes {
            text.push_str(&match o {
                RenewOutcome::NotDue {
                    not_after,
                    due_from,
                } => format!(
                    "{name}: nothing due; valid until {}, renewal due from {}\n",
                    rfc3339(*not_after),
                    rfc3339(*due_from)
                ),
                RenewOutcome::Renewed(r) => format!(
                    "{name}: renewed; serial {}, valid until {}\n",
                    r.profile.certificate.serial,
                    rfc3339(r.profile.certificate.not_after)
                ),
            });
        }
        print_stdout(&text)?;
    }
    match first_error {
        Some(e) => Err(e.context("not every profile was renewed")),
        None => Ok(ExitCode::SUCCESS),
    }
}

async fn renew_one(
    roots: &Roots,
    name: &ProfileName,
    printer: &Printer,
) -> anyhow::Result<RenewOutcome> {
    let dir = profile::dir(&roots.root, name);
    let profile = Profile::load(&dir)?;
    // Nothing due: no network at all (cron runs this often).
    if !renew::is_due(&profile.certificate, OffsetDateTime::now_utc()) {
        return Ok(RenewOutcome::NotDue {
            not_after: profile.certificate.not_after,
            due_from: renew::due_from(&profile.certificate),
        });
    }
    let session = login(roots, &profile, printer).await?;
    let step = printer.wait(&format!("renew the certificate of `{name}`"));
    let result = renew::renew_if_due(&session, &dir, name, Some(PATIENCE)).await;
    session.close().await;
    let outcome = result.with_context(|| format!("cannot renew the certificate of `{name}`"))?;
    match &outcome {
        RenewOutcome::Renewed(r) => {
            step.done(&format!(
                "serial {} → {}, valid until {}",
                r.old.serial,
                r.profile.certificate.serial,
                date(r.profile.certificate.not_after)
            ));
            show(r, &dir, &roots.home, printer);
        }
        RenewOutcome::NotDue { .. } => step.done("nothing due"),
    }
    Ok(outcome)
}

/// Logs in to the profile's server without asking anything.
async fn login(roots: &Roots, profile: &Profile, printer: &Printer) -> anyhow::Result<Session> {
    let step = printer.step(&format!("connect to {}", profile.server.host));
    let targets = Targets::resolve(profile, &roots.home)
        .with_context(|| format!("cannot resolve `{}`", profile.server.destination))?;
    let session = targets
        .connect()
        .await
        .with_context(|| format!("cannot log in to `{}`", profile.server.destination))?;
    step.done(&format!(
        "{} with {}",
        targets.server(),
        session.auth().used
    ));
    Ok(session)
}

/// The logins and the fate of the old certificate, on stderr.
fn show(r: &Rotated, dir: &Path, home: &Path, printer: &Printer) {
    for l in &r.logins {
        let line = format!("{}: {}", l.service, l.check.detail);
        if l.check.ok {
            printer.note(&line);
        } else {
            printer.warn(&line);
        }
    }
    match (&r.revoked, &r.kept_old) {
        (Some(rev), _) => {
            let reason = rev
                .revoked
                .iter()
                .find_map(|c| c.reason)
                .map_or("unspecified", |r| r.as_str());
            printer.note(&format!(
                "old certificate {} revoked ({reason}), listed in CRL #{}",
                r.old.serial, rev.crl.number
            ));
            if let Some(m) = &rev.mysql
                && !m.killed.is_empty()
            {
                printer.note(&format!(
                    "the server ended {} MySQL session(s) of `{}`",
                    m.killed.len(),
                    r.profile.name
                ));
            }
            for w in &rev.warnings {
                printer.warn(w.as_str());
            }
        }
        (None, Some(why)) => printer.warn(&format!(
            "old certificate {} is still valid until {}: {why}",
            r.old.serial,
            rfc3339(r.old.not_after)
        )),
        (None, None) => {}
    }
    if let Some(why) = &r.revoke_incomplete {
        printer.warn(&format!(
            "the server could not finish the revocation: {why}"
        ));
    }
    printer.note(&format!(
        "every file in {} is new; Java and DataGrip clients pick the new keystore up at their \
         next connection (the password is unchanged); a running tunnel keeps running",
        tilde(dir, home)
    ));
}

fn json(r: &Rotated) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
    s.push('\n');
    s
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| t.to_string())
}

fn date(t: OffsetDateTime) -> String {
    format!(
        "{} ({} days)",
        t.date(),
        (t - OffsetDateTime::now_utc()).whole_days()
    )
}
