//! Where the ssh-agent listens and how to reach it: a Unix socket (`SSH_AUTH_SOCK`), or on
//! Windows the OpenSSH agent's named pipe (`\\.\pipe\openssh-ssh-agent`, unless `SSH_AUTH_SOCK`
//! names another pipe).

use std::path::{Path, PathBuf};

use russh::keys::agent::client::AgentClient;

/// The connection to an agent.
#[cfg(unix)]
pub(crate) type Stream = tokio::net::UnixStream;
/// The connection to an agent.
#[cfg(windows)]
pub(crate) type Stream = tokio::net::windows::named_pipe::NamedPipeClient;

/// The agent the environment names, when no `IdentityAgent` does.
pub(crate) fn default_socket() -> Option<PathBuf> {
    let env = std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from);
    #[cfg(windows)]
    let env = env.or_else(|| Some(PathBuf::from(r"\\.\pipe\openssh-ssh-agent")));
    env
}

/// Connects to the agent at `socket`.
///
/// # Errors
/// When nothing listens there.
pub(crate) async fn connect(socket: &Path) -> Result<AgentClient<Stream>, russh::keys::Error> {
    #[cfg(unix)]
    {
        AgentClient::connect_uds(socket).await
    }
    #[cfg(windows)]
    {
        AgentClient::connect_named_pipe(socket).await
    }
}
