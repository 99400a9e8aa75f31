//! `tunnel.state.json`: what the background process is doing. It writes the file (atomically,
//! through `fsutil`) at every change; `tunnel up` waits on it and `tunnel status` shows it. It
//! holds no secrets: forwards, times and one-line errors.

use std::path::Path;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::Error;
use crate::fsutil;
use crate::profile::ForwardRecord;

/// Where the background process is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
    /// Binding the ports and connecting for the first time.
    Starting,
    /// Connected; every listed forward is served.
    Up,
    /// The connection dropped; the ports stay bound while it reconnects.
    Reconnecting,
    /// It could not start and is exiting; `error` says why.
    Failed,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Starting => "starting",
            Self::Up => "up",
            Self::Reconnecting => "reconnecting",
            Self::Failed => "failed",
        })
    }
}

/// The state file's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct State {
    /// The background process.
    pub(crate) pid: u32,
    /// What it is doing.
    pub(crate) phase: Phase,
    /// Since when.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) since: OffsetDateTime,
    /// `user@host:port` of the SSH server.
    pub(crate) server: String,
    /// How many times the profile was reloaded (`tunnel up` on a running tunnel bumps it).
    pub(crate) generation: u64,
    /// The forwards being served.
    pub(crate) forwards: Vec<ForwardRecord>,
    /// The last error (why it failed, or why the last reconnect attempt did not work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The fix for `error`, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
    /// Forwards the last reload could not add (a taken port), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) problems: Vec<String>,
    /// What the tunnel last learned of the cluster's brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) brokers: Option<BrokersCheck>,
    /// The local endpoint's ports (bootstrap first), when the profile uses it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) endpoint: Vec<ForwardRecord>,
    /// The certificate as the daemon renews it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) renewal: Option<Renewal>,
    /// Connections the local endpoint closed because another account opened them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) refused: Option<Refused>,
}

/// The local endpoint's refusals of other accounts' connections.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Refused {
    /// How many since the tunnel started.
    pub(crate) count: u64,
    /// The last one, in words (its address, uid and account name, the port it reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last: Option<String>,
}

/// The daemon's renewals of the profile's certificate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Renewal {
    /// The certificate's end.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) not_after: OffsetDateTime,
    /// When the daemon renews it (a third of its lifetime before the end, plus jitter).
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) due: OffsetDateTime,
    /// The last renewal, in words (`serial A → B at …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last: Option<String>,
    /// Why the last attempt failed, while it keeps retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// What to do about it (the error's hint), when there is something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
    /// Failed attempts since the last renewal (or since the tunnel started).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) attempts: u32,
    /// When it tries again after a failure.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub(crate) retry_at: Option<OffsetDateTime>,
    /// Renewals this tunnel made since it started.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) renewed: u32,
    /// When the last renewal started, and how long it took in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_run: Option<RenewalRun>,
}

/// One renewal's time, for `tunnel status --json` (and the soak, which lines up latency with it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RenewalRun {
    /// When it started.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) started: OffsetDateTime,
    /// How long it took, in milliseconds.
    pub(crate) took_ms: u64,
}

/// The daemon's last look at the cluster's brokers (on every reconnect and periodically).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BrokersCheck {
    /// When it last asked.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) checked: OffsetDateTime,
    /// Why the last question got no answer, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// Registered brokers that are not serving, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) not_serving: Vec<String>,
    /// The last change it made, with its time (`2026-12-04 19:30:05 UTC: new forward …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_change: Option<String>,
}

impl State {
    /// Reads the state file; `None` when it is missing or unreadable (a crash mid-way cannot
    /// leave half a file, but an older build may have left another shape).
    pub(crate) fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the state file atomically.
    ///
    /// # Errors
    /// [`Error::Io`] when the profile folder is not writable.
    pub(crate) fn write(&self, path: &Path) -> Result<(), Error> {
        // Serializing plain strings and numbers cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        fsutil::write_private(path, text.as_bytes())
    }
}

/// Removes a file that may not exist.
pub(crate) fn remove(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot remove"),
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_junk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tunnel.state.json");
        assert!(State::read(&path).is_none());
        let s = State {
            pid: 42,
            phase: Phase::Reconnecting,
            since: time::macros::datetime!(2026-10-10 08:00 UTC),
            server: "shiqi-dev@10.231.0.1:22".into(),
            generation: 1,
            forwards: vec![],
            error: Some("cannot connect".into()),
            hint: None,
            problems: vec![],
            brokers: None,
            endpoint: vec![],
            renewal: None,
            refused: None,
        };
        s.write(&path).expect("write");
        assert_eq!(State::read(&path), Some(s));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("\"phase\": \"reconnecting\""), "{text}");
        fsutil::write_private(&path, b"{").expect("write");
        assert!(State::read(&path).is_none());
        remove(&path);
        remove(&path);
        assert!(!path.exists());
    }
}
