//! PKCS#12 keystores and truststores for Java clients, DataGrip and Kafka brokers.
//!
//! Modern files use PBES2 / PBKDF2 / AES-256-CBC with a SHA-256 MAC, the same as JDK 17's and
//! OpenSSL 3's defaults. JDKs before 8u301 and 11.0.12 cannot read those and report "keystore
//! password was incorrect" (JDK-8278989, openssl/openssl#18349); [`P12Format::Legacy`] writes
//! 3DES with a SHA-1 MAC for them. Keys inside are always PKCS#8 (Java rejects PKCS#1).

use std::fmt;
use std::str::FromStr;

use p12_keystore::{
    Certificate, EncryptionAlgorithm, KeyStore, KeyStoreEntry, MacAlgorithm, Pkcs12ImportPolicy,
    PrivateKeyChain,
};
use serde::{Deserialize, Serialize};

use crate::cert::pem_blocks;
use crate::error::Error;
use crate::key::PrivateKey;
use crate::secret::Secret;

/// Which PKCS#12 encryption to write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum P12Format {
    /// PBES2 + AES-256-CBC, SHA-256 MAC (Java 12+, OpenSSL 1.1.1+).
    #[default]
    Modern,
    /// pbeWithSHA1And3-KeyTripleDES-CBC, SHA-1 MAC, for old JDKs.
    Legacy,
}

impl FromStr for P12Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "modern" => Ok(Self::Modern),
            "legacy" => Ok(Self::Legacy),
            _ => Err(Error::Keystore {
                why: format!("unknown PKCS#12 format `{s}`: expected `modern` or `legacy`"),
            }),
        }
    }
}

impl fmt::Display for P12Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy",
        })
    }
}

/// A keystore holding `key` with its certificate chain (`chain_pem`: leaf first, then CA).
pub fn keystore(
    key: &PrivateKey,
    chain_pem: &str,
    alias: &str,
    password: &Secret<String>,
    format: P12Format,
) -> Result<Vec<u8>, Error> {
    let chain = certificates(chain_pem)?;
    let leaf = chain.first().ok_or(Error::NoCertificate)?;
    let leaf_cert = crate::cert::Cert::from_der(leaf.as_der())?;
    if !leaf_cert.matches_key(key) {
        return Err(Error::KeyMismatch);
    }
    let p12_key =
        p12_keystore::PrivateKey::from_der(key.to_pkcs8_der().expose()).map_err(p12_error)?;
    // The local key id ties the key bag to its certificate; the serial is unique per CA.
    let key_id = leaf_cert.serial().as_bytes().to_vec();
    let mut store = KeyStore::new();
    store.add_entry(
        alias,
        KeyStoreEntry::PrivateKeyChain(PrivateKeyChain::new(key_id, p12_key, chain)),
    );
    write(&store, password, format)
}

/// A truststore holding the CA certificate(s) in `ca_pem` as trusted entries.
pub fn truststore(
    ca_pem: &str,
    alias: &str,
    password: &Secret<String>,
    format: P12Format,
) -> Result<Vec<u8>, Error> {
    let certs = certificates(ca_pem)?;
    if certs.is_empty() {
        return Err(Error::NoCertificate);
    }
    let mut store = KeyStore::new();
    let many = certs.len() > 1;
    for (i, cert) in certs.into_iter().enumerate() {
        let name = if many {
            format!("{alias}-{i}")
        } else {
            alias.to_owned()
        };
        store.add_entry(&name, KeyStoreEntry::Certificate(cert));
    }
    write(&store, password, format)
}

/// The certificates and key in a PKCS#12 file, DER, for a client that logs in with it.
#[derive(Debug)]
pub struct Material {
    /// The first private-key entry's chain, leaf first (empty in a truststore).
    pub chain: Vec<Vec<u8>>,
    /// Its PKCS#8 key.
    pub key: Option<Secret<Vec<u8>>>,
    /// The trusted-certificate entries.
    pub trusted: Vec<Vec<u8>>,
}

/// Reads the certificates and the first key out of a PKCS#12 file (a Java keystore or
/// truststore), so that `doctor` can log in the way the Java client would.
///
/// # Errors
/// [`Error::KeystorePassword`] when the password does not open it; [`Error::Keystore`] for a
/// file that is not PKCS#12.
pub fn material(bytes: &[u8], password: &Secret<String>) -> Result<Material, Error> {
    let store = KeyStore::from_pkcs12(bytes, password.expose(), Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| match e {
            p12_keystore::error::Error::MacError(_) => Error::KeystorePassword,
            other => p12_error(other),
        })?;
    let mut out = Material {
        chain: Vec::new(),
        key: None,
        trusted: Vec::new(),
    };
    // Aliases sorted, so that "the first key" is the same every time.
    let mut entries: Vec<_> = store.entries().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (_, entry) in entries {
        match entry {
            KeyStoreEntry::PrivateKeyChain(chain) if out.key.is_none() => {
                out.chain = chain.certs().iter().map(|c| c.as_der().to_vec()).collect();
                out.key = Some(Secret::new(chain.key().as_der().to_vec()));
            }
            KeyStoreEntry::Certificate(cert) => out.trusted.push(cert.as_der().to_vec()),
            _ => {}
        }
    }
    Ok(out)
}

/// What a PKCS#12 file holds, for `doctor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contents {
    /// Aliases of private-key entries, with the length of each chain.
    pub key_entries: Vec<(String, usize)>,
    /// Aliases of trusted-certificate entries.
    pub trusted: Vec<String>,
}

/// Opens a PKCS#12 file with `password`.
///
/// # Errors
/// [`Error::KeystorePassword`] when the password does not open it.
pub fn open(bytes: &[u8], password: &Secret<String>) -> Result<Contents, Error> {
    let store = KeyStore::from_pkcs12(bytes, password.expose(), Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| match e {
            p12_keystore::error::Error::MacError(_) => Error::KeystorePassword,
            other => p12_error(other),
        })?;
    let mut contents = Contents {
        key_entries: Vec::new(),
        trusted: Vec::new(),
    };
    for (alias, entry) in store.entries() {
        match entry {
            KeyStoreEntry::PrivateKeyChain(chain) => {
                contents
                    .key_entries
                    .push((alias.clone(), chain.certs().len()));
            }
            KeyStoreEntry::Certificate(_) => contents.trusted.push(alias.clone()),
            KeyStoreEntry::Secret(_) => {}
        }
    }
    contents.key_entries.sort();
    contents.trusted.sort();
    Ok(contents)
}

fn certificates(pem: &str) -> Result<Vec<Certificate>, Error> {
    pem_blocks(pem, "CERTIFICATE")?
        .iter()
        .map(|der| Certificate::from_der(der).map_err(p12_error))
        .collect()
}

fn write(store: &KeyStore, password: &Secret<String>, format: P12Format) -> Result<Vec<u8>, Error> {
    let writer = store.writer(password.expose());
    let writer = match format {
        P12Format::Modern => writer
            .encryption_algorithm(EncryptionAlgorithm::PbeWithHmacSha256AndAes256)
            .mac_algorithm(MacAlgorithm::HmacSha256),
        P12Format::Legacy => writer
            .encryption_algorithm(EncryptionAlgorithm::PbeWithShaAnd3KeyTripleDesCbc)
            .mac_algorithm(MacAlgorithm::HmacSha1),
    };
    writer.write().map_err(p12_error)
}

fn p12_error(e: p12_keystore::error::Error) -> Error {
    Error::Keystore { why: e.to_string() }
}
