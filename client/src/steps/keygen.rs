//! Step 1: the private key and the CSR, made on the laptop; the key never leaves it.

use shiqi_ca::ProfileName;
use shiqi_ca::key::{KeyType, PrivateKey};

use crate::error::Error;

/// A fresh key and the CSR (CN = the profile name) that asks the server to certify it.
pub(crate) struct KeyAndCsr {
    /// The private key (PKCS#8 when written).
    pub(crate) key: PrivateKey,
    /// The CSR, PEM.
    pub(crate) csr_pem: String,
}

/// Generates a `key_type` key and a CSR for `name`.
///
/// # Errors
/// [`Error::Ca`] when the CA library cannot generate or sign.
#[tracing::instrument(skip_all, fields(profile = %name, key_type = %key_type))]
pub(crate) fn keygen(name: &ProfileName, key_type: KeyType) -> Result<KeyAndCsr, Error> {
    let key = PrivateKey::generate(key_type).map_err(|source| Error::Ca {
        what: "generate the private key",
        source,
    })?;
    let csr_pem = shiqi_ca::csr::build(&key, name).map_err(|source| Error::Ca {
        what: "build the certificate signing request",
        source,
    })?;
    tracing::debug!(bytes = csr_pem.len(), "CSR built");
    Ok(KeyAndCsr { key, csr_pem })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_a_pem_csr() {
        let name: ProfileName = "saige".parse().expect("valid name");
        let out = keygen(&name, KeyType::EcdsaP256).expect("keygen");
        assert!(
            out.csr_pem
                .starts_with("-----BEGIN CERTIFICATE REQUEST-----")
        );
        assert_eq!(out.key.key_type(), KeyType::EcdsaP256);
        assert!(
            out.key
                .to_pkcs8_pem()
                .expose()
                .starts_with(concat!("-----BEGIN ", "PRIVATE KEY-----"))
        );
    }
}
