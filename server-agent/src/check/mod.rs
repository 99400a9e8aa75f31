//! `check`: the server's doctor. Each finding is one line (ok, warn or FAIL) with the fix; the
//! Kafka and MySQL findings come from trying, not from reading configs: a throwaway
//! certificate from this CA (`throwaway`) is presented to every broker and to MySQL, given an
//! ACL, then revoked, and the seconds until each server refuses it are measured.
//!
//! The throwaway is recorded in the inventory (kind `admin`, name `shiqi-check-…`), lives for
//! 15 minutes and is listed in the CRL only until it expires.

mod kafka;
mod local;
mod mysql;
mod throwaway;

use std::time::Duration;

use serde::Serialize;

use crate::progress::Progress;
use crate::state::Context;

/// How long `check` waits for a server to refuse the revoked throwaway. The JVM re-reads a
/// changed CRL file within 30 s; MySQL re-reads it when the agent asks.
pub(crate) const REVOCATION_WAIT: Duration = Duration::from_secs(90);

/// One finding's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// As it should be.
    Ok,
    /// Works, but something will bite later.
    Warn,
    /// A hole or a breakage: the line says the fix.
    Fail,
    /// Could not be checked (the line says why).
    Skip,
}

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Finding {
    /// A stable id, e.g. `kafka.client_auth` (with `@broker` for per-broker findings).
    pub(crate) id: String,
    /// The verdict.
    pub(crate) status: Status,
    /// What was found.
    pub(crate) text: String,
    /// What to do, for `warn` and `fail`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fix: Option<String>,
    /// A measurement, e.g. the seconds until a revoked certificate was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seconds: Option<f64>,
}

impl Finding {
    fn new(id: impl Into<String>, status: Status, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            status,
            text: text.into(),
            fix: None,
            seconds: None,
        }
    }

    fn ok(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(id, Status::Ok, text)
    }

    fn fail(id: impl Into<String>, text: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(id, Status::Fail, text).with_fix(fix)
    }

    fn warn(id: impl Into<String>, text: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(id, Status::Warn, text).with_fix(fix)
    }

    fn skip(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(id, Status::Skip, text)
    }

    fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    fn with_seconds(mut self, seconds: f64) -> Self {
        self.seconds = Some((seconds * 10.0).round() / 10.0);
        self
    }
}

/// What `check` runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    /// Also revoke the throwaway and time each server's refusal.
    pub(crate) revocation: bool,
}

/// Every finding, in a fixed order: this host, then Kafka, then MySQL, then revocation; what it
/// is doing meanwhile on `progress`.
pub(crate) fn run(ctx: &Context, options: Options, progress: &Progress) -> Vec<Finding> {
    progress.set("check: this host (the state folder, the CRL, sshd, the last backup)");
    let mut findings = local::check(ctx);
    let ca = match ctx.ca() {
        Ok(ca) => ca,
        Err(e) => {
            findings.push(Finding::fail(
                "ca",
                format!("cannot load the CA: {e}"),
                "run `shiqi-ca-agent init` as the agent's account",
            ));
            return findings;
        }
    };
    let probe = match throwaway::Throwaway::issue(ctx, &ca) {
        Ok(p) => p,
        Err(e) => {
            findings.push(Finding::fail(
                "ca.issue",
                format!("cannot issue a throwaway certificate: {e}"),
                "check the state directory (above) and the inventory",
            ));
            return findings;
        }
    };
    progress.set("check: every broker, with a throwaway certificate");
    let mut brokers = kafka::check(ctx, &ca, &probe, &mut findings);
    progress.set("check: MySQL, with the throwaway certificate");
    let mut mysql = mysql::check(ctx, &ca, &probe, &mut findings);
    revocation(
        ctx,
        &ca,
        options,
        (&probe, progress),
        &mut brokers,
        &mut mysql,
        &mut findings,
    );
    if !ctx.config.mysql.host.is_empty()
        && let Some(f) = mysql::cleanup(ctx, &probe)
    {
        findings.push(f);
    }
    findings
}

/// Revokes the throwaway and times each server that accepted it until it refuses it.
fn revocation(
    ctx: &Context,
    ca: &shiqi_ca::issue::Ca,
    options: Options,
    (probe, progress): (&throwaway::Throwaway, &Progress),
    brokers: &mut Vec<kafka::Accepting>,
    mysql: &mut Option<mysql::Accepting>,
    findings: &mut Vec<Finding>,
) {
    if !options.revocation {
        findings.push(Finding::skip(
            "revocation",
            "not measured (--no-revocation); the throwaway certificate expires on its own",
        ));
        return;
    }
    if brokers.is_empty() && mysql.is_none() {
        findings.push(Finding::skip(
            "revocation",
            "no server accepted the throwaway certificate, so there is nothing to revoke against",
        ));
        return;
    }
    if let Err(e) = probe.revoke(ctx, ca) {
        findings.push(Finding::fail(
            "revocation",
            format!("cannot revoke the throwaway certificate: {e}"),
            "run `shiqi-ca-agent crl` and read its error",
        ));
        return;
    }
    let started = std::time::Instant::now();
    let deadline = started + REVOCATION_WAIT;
    while !(brokers.is_empty() && mysql.is_none()) && std::time::Instant::now() < deadline {
        progress.set(&waiting_for(brokers.len(), mysql.is_some()));
        brokers.retain(|b| match b.refuses(ctx) {
            Some(why) => {
                findings.push(kafka::revoked(b, started.elapsed(), &why));
                false
            }
            None => true,
        });
        if let Some(m) = mysql.as_ref()
            && let Some(why) = m.refuses(ctx)
        {
            findings.push(mysql::revoked(started.elapsed(), &why));
            *mysql = None;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    for b in brokers.iter() {
        findings.push(kafka::not_revoked(b));
    }
    if mysql.is_some() {
        findings.push(mysql::not_revoked());
    }
}

/// What the revocation wait is waiting on, in words.
fn waiting_for(brokers: usize, mysql: bool) -> String {
    let servers = match (brokers, mysql) {
        (0, _) => "MySQL".to_owned(),
        (1, false) => "1 broker".to_owned(),
        (n, false) => format!("{n} brokers"),
        (1, true) => "1 broker and MySQL".to_owned(),
        (n, true) => format!("{n} brokers and MySQL"),
    };
    format!(
        "check: waiting for {servers} to refuse the revoked throwaway certificate (at most {} s; \
         brokers re-read the CRL within 30 s)",
        REVOCATION_WAIT.as_secs()
    )
}

/// The report as text: one line per finding, the fix indented below a failure or warning.
pub(crate) fn text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let mark = match f.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        out.push_str(&format!(
            "{mark}  {:<28} {}\n",
            f.id,
            shiqi_ca::text::one_line(&f.text, 400)
        ));
        if let Some(fix) = &f.fix {
            out.push_str(&format!(
                "      {:<28} fix: {}\n",
                "",
                shiqi_ca::text::one_line(fix, 400)
            ));
        }
    }
    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    let skipped = match count(Status::Skip) {
        0 => String::new(),
        n => format!(", {n} not checked (skip)"),
    };
    out.push_str(&match (count(Status::Fail), count(Status::Warn)) {
        (0, 0) => format!("all checks passed{skipped}\n"),
        (0, w) => format!("no failures, {w} warning(s){skipped}\n"),
        (f, w) => format!("{f} failure(s), {w} warning(s){skipped}\n"),
    });
    out
}
