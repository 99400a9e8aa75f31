//! Who may ask the CA for what, kept beside the certificates in the inventory file: the SSH keys
//! enrolled with a name and a role, and the names blocked by a `revoke --name` until an admin
//! unblocks them. The agent decides what each role may do; this module only stores the facts.
//!
//! Same transaction rules as the store: every write is one IMMEDIATE transaction.

use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use time::OffsetDateTime;

use super::store::{Inventory, query, to_time};
use crate::error::Error;

/// What an enrolled key may do (the agent's `access` module says what each means).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Only its own name: sign, rotate, renew, its MySQL user and Kafka ACLs; read the brokers.
    User,
    /// Everything.
    Admin,
}

impl Role {
    /// The lowercase name used in the inventory, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "user" => Ok(Self::User),
            "admin" => Ok(Self::Admin),
            _ => Err(Error::InvalidChoice {
                what: "role",
                found: s.chars().take(64).collect(),
                choices: "user, admin",
            }),
        }
    }
}

impl ToSql for Role {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for Role {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e: Error| FromSqlError::Other(Box::new(e)))
    }
}

/// One enrolled SSH identity: a key, or a principal of an SSH CA's certificates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Enrollment {
    /// Who sshd authenticated: the key's OpenSSH fingerprint, `SHA256:…` (what `ssh-keygen -l`
    /// prints), or `principal:P` for certificates naming principal `P` (then `public_key` is
    /// empty: the SSH CA vouches for the key).
    pub fingerprint: String,
    /// The name it acts as (a profile name).
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The public key, one OpenSSH line without its comment.
    pub public_key: String,
    /// When it was enrolled.
    #[serde(with = "time::serde::rfc3339")]
    pub enrolled_at: OffsetDateTime,
    /// Who enrolled it (an audit identity, e.g. `key SHA256:… (saige, admin)` or `local root`).
    pub enrolled_by: String,
}

impl Enrollment {
    /// The prefix of a principal's identity in [`Enrollment::fingerprint`].
    pub const PRINCIPAL: &'static str = "principal:";

    /// The certificate principal this enrollment is for, when it is not a key.
    pub fn principal(&self) -> Option<&str> {
        self.fingerprint.strip_prefix(Self::PRINCIPAL)
    }
}

/// A name that may not be signed again until an admin unblocks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Block {
    /// The name.
    pub name: String,
    /// Since when.
    #[serde(with = "time::serde::rfc3339")]
    pub blocked_at: OffsetDateTime,
    /// Who revoked it.
    pub blocked_by: String,
}

const KEY_COLUMNS: &str = "fingerprint, name, role, public_key, enrolled_at, enrolled_by";

impl Inventory {
    /// Records `key`, replacing an earlier enrollment of the same fingerprint (a new name or
    /// role for the same key). Returns the enrollment it replaced.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn enroll(&mut self, key: &Enrollment) -> Result<Option<Enrollment>, Error> {
        let tx = self.write_tx("begin enrolling")?;
        let before = key_in(&tx, &key.fingerprint)?;
        tx.execute(
            "INSERT OR REPLACE INTO keys (fingerprint, name, role, public_key, enrolled_at,
                                          enrolled_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                key.fingerprint,
                key.name,
                key.role,
                key.public_key,
                key.enrolled_at.unix_timestamp(),
                key.enrolled_by,
            ],
        )
        .map_err(query("record the key"))?;
        tx.commit().map_err(query("commit the key"))?;
        Ok(before)
    }

    /// The enrollment of the key with this fingerprint.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn enrollment(&self, fingerprint: &str) -> Result<Option<Enrollment>, Error> {
        key_in(&self.conn, fingerprint)
    }

    /// Every enrolled key, by name then fingerprint.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn enrollments(&self) -> Result<Vec<Enrollment>, Error> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM keys ORDER BY name, fingerprint"
            ))
            .map_err(query("list keys"))?;
        let rows = stmt
            .query_map([], enrollment_from_row)
            .map_err(query("list keys"))?;
        rows.collect::<Result<_, _>>().map_err(query("list keys"))
    }

    /// Removes the key with this fingerprint; returns what was removed.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn remove_enrollment(&mut self, fingerprint: &str) -> Result<Option<Enrollment>, Error> {
        let tx = self.write_tx("begin removing a key")?;
        let before = key_in(&tx, fingerprint)?;
        tx.execute("DELETE FROM keys WHERE fingerprint = ?1", [fingerprint])
            .map_err(query("remove the key"))?;
        tx.commit().map_err(query("commit the key's removal"))?;
        Ok(before)
    }

    /// Blocks `name` from new client certificates. Blocking it again keeps the first record.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn block(&mut self, name: &str, by: &str, at: OffsetDateTime) -> Result<Block, Error> {
        let tx = self.write_tx("begin blocking")?;
        tx.execute(
            "INSERT OR IGNORE INTO blocks (name, blocked_at, blocked_by) VALUES (?1, ?2, ?3)",
            params![name, at.unix_timestamp(), by],
        )
        .map_err(query("block the name"))?;
        let block = block_in(&tx, name)?.ok_or(Error::InventoryQuery {
            action: "read the block back",
            source: rusqlite::Error::QueryReturnedNoRows,
        })?;
        tx.commit().map_err(query("commit the block"))?;
        Ok(block)
    }

    /// Lifts the block on `name`; returns it, or `None` if the name was not blocked.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn unblock(&mut self, name: &str) -> Result<Option<Block>, Error> {
        let tx = self.write_tx("begin unblocking")?;
        let before = block_in(&tx, name)?;
        tx.execute("DELETE FROM blocks WHERE name = ?1", [name])
            .map_err(query("unblock the name"))?;
        tx.commit().map_err(query("commit the unblock"))?;
        Ok(before)
    }

    /// The block on `name`, if any.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`].
    pub fn blocked(&self, name: &str) -> Result<Option<Block>, Error> {
        block_in(&self.conn, name)
    }
}

fn key_in(conn: &Connection, fingerprint: &str) -> Result<Option<Enrollment>, Error> {
    conn.query_row(
        &format!("SELECT {KEY_COLUMNS} FROM keys WHERE fingerprint = ?1"),
        [fingerprint],
        enrollment_from_row,
    )
    .optional()
    .map_err(query("look up a key"))
}

/// The block on `name` as seen by `conn` (a transaction's, for [`Inventory::issue`]).
pub(super) fn block_in(conn: &Connection, name: &str) -> Result<Option<Block>, Error> {
    conn.query_row(
        "SELECT name, blocked_at, blocked_by FROM blocks WHERE name = ?1",
        [name],
        |row| {
            Ok(Block {
                name: row.get(0)?,
                blocked_at: to_time(1, row.get(1)?)?,
                blocked_by: row.get(2)?,
            })
        },
    )
    .optional()
    .map_err(query("look up a block"))
}

fn enrollment_from_row(row: &Row<'_>) -> rusqlite::Result<Enrollment> {
    Ok(Enrollment {
        fingerprint: row.get(0)?,
        name: row.get(1)?,
        role: row.get(2)?,
        public_key: row.get(3)?,
        enrolled_at: to_time(4, row.get(4)?)?,
        enrolled_by: row.get(5)?,
    })
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;
    use crate::inventory::{CertKind, NewCert};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn key(fp: &str, name: &str, role: Role) -> Enrollment {
        Enrollment {
            fingerprint: fp.to_owned(),
            name: name.to_owned(),
            role,
            public_key: format!("ssh-ed25519 AAAA{fp}"),
            enrolled_at: OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("time"),
            enrolled_by: "local root".to_owned(),
        }
    }

    fn client(name: &str) -> impl FnOnce(&crate::name::Serial) -> Result<NewCert, Error> {
        let now = OffsetDateTime::now_utc();
        let name = name.to_owned();
        move |s| {
            Ok(NewCert {
                subject: format!("CN={name}"),
                name,
                kind: CertKind::Client,
                not_before: now,
                not_after: now + Duration::days(1),
                der: s.as_bytes().to_vec(),
            })
        }
    }

    #[test]
    fn keys_are_enrolled_replaced_listed_and_removed() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut inv = Inventory::open(&dir.path().join("inventory.sqlite"))?;
        assert_eq!(inv.enroll(&key("SHA256:b", "bob", Role::User))?, None);
        inv.enroll(&key("SHA256:s", "saige", Role::Admin))?;
        let replaced = inv.enroll(&key("SHA256:b", "bob", Role::Admin))?;
        assert_eq!(replaced.map(|k| k.role), Some(Role::User));
        let all = inv.enrollments()?;
        assert_eq!(
            all.iter()
                .map(|k| (k.name.as_str(), k.role))
                .collect::<Vec<_>>(),
            [("bob", Role::Admin), ("saige", Role::Admin)]
        );
        assert_eq!(
            inv.enrollment("SHA256:s")?.map(|k| k.name),
            Some("saige".into())
        );
        assert!(inv.remove_enrollment("SHA256:b")?.is_some());
        assert!(inv.remove_enrollment("SHA256:b")?.is_none());
        assert_eq!(inv.enrollment("SHA256:b")?, None);
        Ok(())
    }

    #[test]
    fn a_blocked_name_gets_no_client_certificate_until_unblocked() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut inv = Inventory::open(&dir.path().join("inventory.sqlite"))?;
        inv.issue(client("bob"))?;
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000)?;
        let first = inv.block("bob", "key SHA256:s (saige, admin)", at)?;
        // Blocking twice keeps the first record.
        let again = inv.block("bob", "someone else", at + Duration::hours(1))?;
        assert_eq!(first, again);
        let before = inv.list()?.len();
        match inv.issue(client("bob")) {
            Err(Error::Blocked { name, since }) => assert_eq!((name.as_str(), since), ("bob", at)),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            inv.list()?.len(),
            before,
            "a refused signature records nothing"
        );
        // Other names are not affected.
        inv.issue(client("saige"))?;
        assert!(inv.unblock("bob")?.is_some());
        assert!(inv.unblock("bob")?.is_none());
        inv.issue(client("bob"))?;
        Ok(())
    }

    #[test]
    fn a_version_1_inventory_is_upgraded_in_place() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("inventory.sqlite");
        {
            let conn = Connection::open(&path)?;
            conn.execute_batch(super::super::store::SCHEMA_V1_FOR_TESTS)?;
        }
        let mut inv = Inventory::open(&path)?;
        inv.enroll(&key("SHA256:s", "saige", Role::Admin))?;
        let version: i64 = inv
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))?;
        assert_eq!(version, crate::inventory::SCHEMA_VERSION);
        Ok(())
    }
}
