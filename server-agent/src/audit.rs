//! The audit log: `<state>/audit.log`, append-only, one JSON line per action with who asked
//! (the SSH user and client address), when, the serial and the outcome.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;

use serde::Serialize;

use crate::state::Context;

/// One audit line.
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    /// `sign`, `mysql-user`, `revoke`, `server-cert`, `init`.
    pub action: &'a str,
    /// The name acted on.
    pub name: &'a str,
    /// The serial, when a certificate is involved.
    pub serial: Option<String>,
    /// `ok` or `refused` / `failed`.
    pub outcome: &'a str,
    /// One line on why, for refusals and failures.
    pub reason: Option<String>,
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(with = "time::serde::rfc3339")]
    time: time::OffsetDateTime,
    user: String,
    ssh_client: Option<String>,
    #[serde(flatten)]
    entry: &'a Entry<'a>,
}

/// Appends one line. A failure to write the audit log is reported on stderr but does not undo
/// the action (the inventory is the record of truth).
pub fn record(ctx: &Context, entry: &Entry<'_>) {
    let line = Line {
        time: time::OffsetDateTime::now_utc(),
        user: std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "unknown".to_owned()),
        ssh_client: std::env::var("SSH_CLIENT")
            .ok()
            .and_then(|s| s.split_whitespace().next().map(str::to_owned)),
        entry,
    };
    let Ok(mut text) = serde_json::to_string(&line) else {
        return;
    };
    text.push('\n');
    let path = ctx.path("audit.log");
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        // One write(2) of one line: O_APPEND keeps concurrent lines whole.
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "cannot append to the audit log");
    }
}
