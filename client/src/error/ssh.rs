//! Reaching the server: `ssh -G`, the connection, the host key (checked as OpenSSH checks it) and
//! the login.

use std::path::PathBuf;

/// Reaching the server over SSH.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SshError {
    /// `ssh -G DEST` failed.
    #[error("`ssh -G {destination}` failed: {why}")]
    Config {
        /// The destination as given.
        destination: String,
        /// What ssh said (first line).
        why: String,
    },

    /// The TCP connection to the SSH server failed.
    #[error("cannot connect to `{host}:{port}`")]
    Connect {
        /// Host name or address dialled.
        host: String,
        /// Port dialled.
        port: u16,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// A step took longer than allowed.
    #[error("timed out after {secs}s while {what}")]
    Timeout {
        /// What was being waited for.
        what: &'static str,
        /// The limit.
        secs: u64,
    },

    /// The SSH protocol failed (handshake, channel, disconnect).
    #[error("SSH to `{host}` failed while {what}")]
    Protocol {
        /// The server.
        host: String,
        /// What was being done.
        what: &'static str,
        /// What russh said (boxed: an error stays small enough to return by value).
        #[source]
        source: Box<russh::Error>,
    },

    /// The server's host key is not in known_hosts and may not be learned.
    #[error("the host key of `{host}` is not known: {algorithm} key fingerprint is {fingerprint}")]
    HostKeyUnknown {
        /// The known_hosts name (`host` or `[host]:port`).
        host: String,
        /// Key algorithm, e.g. `ssh-ed25519`.
        algorithm: String,
        /// `SHA256:…`.
        fingerprint: String,
        /// Where it was looked up.
        known_hosts: PathBuf,
    },

    /// The server's host key differs from the one recorded: possibly a man-in-the-middle.
    #[error(
        "REMOTE HOST IDENTIFICATION HAS CHANGED for `{host}`: it now offers {algorithm} key \
         {fingerprint}, which differs from `{}` line {line}",
        known_hosts.display()
    )]
    HostKeyChanged {
        /// The known_hosts name.
        host: String,
        /// Key algorithm.
        algorithm: String,
        /// The fingerprint the server offered now.
        fingerprint: String,
        /// The file holding the old key.
        known_hosts: PathBuf,
        /// Its line.
        line: usize,
    },

    /// A known_hosts file could not be read or updated.
    #[error("cannot use known_hosts file `{}`", path.display())]
    KnownHosts {
        /// The file.
        path: PathBuf,
        /// What russh said.
        #[source]
        source: russh::keys::Error,
    },

    /// A `@revoked` line in known_hosts lists the key the server showed.
    #[error("the host key of `{host}` ({fingerprint}) is REVOKED at `{}` line {line}: refusing to connect", known_hosts.display())]
    HostKeyRevoked {
        /// The known_hosts name.
        host: String,
        /// The key's fingerprint.
        fingerprint: String,
        /// The file with the `@revoked` line.
        known_hosts: PathBuf,
        /// Its line.
        line: usize,
    },

    /// The `RevokedHostKeys` file (a key list or a KRL) lists the key the server showed.
    #[error(
        "the host key of `{host}` ({fingerprint}) is REVOKED by `{}`{} (RevokedHostKeys): refusing to connect",
        file.display(),
        line.map(|l| format!(" line {l}")).unwrap_or_default()
    )]
    HostKeyRevokedByFile {
        /// The known_hosts name.
        host: String,
        /// The key's fingerprint.
        fingerprint: String,
        /// The `RevokedHostKeys` file.
        file: PathBuf,
        /// The line listing the key, in a plain list (a KRL has none).
        line: Option<usize>,
    },

    /// The `RevokedHostKeys` file cannot be read or checked; OpenSSH then refuses every host.
    #[error("cannot check the host key of `{host}` against RevokedHostKeys `{}`: {why}", file.display())]
    RevokedHostKeysUnusable {
        /// The known_hosts name.
        host: String,
        /// The `RevokedHostKeys` file.
        file: PathBuf,
        /// What is wrong (escaped, one line).
        why: String,
    },

    /// Only a `@cert-authority` line vouches for the host; host certificates are not checked.
    #[error("`{host}` is trusted only through a host certificate authority (`{}` line {line}), which shiqi-connect does not check", known_hosts.display())]
    HostCertAuthority {
        /// The known_hosts name.
        host: String,
        /// The file with the `@cert-authority` line.
        known_hosts: PathBuf,
        /// Its line.
        line: usize,
    },

    /// No identity was accepted by the server.
    #[error("the server `{host}` accepted none of the SSH keys for user `{user}` (tried: {tried})")]
    AuthFailed {
        /// The remote user.
        user: String,
        /// The server.
        host: String,
        /// What was offered, comma-separated (paths and agent key comments with fingerprints,
        /// never key material).
        tried: String,
        /// The first key file offered, whose `.pub` an admin would enroll (boxed, as the name:
        /// an error stays small enough to return by value).
        key_file: Option<Box<std::path::Path>>,
        /// The profile name, when the command knows it (for the `enroll` line).
        name: Option<Box<str>>,
    },
}

impl SshError {
    /// One next step for the user (see [`super::Error::hint`]).
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            Self::Config { .. } => {
                "check `~/.ssh/config` with `ssh -G DEST`; the destination must work with plain `ssh`"
                    .to_owned()
            }
            Self::Connect { host, port, .. } => format!(
                "check that the server is up and sshd listens there: `ssh -p {port} {host} true`"
            ),
            Self::Timeout { .. } => "check the network path to the server, then run it again".to_owned(),
            Self::Protocol { host, .. } => format!("try `ssh -v {host} true` to see where it breaks"),
            Self::HostKeyUnknown { .. } => "compare the fingerprint with the server's \
                (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on it), then run again on a \
                terminal to confirm it, or pass `--accept-new-host-key`"
                .to_owned(),
            Self::HostKeyChanged {
                known_hosts,
                line,
                host,
                ..
            } => format!(
                "if the server was really reinstalled, ask its admin for the new fingerprint, then \
                 remove line {line}: `ssh-keygen -R '{host}' -f {}`; otherwise someone may be \
                 intercepting the connection",
                known_hosts.display()
            ),
            Self::HostKeyRevoked { known_hosts, line, .. } => format!(
                "someone holding a revoked host key may be impersonating the server; ask its \
                 admin. Line {line} of `{}` revoked it on purpose: do not remove it to get in",
                known_hosts.display()
            ),
            Self::HostKeyRevokedByFile { file, .. } => format!(
                "someone holding a revoked host key may be impersonating the server; ask its \
                 admin. `{}` (RevokedHostKeys in your ssh config) revokes it on purpose: do not \
                 edit it to get in",
                file.display()
            ),
            Self::RevokedHostKeysUnusable { file, .. } => format!(
                "OpenSSH refuses every host while this file is unusable, and so does \
                 shiqi-connect: fix `{0}` (an empty file revokes nothing: `touch {0}`), or \
                 remove `RevokedHostKeys` from your ssh config (`ssh -G HOST | grep -i \
                 revokedhostkeys` shows it)",
                file.display()
            ),
            Self::HostCertAuthority { host, .. } => format!(
                "add the server's plain host key: `ssh-keyscan -t ed25519 {host} >> ~/.ssh/known_hosts`, \
                 after checking its fingerprint with the admin"
            ),
            Self::KnownHosts { path, .. } => format!(
                "check that `{}` is readable and its lines are `host key-type base64`",
                path.display()
            ),
            Self::AuthFailed {
                user,
                host,
                key_file,
                name,
                ..
            } => {
                let public = key_file.as_ref().map_or_else(
                    || "~/.ssh/id_ed25519.pub".to_owned(),
                    |f| format!("{}.pub", f.display()),
                );
                format!(
                    "if `{user}` is the CA agent's account, send `{public}` to its admin, who runs \
                     `shiqi-ca-agent enroll {} --ssh-key {} --role user` on the server; for a \
                     plain account add the key to `~{user}/.ssh/authorized_keys` (`ssh-copy-id \
                     {user}@{host}`), or load it into ssh-agent (`ssh-add`)",
                    name.as_deref().unwrap_or("NAME"),
                    public.rsplit('/').next().unwrap_or(&public),
                )
            }

        })
    }
}

impl SshError {
    /// Names the profile in an [`SshError::AuthFailed`] hint (other errors are unchanged).
    #[must_use]
    pub(crate) fn for_profile(self, profile: &str) -> Self {
        match self {
            Self::AuthFailed {
                user,
                host,
                tried,
                key_file,
                name: None,
            } => Self::AuthFailed {
                user,
                host,
                tried,
                key_file,
                name: Some(profile.into()),
            },
            other => other,
        }
    }
}
