//! Private keys: generation, PEM (always PKCS#8) in and out.
//!
//! Keys are made where they are used (the laptop for client keys, the server for the CA) and
//! never cross the wire. ECDSA P-256 is the default: every peer here (Java 17, librdkafka,
//! MariaDB, OpenSSL) speaks it, and it is small and fast. RSA uses aws-lc-rs (ring cannot
//! generate RSA keys); Ed25519 works in the PKI layer but many TLS peers refuse it.

use std::fmt;
use std::str::FromStr;

use rcgen::{KeyPair, RsaKeySize, SignatureAlgorithm};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::secret::Secret;

/// The key algorithms the tool generates and the CSR policy accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyType {
    /// ECDSA on NIST P-256 with SHA-256 (the default).
    #[default]
    EcdsaP256,
    /// ECDSA on NIST P-384 with SHA-384.
    EcdsaP384,
    /// Ed25519.
    Ed25519,
    /// RSA, 2048-bit modulus.
    Rsa2048,
    /// RSA, 3072-bit modulus.
    Rsa3072,
    /// RSA, 4096-bit modulus.
    Rsa4096,
}

impl KeyType {
    /// Every accepted spelling, for help texts and hints.
    pub const NAMES: &'static str = "p256, p384, ed25519, rsa2048, rsa3072, rsa4096";

    fn algorithm(self) -> &'static SignatureAlgorithm {
        match self {
            Self::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            Self::EcdsaP384 => &rcgen::PKCS_ECDSA_P384_SHA384,
            Self::Ed25519 => &rcgen::PKCS_ED25519,
            Self::Rsa2048 | Self::Rsa3072 | Self::Rsa4096 => &rcgen::PKCS_RSA_SHA256,
        }
    }
}

impl FromStr for KeyType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "p256" | "ecdsa-p256" | "ec" | "ecdsa" => Self::EcdsaP256,
            "p384" | "ecdsa-p384" => Self::EcdsaP384,
            "ed25519" => Self::Ed25519,
            "rsa2048" | "rsa-2048" => Self::Rsa2048,
            "rsa3072" | "rsa-3072" | "rsa" => Self::Rsa3072,
            "rsa4096" | "rsa-4096" => Self::Rsa4096,
            _ => {
                return Err(Error::UnknownKeyType {
                    given: s.chars().take(32).collect(),
                    known: Self::NAMES,
                });
            }
        })
    }
}

impl KeyType {
    /// Its name as `--key-type` takes it (`p256`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EcdsaP256 => "p256",
            Self::EcdsaP384 => "p384",
            Self::Ed25519 => "ed25519",
            Self::Rsa2048 => "rsa2048",
            Self::Rsa3072 => "rsa3072",
            Self::Rsa4096 => "rsa4096",
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A private key with its algorithm. `Debug` never shows key material.
pub struct PrivateKey {
    pair: KeyPair,
    key_type: KeyType,
}

impl PrivateKey {
    /// Generates a fresh key.
    pub fn generate(key_type: KeyType) -> Result<Self, Error> {
        let alg = key_type.algorithm();
        let pair = match key_type {
            KeyType::Rsa2048 => KeyPair::generate_rsa_for(alg, RsaKeySize::_2048),
            KeyType::Rsa3072 => KeyPair::generate_rsa_for(alg, RsaKeySize::_3072),
            KeyType::Rsa4096 => KeyPair::generate_rsa_for(alg, RsaKeySize::_4096),
            _ => KeyPair::generate_for(alg),
        }
        .map_err(|source| Error::KeyGeneration {
            key_type: key_type.as_str(),
            source,
        })?;
        Ok(Self { pair, key_type })
    }

    /// Reads a PEM private key (PKCS#8, or PKCS#1/SEC1 as rcgen accepts them).
    pub fn from_pem(pem: &str) -> Result<Self, Error> {
        let pair = KeyPair::from_pem(pem).map_err(|source| Error::KeyParse { source })?;
        let key_type = key_type_of(&pair)?;
        Ok(Self { pair, key_type })
    }

    /// The key's algorithm.
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The key as PKCS#8 PEM (a `PRIVATE KEY` PEM block), which Java, OpenSSL, librdkafka
    /// and MariaDB all read.
    pub fn to_pkcs8_pem(&self) -> Secret<String> {
        Secret::new(self.pair.serialize_pem())
    }

    /// The key as PKCS#8 DER.
    pub fn to_pkcs8_der(&self) -> Secret<Vec<u8>> {
        Secret::new(self.pair.serialize_der())
    }

    /// The public half's [`crate::KeyId`].
    pub fn key_id(&self) -> crate::name::KeyId {
        crate::name::KeyId::of_spki(&self.public_key_der())
    }

    /// The DER SubjectPublicKeyInfo.
    pub fn public_key_der(&self) -> Vec<u8> {
        rcgen::PublicKeyData::subject_public_key_info(&self.pair)
    }

    pub(crate) fn pair(&self) -> &KeyPair {
        &self.pair
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({}, ***)", self.key_type)
    }
}

fn key_type_of(pair: &KeyPair) -> Result<KeyType, Error> {
    let alg = pair.algorithm();
    if alg == &rcgen::PKCS_ECDSA_P256_SHA256 {
        Ok(KeyType::EcdsaP256)
    } else if alg == &rcgen::PKCS_ECDSA_P384_SHA384 {
        Ok(KeyType::EcdsaP384)
    } else if alg == &rcgen::PKCS_ED25519 {
        Ok(KeyType::Ed25519)
    } else if alg == &rcgen::PKCS_RSA_SHA256
        || alg == &rcgen::PKCS_RSA_SHA384
        || alg == &rcgen::PKCS_RSA_SHA512
    {
        let spki = rcgen::PublicKeyData::subject_public_key_info(pair);
        Ok(match rsa_bits(&spki).unwrap_or(0) {
            0..=2048 => KeyType::Rsa2048,
            2049..=3072 => KeyType::Rsa3072,
            _ => KeyType::Rsa4096,
        })
    } else {
        Err(Error::UnsupportedKey {
            what: format!("{alg:?}"),
        })
    }
}

/// The modulus size in bits of an RSA SubjectPublicKeyInfo, or `None` for other keys.
pub(crate) fn rsa_bits(spki_der: &[u8]) -> Option<usize> {
    use x509_parser::prelude::FromDer as _;
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(spki_der).ok()?;
    match spki.parsed().ok()? {
        x509_parser::public_key::PublicKey::RSA(rsa) => Some(rsa.key_size()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_every_type_and_round_trips_pem() -> Result<(), Error> {
        for kt in [
            KeyType::EcdsaP256,
            KeyType::EcdsaP384,
            KeyType::Ed25519,
            KeyType::Rsa2048,
        ] {
            let key = PrivateKey::generate(kt)?;
            let pem = key.to_pkcs8_pem();
            assert!(
                pem.expose()
                    .starts_with(concat!("-----BEGIN ", "PRIVATE KEY-----")),
                "{kt}"
            );
            let back = PrivateKey::from_pem(pem.expose())?;
            assert_eq!(back.key_type(), kt);
            assert_eq!(back.public_key_der(), key.public_key_der());
            assert!(!format!("{key:?}").contains("BEGIN"));
        }
        Ok(())
    }

    #[test]
    fn parses_key_type_names() {
        assert_eq!("p256".parse::<KeyType>().ok(), Some(KeyType::EcdsaP256));
        assert_eq!("RSA3072".parse::<KeyType>().ok(), Some(KeyType::Rsa3072));
        assert!("dsa".parse::<KeyType>().is_err());
        for name in KeyType::NAMES.split(", ") {
            let kt: KeyType = name.parse().expect("every listed name parses");
            assert_eq!(kt.to_string(), name);
        }
    }
}
