//! The tunnel: one russh connection that forwards `127.0.0.1:P` for every advertised broker and
//! for MySQL, run in the background by `shiqi-connect tunnel up`.
//!
//! `login` connects the way setup did, without asking anything; `refresh` asks the server
//! for its current brokers and re-renders `ssh_config` and `profile.json`; `ports` finds who
//! holds a local port; `launch` starts and finds the processes; `process` and `state` are the pid and state files the background
//! process and the commands share; `daemon` and `forward` are the background process.
//! `tunnel status` checks each forward with `crate::probe`. Nothing here prints: the commands
//! in `commands::tunnel` decide what to show, and the daemon logs through `tracing`.

mod at_login;
mod daemon;
pub mod endpoint;
mod forward;
mod launch;
mod live;
mod login;
mod ports;
mod process;
mod pump;
mod refresh;
mod state;

// The front door: all that commands, doctor and operations use of the tunnel, by name.
pub(crate) use at_login::{
    install as install_at_login, installed as at_login, remove as remove_at_login,
};
pub(crate) use daemon::{Options as DaemonOptions, one_line, run as run_daemon};
pub(crate) use launch::{openssh_alive, start_daemon, start_openssh, stop_openssh};
#[cfg(test)]
pub(crate) use live::ClientFigures;
pub(crate) use live::{PortFigures, Snapshot};
pub(crate) use login::Targets;
pub(crate) use ports::{check_free, is_taken, owner_of};
pub(crate) use process::{alive, read_pid, running, send, stop};
pub(crate) use refresh::{Plan, apply as apply_brokers, plan as plan_brokers, switch_endpoint};
pub(crate) use state::{BrokersCheck, Phase, Renewal, State, remove as remove_stale};

use std::path::{Path, PathBuf};

use shiqi_ca::ProfileName;

use crate::profile::{self, files};

/// The log of the background process (its stderr).
pub(crate) const LOG: &str = "tunnel.log";
/// The background process's pid, written by the process itself.
pub(crate) const PID: &str = "tunnel.pid";
/// What the background process is doing, for `up` (waiting for it) and `status`.
pub(crate) const STATE: &str = "tunnel.state.json";
/// The OpenSSH control socket (`ControlPath` in `ssh_config`), for `up --openssh`.
pub(crate) const CONTROL_SOCKET: &str = "tunnel.sock";
/// The background process's `live` socket (Unix), which `tunnel status --watch` asks.
pub(crate) const LIVE_SOCKET: &str = "tunnel.live";

/// The files of one profile's tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Paths {
    /// The profile folder.
    pub(crate) dir: PathBuf,
    /// `tunnel.log`.
    pub(crate) log: PathBuf,
    /// `tunnel.pid`.
    pub(crate) pid: PathBuf,
    /// `tunnel.state.json`.
    pub(crate) state: PathBuf,
    /// `tunnel.sock`.
    pub(crate) control_socket: PathBuf,
    /// `tunnel.live`.
    pub(crate) live: PathBuf,
    /// `ssh_config`.
    pub(crate) ssh_config: PathBuf,
}

impl Paths {
    /// The tunnel files of profile `name` under `root`.
    pub(crate) fn new(root: &Path, name: &ProfileName) -> Self {
        let dir = profile::dir(root, name);
        Self {
            log: dir.join(LOG),
            pid: dir.join(PID),
            state: dir.join(STATE),
            control_socket: dir.join(CONTROL_SOCKET),
            live: dir.join(LIVE_SOCKET),
            ssh_config: dir.join(files::SSH_CONFIG),
            dir,
        }
    }
}
