//! Public-key authentication the way OpenSSH tries it: ssh-agent first (the `IdentityAgent`
//! socket, else `SSH_AUTH_SOCK`), then the identity files in order, skipping missing ones.
//! User certificates go with their keys, each before its plain key: those the agent holds,
//! `CertificateFile`s and `KEY-cert.pub` beside an identity file; one outside its validity is
//! skipped with a note. Remembers which key (and certificate) worked so the generated
//! `ssh_config` names the same one. Never prompts itself: a passphrase comes from the caller's
//! [`Passphrase`] source.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::client::{Handle, Handler};
use russh::keys::agent::AgentIdentity;
use russh::keys::agent::client::AgentClient;
use russh::keys::ssh_key::public::KeyData;
use russh::keys::{Certificate, HashAlg, PrivateKeyWithHashAlg, PublicKey};
use serde::{Deserialize, Serialize};
use shiqi_ca::Secret;

use crate::error::{Error, SshError};
use crate::ssh::config::Target;
use crate::ssh::known_hosts::fingerprint;

/// Asks for the passphrase of an encrypted key file; `None` means skip the key.
pub(crate) trait Passphrase {
    /// Called once per encrypted key file, and again after a wrong passphrase.
    fn passphrase(&self, key_file: &Path, retry: bool) -> Option<Secret<String>>;
}

/// Never asks: encrypted keys are skipped (no terminal, or `--yes`).
pub(crate) struct NoPassphrase;

impl Passphrase for NoPassphrase {
    fn passphrase(&self, _: &Path, _: bool) -> Option<Secret<String>> {
        None
    }
}

/// What authentication found.
#[derive(Debug)]
pub(crate) struct AuthOutcome {
    /// The key that worked.
    pub(crate) used: KeyUsed,
    /// The user certificate that went with it, if one did.
    pub(crate) certificate: Option<UsedCertificate>,
    /// Things worth telling the user (skipped encrypted keys, agent trouble, expired
    /// certificates).
    pub(crate) notes: Vec<String>,
}

/// A user certificate the server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UsedCertificate {
    /// Where it was read from; `None`: the agent holds it.
    pub(crate) file: Option<PathBuf>,
    /// The key id the SSH CA gave it (what the server logs).
    pub(crate) key_id: String,
    /// Its principals.
    pub(crate) principals: Vec<String>,
    /// When it expires (Unix seconds; `u64::MAX`: never).
    pub(crate) valid_before: u64,
}

impl UsedCertificate {
    fn new(cert: &Certificate, file: Option<PathBuf>) -> Self {
        Self {
            file,
            key_id: cert.key_id().to_owned(),
            principals: cert.valid_principals().to_vec(),
            valid_before: cert.valid_before(),
        }
    }
}

impl std::fmt::Display for UsedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "certificate `{}`", self.key_id)?;
        if !self.principals.is_empty() {
            write!(f, " for {}", self.principals.join(", "))?;
        }
        write!(f, ", valid until {}", unix_time(self.valid_before))?;
        match &self.file {
            Some(p) => write!(f, " (`{}`)", p.display()),
            None => f.write_str(" (from the agent)"),
        }
    }
}

/// A certificate file found for the target, parsed.
struct CertFile {
    path: PathBuf,
    cert: Certificate,
}

/// The certificates OpenSSH would offer from disk: `CertificateFile`s, then `KEY-cert.pub`
/// beside each identity file; unreadable ones are skipped with a note.
fn cert_files(target: &Target, notes: &mut Vec<String>) -> Vec<CertFile> {
    let mut paths: Vec<PathBuf> = target.certificate_files.clone();
    for p in target
        .identity_files
        .iter()
        .map(|p| suffixed(p, "-cert.pub"))
    {
        if !paths.contains(&p) {
            paths.push(p);
        }
    }
    paths
        .into_iter()
        .filter(|p| p.is_file())
        .filter_map(|path| match Certificate::read_file(&path) {
            Ok(cert) => Some(CertFile { path, cert }),
            Err(e) => {
                notes.push(format!("skipped certificate `{}`: {e}", path.display()));
                None
            }
        })
        .collect()
}

/// Whether `cert` is valid now; if not, a note naming its validity.
fn current(cert: &Certificate, label: &str, notes: &mut Vec<String>) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if (cert.valid_after()..cert.valid_before()).contains(&now) {
        return true;
    }
    notes.push(format!(
        "skipped {label} (key id `{}`): valid from {} to {}, not now",
        cert.key_id(),
        unix_time(cert.valid_after()),
        unix_time(cert.valid_before())
    ));
    false
}

fn unix_time(secs: u64) -> String {
    if secs == u64::MAX {
        return "forever".to_owned();
    }
    i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| secs.to_string())
}

/// Authenticates `handle` as `target.user`.
///
/// # Errors
/// [`SshError::AuthFailed`] when no key is accepted; [`SshError::Protocol`] when the connection breaks.
pub(crate) async fn authenticate<H: Handler>(
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
    let ssh_err = |source| {
        Error::Ssh(SshError::Protocol {
            host: target.host.clone(),
            what: "authenticating",
            source: Box::new(source),
        })
    };

    if let Some(provider) = &target.pkcs11_provider {
        // A token's keys need its PKCS#11 module loaded into this process; the agent already
        // knows how.
        notes.push(format!(
            "PKCS11Provider `{provider}` is not used: load the token's keys into ssh-agent \
             (`ssh-add -s {provider}`), which shiqi-connect asks"
        ));
    }
    let certs = cert_files(target, &mut notes);
    let mut offered_certs: Vec<PathBuf> = Vec::new();
    let socket = target
        .identity_agent
        .clone()
        .or_else(crate::os::ssh_agent::default_socket);
    if let Some(socket) = socket.filter(|_| target.use_agent) {
        let mut offers = Offers {
            keys: &mut offered,
            cert_files: &mut offered_certs,
            tried: &mut tried,
            notes: &mut notes,
        };
        match agent_auth(handle, target, &socket, &certs, &mut offers).await {
            Ok(Some((used, certificate))) => {
                return Ok(AuthOutcome {
                    used,
                    certificate,
                    notes,
                });
            }
            Ok(None) => {}
            Err(AgentTrouble::Agent(why)) => notes.push(format!("ssh-agent not used: {why}")),
            Err(AgentTrouble::Ssh(e)) => return Err(ssh_err(e)),
        }
    }

    let mut offers = Offers {
        keys: &mut offered,
        cert_files: &mut offered_certs,
        tried: &mut tried,
        notes: &mut notes,
    };
    for path in &target.identity_files {
        if !path.is_file() {
            tracing::debug!(path = %path.display(), "no such identity file");
            continue;
        }
        let Some(key) = load_key(path, passphrase, offers.notes) else {
            continue;
        };
        if let Some((used, certificate)) = file_auth(
            handle,
            target,
            path,
            Arc::new(key),
            &certs,
            &mut offers,
            &mut key_file,
        )
        .await
        .map_err(ssh_err)?
        {
            return Ok(AuthOutcome {
                used,
                certificate,
                notes,
            });
        }
    }
    Err(refused(target, key_file, &tried, &notes))
}

/// Offers the key of identity file `path`: first with each current certificate of it not
/// offered yet, then alone unless the agent already offered it. `Some`: the server took it.
async fn file_auth<H: Handler>(
    handle: &mut Handle<H>,
    target: &Target,
    path: &Path,
    key: Arc<russh::keys::PrivateKey>,
    certs: &[CertFile],
    offers: &mut Offers<'_>,
    key_file: &mut Option<PathBuf>,
) -> Result<Option<(KeyUsed, Option<UsedCertificate>)>, russh::Error> {
    let fp = fingerprint(key.public_key());
    let used = || KeyUsed::File {
        path: path.to_path_buf(),
        fingerprint: fp.clone(),
    };
    for c in certs
        .iter()
        .filter(|c| c.cert.public_key() == key.public_key().key_data())
    {
        let label = format!("certificate `{}`", c.path.display());
        if offers.cert_files.contains(&c.path) || !current(&c.cert, &label, offers.notes) {
            continue;
        }
        offers.cert_files.push(c.path.clone());
        offers
            .tried
            .push(format!("{} with {label}", path.display()));
        tracing::debug!(path = %c.path.display(), "offering a certificate with its key file");
        let res = handle
            .authenticate_openssh_cert(&target.user, key.clone(), c.cert.clone())
            .await?;
        if res.success() {
            let certificate = Some(UsedCertificate::new(&c.cert, Some(c.path.clone())));
            return Ok(Some((used(), certificate)));
        }
    }
    if offers.keys.contains(key.public_key().key_data()) {
        return Ok(None); // the agent already offered it and the server said no
    }
    offers.keys.push(key.public_key().key_data().clone());
    offers.tried.push(format!("{} ({fp})", path.display()));
    key_file.get_or_insert_with(|| path.to_path_buf());
    let hash = rsa_hash(handle, key.algorithm().is_rsa()).await?;
    tracing::debug!(path = %path.display(), fingerprint = %fp, "offering key file");
    let res = handle
        .authenticate_publickey(&target.user, PrivateKeyWithHashAlg::new(key, hash))
        .await?;
    Ok(res.success().then(|| (used(), None)))
}

/// No key was taken: what was offered, or why nothing was.
fn refused(
    target: &Target,
    key_file: Option<PathBuf>,
    tried: &[String],
    notes: &[String],
) -> Error {
    Error::Ssh(SshError::AuthFailed {
        user: target.user.clone(),
        host: target.host.clone(),
        key_file: key_file.map(PathBuf::into_boxed_path),
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

/// What has been offered so far, and what to tell the user.
struct Offers<'a> {
    keys: &'a mut Vec<KeyData>,
    cert_files: &'a mut Vec<PathBuf>,
    tried: &'a mut Vec<String>,
    notes: &'a mut Vec<String>,
}

async fn agent_auth<H: Handler>(
    handle: &mut Handle<H>,
    target: &Target,
    socket: &Path,
    certs: &[CertFile],
    offers: &mut Offers<'_>,
) -> Result<Option<(KeyUsed, Option<UsedCertificate>)>, AgentTrouble> {
    let mut agent = crate::os::ssh_agent::connect(socket)
        .await
        .map_err(|e| AgentTrouble::Agent(format!("`{}`: {e}", socket.display())))?;
    let identities = agent
        .request_identities()
        .await
        .map_err(|e| AgentTrouble::Agent(e.to_string()))?;
    let mut session = AgentSession {
        agent,
        target,
        certs,
        on_disk: target
            .identity_files
            .iter()
            .filter_map(|p| Some((p.clone(), russh::keys::load_public_key(pub_path(p)).ok()?)))
            .collect(),
    };
    for id in identities {
        let taken = match id {
            AgentIdentity::Certificate {
                certificate,
                comment,
            } => {
                session
                    .offer_certificate(handle, certificate, comment, offers)
                    .await?
            }
            AgentIdentity::PublicKey { key, comment } => {
                session.offer_key(handle, key, comment, offers).await?
            }
        };
        if taken.is_some() {
            return Ok(taken);
        }
    }
    Ok(None)
}

/// The agent, and what its keys are checked against for one login.
struct AgentSession<'a> {
    agent: AgentClient<crate::os::ssh_agent::Stream>,
    target: &'a Target,
    certs: &'a [CertFile],
    /// The identity files' public halves: to honour `IdentitiesOnly yes` (only agent keys that
    /// belong to a configured file) and to name the file behind the agent key that worked.
    on_disk: Vec<(PathBuf, PublicKey)>,
}

impl AgentSession<'_> {
    fn file_of(&self, key: &KeyData) -> Option<PathBuf> {
        self.on_disk
            .iter()
            .find(|(_, k)| k.key_data() == key)
            .map(|(p, _)| p.clone())
    }

    /// Whether `key` may be offered: any agent key, or with `IdentitiesOnly yes` one that a
    /// configured identity or certificate file names.
    fn allowed(&self, key: &KeyData) -> bool {
        !self.target.identities_only
            || self.file_of(key).is_some()
            || self.certs.iter().any(|c| c.cert.public_key() == key)
    }

    fn used(&self, comment: String, fingerprint: String, key: &KeyData) -> KeyUsed {
        KeyUsed::Agent {
            comment,
            fingerprint,
            file: self.file_of(key),
            socket: self.target.identity_agent.clone(),
        }
    }

    /// A certificate the agent holds, when current.
    async fn offer_certificate<H: Handler>(
        &mut self,
        handle: &mut Handle<H>,
        certificate: Certificate,
        comment: String,
        offers: &mut Offers<'_>,
    ) -> Result<Option<(KeyUsed, Option<UsedCertificate>)>, AgentTrouble> {
        let key = certificate.public_key().clone();
        if !self.allowed(&key) {
            return Ok(None);
        }
        let label = format!("agent certificate `{}`", certificate.key_id());
        if !current(&certificate, &label, offers.notes) {
            return Ok(None);
        }
        offers.tried.push(label);
        let used = UsedCertificate::new(&certificate, None);
        let hash = rsa_hash(handle, certificate.algorithm().is_rsa())
            .await
            .map_err(AgentTrouble::Ssh)?;
        let res = handle
            .authenticate_certificate_with(&self.target.user, certificate, hash, &mut self.agent)
            .await
            .map_err(|e| AgentTrouble::Agent(format!("the agent could not sign: {e}")))?;
        if !res.success() {
            return Ok(None);
        }
        let fp = fingerprint(&PublicKey::new(key.clone(), ""));
        Ok(Some((self.used(comment, fp, &key), Some(used))))
    }

    /// A plain key the agent holds: with each current certificate of it on disk first, then
    /// alone.
    async fn offer_key<H: Handler>(
        &mut self,
        handle: &mut Handle<H>,
        key: PublicKey,
        comment: String,
        offers: &mut Offers<'_>,
    ) -> Result<Option<(KeyUsed, Option<UsedCertificate>)>, AgentTrouble> {
        if !self.allowed(key.key_data()) {
            return Ok(None);
        }
        let fp = fingerprint(&key);
        let hash = rsa_hash(handle, key.algorithm().is_rsa())
            .await
            .map_err(AgentTrouble::Ssh)?;
        // A certificate on disk for this agent key: the agent signs with the key.
        let certs = self.certs;
        for c in certs
            .iter()
            .filter(|c| c.cert.public_key() == key.key_data())
        {
            let label = format!("certificate `{}`", c.path.display());
            if offers.cert_files.contains(&c.path) || !current(&c.cert, &label, offers.notes) {
                continue;
            }
            offers.cert_files.push(c.path.clone());
            offers.tried.push(format!("agent: {fp} with {label}"));
            let mut signer = PlainKey {
                agent: &mut self.agent,
                key: &key,
            };
            let res = handle
                .authenticate_certificate_with(&self.target.user, c.cert.clone(), hash, &mut signer)
                .await
                .map_err(|e| AgentTrouble::Agent(format!("the agent could not sign: {e}")))?;
            if res.success() {
                let cert = UsedCertificate::new(&c.cert, Some(c.path.clone()));
                return Ok(Some((self.used(comment, fp, key.key_data()), Some(cert))));
            }
        }
        tracing::debug!(%comment, fingerprint = %fp, "offering agent key");
        offers.tried.push(if comment.is_empty() {
            format!("agent: {fp}")
        } else {
            format!("agent: {comment} ({fp})")
        });
        offers.keys.push(key.key_data().clone());
        let res = handle
            .authenticate_publickey_with(&self.target.user, key.clone(), hash, &mut self.agent)
            .await
            .map_err(|e| AgentTrouble::Agent(format!("the agent could not sign: {e}")))?;
        Ok(res
            .success()
            .then(|| (self.used(comment, fp, key.key_data()), None)))
    }
}

/// Signs with an agent's plain key for a certificate read from disk: agents look a key up by
/// the blob they are sent, and hold the key without that certificate.
struct PlainKey<'a> {
    agent: &'a mut AgentClient<crate::os::ssh_agent::Stream>,
    key: &'a PublicKey,
}

impl russh::Signer for PlainKey<'_> {
    type Error = russh::AgentAuthError;

    async fn auth_sign(
        &mut self,
        _: &AgentIdentity,
        hash_alg: Option<HashAlg>,
        to_sign: Vec<u8>,
    ) -> Result<Vec<u8>, Self::Error> {
        let plain = AgentIdentity::PublicKey {
            key: self.key.clone(),
            comment: String::new(),
        };
        self.agent.auth_sign(&plain, hash_alg, to_sign).await
    }
}

fn pub_path(p: &Path) -> PathBuf {
    suffixed(p, ".pub")
}

fn suffixed(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
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
    let key = load_key_file(path, passphrase, notes)?;
    if matches!(
        key.algorithm(),
        russh::keys::Algorithm::SkEd25519 | russh::keys::Algorithm::SkEcdsaSha2NistP256
    ) {
        // The file holds a handle; the key is on the authenticator, which only ssh's FIDO
        // middleware talks to (asking for the touch).
        notes.push(format!(
            "skipped `{}`: a security-key (FIDO) key signs only on its authenticator; add it to \
             ssh-agent (`ssh-add {}`), whose signatures shiqi-connect uses",
            path.display(),
            path.display()
        ));
        return None;
    }
    Some(key)
}

fn load_key_file(
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

/// The key the server accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum KeyUsed {
    /// A private key file.
    File {
        /// Its path.
        path: PathBuf,
        /// `SHA256:…` of its public key.
        fingerprint: String,
    },
    /// A key held by ssh-agent.
    Agent {
        /// The agent's comment for it (often the file it came from).
        comment: String,
        /// `SHA256:…`.
        fingerprint: String,
        /// The identity file whose `.pub` is this key, if any: the tunnel's ssh_config names it,
        /// so ssh finds the key with or without the agent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<PathBuf>,
        /// The agent's socket when `IdentityAgent` named one (1Password, Secretive); `None`:
        /// `SSH_AUTH_SOCK`. The tunnel's ssh_config names it, so OpenSSH and DataGrip ask the
        /// same agent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        socket: Option<PathBuf>,
    },
}

impl std::fmt::Display for KeyUsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File { path, .. } => write!(f, "`{}`", path.display()),
            Self::Agent {
                comment,
                fingerprint,
                ..
            } if comment.is_empty() => write!(f, "agent: {fingerprint}"),
            Self::Agent {
                comment,
                fingerprint,
                ..
            } => write!(f, "agent: {comment} ({fingerprint})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use russh::keys::ssh_key::private::{KeypairData, SkEd25519};
    use russh::keys::ssh_key::public::{Ed25519PublicKey, SkEd25519 as SkPublic};
    use russh::keys::ssh_key::{LineEnding, PrivateKey};

    use super::*;

    #[test]
    fn a_security_key_file_is_skipped_with_the_agent_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("id_ed25519_sk");
        let public = SkPublic::new(Ed25519PublicKey([7; 32]), "ssh:");
        let sk = SkEd25519::new(public, 0x01, vec![9; 64]).expect("key handle");
        let key = PrivateKey::new(KeypairData::SkEd25519(sk), "yubikey").expect("key");
        let text = key.to_openssh(LineEnding::LF).expect("openssh");
        crate::fsutil::write_private(&path, text.as_bytes()).expect("write");
        let mut notes = Vec::new();
        assert!(load_key(&path, &NoPassphrase, &mut notes).is_none());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("security-key (FIDO)"), "{notes:?}");
        assert!(notes[0].contains("ssh-add"), "{notes:?}");
    }

    #[test]
    fn certificate_validity_is_told_in_dates() {
        assert_eq!(unix_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(unix_time(u64::MAX), "forever");
    }
}
