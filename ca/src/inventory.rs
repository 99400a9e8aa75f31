//! The certificate inventory's records: every certificate the CA issued, its kind and status.
//! Plain data shared by the CRL code and the agent; the SQLite store that keeps them is
//! [`store`] (feature `inventory`, which only the agent enables, so the laptop links no SQLite).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::Error;
use crate::name::Serial;

#[cfg(feature = "inventory")]
pub mod access;
#[cfg(feature = "inventory")]
pub mod listing;
#[cfg(feature = "inventory")]
pub mod store;

#[cfg(feature = "inventory")]
pub use store::{BUSY_TIMEOUT, Filter, Inventory, Listed, SCHEMA_VERSION};

/// What a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CertKind {
    /// A user's client certificate (CN = profile name).
    Client,
    /// A Kafka broker or MySQL server certificate.
    Server,
    /// The agent's own short-lived admin certificate.
    Admin,
}

impl CertKind {
    /// The lowercase name used in the inventory and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for CertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CertKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "client" => Ok(Self::Client),
            "server" => Ok(Self::Server),
            "admin" => Ok(Self::Admin),
            _ => Err(Error::InvalidChoice {
                what: "certificate kind",
                found: s.chars().take(64).collect(),
                choices: "client, server, admin",
            }),
        }
    }
}

/// Whether a certificate is revoked. Expiry is not stored: callers compare `not_after` with now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Not revoked (it may still have expired).
    Valid,
    /// Revoked; listed in every CRL from then on.
    Revoked,
}

impl Status {
    /// The lowercase name used in the inventory and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Revoked => "revoked",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "valid" => Ok(Self::Valid),
            "revoked" => Ok(Self::Revoked),
            _ => Err(Error::InvalidChoice {
                what: "certificate status",
                found: s.chars().take(64).collect(),
                choices: "valid, revoked",
            }),
        }
    }
}

/// One issued certificate as the inventory knows it. Times have whole-second precision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Record {
    /// The certificate's serial number.
    pub serial: Serial,
    /// The profile or server name it was issued for.
    pub name: String,
    /// What it is for.
    pub kind: CertKind,
    /// The subject DN as text, e.g. `CN=saige`.
    pub subject: String,
    /// Start of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    /// End of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// When the inventory recorded it.
    #[serde(with = "time::serde::rfc3339")]
    pub issued_at: OffsetDateTime,
    /// Valid or revoked.
    pub status: Status,
    /// When it was first revoked.
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
    /// The revocation reason as given (normally a `crl::Reason` name such as `key-compromise`).
    pub reason: Option<String>,
    /// The certificate, DER. Left out of JSON: `list --json` is for people and scripts.
    #[serde(skip)]
    pub der: Vec<u8>,
}

/// What the closure given to [`Inventory::issue`] returns: the certificate it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCert {
    /// The profile or server name it is issued for.
    pub name: String,
    /// What it is for.
    pub kind: CertKind,
    /// The subject DN as text.
    pub subject: String,
    /// Start of validity (stored to the second).
    pub not_before: OffsetDateTime,
    /// End of validity (stored to the second).
    pub not_after: OffsetDateTime,
    /// The signed certificate, DER.
    pub der: Vec<u8>,
}

impl NewCert {
    /// The inventory row for a certificate just issued: subject, validity and DER come from
    /// the certificate itself, so they cannot disagree with it.
    pub fn from_cert(name: &str, kind: CertKind, cert: &crate::cert::Cert) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            subject: cert.subject().to_owned(),
            not_before: cert.not_before(),
            not_after: cert.not_after(),
            der: cert.der().to_vec(),
        }
    }
}
