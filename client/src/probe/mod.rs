//! Talking to the services as their clients would, from this laptop; one home for doctor,
//! `tunnel status` and rotate's verification of a new certificate.
//!
//! - [`kafka`]: TLS with the profile's certificate ([`tls`]), then `ApiVersions` or `Metadata`
//!   ([`kafka_wire`] encodes them);
//! - [`mysql`]: a real certificate login and `SELECT CURRENT_USER()`;
//! - [`speaks`]: what a port speaks, found without any certificate (TLS hello, plaintext Kafka,
//!   MySQL greeting, SSH banner), so it works before the certificate does.
//!
//! Nothing here prints; a failure is a one-line reason for the caller to show.

pub mod kafka;
pub mod kafka_wire;
pub mod mysql;
pub mod speaks;
pub mod tls;

use serde::Serialize;

pub use tls::ProfileTls;

/// What a probe found, for a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// Whether it worked.
    pub ok: bool,
    /// What worked, or why not.
    pub detail: String,
}

impl Outcome {
    /// It worked: `detail` says what.
    pub fn ok(detail: impl Into<String>) -> Self {
        Self {
            ok: true,
            detail: detail.into(),
        }
    }

    /// It did not: `detail` says why.
    pub fn fail(detail: impl Into<String>) -> Self {
        Self {
            ok: false,
            detail: detail.into(),
        }
    }

    /// From a result's one-line reason.
    pub fn from_result(r: Result<String, String>) -> Self {
        match r {
            Ok(d) => Self::ok(d),
            Err(d) => Self::fail(d),
        }
    }
}
