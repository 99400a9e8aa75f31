//! The CRL on disk: `<state>/crl.pem` and `crl.der`, and their copies in `[crl] publish_dir`
//! where the servers read them (MariaDB's `ssl_crl`, the brokers' CRL distribution point).
//!
//! Every writer holds `<state>/crl.lock` from reading the revoked list to the last rename, so
//! two agents (a `revoke` and a `sign` that refreshes) can never publish an older list over a
//! newer one, and CRL numbers grow in the order the files are written.
//!
//! A CRL past its `nextUpdate` makes MariaDB and Java refuse *every* certificate ("CRL has
//! expired", "Could not determine revocation status"), so the CRL is regenerated well before:
//! by `sign`, `revoke` and `crl --refresh` once fewer than `[crl] refresh_before_days` are left.
//! MariaDB keeps the CRL it read at start or at the last `FLUSH SSL`, so whoever writes a new
//! one also asks it to re-read ([`reload_mysql`]); Java re-reads a changed `file:` CRL by itself
//! (at most 30 s later: `sun.security.provider.certpath.URICertStore` checks again after 30 s).

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use shiqi_ca::crl::{CrlInfo, build_crl, read_crl};
use shiqi_ca::issue::Ca;
use shiqi_ca::protocol::CrlFacts;
use time::OffsetDateTime;

use crate::error::AgentError;
use crate::fsutil;
use crate::state::Context;

/// The PEM file name (MariaDB, `openssl crl`).
pub(crate) const CRL_PEM: &str = "crl.pem";
/// The DER file name (the distribution point Java fetches).
pub(crate) const CRL_DER: &str = "crl.der";
const LOCK: &str = "crl.lock";
/// Present while MySQL may hold an older CRL than the state directory's (a reload failed).
pub(crate) const RELOAD_PENDING: &str = "mysql-reload.pending";

/// When to write a new CRL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// Always (after a revocation, or `crl` without `--refresh`).
    Always,
    /// Only when the CRL is missing, unreadable or due (fewer than `refresh_before_days` left);
    /// a fresh CRL whose published copy is missing or stale is copied again.
    IfDue,
}

/// What [`update`] did.
#[derive(Clone, Debug)]
pub(crate) struct Updated {
    /// The CRL now on disk.
    pub(crate) facts: CrlFacts,
    /// A new CRL was signed.
    pub(crate) regenerated: bool,
    /// The publish directory's copy was (re)written; the servers should re-read it.
    pub(crate) published: bool,
}

impl Updated {
    /// Whether MySQL should be asked to re-read its CRL.
    pub(crate) fn changed(&self) -> bool {
        self.regenerated || self.published
    }
}

/// Regenerates (or, with [`When::IfDue`], checks) the CRL and publishes it.
///
/// `IfDue` is on every `sign`'s path, so it answers from `Summary` (`crl.json`, a few
/// bytes) and the inventory's index when it can: at 100,000 certificates, reading every
/// revoked row or parsing a megabyte CRL per signature is what made `sign` slow. The full
/// check (parse the CRL, compare its serials) runs only when the summary is missing or does not
/// match.
///
/// # Errors
/// When the lock, the inventory or a file write fails; nothing is half-written (every file is
/// replaced by a rename).
pub(crate) fn update(ctx: &Context, ca: &Ca, when: When) -> Result<Updated, AgentError> {
    let _lock = lock(&ctx.path(LOCK))?;
    let now = OffsetDateTime::now_utc();
    let cfg = &ctx.config.crl;
    let (pem_path, der_path) = (ctx.path(CRL_PEM), ctx.path(CRL_DER));
    let publish = cfg.publish_dir.as_deref();

    let mut inventory = ctx.inventory()?;
    if when == When::IfDue {
        let digest = inventory.revoked_digest(now)?;
        if let Some(summary) = Summary::read(ctx)
            && summary.ca == ca.cert().key_id().to_string()
            && summary.digest == digest
            && summary.next_update - now >= cfg.refresh_before()
            && file_len(&der_path) == Some(summary.der_len)
            && file_len(&pem_path) == Some(summary.pem_len)
        {
            let published = match publish {
                Some(dir)
                    if file_len(&dir.join(CRL_DER)) != Some(summary.der_len)
                        || file_len(&dir.join(CRL_PEM)) != Some(summary.pem_len) =>
                {
                    let (pem, der) = (read_file(&pem_path)?, read_file(&der_path)?);
                    write_files(dir, &pem, &der)?;
                    true
                }
                _ => false,
            };
            return Ok(Updated {
                facts: summary.facts(&pem_path, publish),
                regenerated: false,
                published,
            });
        }
    }
    let revoked = inventory.revoked_unexpired(now)?;
    if when == When::IfDue
        && let Some((info, pem, der)) = current(&pem_path, &der_path, ca)
        && !info.is_due(now, cfg.refresh_before())
        // A revocation whose CRL write failed is made up for here.
        && same_serials(&info, &revoked)
    {
        let published = match publish {
            Some(dir) if !same(&dir.join(CRL_DER), &der) || !same(&dir.join(CRL_PEM), &pem) => {
                write_files(dir, &pem, &der)?;
                true
            }
            _ => false,
        };
        Summary::from_info(ca, &info, inventory.revoked_digest(now)?, &pem, &der).write(ctx);
        return Ok(Updated {
            facts: facts(&info, &pem_path, publish, now),
            regenerated: false,
            published,
        });
    }

    let number = inventory.next_crl_number()?;
    let crl = build_crl(&ca.issuer()?, &revoked, number, now, cfg.validity())?;
    write_files(&ctx.dir, crl.pem.as_bytes(), &crl.der)?;
    if let Some(dir) = publish {
        write_files(dir, crl.pem.as_bytes(), &crl.der)?;
    }
    tracing::debug!(number, revoked = revoked.len(), "wrote a new CRL");
    let info = CrlInfo {
        this_update: crl.this_update,
        next_update: Some(crl.next_update),
        number: Some(number),
        serials: revoked.iter().map(|r| r.serial.clone()).collect(),
    };
    let digest = inventory.revoked_digest(now)?;
    Summary::from_info(ca, &info, digest, crl.pem.as_bytes(), &crl.der).write(ctx);
    Ok(Updated {
        facts: facts(&info, &pem_path, publish, now),
        regenerated: true,
        published: publish.is_some(),
    })
}

/// What the CRL on disk was built from, so that `IfDue` need not read it: `<state>/crl.json`.
/// Only ever a shortcut: missing, unreadable or not matching, the full check runs.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Summary {
    /// The key id of the CA that signed it (a re-`init`ed CA makes it stale).
    ca: String,
    number: u64,
    #[serde(with = "time::serde::rfc3339")]
    this_update: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    next_update: OffsetDateTime,
    /// [`shiqi_ca::inventory::Inventory::revoked_digest`] when it was written.
    digest: (i64, i64),
    revoked: usize,
    der_len: u64,
    pem_len: u64,
}

const SUMMARY: &str = "crl.json";

impl Summary {
    fn from_info(ca: &Ca, info: &CrlInfo, digest: (i64, i64), pem: &[u8], der: &[u8]) -> Self {
        Self {
            ca: ca.cert().key_id().to_string(),
            number: info.number.unwrap_or_default(),
            this_update: info.this_update,
            next_update: info.next_update.unwrap_or(info.this_update),
            digest,
            revoked: info.serials.len(),
            der_len: der.len() as u64,
            pem_len: pem.len() as u64,
        }
    }

    fn read(ctx: &Context) -> Option<Self> {
        let text = std::fs::read(ctx.path(SUMMARY)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Best effort: without it the next check is the full one.
    fn write(&self, ctx: &Context) {
        let written = serde_json::to_vec(self)
            .map_err(|e| e.to_string())
            .and_then(|j| fsutil::write_private(&ctx.path(SUMMARY), &j).map_err(|e| e.to_string()));
        if let Err(why) = written {
            tracing::warn!("cannot write {SUMMARY}: {why}");
        }
    }

    fn facts(&self, pem: &Path, publish: Option<&Path>) -> CrlFacts {
        CrlFacts {
            number: self.number,
            this_update: self.this_update,
            next_update: self.next_update,
            revoked: self.revoked,
            path: pem.display().to_string().into(),
            published: publish.map(|d| d.join(CRL_PEM).display().to_string().into()),
        }
    }
}

fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

fn read_file(path: &Path) -> Result<Vec<u8>, AgentError> {
    std::fs::read(path).map_err(|why| AgentError::File {
        path: path.to_owned(),
        why,
    })
}

/// Asks MySQL/MariaDB to re-read its TLS files (and so the CRL), when a publish directory is
/// configured (the server cannot read the state directory's copy) and MySQL is.
///
/// `Ok(None)`: nothing to reload; `Ok(Some(statement))`: done.
///
/// # Errors
/// When the server cannot be reached or refuses.
pub(crate) fn reload_mysql(ctx: &Context) -> Result<Option<String>, AgentError> {
    if ctx.config.crl.publish_dir.is_none() || ctx.config.mysql.host.is_empty() {
        return Ok(None);
    }
    let result = reload_now(ctx);
    note_reload(ctx, result.is_ok());
    result.map(Some)
}

/// Whether an earlier reload failed, so MySQL may still hold an older CRL than the one on disk:
/// the next `sign`, `revoke` or `crl --refresh` retries it even though the CRL did not change.
pub(crate) fn reload_pending(ctx: &Context) -> bool {
    ctx.path(RELOAD_PENDING).exists()
}

/// Records the outcome of a reload: a failure leaves [`RELOAD_PENDING`] behind (durably, so a
/// later process sees it), a success removes it.
pub(crate) fn note_reload(ctx: &Context, ok: bool) {
    let path = ctx.path(RELOAD_PENDING);
    let result = if ok {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
            _ => Ok(()),
        }
    } else {
        fsutil::write_private(&path, b"MySQL has not re-read the newest CRL\n")
            .map_err(|e| e.to_string())
    };
    if let Err(why) = result {
        tracing::warn!(
            "cannot record the MySQL reload state in {}: {why}",
            path.display()
        );
    }
}

fn reload_now(ctx: &Context) -> Result<String, AgentError> {
    let address = crate::mysql::address(ctx);
    let statement = ctx.block_on(async {
        let mut conn = crate::mysql::connect(ctx).await?;
        let done = crate::mysql::reload_tls(&mut conn, &address).await;
        let _ = conn.disconnect().await;
        done
    })?;
    Ok(statement.to_owned())
}

/// The state directory's CRL, if both files are there, agree, and the CA signed them.
fn current(pem_path: &Path, der_path: &Path, ca: &Ca) -> Option<(CrlInfo, Vec<u8>, Vec<u8>)> {
    let der = std::fs::read(der_path).ok()?;
    let pem = std::fs::read(pem_path).ok()?;
    let from_pem = shiqi_ca::cert::pem_blocks(std::str::from_utf8(&pem).ok()?, "X509 CRL")
        .ok()?
        .into_iter()
        .next()?;
    if from_pem != der {
        return None;
    }
    let info = read_crl(&der, ca.cert().der()).ok()?;
    Some((info, pem, der))
}

fn same_serials(info: &CrlInfo, revoked: &[shiqi_ca::inventory::Record]) -> bool {
    let listed: std::collections::BTreeSet<_> = info.serials.iter().collect();
    let wanted: std::collections::BTreeSet<_> = revoked.iter().map(|r| &r.serial).collect();
    listed == wanted
}

fn same(path: &Path, bytes: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|b| b == bytes)
}

/// Writes `crl.der` then `crl.pem` into `dir` (created 0755 if missing), each 0644 and
/// atomically: a CRL is public, and the servers run as other users.
fn write_files(dir: &Path, pem: &[u8], der: &[u8]) -> Result<(), AgentError> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|why| AgentError::File {
            path: dir.to_owned(),
            why,
        })?;
    }
    fsutil::write_atomic(&dir.join(CRL_DER), der, 0o644)?;
    fsutil::write_atomic(&dir.join(CRL_PEM), pem, 0o644)
}

fn facts(info: &CrlInfo, pem: &Path, publish: Option<&Path>, now: OffsetDateTime) -> CrlFacts {
    CrlFacts {
        number: info.number.unwrap_or_default(),
        this_update: info.this_update,
        next_update: info.next_update.unwrap_or(now),
        revoked: info.serials.len(),
        path: pem.display().to_string().into(),
        published: publish.map(|d| d.join(CRL_PEM).display().to_string().into()),
    }
}

/// An exclusive lock on `path`, held until the file is dropped.
fn lock(path: &PathBuf) -> Result<std::fs::File, AgentError> {
    let err = |why| AgentError::File {
        path: path.clone(),
        why,
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    file.lock().map_err(err)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use shiqi_ca::inventory::{CertKind, NewCert};
    use shiqi_ca::issue::Validity;
    use shiqi_ca::key::KeyType;

    use super::*;
    use crate::config::Config;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn context(
        publish: bool,
    ) -> Result<(tempfile::TempDir, Context, Ca), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let mut config = Config::default();
        config.mysql.host = String::new();
        if publish {
            config.crl.publish_dir = Some(dir.path().join("pub"));
        }
        let ctx = Context::with_config(dir.path().join("state"), config)?;
        std::fs::create_dir_all(&ctx.dir)?;
        let ca = Ca::create(
            KeyType::EcdsaP256,
            "test CA",
            Validity::starting_now(OffsetDateTime::now_utc(), time::Duration::days(30)),
        )?;
        Ok((dir, ctx, ca))
    }

    #[test]
    fn writes_publishes_and_refreshes_only_when_due() -> TestResult {
        let (dir, mut ctx, ca) = context(true)?;
        // First run with IfDue: nothing on disk yet, so a CRL is made.
        let first = update(&ctx, &ca, When::IfDue)?;
        assert!(first.regenerated && first.published);
        assert_eq!(first.facts.number, 1);
        assert_eq!(first.facts.revoked, 0);
        let published = dir.path().join("pub").join(CRL_DER);
        let mode = std::fs::metadata(&published)?.permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        assert_eq!(
            std::fs::read(&published)?,
            std::fs::read(ctx.path(CRL_DER))?
        );

        // Fresh: nothing to do.
        let again = update(&ctx, &ca, When::IfDue)?;
        assert!(!again.changed());
        assert_eq!(again.facts.number, 1);

        // A lost published copy is put back without a new number.
        std::fs::remove_file(&published)?;
        let repaired = update(&ctx, &ca, When::IfDue)?;
        assert!(!repaired.regenerated && repaired.published);
        assert!(published.exists());

        // Revoke one and force: the new CRL lists it.
        let mut inventory = ctx.inventory()?;
        let now = OffsetDateTime::now_utc();
        let record = inventory.issue(|s| {
            Ok(NewCert {
                name: "saige".into(),
                kind: CertKind::Client,
                subject: "CN=saige".into(),
                not_before: now,
                not_after: now + time::Duration::days(1),
                der: s.as_bytes().to_vec(),
            })
        })?;
        inventory.revoke(&record.serial, Some("key-compromise"), now)?;
        // A revocation whose CRL was never written: a refresh notices and writes one.
        let healed = update(&ctx, &ca, When::IfDue)?;
        assert!(healed.regenerated);
        assert_eq!(healed.facts.number, 2);
        let forced = update(&ctx, &ca, When::Always)?;
        assert!(forced.regenerated);
        assert_eq!(forced.facts.number, 3);
        let info = read_crl(&std::fs::read(&published)?, ca.cert().der())?;
        assert_eq!(info.serials, vec![record.serial]);

        // Within the refresh margin: IfDue regenerates.
        ctx.config.crl.refresh_before_days = 29;
        ctx.config.crl.validity_days = 30;
        let fresh = update(&ctx, &ca, When::IfDue)?;
        assert!(!fresh.regenerated, "30 days left, margin 29: not due");
        ctx.config.crl.validity_days = 40;
        ctx.config.crl.refresh_before_days = 35;
        let due = update(&ctx, &ca, When::IfDue)?;
        assert!(due.regenerated && due.facts.number == 4);
        Ok(())
    }

    #[test]
    fn a_crl_from_another_ca_is_replaced() -> TestResult {
        let (_dir, ctx, ca) = context(false)?;
        update(&ctx, &ca, When::Always)?;
        let (_other_dir, _, other) = context(false)?;
        let replaced = update(&ctx, &other, When::IfDue)?;
        assert!(replaced.regenerated && !replaced.published);
        assert!(replaced.facts.published.is_none());
        Ok(())
    }
}
