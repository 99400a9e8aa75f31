//! The tunnel: its local ports, its background process, OpenSSH's.

use std::path::PathBuf;

/// Who holds a port, as the error shows it and its hint needs it (`tunnel::ports` makes it
/// from what the OS says, so this module names no OS type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortHolder {
    /// `` `socat` (pid 4242) ``, ``a process of user `bob` ``, or the connection lent the port.
    pub shown: String,
    /// The holding process, when this user may see it.
    pub pid: Option<u32>,
    /// An outgoing connection has the port as its source port (nothing listens there).
    pub outgoing: bool,
}

impl std::fmt::Display for PortHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// The tunnel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TunnelError {
    /// A local port the tunnel needs is taken (tunnel).
    #[error(
        "port `127.0.0.1:{port}` is already in use by {}",
        owner.as_ref().map_or_else(|| "another process".to_owned(), ToString::to_string)
    )]
    PortInUse {
        /// The port.
        port: u16,
        /// Who holds it, when that can be found out.
        owner: Option<PortHolder>,
    },

    /// Listening on a local port failed for another reason than it being taken (tunnel).
    #[error("cannot listen on `127.0.0.1:{port}`")]
    Listen {
        /// The port.
        port: u16,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// The tunnel of this profile runs already, in another process (tunnel).
    #[error("the tunnel of `{name}` is already running (pid {pid})")]
    Running {
        /// The profile.
        name: String,
        /// Its process.
        pid: u32,
    },

    /// The background tunnel process reported that it could not start (tunnel).
    #[error("the tunnel did not start: {why}")]
    Failed {
        /// Its one-line error.
        why: String,
        /// Its hint, if it had one.
        hint: Option<String>,
        /// `tunnel.log`.
        log: PathBuf,
    },

    /// A tunnel process cannot be signalled (tunnel).
    #[error("cannot signal the tunnel process {pid}")]
    Signal {
        /// The process.
        pid: u32,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// A tunnel process outlived SIGTERM and SIGKILL (tunnel).
    #[error("the tunnel process {pid} did not exit within {secs}s")]
    Stuck {
        /// The process.
        pid: u32,
        /// How long was waited.
        secs: u64,
    },

    /// `ssh` (OpenSSH) failed to open or close the tunnel (`tunnel up --openssh`).
    #[error("`{command}` failed: {why}")]
    OpenSsh {
        /// The command line as run.
        command: String,
        /// What ssh said (last line).
        why: String,
    },

    /// The login item (`--at-login`) cannot name this path.
    #[error("cannot start the tunnel at login from `{}`: {why}", path.display())]
    AtLoginPath {
        /// The program or the log.
        path: std::path::PathBuf,
        /// Which rule it breaks.
        why: &'static str,
    },
}

impl TunnelError {
    /// One next step for the user (see [`super::Error::hint`]).
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            Self::PortInUse { port, owner } => {
                // The system lends ports of its ephemeral range to outgoing connections; a
                // reserved port is never lent.
                let reserve = format!(
                    "; to keep outgoing connections off it, add {port} to the sysctl \
                     `net.ipv4.ip_local_reserved_ports`"
                );
                let outgoing = owner.as_ref().is_some_and(|o| o.outgoing);
                match (outgoing, owner.as_ref().and_then(|o| o.pid)) {
                    (true, Some(pid)) => format!(
                        "run `tunnel up` again once that connection has closed (or stop pid \
                         {pid}){reserve}"
                    ),
                    (true, None) => format!(
                        "run `tunnel up` again in a minute, when the system frees the port{reserve}"
                    ),
                    (_, Some(pid)) => format!(
                        "stop it (`kill {pid}`; if it is another shiqi-connect or ssh tunnel, \
                         `shiqi-connect tunnel down NAME`), then run `tunnel up` again"
                    ),
                    (_, None) => {
                        "find it with `ss -ltnp` and stop it, then run `tunnel up` again".to_owned()
                    }
                }
            }
            Self::Running { name, .. } => {
                format!("stop it with `shiqi-connect tunnel down {name}`")
            }
            Self::Failed { hint: Some(h), .. } => h.clone(),
            Self::Failed { log, .. } => format!("see `{}`", log.display()),
            Self::Stuck { pid, .. } => format!("kill it with `kill -9 {pid}`"),
            Self::OpenSsh { .. } => {
                "run the command with `-v` to see where it breaks, or use the built-in tunnel \
                 (`shiqi-connect tunnel up` without `--openssh`)"
                    .to_owned()
            }
            Self::AtLoginPath { .. } => {
                "install shiqi-connect, and keep profiles (`--home`/`SHIQI_HOME`), in folders \
                 whose paths have no spaces"
                    .to_owned()
            }
            _ => return None,
        })
    }
}
