//! Logging in for the tunnel the way setup did, but never asking: the destination is resolved
//! again (`ssh -G`), the host key must already be in known_hosts (unknown or changed = refuse),
//! and the key recorded in `profile.json` is offered first. Only when that key is refused are
//! the other keys tried, as setup would.

use std::path::{Path, PathBuf};

use crate::error::{Error, SshError};
use crate::profile::KeyUsed;
use crate::profile::Profile;
use crate::ssh::Session;
use crate::ssh::auth::NoPassphrase;
use crate::ssh::config::{self, Env, Target};
use crate::ssh::destination::Destination;
use crate::ssh::known_hosts::HostKeyPolicy;

/// Where to log in: the recorded key alone first, then everything setup would try.
#[derive(Clone, Debug)]
pub(crate) struct Targets {
    /// Only the key `profile.json` recorded.
    pub(crate) first: Target,
    /// Every key, when that differs from `first`.
    pub(crate) fallback: Option<Target>,
}

impl Targets {
    /// Resolves the profile's server again.
    ///
    /// # Errors
    /// When the recorded destination no longer parses or `ssh -G` rejects it.
    pub(crate) fn resolve(profile: &Profile, home: &Path) -> Result<Self, Error> {
        let dest: Destination = profile.server.destination.parse()?;
        let env =
            Env::from_process(home.to_path_buf(), None).with_jump(profile.server.jump.as_deref());
        let full = config::resolve(&dest, &env)?;
        Ok(plan(profile, full))
    }

    /// `user@host:port`, for messages and the log.
    pub(crate) fn server(&self) -> String {
        let t = &self.first;
        format!("{}@{}:{}", t.user, t.host, t.port)
    }

    /// Connects and authenticates, falling back to every key only when the recorded one is
    /// refused.
    ///
    /// # Errors
    /// As [`Session::connect`].
    pub(crate) async fn connect(&self) -> Result<Session, Error> {
        match (
            Session::connect(&self.first, HostKeyPolicy::Strict, &NoPassphrase).await,
            &self.fallback,
        ) {
            (Err(e @ Error::Ssh(SshError::AuthFailed { .. })), Some(all)) => {
                tracing::info!(error = %e, "the recorded key was refused; trying the others");
                Session::connect(all, HostKeyPolicy::Strict, &NoPassphrase).await
            }
            (res, _) => res,
        }
    }
}

/// Pins `full` to what setup found, and puts a target with only the recorded key before it.
fn plan(profile: &Profile, mut full: Target) -> Targets {
    let s = &profile.server;
    // Where and as whom setup logged in, even if ~/.ssh/config changed since.
    full.host.clone_from(&s.host);
    full.port = s.port;
    full.user.clone_from(&s.user);
    // The file that vouched for the host key during setup comes first.
    full.known_hosts.retain(|k| *k != s.known_hosts);
    full.known_hosts.insert(0, s.known_hosts.clone());

    let mut first = full.clone();
    match &s.ssh_key {
        KeyUsed::File { path, .. } => {
            first.identity_files = vec![path.clone()];
            first.use_agent = false;
        }
        KeyUsed::Agent { file, socket, .. } => {
            // IdentitiesOnly: the agent offers only the key whose `.pub` is that file.
            first.identity_files = file.iter().cloned().collect::<Vec<PathBuf>>();
            first.identities_only = file.is_some();
            first.use_agent = true;
            // The agent that signed during setup, even if ~/.ssh/config no longer names it.
            if socket.is_some() {
                first.identity_agent.clone_from(socket);
            }
        }
    }
    Targets {
        fallback: (first != full).then_some(full),
        first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::sample;

    fn resolved() -> Target {
        Target {
            destination: "shiqi-dev@vm".parse().expect("dest"),
            host: "vm.example".parse().expect("host"),
            port: 2222,
            user: "other".parse().expect("name"),
            identity_files: vec![
                "/home/saige/.ssh/id_rsa".into(),
                "/home/saige/.ssh/id_ed25519".into(),
            ],
            certificate_files: vec![],
            pkcs11_provider: None,
            identities_only: false,
            use_agent: true,
            identity_agent: None,
            known_hosts: vec!["/home/saige/.ssh/known_hosts2".into()],
            global_known_hosts: vec![],
            host_key_alias: None,
            proxy_command: None,
            proxy_jump: None,
            jumps: Vec::new(),
            resolved_by: "ssh -G",
        }
    }

    #[test]
    fn offers_the_recorded_key_first_and_pins_the_server() {
        let p = sample();
        let t = plan(&p, resolved());
        assert_eq!(
            t.first.identity_files,
            [PathBuf::from("/home/saige/.ssh/id_ed25519")]
        );
        assert!(!t.first.use_agent);
        assert_eq!(t.server(), "shiqi-dev@10.231.0.1:22");
        let all = t.fallback.clone().expect("a fallback with every key");
        for target in [&t.first, &all] {
            assert_eq!(
                (target.host.as_str(), target.port, target.user.as_str()),
                ("10.231.0.1", 22, "shiqi-dev")
            );
            assert_eq!(target.known_hosts[0], p.server.known_hosts);
        }
        assert_eq!(all.identity_files.len(), 2);

        let mut agent = sample();
        agent.server.ssh_key = KeyUsed::Agent {
            comment: "saige@laptop".into(),
            fingerprint: "SHA256:x".into(),
            file: None,
            socket: Some("/home/saige/agent.sock".into()),
        };
        let t = plan(&agent, resolved());
        assert!(t.first.use_agent && t.first.identity_files.is_empty());
        assert_eq!(
            t.first.identity_agent.as_deref(),
            Some(Path::new("/home/saige/agent.sock"))
        );
    }
}
