//! The CA's state as one encrypted file, and back.
//!
//! A backup is a tar archive (`MANIFEST`, `ca.key`, `ca.crt`, `inventory.sqlite`, `agent.toml`)
//! encrypted to a passphrase with age's scrypt recipient, so `age -d` or `rage -d` opens it
//! without this tool. The inventory is copied with SQLite's `VACUUM INTO` (one consistent
//! snapshot while the agent may be signing). What the state holds besides is made again: the
//! enrolled keys' `authorized_keys` lines by `enroll --sync` (the enrollments are in the
//! inventory), the CRL by `crl`, the agent's Kafka admin identity on first use, the locks and
//! rate buckets empty.
//!
//! A restored CA cannot know how many CRLs it signed after the backup: its CRL number skips
//! ahead by [`CRL_NUMBER_SKIP`] so that no number repeats. Certificates signed after the backup
//! are unknown to it (it cannot list or revoke them by name); `restore` says so.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::Path;

use age::secrecy::SecretString;
use serde::{Deserialize, Serialize};
use shiqi_ca::issue::Ca;

use crate::error::AgentError;
use crate::fsutil;
use crate::state::Context;

/// The archive's format; a newer one is refused by name.
const FORMAT: u32 = 1;
/// The manifest's name in the archive.
const MANIFEST: &str = "MANIFEST.json";
/// The files a backup holds, and whether each must be there.
const FILES: [(&str, bool); 4] = [
    ("ca.key", true),
    ("ca.crt", true),
    ("inventory.sqlite", true),
    ("agent.toml", false),
];
/// The largest backup read back (an inventory of a million certificates is ~300 MB; a team's
/// is a few MB).
const MAX_BYTES: u64 = 1 << 30;
/// How far a restored CA's CRL number moves ahead (a CA that signs a CRL a minute would need
/// two years to reach it).
pub(crate) const CRL_NUMBER_SKIP: u64 = 1_000_000;
/// Where the last backup is recorded, for `check`.
pub(crate) const RECORD: &str = "backup.json";
/// The shortest passphrase taken (age's scrypt makes each guess cost ~1 s of CPU, but a short
/// one is still a short one).
const MIN_PASSPHRASE: usize = 12;

/// What a backup says about itself.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// The archive format (1).
    pub(crate) format: u32,
    /// When it was made (RFC 3339).
    pub(crate) created_at: String,
    /// The agent that made it (`--version`).
    pub(crate) agent: String,
    /// The CA's subject.
    pub(crate) ca_subject: String,
    /// Client and server certificates in the inventory, and how many of them are revoked.
    pub(crate) certificates: usize,
    /// Of which revoked.
    pub(crate) revoked: usize,
    /// The files in the archive.
    pub(crate) files: Vec<String>,
}

/// The record of the last backup, in the state directory (no secret in it).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    /// When (RFC 3339).
    pub(crate) at: String,
    /// Where it was written.
    pub(crate) file: String,
}

/// Reads a passphrase from `source` (a file, or `-` for stdin): the first line, at least
/// 12 characters. Never an argument: argv is visible to every account.
pub(crate) fn passphrase(source: &Path) -> Result<SecretString, AgentError> {
    let mut text = String::new();
    let limited =
        |r: &mut dyn std::io::Read, text: &mut String| r.take(4096).read_to_string(text).map(drop);
    if source == Path::new("-") {
        limited(&mut std::io::stdin().lock(), &mut text).map_err(AgentError::Stdin)?;
    } else {
        let mut file = std::fs::File::open(source).map_err(|why| AgentError::File {
            path: source.to_owned(),
            why,
        })?;
        limited(&mut file, &mut text).map_err(|why| AgentError::File {
            path: source.to_owned(),
            why,
        })?;
    }
    let line = text.lines().next().unwrap_or_default().to_owned();
    if line.chars().count() < MIN_PASSPHRASE {
        return Err(AgentError::Local {
            why: format!(
                "the passphrase from {} is shorter than {MIN_PASSPHRASE} characters: use a long \
                 one (e.g. `openssl rand -base64 24 > pass`) and keep it apart from the backup",
                source.display()
            ),
        });
    }
    Ok(SecretString::from(line))
}

/// Makes the encrypted archive of `ctx`'s CA; returns it and its manifest.
pub(crate) fn create(
    ctx: &Context,
    passphrase: SecretString,
) -> Result<(Vec<u8>, Manifest), AgentError> {
    let ca = ctx.ca()?;
    let scratch = tempfile::tempdir_in(&ctx.dir).map_err(|why| AgentError::File {
        path: ctx.dir.clone(),
        why,
    })?;
    let copy = scratch.path().join("inventory.sqlite");
    let inventory = ctx.inventory()?;
    inventory.copy_to(&copy)?;
    let records = inventory.list()?;
    let revoked = records.iter().filter(|r| r.revoked_at.is_some()).count();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, required) in FILES {
        let path = if name == "inventory.sqlite" {
            copy.clone()
        } else {
            ctx.path(name)
        };
        match std::fs::read(&path) {
            Ok(bytes) => files.push((name.to_owned(), bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {}
            Err(why) => return Err(AgentError::File { path, why }),
        }
    }
    let manifest = Manifest {
        format: FORMAT,
        created_at: now(),
        agent: shiqi_ca::version!().to_owned(),
        ca_subject: ca.cert().subject().to_owned(),
        certificates: records.len(),
        revoked,
        files: files.iter().map(|(n, _)| n.clone()).collect(),
    };
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| AgentError::Local {
        why: format!("cannot write the manifest: {e}"),
    })?;
    let mut archive = tar::Builder::new(Vec::new());
    for (name, bytes) in std::iter::once((MANIFEST.to_owned(), manifest_bytes)).chain(files) {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        header.set_entry_type(tar::EntryType::Regular);
        archive
            .append_data(&mut header, &name, bytes.as_slice())
            .map_err(archive_error)?;
    }
    let plain = archive.into_inner().map_err(archive_error)?;
    let mut sealed = Vec::new();
    let mut writer = age::Encryptor::with_user_passphrase(passphrase)
        .wrap_output(&mut sealed)
        .map_err(archive_error)?;
    writer.write_all(&plain).map_err(archive_error)?;
    writer.finish().map_err(archive_error)?;
    Ok((sealed, manifest))
}

fn archive_error(e: std::io::Error) -> AgentError {
    AgentError::Local {
        why: format!("cannot write the backup: {e}"),
    }
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Records that a backup of `ctx` went to `file`.
pub(crate) fn record(ctx: &Context, file: &Path) -> Result<(), AgentError> {
    let record = Record {
        at: now(),
        file: file.display().to_string(),
    };
    let text = serde_json::to_vec(&record).map_err(|e| AgentError::Local {
        why: format!("cannot record the backup: {e}"),
    })?;
    fsutil::write_private(&ctx.path(RECORD), &text)
}

/// The last backup's record, if any.
pub(crate) fn last(ctx: &Context) -> Option<Record> {
    let text = std::fs::read(ctx.path(RECORD)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// An opened backup: its manifest and files, checked.
pub(crate) struct Opened {
    /// What it says about itself.
    pub(crate) manifest: Manifest,
    files: BTreeMap<String, Vec<u8>>,
}

impl Opened {
    /// Decrypts and reads `sealed` (from `from`, named in errors) with `passphrase`, and checks
    /// it: the format, every required file, the CA key matching the CA certificate.
    pub(crate) fn open(
        sealed: &[u8],
        from: &Path,
        passphrase: SecretString,
    ) -> Result<Self, AgentError> {
        let bad = |why: String| AgentError::Local {
            why: format!("{} is not a usable backup: {why}", from.display()),
        };
        let decryptor = age::Decryptor::new(sealed).map_err(|e| bad(e.to_string()))?;
        let identity = age::scrypt::Identity::new(passphrase);
        let mut reader = decryptor
            .decrypt(std::iter::once(&identity as &dyn age::Identity))
            .map_err(|e| match e {
                age::DecryptError::DecryptionFailed | age::DecryptError::NoMatchingKeys => {
                    AgentError::Local {
                        why: format!(
                            "the passphrase does not open {}: give the one the backup was made \
                             with",
                            from.display()
                        ),
                    }
                }
                e => bad(e.to_string()),
            })?;
        let mut plain = Vec::new();
        (&mut reader)
            .take(MAX_BYTES)
            .read_to_end(&mut plain)
            .map_err(|e| bad(e.to_string()))?;
        let mut files = BTreeMap::new();
        let mut archive = tar::Archive::new(plain.as_slice());
        for entry in archive.entries().map_err(|e| bad(e.to_string()))? {
            let mut entry = entry.map_err(|e| bad(e.to_string()))?;
            let name = entry
                .path()
                .map_err(|e| bad(e.to_string()))?
                .to_string_lossy()
                .into_owned();
            // Only the names a backup holds: nothing else is ever written from it.
            if name != MANIFEST && !FILES.iter().any(|(n, _)| *n == name) {
                return Err(bad(format!(
                    "it holds `{}`, which no backup does",
                    shiqi_ca::text::one_line(&name, 80)
                )));
            }
            if entry.header().entry_type() != tar::EntryType::Regular {
                return Err(bad(format!("`{name}` is not a regular file")));
            }
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| bad(e.to_string()))?;
            files.insert(name, bytes);
        }
        let manifest: Manifest = files
            .get(MANIFEST)
            .ok_or_else(|| bad(format!("no {MANIFEST}")))
            .and_then(|m| serde_json::from_slice(m).map_err(|e| bad(format!("{MANIFEST}: {e}"))))?;
        if manifest.format != FORMAT {
            return Err(bad(format!(
                "format {} (this agent reads format {FORMAT}): restore with the agent that made it",
                manifest.format
            )));
        }
        for (name, required) in FILES {
            if required && !files.contains_key(name) {
                return Err(bad(format!("no `{name}`")));
            }
        }
        let text = |name: &str| String::from_utf8_lossy(&files[name]).into_owned();
        Ca::from_pem(&text("ca.crt"), &text("ca.key")).map_err(|e| bad(e.to_string()))?;
        Ok(Self { manifest, files })
    }

    /// Writes the CA into `ctx`'s state directory, which must hold none (`force`: the one there
    /// is moved aside first, into `before-restore-<time>/`). Returns the CRL number it now
    /// continues from and, when one was already there, where the backup's `agent.toml` went.
    pub(crate) fn restore(&self, ctx: &Context, force: bool) -> Result<Restored, AgentError> {
        fsutil::create_private_dir(&ctx.dir)?;
        let present: Vec<&str> = ["ca.key", "ca.crt", "inventory.sqlite"]
            .into_iter()
            .filter(|n| ctx.path(n).exists())
            .collect();
        let mut aside = None;
        if !present.is_empty() {
            if !force {
                return Err(AgentError::Local {
                    why: format!(
                        "a CA is in {} already ({}): restore into an empty state directory, or \
                         pass --force to move it aside first",
                        ctx.dir.display(),
                        present.join(", ")
                    ),
                });
            }
            let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
            let dir = ctx.path(&format!("before-restore-{stamp}"));
            fsutil::create_private_dir(&dir)?;
            for name in present {
                for suffix in ["", "-wal", "-shm"] {
                    let from = ctx.path(&format!("{name}{suffix}"));
                    if from.exists() {
                        std::fs::rename(&from, dir.join(format!("{name}{suffix}"))).map_err(
                            |why| AgentError::File {
                                path: from.clone(),
                                why,
                            },
                        )?;
                    }
                }
            }
            aside = Some(dir);
        }
        // The inventory first, under a temporary name, numbered ahead; then the certificate,
        // then the key: a crash leaves no key without its inventory.
        let staged = ctx.path("inventory.sqlite.restoring");
        fsutil::write_private(&staged, &self.files["inventory.sqlite"])?;
        let crl_number = {
            let mut inventory = shiqi_ca::inventory::Inventory::open(&staged)?;
            inventory.skip_crl_numbers(CRL_NUMBER_SKIP)?
        };
        std::fs::rename(&staged, ctx.path("inventory.sqlite")).map_err(|why| AgentError::File {
            path: staged.clone(),
            why,
        })?;
        fsutil::write_atomic(&ctx.path("ca.crt"), &self.files["ca.crt"], 0o644)?;
        fsutil::write_private(&ctx.path("ca.key"), &self.files["ca.key"])?;
        let mut config_to = None;
        if let Some(config) = self.files.get("agent.toml") {
            let path = ctx.path("agent.toml");
            match std::fs::read(&path) {
                Ok(current) if current == *config => {}
                Ok(_) => {
                    let kept = ctx.path("agent.toml.from-backup");
                    fsutil::write_private(&kept, config)?;
                    config_to = Some(kept);
                }
                Err(_) => fsutil::write_private(&path, config)?,
            }
        }
        Ok(Restored {
            crl_number,
            config_to,
            aside,
        })
    }
}

/// What [`Opened::restore`] did besides writing the CA.
pub(crate) struct Restored {
    /// The CRL number the CA now continues from.
    pub(crate) crl_number: u64,
    /// Where the backup's `agent.toml` went when another one was in place.
    pub(crate) config_to: Option<std::path::PathBuf>,
    /// Where the CA that was there went (`--force`).
    pub(crate) aside: Option<std::path::PathBuf>,
}
