//! Step 4c: the PKCS#12 key and trust stores for Java clients and DataGrip, via `shiqi-ca`.

use shiqi_ca::Secret;
use shiqi_ca::key::PrivateKey;
use shiqi_ca::keystore::{self, P12Format};

use crate::error::Error;
use crate::profile::{KEYSTORE_ALIAS, TRUSTSTORE_ALIAS};

/// `keystore.p12` and `truststore.p12` bytes.
pub(crate) struct Stores {
    /// Key and chain, alias `client`.
    pub(crate) keystore: Vec<u8>,
    /// The CA as a trusted certificate, alias `shiqi-ca`.
    pub(crate) truststore: Vec<u8>,
}

/// Builds both stores under one password.
///
/// # Errors
/// [`Error::Ca`] when the CA library refuses (e.g. the chain does not match the key).
pub(crate) fn stores(
    key: &PrivateKey,
    chain_pem: &str,
    ca_pem: &str,
    password: &Secret<String>,
    format: P12Format,
) -> Result<Stores, Error> {
    let keystore =
        keystore::keystore(key, chain_pem, KEYSTORE_ALIAS, password, format).map_err(|source| {
            Error::Ca {
                what: "build keystore.p12",
                source,
            }
        })?;
    let truststore =
        keystore::truststore(ca_pem, TRUSTSTORE_ALIAS, password, format).map_err(|source| {
            Error::Ca {
                what: "build truststore.p12",
                source,
            }
        })?;
    Ok(Stores {
        keystore,
        truststore,
    })
}
