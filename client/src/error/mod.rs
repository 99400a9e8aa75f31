//! The error type of the `shiqi-connect` library, nested by area as rustls nests its own: each
//! area's variants and their hints live in its module (`input`, `ssh`, `agent`,
//! `profile`, `tunnel`, `datagrip`); what crosses areas (the CA library, the file system)
//! stays here. Messages name the fact; `Error::hint` names the next step. Secrets never appear
//! in a message.

use std::path::PathBuf;

pub(crate) mod agent;
pub(crate) mod datagrip;
pub(crate) mod input;
pub(crate) mod profile;
pub(crate) mod ssh;
pub(crate) mod tunnel;

pub use agent::AgentError;
pub use datagrip::DataGripError;
pub use input::InputError;
pub use profile::ProfileError;
pub use ssh::SshError;
pub use tunnel::{PortHolder, TunnelError};

/// Everything that can go wrong in the client library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// What the user gave.
    #[error(transparent)]
    Input(#[from] InputError),

    /// Reaching the server.
    #[error(transparent)]
    Ssh(#[from] SshError),

    /// The server's agent.
    #[error(transparent)]
    Agent(#[from] AgentError),

    /// A profile and its certificate.
    #[error(transparent)]
    Profile(#[from] ProfileError),

    /// The tunnel.
    #[error(transparent)]
    Tunnel(#[from] TunnelError),

    /// DataGrip and JDBC.
    #[error(transparent)]
    DataGrip(#[from] DataGripError),

    /// The CA library failed (key generation, CSR, keystore).
    #[error("cannot {what}")]
    Ca {
        /// What was being done.
        what: &'static str,
        /// What the CA library said.
        #[source]
        source: shiqi_ca::Error,
    },

    /// A file-system operation failed.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// What was being done (`write`, `create folder`, `rename into place`).
        action: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Names the profile in an [`SshError::AuthFailed`] hint (other errors are unchanged).
    #[must_use]
    pub(crate) fn for_profile(self, profile: &str) -> Self {
        match self {
            Self::Ssh(e) => Self::Ssh(e.for_profile(profile)),
            other => other,
        }
    }

    /// One next step for the user, rendered by the CLI as `hint: …`.
    pub(crate) fn hint(&self) -> Option<String> {
        match self {
            Self::Input(e) => e.hint(),
            Self::Ssh(e) => e.hint(),
            Self::Agent(e) => e.hint(),
            Self::Profile(e) => e.hint(),
            Self::Tunnel(e) => e.hint(),
            Self::DataGrip(e) => e.hint(),
            Self::Ca { source, .. } => source.hint(),
            Self::Io { .. } => Some("check the path's permissions and free space".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_home_asks_for_home_not_for_a_flag_that_cannot_help() {
        let hint = Error::from(InputError::NoHome).hint().expect("hint");
        assert!(hint.contains("set `HOME`"), "{hint}");
        // `--home` moves only `~/.shiqi`; `~/.ssh` is still found from `HOME`.
        assert!(!hint.contains("--home"), "{hint}");
    }
}
