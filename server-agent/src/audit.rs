//! The audit log: `<state>/audit.log`, append-only, one JSON line per action with who asked
//! (the enrolled key's fingerprint, name and role, or the local account), when, the serial and
//! the outcome. Who asked comes from [`Context::caller`], never from the environment a caller
//! could set; the file is the agent account's (0600 in its 0700 state directory).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;

use serde::Serialize;

use shiqi_ca::inventory::access::Role;

use crate::access::Caller;
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
    #[serde(flatten)]
    entry: &'a Entry<'a>,
}

/// Appends one line. A failure to write the audit log is reported on stderr but does not undo
/// the action (the inventory is the record of truth).
pub fn record(ctx: &Context, entry: &Entry<'_>) {
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
