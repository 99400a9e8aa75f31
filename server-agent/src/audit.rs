//! The audit log: `<state>/audit.log`, append-only, one JSON line per action with who asked
//! (the enrolled key's fingerprint, name and role, or the local account), when, the serial and
//! the outcome. Who asked comes from [`Context::caller`], never from the environment a caller
//! could set; the file is the agent account's (0600 in its 0700 state directory).
//!
//! Every field a caller can choose (a refused request's name, serial and the error quoting
//! them) is escaped and clipped here, so one request adds well under 1 kB whatever it sends:
//! the log must not be a way to fill the disk, on which the CRL's refreshes depend.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;

use serde::Serialize;

use shiqi_ca::inventory::access::Role;
use shiqi_ca::text::one_line;

use crate::caller::Caller;
use crate::state::Context;

/// One audit line.
#[derive(Debug, Serialize)]
pub(crate) struct Entry<'a> {
    /// `sign`, `mysql-user`, `revoke`, `server-cert`, `init`.
    pub(crate) action: &'a str,
    /// The name acted on.
    pub(crate) name: &'a str,
    /// The serial, when a certificate is involved.
    pub(crate) serial: Option<String>,
    /// `ok` or `refused` / `failed`.
    pub(crate) outcome: &'a str,
    /// One line on why, for refusals and failures.
    pub(crate) reason: Option<String>,
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(with = "time::serde::rfc3339")]
    time: time::OffsetDateTime,
    /// `key` (through `serve`) or `local`.
    via: &'static str,
    /// The key's fingerprint.
    key: Option<&'a str>,
    /// The name the key is enrolled as.
    key_name: Option<&'a str>,
    /// Its role.
    role: Option<Role>,
    /// The Unix account of a local caller, and who ran it through sudo.
    account: Option<&'a str>,
    sudo_user: Option<&'a str>,
    /// Where the SSH connection came from (set by sshd).
    ssh_client: Option<String>,
    /// The key id of the SSH certificate a principal logged in with (sshd's `ExposeAuthInfo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate: Option<&'a str>,
    action: &'a str,
    name: String,
    serial: Option<String>,
    outcome: &'a str,
    reason: Option<String>,
}

/// The longest name or serial an audit line quotes (a valid name has 32 characters, a serial 40
/// hex digits; anything longer was refused and is kept only as a hint of what was sent).
const MAX_FIELD: usize = 64;
/// The longest reason.
const MAX_REASON: usize = 300;

/// Appends one line. A failure to write the audit log is reported on stderr but does not undo
/// the action (the inventory is the record of truth).
pub(crate) fn record(ctx: &Context, entry: &Entry<'_>) {
    let (via, key, key_name, role, account, sudo_user) = match &ctx.caller {
        Caller::Key(k) => (
            "key",
            Some(k.fingerprint.as_str()),
            Some(k.name.as_str()),
            Some(k.role),
            None,
            None,
        ),
        Caller::Unenrolled { fingerprint } => {
            ("key", Some(fingerprint.as_str()), None, None, None, None)
        }
        Caller::Local { account, sudo_user } => (
            "local",
            None,
            None,
            None,
            Some(account.as_str()),
            sudo_user.as_deref(),
        ),
    };
    let line = Line {
        time: time::OffsetDateTime::now_utc(),
        via,
        key,
        key_name,
        role,
        account,
        sudo_user,
        ssh_client: std::env::var("SSH_CLIENT")
            .ok()
            .and_then(|s| s.split_whitespace().next().map(str::to_owned)),
        certificate: ctx.certificate_key_id.as_deref(),
        action: entry.action,
        name: one_line(entry.name, MAX_FIELD),
        serial: entry.serial.as_deref().map(|s| one_line(s, MAX_FIELD)),
        outcome: entry.outcome,
        reason: entry.reason.as_deref().map(|r| one_line(r, MAX_REASON)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_huge_refused_request_adds_one_short_escaped_line() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let ctx = Context::with_config(dir.path().to_owned(), Config::default())?;
        let name = format!("\u{1b}]0;x\u{7}{}", "b".repeat(120 * 1024));
        record(
            &ctx,
            &Entry {
                action: "sign",
                name: &name,
                serial: Some("f".repeat(10_000)),
                outcome: "refused",
                reason: Some(format!("invalid name `{name}`; request: {name}")),
            },
        );
        let text = std::fs::read_to_string(ctx.path("audit.log"))?;
        assert_eq!(text.lines().count(), 1);
        assert!(text.len() < 1024, "{} bytes", text.len());
        let line: serde_json::Value = serde_json::from_str(&text)?;
        let logged = line["name"].as_str().unwrap_or_default();
        assert!(logged.starts_with("\\u{1b}]0;x\\u{7}bbb"), "{logged}");
        assert!(logged.ends_with('…') && logged.chars().count() == MAX_FIELD);
        Ok(())
    }
}
