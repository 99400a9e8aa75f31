//! Public-key authentication the way OpenSSH tries it: ssh-agent first (the `IdentityAgent`
//! socket, else `SSH_AUTH_SOCK`), then the identity files in order, skipping missing ones. Remembers which key worked so
//! the generated `ssh_config` names the same one. Never prompts itself: a passphrase comes from
//! the caller's [`Passphrase`] source.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::client::{Handle, Handler};
use russh::keys::agent::AgentIdentity;
use russh::keys::agent::client::AgentClient;
use russh::keys::ssh_key::public::KeyData;
use russh::keys::{HashAlg, PrivateKeyWithHashAlg, PublicKey};
use shiqi_ca::Secret;

use crate::error::Error;
use crate::profile::KeyUsed;
use crate::ssh::config::Target;
use crate::ssh::known_hosts::fingerprint;

/// Asks for the passphrase of an encrypted key file; `None` means skip the key.
pub trait Passphrase {
    /// Called once per encrypted key file, and again after a wrong passphrase.
    fn passphrase(&self, key_file: &Path, retry: bool) -> Option<Secret<String>>;
}

/// Never asks: encrypted keys are skipped (no terminal, or `--yes`).
pub struct NoPassphrase;

impl Passphrase for NoPassphrase {
    fn passphrase(&self, _: &Path, _: bool) -> Option<Secret<String>> {
        None
    }
}

/// What authentication found.
#[derive(Debug)]
pub struct AuthOutcome {
    /// The key that worked.
    pub used: KeyUsed,
    /// Things worth telling the user (skipped encrypted keys, agent trouble).
    pub notes: Vec<String>,
}

/// Authenticates `handle` as `target.user`.
///
/// # Errors
/// [`Error::AuthFailed`] when no key is accepted; [`Error::Ssh`] when the connection breaks.
pub async fn authenticate<H: Handler>(
    handle: &mut Handle<H>,
    target: &Target,
    passphrase: &dyn Passphrase,
) -> Result<AuthOutcome, Error> {
    let mut notes = Vec::new();
    let mut tried: Vec<String> = Vec::new();
    // Compared by key data: the same key read from a file and from the agent differ in comment.
    let mut offered: Vec<KeyData> = Vec::new();
    // The first key file offered: the refusal's hint names its `.pub` for the admin.
    let mut key_file: Option<PathBuf> = None;
    let ssh_err = |source| Error::Ssh {
        host: target.host.clone(),
        what: "authenticating",
        source,
    };

    let socket = target
        .identity_agent
        .clone()
        .or_else(|| std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from));
    if let Some(socket) = socket.filter(|_| target.use_agent) {
        match agent_auth(handle, target, &socket, &mut offered, &mut tried).await {
            Ok(Some(used)) => return Ok(AuthOutcome { used, notes }),
            Ok(None) => {}
            Err(AgentTrouble::Agent(why)) => notes.push(format!("ssh-agent not used: {why}")),
            Err(AgentTrouble::Ssh(e)) => return Err(ssh_err(e)),
        }
    }

    for path in &target.identity_files {
        if !path.is_file() {
            tracing::debug!(path = %path.display(), "no such identity file");
            continue;
        }
        let Some(key) = load_key(path, passphrase, &mut notes) else {
            continue;
        };
        if offered.contains(key.public_key().key_data()) {
            continue; // the agent already offered it and the server said no
        }
        offered.push(key.public_key().key_data().clone());
        let fp = fingerprint(key.public_key());
        tried.push(format!("{} ({fp})", path.display()));
        key_file.get_or_insert_with(|| path.clone());
        let hash = rsa_hash(handle, key.algorithm().is_rsa())
            .await
            .map_err(ssh_err)?;
        tracing::debug!(path = %path.display(), fingerprint = %fp, "offering key file");
        let res = handle
            .authenticate_publickey(
                &target.user,
                PrivateKeyWithHashAlg::new(Arc::new(key), hash),
            )
            .await
            .map_err(ssh_err)?;
        if res.success() {
            let used = KeyUsed::File {
                path: path.clone(),
                fingerprint: fp,
            };
            return Ok(AuthOutcome { used, notes });
        }
    }

    Err(Error::AuthFailed {
        user: target.user.clone(),
        host: target.host.clone(),
        key_file,
        name: None,
        tried: match (tried.is_empty(), notes.is_empty()) {
            (true, true) => {
                "no key found: no agent and none of the identity files exist".to_owned()
            }
            (true, false) => notes.join("; "),
            (false, true) => tried.join(", "),
            (false, false) => format!("{}; {}", tried.join(", "), notes.join("; ")),
        },
    })
}

enum AgentTrouble {
    Agent(String),
    Ssh(russh::Error),
}

async fn agent_auth<H: Handler>(
    handle: &mut Handle<H>,
    target: &Target,
    socket: &Path,
    offered: &mut Vec<KeyData>,
    tried: &mut Vec<String>,
) -> Result<Option<KeyUsed>, AgentTrouble> {
    let mut agent = AgentClient::connect_uds(socket)
        .await
        .map_err(|e| AgentTrouble::Agent(format!("`{}`: {e}", socket.display())))?;
    let identities = agent
        .request_identities()
        .await
        .map_err(|e| AgentTrouble::Agent(e.to_string()))?;
    // The identity files' public halves: to honour `IdentitiesOnly yes` (only agent keys that
    // belong to a configured file) and to name the file behind the agent key that worked.
    let on_disk: Vec<(PathBuf, PublicKey)> = target
        .identity_files
        .iter()
        .filter_map(|p| Some((p.clone(), russh::keys::load_public_key(pub_path(p)).ok()?)))
        .collect();
    for id in identities {
        let AgentIdentity::PublicKey { key, comment } = id else {
            continue; // OpenSSH certificates need a CA on the server; not ours to try
        };
        let file = on_disk
            .iter()
            .find(|(_, k)| k.key_data() == key.key_data())
            .map(|(p, _)| p.clone());
        if target.identities_only && file.is_none() {
            continue;
        }
        let fp = fingerprint(&key);
        tracing::debug!(%comment, fingerprint = %fp, "offering agent key");
        tried.push(if comment.is_empty() {
            format!("agent: {fp}")
        } else {
            format!("agent: {comment} ({fp})")
        });
        offered.push(key.key_data().clone());
        let hash = rsa_hash(handle, key.algorithm().is_rsa())
            .await
            .map_err(AgentTrouble::Ssh)?;
        match handle
            .authenticate_publickey_with(&target.user, key, hash, &mut agent)
            .await
        {
            Ok(r) if r.success() => {
                return Ok(Some(KeyUsed::Agent {
                    comment,
                    fingerprint: fp,
                    file,
                    socket: target.identity_agent.clone(),
                }));
            }
            Ok(_) => {}
            Err(e) => {
                return Err(AgentTrouble::Agent(format!(
                    "the agent could not sign: {e}"
                )));
            }
        }
    }
    Ok(None)
}

fn pub_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

async fn rsa_hash<H: Handler>(
    handle: &Handle<H>,
    is_rsa: bool,
) -> Result<Option<HashAlg>, russh::Error> {
    if !is_rsa {
        return Ok(None);
    }
    // Servers that disabled SHA-1 refuse `ssh-rsa`; ask which hash they take (RFC 8332).
    Ok(handle.best_supported_rsa_hash().await?.flatten())
}

fn load_key(
    path: &Path,
    passphrase: &dyn Passphrase,
    notes: &mut Vec<String>,
) -> Option<russh::keys::PrivateKey> {
    match russh::keys::load_secret_key(path, None) {
        Ok(k) => return Some(k),
        Err(russh::keys::Error::KeyIsEncrypted) => {}
        Err(e) => {
            notes.push(format!("skipped `{}`: {e}", path.display()));
            return None;
        }
    }
    let mut retry = false;
    loop {
        let Some(pass) = passphrase.passphrase(path, retry) else {
            notes.push(format!(
                "skipped `{}`: it is encrypted and there is no terminal to ask for its \
                 passphrase (load it into ssh-agent with `ssh-add`)",
                path.display()
            ));
            return None;
        };
        match russh::keys::load_secret_key(path, Some(pass.expose())) {
            Ok(k) => return Some(k),
            Err(_) if !retry => retry = true,
            Err(_) => {
                notes.push(format!("skipped `{}`: wrong passphrase", path.display()));
                return None;
            }
        }
    }
}
