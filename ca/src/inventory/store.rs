//! The inventory's store: every certificate the CA issued, its status and the CRL counter, in
//! one SQLite file (`<state>/inventory.sqlite`, mode 0600).
//!
//! It owns the schema, serial allocation and revocation bookkeeping. It does not build
//! certificates (the caller's closure does, see [`Inventory::issue`]) nor CRLs (`crl.rs`).
//!
//! Many `shiqi-ca-agent` processes may run at once (one per SSH session), each with its own
//! connection. The file is in WAL mode with a long `busy_timeout`, and every write runs in an
//! `IMMEDIATE` transaction: a writer takes the lock when it begins, so writers queue in SQLite's
//! busy handler instead of failing with `SQLITE_BUSY` when a deferred read lock cannot be
//! upgraded (<https://www.sqlite.org/lang_transaction.html>). `synchronous` stays at SQLite's
//! default `FULL`: a certificate handed out but lost from the inventory on power loss could not be
//! revoked.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row, Transaction, TransactionBehavior, params};
use time::OffsetDateTime;

use super::{CertKind, NewCert, Record, Status, access};
use crate::error::Error;
use crate::name::Serial;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 5;

/// How long a connection waits for another process's write lock before giving up.
///
/// Long on purpose: 50 agents signing at once must queue, and each holds the lock only for one
/// signature and one insert.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many random serials [`Inventory::issue`] tries before giving up. With 126 random bits a
/// single collision is already unlikely to ever happen; the bound only keeps the loop finite.
const SERIAL_ATTEMPTS: usize = 8;

const SCHEMA_V1: &str = "
    CREATE TABLE certs (
        serial     TEXT PRIMARY KEY NOT NULL,
        name       TEXT NOT NULL,
        kind       TEXT NOT NULL CHECK (kind IN ('client', 'server', 'admin')),
        subject    TEXT NOT NULL,
        not_before INTEGER NOT NULL,
        not_after  INTEGER NOT NULL,
        issued_at  INTEGER NOT NULL,
        status     TEXT NOT NULL CHECK (status IN ('valid', 'revoked')),
        revoked_at INTEGER,
        reason     TEXT,
        der        BLOB NOT NULL,
        ssh_user   TEXT
    ) STRICT;
    CREATE INDEX certs_by_name ON certs (name, kind, status);
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value INTEGER NOT NULL
    ) STRICT;
    INSERT INTO meta (key, value) VALUES ('crl_number', 0);
    PRAGMA user_version = 1;
";

/// Version 2: who may ask (SSH keys enrolled with a name and a role) and which names may not be
/// signed again until an admin says so (a `revoke --name` blocks the name).
const SCHEMA_V2: &str = "
    CREATE TABLE keys (
        fingerprint TEXT PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        role        TEXT NOT NULL CHECK (role IN ('user', 'admin')),
        public_key  TEXT NOT NULL,
        enrolled_at INTEGER NOT NULL,
        enrolled_by TEXT NOT NULL
    ) STRICT;
    CREATE INDEX keys_by_name ON keys (name);
    CREATE TABLE blocks (
        name       TEXT PRIMARY KEY NOT NULL,
        blocked_at INTEGER NOT NULL,
        blocked_by TEXT NOT NULL
    ) STRICT;
    PRAGMA user_version = 2;
";

/// Version 3: the CRL's questions answered from an index, not by reading every row (100,000
/// certificates are ~60 MB of DER): which revoked certificates are unexpired, and how many.
const SCHEMA_V3: &str = "
    CREATE INDEX certs_by_status ON certs (status, not_after, revoked_at);
    PRAGMA user_version = 3;
";

/// Version 4: `list` in issue order from an index that holds every column it prints, so
/// listing 100,000 certificates neither sorts them nor reads their DER (about 10% more file).
const SCHEMA_V4: &str = "
    CREATE INDEX certs_listing ON certs
        (issued_at, serial, name, kind, subject, not_before, not_after, status, revoked_at, reason);
    PRAGMA user_version = 4;
";

/// Version 5: the CRL's rows from a partial index of the revoked ones that holds every column
/// it reads, in revocation order. Through `certs_by_status` each of 10,000 revoked rows cost a
/// page read of the table (DER included): 10,000 reads and 20 MB of cache per `revoke`.
const SCHEMA_V5: &str = "
    CREATE INDEX certs_revoked ON certs
        (revoked_at, serial, not_after, name, kind, subject, not_before, issued_at, status, reason)
        WHERE status = 'revoked';
    PRAGMA user_version = 5;
";

#[cfg(test)]
pub(super) const SCHEMA_V1_FOR_TESTS: &str = SCHEMA_V1;

/// A name's valid certificates, through `certs_by_name` (named: without statistics SQLite
/// prefers `certs_by_status` for `status = 'valid' AND not_after > ?`, which at 100,000
/// certificates reads the table page, DER included, of every valid one: 15,000 page reads per
/// `revoke`).
const VALID_OF_NAME: &str = "INDEXED BY certs_by_name
    WHERE name = ?1 AND kind = ?2 AND status = 'valid' AND not_after > ?3";

const COLUMNS: &str = "serial, name, kind, subject, not_before, not_after, issued_at, status, revoked_at, reason, der";
/// The same without the DER (an empty blob in its place): listings that never look at it.
const SUMMARY_COLUMNS: &str = "serial, name, kind, subject, not_before, not_after, issued_at, status, revoked_at, reason, X''";

/// An open inventory file. One per process (or thread); SQLite serializes the writers.
#[derive(Debug)]
pub struct Inventory {
    pub(super) conn: Connection,
}

/// Which certificates [`Inventory::each_summary`] visits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter<'a> {
    /// Only this name.
    pub name: Option<&'a str>,
    /// Only this status.
    pub status: Option<Listed>,
}

/// A status as `list` shows it: expiry is computed, not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listed {
    /// Not revoked and not expired.
    Valid,
    /// Revoked.
    Revoked,
    /// Not revoked, past its `not_after`.
    Expired,
}

impl Inventory {
    /// Opens the inventory at `path`, creating the file (mode 0600) and its schema if missing.
    ///
    /// # Errors
    ///
    /// [`Error::InventoryCreate`] if the file cannot be created, [`Error::Inventory`] if SQLite
    /// cannot open it or set it up, and [`Error::InventorySchema`] if a newer build wrote it.
    pub fn open(path: &Path) -> Result<Self, Error> {
        // SQLite would create the file with the umask's mode; create it ourselves first so that
        // it is never world-readable, not even for a moment. SQLite gives the `-wal` and `-shm`
        // files the database file's permissions.
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|source| Error::InventoryCreate {
                path: path.to_owned(),
                source,
            })?;
        let open_err = |source| Error::Inventory {
            path: path.to_owned(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // While another process turns a new file into WAL or migrates it, SQLite can answer
        // SQLITE_BUSY without waiting in the busy handler (the concurrency test saw it in about
        // one run of ten), so the first open retries that for as long as the handler would wait.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match prepare(&mut conn, path) {
                Err(Error::Inventory { source, .. })
                    if source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                done => return done.map(|()| Self { conn }),
            }
        }
    }

    /// Picks a random serial that is unused, calls `issue(serial)` to make the certificate, and
    /// records it — all inside one IMMEDIATE transaction, so concurrent processes never reuse a
    /// serial and a crash mid-sign records nothing.
    ///
    /// The write lock is held while `issue` runs, so it should only sign: generate keys before.
    ///
    /// # Errors
    ///
    /// The closure's own error (nothing is recorded), [`Error::NoFreeSerial`] in the
    /// astronomically unlikely case that every random serial tried was taken, or
    /// [`Error::InventoryQuery`].
    pub fn issue<F>(&mut self, issue: F) -> Result<Record, Error>
    where
        F: FnOnce(&Serial) -> Result<NewCert, Error>,
    {
        let tx = self.write_tx("begin issuing")?;
        let serial = unused_serial(&tx)?;
        let cert = issue(&serial)?;
        // In the same transaction as the insert: a `revoke --name` that blocks the name either
        // committed before (refused here) or comes after and revokes this certificate too.
        if cert.kind == CertKind::Client
            && let Some(block) = access::block_in(&tx, &cert.name)?
        {
            return Err(Error::Blocked {
                name: cert.name,
                since: block.blocked_at,
            });
        }
        let issued_at = OffsetDateTime::now_utc().unix_timestamp();
        tx.execute(
            "INSERT INTO certs (serial, name, kind, subject, not_before, not_after, issued_at,
                                status, der)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'valid', ?8)",
            params![
                serial.to_hex(),
                cert.name,
                cert.kind,
                cert.subject,
                cert.not_before.unix_timestamp(),
                cert.not_after.unix_timestamp(),
                issued_at,
                cert.der,
            ],
        )
        .map_err(query("record the new certificate"))?;
        let record = select_serial(&tx, &serial)?.ok_or_else(|| Error::UnknownSerial {
            serial: serial.to_string(),
        })?;
        tx.commit().map_err(query("commit the new certificate"))?;
        Ok(record)
    }

    /// Every certificate, oldest first (by `issued_at`, then serial).
    pub fn list(&self) -> Result<Vec<Record>, Error> {
        self.select(
            "",
            params![],
            "ORDER BY issued_at, serial",
            "list certificates",
        )
    }

    /// Calls `each` with every certificate that `filter` selects, oldest first, one row at a
    /// time and without its DER (`der` is empty): `list` at 100,000 certificates holds one row,
    /// not the inventory.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`], or the first error `each` returns.
    pub fn each_summary<E>(
        &self,
        filter: &Filter<'_>,
        mut each: impl FnMut(Record) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<Error>,
    {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let action = "list certificates";
        let mut stmt = self
            .conn
            .prepare_cached(&summary_sql(filter))
            .map_err(query(action))?;
        let mut rows = stmt
            .query(params![filter.name, now])
            .map_err(query(action))?;
        while let Some(row) = rows.next().map_err(query(action))? {
            each(record_from_row(row).map_err(query(action))?)?;
        }
        Ok(())
    }

    /// Whether `name` ever had a server or admin certificate (an index lookup).
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn is_server_name(&self, name: &str) -> Result<bool, Error> {
        self.conn
            .query_row(
                "SELECT 1 FROM certs WHERE name = ?1 AND kind != 'client' LIMIT 1",
                [name],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(query("look up a name"))
    }

    /// Every certificate of `kind` for `name` (any status), oldest first, with its DER.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn of_name(&self, name: &str, kind: CertKind) -> Result<Vec<Record>, Error> {
        self.select(
            "WHERE name = ?1 AND kind = ?2",
            params![name, kind],
            "ORDER BY issued_at, serial",
            "list a name's certificates",
        )
    }

    /// The revoked certificates that have not expired yet, in revocation order and without
    /// their DER: what a CRL lists (RFC 5280 §3.3 lets an expired certificate leave the CRL,
    /// so it does not grow forever).
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn revoked_unexpired(&self, now: OffsetDateTime) -> Result<Vec<Record>, Error> {
        let mut stmt = self
            .conn
            .prepare_cached(&revoked_unexpired_sql())
            .map_err(query("list revoked certificates"))?;
        let rows = stmt
            .query_map(params![now.unix_timestamp()], record_from_row)
            .map_err(query("list revoked certificates"))?;
        rows.collect::<Result<_, _>>()
            .map_err(query("list revoked certificates"))
    }

    /// A cheap fingerprint of [`Inventory::revoked_unexpired`] (its count and newest
    /// revocation time, from the index alone), to tell whether a CRL still lists the right set.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn revoked_digest(&self, now: OffsetDateTime) -> Result<(i64, i64), Error> {
        self.conn
            .query_row(
                "SELECT count(*), coalesce(max(revoked_at), 0) FROM certs
                 WHERE status = 'revoked' AND not_after > ?1",
                params![now.unix_timestamp()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(query("count revoked certificates"))
    }

    /// How many certificates of `kind` for `name` have not expired at `now`, valid or revoked
    /// (a revoked one stays in every CRL until it expires): what the agent caps per name.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn unexpired_count(
        &self,
        name: &str,
        kind: CertKind,
        now: OffsetDateTime,
    ) -> Result<u64, Error> {
        self.conn
            .query_row(
                "SELECT count(*) FROM certs WHERE name = ?1 AND kind = ?2 AND not_after > ?3",
                params![name, kind, now.unix_timestamp()],
                |row| row.get::<_, i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or_default())
            .map_err(query("count a name's certificates"))
    }

    /// How many certificates of `kind` for `name` are live at `now`: neither revoked nor
    /// expired. What the agent caps per name: counting revoked ones too let a laptop whose
    /// renewals kept failing (each one signed, then revoked) lock its user out for a month
    /// (issue 42).
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn live_count(
        &self,
        name: &str,
        kind: CertKind,
        now: OffsetDateTime,
    ) -> Result<u64, Error> {
        self.conn
            .query_row(
                &format!("SELECT count(*) FROM certs {VALID_OF_NAME}"),
                params![name, kind, now.unix_timestamp()],
                |row| row.get::<_, i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or_default())
            .map_err(query("count a name's live certificates"))
    }

    /// The certificate with this serial, if the inventory has it.
    pub fn by_serial(&self, serial: &Serial) -> Result<Option<Record>, Error> {
        select_serial(&self.conn, serial)
    }

    /// The newest (by `not_before`, then `issued_at`) unrevoked, unexpired certificate of `kind`
    /// for `name`.
    pub fn latest_valid(&self, name: &str, kind: CertKind) -> Result<Option<Record>, Error> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let mut found = self.select(
            VALID_OF_NAME,
            params![name, kind, now],
            "ORDER BY not_before DESC, issued_at DESC, serial DESC LIMIT 1",
            "find the latest certificate",
        )?;
        Ok(found.pop())
    }

    /// Every unrevoked, unexpired certificate of `kind` for `name`, oldest first.
    pub fn valid_for(&self, name: &str, kind: CertKind) -> Result<Vec<Record>, Error> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        self.select(
            VALID_OF_NAME,
            params![name, kind, now],
            "ORDER BY issued_at, serial",
            "list valid certificates",
        )
    }

    /// Marks the certificate revoked at `at` for `reason`. Revoking it again changes nothing:
    /// the first time and reason are kept, because the CRL already published them.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownSerial`] if the inventory has no such certificate.
    pub fn revoke(
        &mut self,
        serial: &Serial,
        reason: Option<&str>,
        at: OffsetDateTime,
    ) -> Result<Record, Error> {
        let tx = self.write_tx("begin revoking")?;
        let Some(record) = select_serial(&tx, serial)? else {
            return Err(Error::UnknownSerial {
                serial: serial.to_string(),
            });
        };
        if record.status == Status::Revoked {
            return Ok(record);
        }
        tx.execute(
            "UPDATE certs SET status = 'revoked', revoked_at = ?2, reason = ?3
             WHERE serial = ?1 AND status = 'valid'",
            params![serial.to_hex(), at.unix_timestamp(), reason],
        )
        .map_err(query("record the revocation"))?;
        let record = select_serial(&tx, serial)?.ok_or_else(|| Error::UnknownSerial {
            serial: serial.to_string(),
        })?;
        tx.commit().map_err(query("commit the revocation"))?;
        Ok(record)
    }

    /// Every revoked certificate, expired ones included, in revocation order.
    pub fn revoked(&self) -> Result<Vec<Record>, Error> {
        self.select(
            "WHERE status = 'revoked'",
            params![],
            "ORDER BY revoked_at, serial",
            "list revoked certificates",
        )
    }

    /// The next CRL number (1, 2, …): persisted, and never handed out twice even across
    /// processes (RFC 5280 §5.2.3 wants it monotonically increasing).
    pub fn next_crl_number(&mut self) -> Result<u64, Error> {
        let tx = self.write_tx("begin numbering the CRL")?;
        let number: i64 = tx
            .query_row(
                "UPDATE meta SET value = value + 1 WHERE key = 'crl_number' RETURNING value",
                [],
                |row| row.get(0),
            )
            .map_err(query("advance the CRL number"))?;
        tx.commit().map_err(query("commit the CRL number"))?;
        // The counter starts at 0 and only ever grows by one, so it stays positive.
        Ok(number.unsigned_abs())
    }

    /// Moves the CRL number ahead by `by` and returns the new value. A CA restored from a backup
    /// cannot know how many CRLs it signed after that backup, and a number must never repeat
    /// (a relying party that saw #130 takes a later #121 for an older list).
    pub fn skip_crl_numbers(&mut self, by: u64) -> Result<u64, Error> {
        let by = i64::try_from(by).unwrap_or(i64::MAX / 2);
        let tx = self.write_tx("begin skipping CRL numbers")?;
        let number: i64 = tx
            .query_row(
                "UPDATE meta SET value = value + ?1 WHERE key = 'crl_number' RETURNING value",
                [by],
                |row| row.get(0),
            )
            .map_err(query("skip CRL numbers"))?;
        tx.commit().map_err(query("commit the CRL number"))?;
        Ok(number.unsigned_abs())
    }

    /// Writes a consistent copy of the whole inventory to `dest` (a path that must not exist)
    /// while other processes may be signing: SQLite's `VACUUM INTO` reads one snapshot, inside a
    /// read transaction, so a backup never holds half a sign.
    pub fn copy_to(&self, dest: &Path) -> Result<(), Error> {
        let dest = dest.to_str().ok_or_else(|| Error::InventoryCreate {
            path: dest.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not UTF-8"),
        })?;
        self.conn
            .execute("VACUUM INTO ?1", [dest])
            .map_err(query("copy the inventory"))?;
        Ok(())
    }

    pub(super) fn write_tx(&mut self, action: &'static str) -> Result<Transaction<'_>, Error> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(query(action))
    }

    fn select(
        &self,
        filter: &str,
        params: &[&dyn ToSql],
        order: &str,
        action: &'static str,
    ) -> Result<Vec<Record>, Error> {
        select_where(&self.conn, filter, params, order, action)
    }
}

/// Creates or checks the schema. Runs in a write transaction so that processes racing to create
/// a fresh file create it once.
/// The query behind [`Inventory::each_summary`] (`?1` the name, `?2` now). Conditions are added
/// only when asked for, so that SQLite can use `certs_by_name` and `certs_by_status` (an
/// `?1 IS NULL OR …` clause would make it scan every row), and the whole list comes from
/// `certs_listing` in order, with no sort.
pub(super) fn summary_sql(filter: &Filter<'_>) -> String {
    let mut conditions = Vec::new();
    if filter.name.is_some() {
        conditions.push("name = ?1");
    }
    conditions.push(match filter.status {
        None => "?2 = ?2",
        Some(Listed::Revoked) => "status = 'revoked' AND ?2 = ?2",
        Some(Listed::Valid) => "status = 'valid' AND not_after > ?2",
        Some(Listed::Expired) => "status = 'valid' AND not_after <= ?2",
    });
    // A name is the narrowest filter; see VALID_OF_NAME for why the index is named.
    let index = if filter.name.is_some() {
        "INDEXED BY certs_by_name"
    } else {
        ""
    };
    format!(
        "SELECT {SUMMARY_COLUMNS} FROM certs {index} WHERE {} ORDER BY issued_at, serial",
        conditions.join(" AND ")
    )
}

/// The CRL's rows, from `certs_revoked` alone (schema 5): named, because the planner prefers
/// `certs_by_status` and would then read every revoked row's table page.
fn revoked_unexpired_sql() -> String {
    format!(
        "SELECT {SUMMARY_COLUMNS} FROM certs INDEXED BY certs_revoked
         WHERE status = 'revoked' AND not_after > ?1 ORDER BY revoked_at, serial"
    )
}

/// WAL mode and the current schema.
fn prepare(conn: &mut Connection, path: &Path) -> Result<(), Error> {
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        .map_err(|source| Error::Inventory {
            path: path.to_owned(),
            source,
        })?;
    migrate(conn, path)
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), Error> {
    let open_err = |source| Error::Inventory {
        path: path.to_owned(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(open_err)?;
    let version: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(open_err)?;
    match version {
        SCHEMA_VERSION => {}
        0..SCHEMA_VERSION => {
            for (from, schema) in [
                (0, SCHEMA_V1),
                (1, SCHEMA_V2),
                (2, SCHEMA_V3),
                (3, SCHEMA_V4),
                (4, SCHEMA_V5),
            ] {
                if version <= from {
                    tx.execute_batch(schema).map_err(open_err)?;
                }
            }
        }
        found => {
            return Err(Error::InventorySchema {
                path: PathBuf::from(path),
                found,
                supported: SCHEMA_VERSION,
            });
        }
    }
    tx.commit().map_err(open_err)
}

fn unused_serial(tx: &Transaction<'_>) -> Result<Serial, Error> {
    for _ in 0..SERIAL_ATTEMPTS {
        let serial = Serial::random();
        let taken = tx
            .query_row(
                "SELECT 1 FROM certs WHERE serial = ?1",
                [serial.to_hex()],
                |_| Ok(()),
            )
            .optional()
            .map_err(query("check the new serial"))?
            .is_some();
        if !taken {
            return Ok(serial);
        }
    }
    Err(Error::NoFreeSerial {
        attempts: SERIAL_ATTEMPTS,
    })
}

fn select_serial(conn: &Connection, serial: &Serial) -> Result<Option<Record>, Error> {
    let mut found = select_where(
        conn,
        "WHERE serial = ?1",
        params![serial.to_hex()],
        "",
        "look up a serial",
    )?;
    Ok(found.pop())
}

fn select_where(
    conn: &Connection,
    filter: &str,
    params: &[&dyn ToSql],
    order: &str,
    action: &'static str,
) -> Result<Vec<Record>, Error> {
    let sql = format!("SELECT {COLUMNS} FROM certs {filter} {order}");
    let mut stmt = conn.prepare_cached(&sql).map_err(query(action))?;
    let rows = stmt
        .query_map(params, record_from_row)
        .map_err(query(action))?;
    rows.collect::<Result<_, _>>().map_err(query(action))
}

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<Record> {
    Ok(Record {
        serial: parsed(row, 0)?,
        name: row.get(1)?,
        kind: row.get(2)?,
        subject: row.get(3)?,
        not_before: timestamp(row, 4)?,
        not_after: timestamp(row, 5)?,
        issued_at: timestamp(row, 6)?,
        status: row.get(7)?,
        revoked_at: row
            .get::<_, Option<i64>>(8)?
            .map(|t| to_time(8, t))
            .transpose()?,
        reason: row.get(9)?,
        der: row.get(10)?,
    })
}

fn parsed<T>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T>
where
    T: FromStr<Err = Error>,
{
    let text: String = row.get(idx)?;
    text.parse().map_err(|e: Error| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn timestamp(row: &Row<'_>, idx: usize) -> rusqlite::Result<OffsetDateTime> {
    to_time(idx, row.get(idx)?)
}

pub(super) fn to_time(idx: usize, unix: i64) -> rusqlite::Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Integer, Box::new(e))
    })
}

pub(super) fn query(action: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |source| Error::InventoryQuery { action, source }
}

impl ToSql for CertKind {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for CertKind {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e: Error| FromSqlError::Other(Box::new(e)))
    }
}

impl ToSql for Status {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for Status {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e: Error| FromSqlError::Other(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::{Arc, Barrier};

    use time::Duration;

    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn new_cert(serial: &Serial, name: &str, kind: CertKind, days: i64) -> NewCert {
        let now = OffsetDateTime::now_utc();
        NewCert {
            name: name.to_owned(),
            kind,
            subject: format!("CN={name}"),
            not_before: now - Duration::minutes(5),
            not_after: now + Duration::days(days),
            der: serial.as_bytes().to_vec(),
        }
    }

    fn temp_inventory()
    -> Result<(tempfile::TempDir, PathBuf, Inventory), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("inventory.sqlite");
        let inv = Inventory::open(&path)?;
        Ok((dir, path, inv))
    }

    #[test]
    fn listings_read_indexes_only() -> TestResult {
        let (_dir, _path, inv) = temp_inventory()?;
        let plan = |filter: Filter<'_>| -> rusqlite::Result<String> {
            let mut stmt = inv
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {}", summary_sql(&filter)))?;
            let rows = stmt.query_map(params![filter.name, 0], |r| r.get::<_, String>(3))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map(|v| v.join("; "))
        };
        // Everything: the covering index, in order (no sort, no DER read).
        let all = plan(Filter::default())?;
        assert!(all.contains("COVERING INDEX certs_listing"), "{all}");
        assert!(!all.contains("TEMP B-TREE"), "{all}");
        let by_name = plan(Filter {
            name: Some("saige"),
            status: None,
        })?;
        assert!(by_name.contains("INDEX certs_by_name"), "{by_name}");
        let revoked = plan(Filter {
            name: None,
            status: Some(Listed::Revoked),
        })?;
        assert!(revoked.contains("INDEX certs_"), "{revoked}");
        Ok(())
    }

    #[test]
    fn a_names_valid_certificates_come_from_its_index() -> TestResult {
        let (_dir, _path, inv) = temp_inventory()?;
        let sql = format!("EXPLAIN QUERY PLAN SELECT {COLUMNS} FROM certs {VALID_OF_NAME}");
        let mut stmt = inv.conn.prepare(&sql)?;
        let plan = stmt
            .query_map(params!["saige", "client", 0], |r| r.get::<_, String>(3))?
            .collect::<rusqlite::Result<Vec<_>>>()?
            .join("; ");
        assert!(plan.contains("INDEX certs_by_name"), "{plan}");
        let by_name = format!(
            "EXPLAIN QUERY PLAN {}",
            summary_sql(&Filter {
                name: Some("saige"),
                status: Some(Listed::Valid),
            })
        );
        let mut stmt = inv.conn.prepare(&by_name)?;
        let plan = stmt
            .query_map(params!["saige", 0], |r| r.get::<_, String>(3))?
            .collect::<rusqlite::Result<Vec<_>>>()?
            .join("; ");
        assert!(plan.contains("INDEX certs_by_name"), "{plan}");
        Ok(())
    }

    #[test]
    fn the_crl_reads_its_index_only() -> TestResult {
        let (_dir, _path, inv) = temp_inventory()?;
        let mut stmt = inv
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", revoked_unexpired_sql()))?;
        let plan = stmt
            .query_map(params![0], |r| r.get::<_, String>(3))?
            .collect::<rusqlite::Result<Vec<_>>>()?
            .join("; ");
        assert!(plan.contains("COVERING INDEX certs_revoked"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        Ok(())
    }

    #[test]
    fn a_names_unexpired_certificates_count_revoked_ones_until_they_expire() -> TestResult {
        let (_dir, _path, mut inv) = temp_inventory()?;
        let now = OffsetDateTime::now_utc();
        let revoked = inv.issue(|s| Ok(new_cert(s, "bo", CertKind::Client, 30)))?;
        inv.revoke(&revoked.serial, Some("superseded"), now)?;
        inv.issue(|s| Ok(new_cert(s, "bo", CertKind::Client, 30)))?;
        inv.issue(|s| Ok(new_cert(s, "bo", CertKind::Client, -1)))?;
        inv.issue(|s| Ok(new_cert(s, "bo-x", CertKind::Client, 30)))?;
        inv.issue(|s| Ok(new_cert(s, "bo", CertKind::Server, 30)))?;
        assert_eq!(inv.unexpired_count("bo", CertKind::Client, now)?, 2);
        assert_eq!(inv.unexpired_count("al", CertKind::Client, now)?, 0);
        let plan: String = inv.conn.query_row(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM certs WHERE name = ?1 AND kind = ?2 \
             AND not_after > ?3",
            params!["bo", "client", 0],
            |r| r.get(3),
        )?;
        assert!(plan.contains("INDEX certs_by_name"), "{plan}");
        Ok(())
    }

    #[test]
    fn listings_filter_stream_and_leave_the_der_out() -> TestResult {
        let (_dir, _path, mut inv) = temp_inventory()?;
        let valid = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        let revoked = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        let now = OffsetDateTime::now_utc();
        inv.revoke(&revoked.serial, Some("superseded"), now)?;
        let gone = inv.issue(|s| Ok(new_cert(s, "bo", CertKind::Client, -1)))?;
        inv.revoke(&gone.serial, Some("superseded"), now)?;
        let server = inv.issue(|s| Ok(new_cert(s, "kafka-1", CertKind::Server, 397)))?;

        let seen = |filter: Filter<'_>| -> Result<Vec<Serial>, Error> {
            let mut out = Vec::new();
            inv.each_summary(&filter, |r| -> Result<(), Error> {
                assert!(r.der.is_empty(), "listings carry no DER");
                out.push(r.serial);
                Ok(())
            })?;
            // Oldest first, then by serial: within one second the order is the serials'.
            out.sort();
            Ok(out)
        };
        let sorted = |mut v: Vec<Serial>| {
            v.sort();
            v
        };
        assert_eq!(seen(Filter::default())?.len(), 4);
        let saige = Filter {
            name: Some("saige"),
            ..Filter::default()
        };
        assert_eq!(
            seen(saige)?,
            sorted(vec![valid.serial.clone(), revoked.serial.clone()])
        );
        let only = |status| Filter {
            status: Some(status),
            ..Filter::default()
        };
        assert_eq!(seen(only(Listed::Revoked))?.len(), 2);
        assert_eq!(
            seen(only(Listed::Valid))?,
            sorted(vec![valid.serial.clone(), server.serial.clone()])
        );
        assert!(seen(only(Listed::Expired))?.is_empty());

        // The CRL's view: revoked and not yet expired, counted from the index.
        let listed: Vec<Serial> = inv
            .revoked_unexpired(now)?
            .into_iter()
            .map(|r| r.serial)
            .collect();
        assert_eq!(listed, std::slice::from_ref(&revoked.serial));
        assert_eq!(inv.revoked_digest(now)?, (1, now.unix_timestamp()));

        assert!(inv.is_server_name("kafka-1")?);
        assert!(!inv.is_server_name("saige")?);
        assert_eq!(inv.of_name("saige", CertKind::Client)?.len(), 2);
        assert!(inv.of_name("saige", CertKind::Server)?.is_empty());
        Ok(())
    }

    #[test]
    fn issue_list_and_look_up() -> TestResult {
        let (_dir, path, mut inv) = temp_inventory()?;
        let a = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        let b = inv.issue(|s| Ok(new_cert(s, "kafka-1", CertKind::Server, 397)))?;
        assert_eq!(a.status, Status::Valid);
        assert_eq!(a.der, a.serial.as_bytes());
        assert_eq!(a.subject, "CN=saige");
        assert_ne!(a.serial, b.serial);

        let all = inv.list()?;
        assert_eq!(all.len(), 2);
        assert!(all.contains(&a) && all.contains(&b));
        assert_eq!(inv.by_serial(&a.serial)?, Some(a.clone()));
        assert_eq!(inv.by_serial(&Serial::random())?, None);
        assert_eq!(
            inv.latest_valid("saige", CertKind::Client)?,
            Some(a.clone())
        );
        assert_eq!(inv.latest_valid("saige", CertKind::Server)?, None);

        // A second, later client certificate becomes the latest; both stay valid.
        let c = inv.issue(|s| {
            let mut cert = new_cert(s, "saige", CertKind::Client, 30);
            cert.not_before += Duration::minutes(1);
            Ok(cert)
        })?;
        assert_eq!(
            inv.latest_valid("saige", CertKind::Client)?,
            Some(c.clone())
        );
        assert_eq!(inv.valid_for("saige", CertKind::Client)?.len(), 2);

        // Expired certificates are neither latest nor valid.
        inv.issue(|s| {
            let mut cert = new_cert(s, "old", CertKind::Client, 30);
            cert.not_before -= Duration::days(60);
            cert.not_after -= Duration::days(60);
            Ok(cert)
        })?;
        assert_eq!(inv.latest_valid("old", CertKind::Client)?, None);
        assert!(inv.valid_for("old", CertKind::Client)?.is_empty());

        // Everything survives reopening.
        drop(inv);
        let inv = Inventory::open(&path)?;
        assert_eq!(inv.list()?.len(), 4);
        Ok(())
    }

    #[test]
    fn revoke_keeps_the_first_time() -> TestResult {
        let (_dir, _path, mut inv) = temp_inventory()?;
        let a = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        let b = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        let first = OffsetDateTime::from_unix_timestamp(1_750_000_000)?;
        let r = inv.revoke(&a.serial, Some("key-compromise"), first)?;
        assert_eq!(r.status, Status::Revoked);
        assert_eq!(r.revoked_at, Some(first));
        assert_eq!(r.reason.as_deref(), Some("key-compromise"));

        let again = inv.revoke(&a.serial, Some("superseded"), first + Duration::days(1))?;
        assert_eq!(again, r);
        assert_eq!(inv.revoked()?, vec![r]);
        assert_eq!(inv.valid_for("saige", CertKind::Client)?, vec![b.clone()]);
        assert_eq!(inv.latest_valid("saige", CertKind::Client)?, Some(b));

        let unknown = Serial::random();
        match inv.revoke(&unknown, None, first) {
            Err(Error::UnknownSerial { serial }) => assert_eq!(serial, unknown.to_string()),
            other => panic!("expected UnknownSerial, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn failed_issue_records_nothing() -> TestResult {
        let (_dir, _path, mut inv) = temp_inventory()?;
        let mut offered = None;
        let err = inv
            .issue(|s| {
                offered = Some(s.clone());
                Err(Error::InvalidSerial {
                    serial: "signing failed".to_owned(),
                })
            })
            .err();
        assert!(matches!(err, Some(Error::InvalidSerial { .. })), "{err:?}");
        assert!(inv.list()?.is_empty());
        let offered = offered.ok_or("closure not called")?;
        assert_eq!(inv.by_serial(&offered)?, None);

        // The connection is usable afterwards (the transaction was rolled back, not left open).
        let ok = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        assert_eq!(inv.list()?, vec![ok]);
        Ok(())
    }

    #[test]
    fn a_copy_holds_everything_and_restored_numbers_skip_ahead() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut inv = Inventory::open(&dir.path().join("inventory.sqlite"))?;
        assert_eq!(inv.next_crl_number()?, 1);
        let copy = dir.path().join("copy.sqlite");
        inv.copy_to(&copy)?;
        assert!(inv.copy_to(&copy).is_err(), "VACUUM INTO overwrote a file");
        let mut restored = Inventory::open(&copy)?;
        assert_eq!(restored.skip_crl_numbers(1000)?, 1001);
        assert_eq!(restored.next_crl_number()?, 1002);
        Ok(())
    }

    #[test]
    fn crl_numbers_increase_and_persist() -> TestResult {
        let (_dir, path, mut inv) = temp_inventory()?;
        assert_eq!(inv.next_crl_number()?, 1);
        assert_eq!(inv.next_crl_number()?, 2);
        drop(inv);
        let mut inv = Inventory::open(&path)?;
        assert_eq!(inv.next_crl_number()?, 3);
        Ok(())
    }

    #[test]
    fn file_is_private() -> TestResult {
        let (_dir, path, mut inv) = temp_inventory()?;
        inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        for suffix in ["", "-wal", "-shm"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            let mode = std::fs::metadata(&file)?.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", file.display());
        }
        Ok(())
    }

    #[test]
    fn refuses_a_newer_schema() -> TestResult {
        let (_dir, path, inv) = temp_inventory()?;
        inv.conn.pragma_update(None, "user_version", 99)?;
        drop(inv);
        match Inventory::open(&path) {
            Err(Error::InventorySchema { found: 99, .. }) => Ok(()),
            other => panic!("expected InventorySchema, got {other:?}"),
        }
    }

    #[test]
    fn kinds_and_statuses_round_trip() -> TestResult {
        for kind in [CertKind::Client, CertKind::Server, CertKind::Admin] {
            assert_eq!(kind.to_string().parse::<CertKind>()?, kind);
            assert_eq!(serde_json::to_string(&kind)?, format!("\"{kind}\""));
        }
        for status in [Status::Valid, Status::Revoked] {
            assert_eq!(status.to_string().parse::<Status>()?, status);
            assert_eq!(serde_json::to_string(&status)?, format!("\"{status}\""));
        }
        assert!("Client".parse::<CertKind>().is_err());
        Ok(())
    }

    #[test]
    fn record_json_has_times_and_no_der() -> TestResult {
        let (_dir, _path, mut inv) = temp_inventory()?;
        let r = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        let json = serde_json::to_value(&r)?;
        assert_eq!(json["serial"], r.serial.to_hex());
        assert_eq!(json["kind"], "client");
        assert_eq!(json["status"], "valid");
        assert!(json["revoked_at"].is_null());
        assert!(json["not_after"].as_str().is_some_and(|s| s.ends_with('Z')));
        assert!(json.get("der").is_none());
        Ok(())
    }

    #[test]
    fn only_live_certificates_count_against_a_name() -> TestResult {
        let (_dir, _path, mut inv) = temp_inventory()?;
        let now = OffsetDateTime::now_utc();
        let a = inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, 30)))?;
        inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Client, -1)))?;
        inv.issue(|s| Ok(new_cert(s, "bob", CertKind::Client, 30)))?;
        inv.issue(|s| Ok(new_cert(s, "saige", CertKind::Server, 30)))?;
        assert_eq!(inv.live_count("saige", CertKind::Client, now)?, 2);
        inv.revoke(&a.serial, Some("superseded"), now)?;
        assert_eq!(inv.live_count("saige", CertKind::Client, now)?, 1);
        // Still in the CRL until it expires, but no longer held against the name.
        assert_eq!(inv.unexpired_count("saige", CertKind::Client, now)?, 2);
        Ok(())
    }

    /// Mirrors 50 `shiqi-ca-agent sign` processes started at once against a fresh state dir:
    /// each has its own connection, and they race on creating the schema and on every insert.
    #[test]
    fn fifty_concurrent_issuers_get_distinct_serials() -> TestResult {
        const N: usize = 50;
        let dir = tempfile::tempdir()?;
        let path = Arc::new(dir.path().join("inventory.sqlite"));
        let barrier = Arc::new(Barrier::new(N));
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let path = Arc::clone(&path);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || -> Result<Record, Error> {
                    barrier.wait();
                    let mut inv = Inventory::open(&path)?;
                    inv.issue(|s| Ok(new_cert(s, &format!("user{i}"), CertKind::Client, 30)))
                })
            })
            .collect();
        let mut serials = std::collections::HashSet::new();
        for handle in handles {
            let record = handle.join().map_err(|_| "issuer thread panicked")??;
            serials.insert(record.serial);
        }
        assert_eq!(serials.len(), N);
        let all = Inventory::open(&path)?.list()?;
        assert_eq!(all.len(), N);
        assert!(all.iter().all(|r| serials.contains(&r.serial)));
        Ok(())
    }
}
