//! Crash safety for the commands that get certificates (`setup`, `rotate`, `renew`).
//!
//! - One run per name at a time: a lock file in `$SHIQI_HOME/.locks/`, held for the run. Whoever
//!   holds it may sweep the name's staging folders (`.NAME.tmp-*`) that a killed run left,
//!   since no live run can own them.
//! - A journal of keys (`.locks/NAME.keys`) whose certificates must not outlive the run unless
//!   they end up in the profile: the new key, written before the agent is asked to sign it (a
//!   run killed while the agent signs never learns the serial, but it knows the key), and the key
//!   a run replaces. [`settle`] revokes, as `superseded`, every journaled key that is not the
//!   profile's, then clears the journal; a run calls it when it ends, and the next run for the
//!   name calls it first, so a SIGKILL at any point is made good by the next run.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use shiqi_ca::crl::Reason;
use shiqi_ca::{KeyId, ProfileName};

use crate::agent::{self, AgentCommand, Revocation};
use crate::error::Error;
use crate::fsutil;
use crate::ssh::Session;

/// The folder of lock and journal files under the profiles' root.
const LOCKS: &str = ".locks";

/// The held lock of one name; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct NameLock {
    _file: File,
    journal: PathBuf,
}

/// Takes the name's lock (refusing if another run holds it) and sweeps its stale staging folders.
///
/// # Errors
/// [`Error::ProfileBusy`] when another run holds the lock; [`Error::Io`] on file errors.
pub fn lock(root: &Path, name: &ProfileName) -> Result<NameLock, Error> {
    let locks = root.join(LOCKS);
    fsutil::create_private_dir(root)?;
    fsutil::create_private_dir(&locks)?;
    let path = locks.join(format!("{name}.lock"));
    let io = |action| {
        let path = path.clone();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io("open the lock file"))?;
    fsutil::set_visibility(&path, fsutil::Visibility::Private)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(Error::ProfileBusy {
                name: name.to_string(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io("lock")(e)),
    }
    sweep(root, name);
    Ok(NameLock {
        _file: file,
        journal: locks.join(format!("{name}.keys")),
    })
}

/// Removes `.NAME.tmp-*` folders: only a run holding the name's lock calls this, and every
/// staging run holds it, so these were left by a run that died.
fn sweep(root: &Path, name: &ProfileName) {
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let path = e.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::debug!(path = %path.display(), "removed a stale staging folder"),
                Err(err) => tracing::warn!("cannot remove `{}`: {err}", path.display()),
            }
        }
    }
}

impl NameLock {
    /// The journaled keys (an unreadable or damaged journal reads as what parses of it).
    pub fn pending(&self) -> BTreeSet<KeyId> {
        std::fs::read_to_string(&self.journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Adds `key` to the journal, durably, before the step that could leave its certificate
    /// behind.
    ///
    /// # Errors
    /// [`Error::Io`] when the journal cannot be written (the run must not go on without it).
    pub fn add(&self, key: &KeyId) -> Result<(), Error> {
        let mut keys = self.pending();
        keys.insert(key.clone());
        self.write(&keys)
    }

    /// Drops `key` from the journal: its certificate is wanted after all (or already revoked).
    ///
    /// # Errors
    /// [`Error::Io`] when the journal cannot be written.
    pub fn forget(&self, key: &KeyId) -> Result<(), Error> {
        let mut keys = self.pending();
        keys.remove(key);
        self.write(&keys)
    }

    fn write(&self, keys: &BTreeSet<KeyId>) -> Result<(), Error> {
        if keys.is_empty() {
            return match std::fs::remove_file(&self.journal) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                    action: "remove",
                    path: self.journal.clone(),
                    source: e,
                }),
                _ => Ok(()),
            };
        }
        let text: String = keys.iter().map(|k| format!("{k}\n")).collect();
        fsutil::write_private(&self.journal, text.as_bytes())
    }
}

/// Whether `error` is the agent's refusal to sign: it records a certificate in the same
/// transaction that makes it, so a refusal means none was issued for the journaled key. (A
/// `provision` that fails after signing says so with [`Error::AgentUnfinished`] instead.)
pub fn signing_refused(error: &anyhow::Error) -> bool {
    use shiqi_ca::protocol::RequestKind;
    error.chain().any(|e| {
        matches!(
            e.downcast_ref::<Error>(),
            Some(Error::AgentRefused {
                op: RequestKind::Sign | RequestKind::Provision,
                ..
            })
        )
    })
}

/// The key of the profile's certificate in `dir`: the key a run must never revoke.
pub fn profile_key(dir: &Path) -> Option<KeyId> {
    let pem = std::fs::read_to_string(dir.join(crate::profile::files::CLIENT_CRT)).ok()?;
    Some(shiqi_ca::cert::Cert::from_pem(&pem).ok()?.key_id())
}

/// Revokes (`superseded`) the certificates of every journaled key except `keep` (the key of the
/// profile as it now is). With `clear`, each key leaves the journal once the agent has answered;
/// a run settles without `clear` when it starts and with it when it ends, so a certificate that
/// a killed run's agent was still writing when this run started is caught at its end.
///
/// # Errors
/// The first agent or SSH error; the keys not yet revoked stay journaled for the next run.
pub async fn settle(
    lock: &NameLock,
    session: &Session,
    agent: &AgentCommand,
    name: &ProfileName,
    keep: Option<&KeyId>,
    clear: bool,
) -> Result<usize, Error> {
    let mut left = lock.pending();
    let mut revoked = 0;
    for key in left.clone() {
        if Some(&key) != keep {
            let what = Revocation::Key(name.clone(), key.clone());
            let done = agent::revoke(session, agent, &what, Reason::Superseded).await?;
            revoked += done.response.revoked.len();
        }
        if clear || Some(&key) == keep {
            left.remove(&key);
            lock.write(&left)?;
        }
    }
    Ok(revoked)
}
