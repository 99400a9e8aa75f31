//! `shiqi-ca`: the X.509 side of shiqi-connect — keys, CSRs and their policy, issuing, CRLs,
//! PKCS#12 keystores and the certificate inventory.
//!
//! It knows nothing of SSH, MySQL or Kafka: the agent and the client bring the transport.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// `--version` of a binary whose package runs `build-info.rs` as its build script: the
/// version, the commit built from and the target (`0.1.0 (e2d2f97bc811, x86_64-unknown-linux-gnu)`).
#[macro_export]
macro_rules! version {
    () => {
        concat!(
            env!("CARGO_PKG_VERSION"),
            " (",
            env!("SHIQI_COMMIT"),
            ", ",
            env!("SHIQI_TARGET"),
            ")"
        )
    };
}

pub mod cert;
pub mod crl;
pub mod csr;
pub mod error;
pub mod host;
pub mod inventory;
pub mod issue;
pub mod key;
pub mod keystore;
pub mod name;
pub mod policy;
pub mod protocol;
pub mod secret;
pub mod span;
pub mod text;

pub use error::Error;
pub use host::{Bootstrap, Host, HostPort, Port};
pub use name::{KeyId, ProfileName, Serial};
pub use secret::Secret;
pub use span::Span;
