//! The hidden `tunnel run NAME`: the background process `up` starts.

use std::process::ExitCode;

use time::OffsetDateTime;

use crate::error::{Error, TunnelError};
use crate::tunnel::{self, Phase, State, one_line};

use super::Settings;

/// `tunnel run NAME`: the tunnel in the foreground. A start-up failure is written to the state
/// file for the waiting `up`, then reported (to stderr, the log) with exit 2.
pub(super) async fn run_daemon(
    s: &Settings,
    check_every: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    let opts = tunnel::DaemonOptions {
        root: s.root.clone(),
        home: s.home.clone(),
        name: s.name.clone(),
        check_every,
    };
    match tunnel::run_daemon(&opts).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Another process runs this tunnel: its files are not ours to touch.
        Err(e @ Error::Tunnel(TunnelError::Running { .. })) => Err(e.into()),
        Err(e) => {
            let me = std::process::id();
            if tunnel::running(&s.paths.pid, &s.root, &s.name).is_some_and(|p| p != me) {
                // Lost a race to another start: the files are the winner's; the waiting `up`
                // reads this error from the log instead.
                return Err(anyhow::Error::new(e)
                    .context(format!("the tunnel of `{}` cannot start", s.name)));
            }
            let st = State {
                pid: me,
                phase: Phase::Failed,
                since: OffsetDateTime::now_utc(),
                server: String::new(),
                generation: 0,
                forwards: vec![],
                error: Some(one_line(&e)),
                hint: e.hint(),
                problems: vec![],
                brokers: None,
                endpoint: vec![],
                renewal: None,
                refused: None,
            };
            if let Err(w) = st.write(&s.paths.state) {
                tracing::warn!("cannot write the state file: {}", one_line(&w));
            }
            if tunnel::read_pid(&s.paths.pid) == Some(me) {
                tunnel::remove_stale(&s.paths.pid);
            }
            Err(anyhow::Error::new(e).context(format!("the tunnel of `{}` cannot start", s.name)))
        }
    }
}
