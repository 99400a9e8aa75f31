//! Crash safety for the commands that get certificates (`setup`, `rotate`, `renew`).
//!
//! - One run per name at a time: the profile's lock ([`crate::profile::lock`]), held for the run.
//! - A journal of keys (`.locks/NAME.keys`) whose certificates must not outlive the run unless
//!   they end up in the profile: the new key, written before the agent is asked to sign it (a
//!   run killed while the agent signs never learns the serial, but it knows the key), and the key
//!   a run replaces. [`settle`] revokes, as `superseded`, every journaled key that is not the
//!   profile's, then clears the journal; a run calls it when it ends, and the next run for the
//!   name calls it first, so a SIGKILL at any point is made good by the next run.
//! - A renewal's record (`.locks/NAME.renewal.json`, [`Renewal`]): how many certificates were
//!   signed to replace the profile's current one, and the one signed but not yet proven, kept
//!   for the next attempt instead of being revoked and signed again (issue 42: each failed
//!   attempt used to cost a certificate, until the name's cap locked the user out). Its key
//!   stays journaled too; [`settle`] spares it while the record belongs to the profile's
//!   certificate, and revokes it once the profile moved on (a rotation, a setup).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shiqi_ca::crl::Reason;
use shiqi_ca::{KeyId, ProfileName};

use crate::agent::{self, AgentCommand, Revocation};
use crate::error::{AgentError, Error};
use crate::fsutil;
use crate::profile::lock::{self, NameLock};
use crate::ssh::Session;

fn renewal_path(root: &Path, name: &ProfileName) -> PathBuf {
    lock::file(root, name, "renewal.json")
}

/// A renewal of one certificate that has not finished: what [`crate::ops::renew`] keeps
/// between attempts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Renewal {
    /// The key of the profile certificate it replaces: the record is that certificate's.
    pub(crate) replaces: String,
    /// Certificates signed for it so far (refused ones included).
    pub(crate) signed: u32,
    /// The certificate signed and not yet proven, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pending: Option<Pending>,
}

/// A signed certificate that no service has accepted or refused yet, with its key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// Its key's identity (what the journal holds).
    pub(crate) key_id: String,
    /// The private key, PKCS#8 PEM (the file is 0600 in the 0700 `.locks`, like the profile's).
    pub(crate) key_pem: String,
    /// The agent's `sign` reply, checked again when it is used.
    pub(crate) reply: String,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pending({}, key ***)", self.key_id)
    }
}

impl Renewal {
    /// A fresh record for the certificate whose key is `replaces`.
    pub(crate) fn of(replaces: Option<&KeyId>) -> Self {
        Self {
            replaces: replaces.map(ToString::to_string).unwrap_or_default(),
            ..Self::default()
        }
    }

    fn is_for(&self, key: Option<&KeyId>) -> bool {
        key.is_some_and(|k| self.replaces == k.to_string())
    }
}

/// The renewal record of `name`, read without the lock (doctor's look; a damaged one reads as
/// none).
pub(crate) fn renewal_of(root: &Path, name: &ProfileName) -> Option<Renewal> {
    read_renewal(&renewal_path(root, name))
}

fn read_renewal(path: &Path) -> Option<Renewal> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

// The journal's and the renewal record's operations on a held lock: only its holder may change them.
impl NameLock {
    /// `.locks/NAME.keys`.
    fn keys_file(&self) -> PathBuf {
        self.file("keys")
    }

    /// `.locks/NAME.renewal.json`.
    fn renewal_file(&self) -> PathBuf {
        self.file("renewal.json")
    }

    /// The journaled keys (an unreadable or damaged journal reads as what parses of it).
    pub(crate) fn pending(&self) -> BTreeSet<KeyId> {
        std::fs::read_to_string(self.keys_file())
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
    pub(crate) fn add(&self, key: &KeyId) -> Result<(), Error> {
        let mut keys = self.pending();
        keys.insert(key.clone());
        self.write(&keys)
    }

    /// Drops `key` from the journal: its certificate is wanted after all (or already revoked).
    ///
    /// # Errors
    /// [`Error::Io`] when the journal cannot be written.
    pub(crate) fn forget(&self, key: &KeyId) -> Result<(), Error> {
        let mut keys = self.pending();
        keys.remove(key);
        self.write(&keys)
    }

    /// The renewal record, when it belongs to the certificate whose key is `current`.
    pub(crate) fn renewal(&self, current: Option<&KeyId>) -> Option<Renewal> {
        read_renewal(&self.renewal_file()).filter(|r| r.is_for(current))
    }

    /// Records `renewal`, durably.
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be written.
    pub(crate) fn set_renewal(&self, renewal: &Renewal) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(renewal).unwrap_or_default();
        fsutil::write_private(&self.renewal_file(), text.as_bytes())
    }

    /// Removes the renewal record (its pending key, if any, is still journaled).
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be removed.
    pub(crate) fn clear_renewal(&self) -> Result<(), Error> {
        match std::fs::remove_file(self.renewal_file()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                action: "remove",
                path: self.renewal_file(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    fn write(&self, keys: &BTreeSet<KeyId>) -> Result<(), Error> {
        if keys.is_empty() {
            return match std::fs::remove_file(self.keys_file()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                    action: "remove",
                    path: self.keys_file(),
                    source: e,
                }),
                _ => Ok(()),
            };
        }
        let text: String = keys.iter().map(|k| format!("{k}\n")).collect();
        fsutil::write_private(&self.keys_file(), text.as_bytes())
    }
}

/// Whether `error` is the agent's refusal to sign: it records a certificate in the same
/// transaction that makes it, so a refusal means none was issued for the journaled key. (A
/// `provision` that fails after signing says so with [`AgentError::Unfinished`] instead.)
pub(crate) fn signing_refused(error: &anyhow::Error) -> bool {
    use shiqi_ca::protocol::RequestKind;
    error.chain().any(|e| {
        matches!(
            e.downcast_ref::<Error>(),
            Some(Error::Agent(AgentError::Refused {
                op: RequestKind::Sign | RequestKind::Provision,
                ..
            }))
        )
    })
}

/// The key of the profile's certificate in `dir`: the key a run must never revoke.
pub(crate) fn profile_key(dir: &Path) -> Option<KeyId> {
    let pem = std::fs::read_to_string(dir.join(crate::profile::files::CLIENT_CRT)).ok()?;
    Some(shiqi_ca::cert::Cert::from_pem(&pem).ok()?.key_id())
}

/// The key [`settle`] spares besides `keep` (a renewal's pending certificate, while its record
/// belongs to `keep`), and whether the record is stale (the profile moved on: it goes, and its
/// key is revoked with the rest).
fn spared(record: Option<Renewal>, keep: Option<&KeyId>) -> (Option<KeyId>, bool) {
    match record {
        Some(r) if r.is_for(keep) => (r.pending.and_then(|p| p.key_id.parse().ok()), false),
        Some(_) => (None, true),
        None => (None, false),
    }
}

/// Revokes (`superseded`) the certificates of every journaled key except `keep` (the key of the
/// profile as it now is) and a pending renewal's for that profile ([`Renewal`]). With `clear`, each key leaves the journal once the agent has answered;
/// a run settles without `clear` when it starts and with it when it ends, so a certificate that
/// a killed run's agent was still writing when this run started is caught at its end.
///
/// # Errors
/// The first agent or SSH error; the keys not yet revoked stay journaled for the next run.
pub(crate) async fn settle(
    lock: &NameLock,
    session: &Session,
    agent: &AgentCommand,
    name: &ProfileName,
    keep: Option<&KeyId>,
    clear: bool,
) -> Result<usize, Error> {
    // A renewal's pending certificate is spared while the profile still holds the certificate
    // it was signed to replace; once the profile moved on, the record goes and its key (still
    // journaled) is revoked with the rest.
    let (spared, stale) = spared(read_renewal(&lock.renewal_file()), keep);
    if stale {
        lock.clear_renewal()?;
    }
    let mut left = lock.pending();
    let mut revoked = 0;
    for key in left.clone() {
        if Some(&key) == spared.as_ref() {
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> KeyId {
        format!("{n:064x}").parse().expect("key id")
    }

    #[test]
    fn a_pending_renewal_is_spared_only_while_the_profile_holds_what_it_replaces() {
        let (old, pending) = (key(1), key(2));
        let record = Renewal {
            replaces: old.to_string(),
            signed: 1,
            pending: Some(Pending {
                key_id: pending.to_string(),
                key_pem: String::new(),
                reply: String::new(),
            }),
        };
        assert_eq!(
            spared(Some(record.clone()), Some(&old)),
            (Some(pending.clone()), false)
        );
        // Renewed (the profile holds the pending key now) or rotated by hand: stale.
        assert_eq!(spared(Some(record.clone()), Some(&pending)), (None, true));
        assert_eq!(spared(Some(record.clone()), Some(&key(3))), (None, true));
        assert_eq!(spared(Some(record), None), (None, true));
        assert_eq!(spared(None, Some(&old)), (None, false));
    }

    #[test]
    fn the_renewal_record_belongs_to_one_certificate() {
        let root = tempfile::tempdir().expect("tempdir");
        let name: ProfileName = "saige".parse().expect("name");
        let lock = lock::lock(root.path(), &name).expect("lock");
        let (old, other) = (key(1), key(3));
        assert_eq!(lock.renewal(Some(&old)), None);
        let mut r = Renewal::of(Some(&old));
        r.signed = 2;
        lock.set_renewal(&r).expect("write");
        assert_eq!(lock.renewal(Some(&old)), Some(r.clone()));
        assert_eq!(lock.renewal(Some(&other)), None);
        assert_eq!(renewal_of(root.path(), &name), Some(r));
        lock.clear_renewal().expect("clear");
        assert_eq!(renewal_of(root.path(), &name), None);
        // The private key inside never reaches a log line.
        let p = Pending {
            key_id: old.to_string(),
            key_pem: "-----BEGIN PRIVATE KEY-----".to_owned(),
            reply: String::new(),
        };
        assert!(!format!("{p:?}").contains("PRIVATE"));
    }
}
