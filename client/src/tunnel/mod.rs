//! The tunnel: one russh connection that forwards `127.0.0.1:P` for every advertised broker and
//! for MySQL, run in the background by `shiqi-connect tunnel up`.
//!
//! [`login`] connects the way setup did, without asking anything; [`refresh`] asks the server
//! for its current brokers and re-renders `ssh_config` and `profile.json`; [`ports`] finds who
//! holds a local port; [`launch`] starts and finds the processes; [`process`] and [`state`] are the pid and state files the background
//! process and the commands share; [`daemon`] and [`forward`] are the background process.
//! `tunnel status` checks each forward with [`crate::probe`]. Nothing here prints: the commands
//! in `commands::tunnel` decide what to show, and the daemon logs through `tracing`.

pub mod daemon;
pub mod endpoint;
pub mod forward;
pub mod launch;
pub mod login;
pub mod ports;
pub mod process;
pub mod pump;
pub mod refresh;
pub mod state;

use std::path::{Path, PathBuf};

use shiqi_ca::ProfileName;

use crate::profile::{self, files};

/// The log of the background process (its stderr).
pub const LOG: &str = "tunnel.log";
/// The background process's pid, written by the process itself.
pub const PID: &str = "tunnel.pid";
/// What the background process is doing, for `up` (waiting for it) and `status`.
pub const STATE: &str = "tunnel.state.json";
/// The OpenSSH control socket (`ControlPath` in `ssh_config`), for `up --openssh`.
pub const CONTROL_SOCKET: &str = "tunnel.sock";

/// The files of one profile's tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// The profile folder.
    pub dir: PathBuf,
    /// `tunnel.log`.
    pub log: PathBuf,
    /// `tunnel.pid`.
    pub pid: PathBuf,
    /// `tunnel.state.json`.
    pub state: PathBuf,
    /// `tunnel.sock`.
    pub control_socket: PathBuf,
    /// `ssh_config`.
    pub ssh_config: PathBuf,
}

impl Paths {
    /// The tunnel files of profile `name` under `root`.
    pub fn new(root: &Path, name: &ProfileName) -> Self {
        let dir = profile::dir(root, name);
        Self {
            log: dir.join(LOG),
            pid: dir.join(PID),
            state: dir.join(STATE),
            control_socket: dir.join(CONTROL_SOCKET),
            ssh_config: dir.join(files::SSH_CONFIG),
            dir,
        }
    }
}
