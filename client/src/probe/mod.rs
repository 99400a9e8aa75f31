//! Talking to the services as their clients would, from this laptop; one home for doctor,
//! `tunnel status` and rotate's verification of a new certificate.
//!
//! - [`kafka`]: TLS with the profile's certificate ([`tls`]), then `ApiVersions` or `Metadata`
//!   ([`kafka_wire`] encodes them);
//! - [`mysql`]: a real certificate login and `SELECT CURRENT_USER()`;
//! - [`speaks`]: what a port speaks, found without any certificate (TLS hello, plaintext Kafka,
//!   MySQL greeting, SSH banner), so it works before the certificate does.
//!
//! Nothing here prints; a failure is a one-line reason for the caller to show. Nothing here
//! knows a profile either: a login takes the [`Identity`] files it is given.

pub(crate) mod kafka;
pub(crate) mod kafka_wire;
pub(crate) mod mysql;
pub(crate) mod speaks;
pub(crate) mod tls;

use serde::Serialize;

use crate::text::Escaped;

pub(crate) use tls::ProfileTls;

/// The PEM files of a certificate login: the CA that signed the server's certificate (the only
/// root), the client certificate with its chain, and its key. A profile's are
/// `profile::files::identity`.
#[derive(Clone, Debug)]
pub(crate) struct Identity {
    /// The CA certificate.
    pub(crate) ca: std::path::PathBuf,
    /// The client certificate (leaf, then chain).
    pub(crate) cert: std::path::PathBuf,
    /// Its private key.
    pub(crate) key: std::path::PathBuf,
}

/// What a probe found, for a report. `detail` quotes the server (its errors, `CURRENT_USER()`),
/// so it is [`Escaped`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Outcome {
    /// Whether it worked.
    pub(crate) ok: bool,
    /// What worked, or why not.
    pub(crate) detail: Escaped,
}

impl Outcome {
    /// It worked: `detail` says what.
    pub(crate) fn ok(detail: impl Into<Escaped>) -> Self {
        Self {
            ok: true,
            detail: detail.into(),
        }
    }

    /// It did not: `detail` says why.
    pub(crate) fn fail(detail: impl Into<Escaped>) -> Self {
        Self {
            ok: false,
            detail: detail.into(),
        }
    }

    /// From a result's one-line reason.
    pub(crate) fn from_result(r: Result<String, String>) -> Self {
        match r {
            Ok(d) => Self::ok(d),
            Err(d) => Self::fail(d),
        }
    }
}

/// A server on 127.0.0.1 that writes `reply` to each of its first `connections`, reads a
/// little and closes: the first words of a fake SSH, MySQL or Kafka server, for tests.
#[cfg(test)]
pub(crate) fn fake_server(reply: Vec<u8>, connections: usize) -> u16 {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for _ in 0..connections {
            if let Ok((mut s, _)) = l.accept() {
                let _ = s.write_all(&reply);
                let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(300)));
                let _ = s.read(&mut [0u8; 512]);
            }
        }
    });
    port
}
