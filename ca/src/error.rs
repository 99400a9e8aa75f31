//! The one error type of `shiqi-ca`. Messages name the fact; [`Error::hint`] names the fix.

use std::path::PathBuf;

/// Everything that can go wrong in the CA library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A profile/user name that does not match `[a-z][a-z0-9_-]{0,31}`.
    #[error("invalid name `{name}`: {why}")]
    InvalidName {
        /// The name as given (truncated).
        name: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A serial number that is not 1..=20 bytes of hex.
    #[error("invalid serial `{serial}`: expected hex digits such as `1f2e3d`")]
    InvalidSerial {
        /// The serial as given (truncated).
        serial: String,
    },
    /// A host that is neither a DNS name of RFC 1123 labels nor an IP literal.
    #[error("invalid host `{}`: {why}", host.escape_debug())]
    InvalidHost {
        /// The host as given (truncated).
        host: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A port outside 1–65535.
    #[error("invalid port {port}: expected 1-65535")]
    InvalidPort {
        /// The number as given (-1 when it was not a number).
        port: i64,
    },
    /// An address that is not `host:port` (`[v6]:port`).
    #[error("invalid address `{}`: expected HOST:PORT such as `localhost:9094`", given.escape_debug())]
    InvalidHostPort {
        /// The address as given (truncated).
        given: String,
    },
    /// Free text from another machine that is not one printable line.
    #[error("invalid text `{text}`: {why}")]
    InvalidText {
        /// The text, escaped and truncated.
        text: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A lifetime outside the floor and the cap for the kind of certificate.
    #[error("a {kind} certificate may live {min} to {max}, not {given}")]
    Lifetime {
        /// `client`, `server` or `CA`.
        kind: &'static str,
        /// What was asked (`30m`, `400 days`).
        given: String,
        /// The floor (`5m`).
        min: String,
        /// The cap (`398d`).
        max: String,
    },
    /// A lifetime that is not written as `10m`, `1h` or `30d`.
    #[error("invalid lifetime `{given}`: {why}")]
    InvalidSpan {
        /// As given (escaped, truncated).
        given: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// An agent reply in a protocol version this build does not speak.
    #[error("the agent speaks protocol version {found}, this build speaks {expected}")]
    ReplyVersion {
        /// The version in the reply.
        found: u32,
        /// [`crate::protocol::PROTOCOL_VERSION`].
        expected: u32,
    },
    /// An agent reply that does not parse into the protocol's strict types.
    #[error("the agent's reply is not valid: {field}: {why}")]
    Reply {
        /// Where in the document (`facts.kafka.brokers[1].host`), `.` for the document itself.
        field: String,
        /// What is wrong, with any value from the reply escaped.
        why: String,
    },
    /// A key identity that is not 64 lowercase hex digits.
    #[error("invalid key id `{}`: expected the 64 hex digits of a SHA-256", given.escape_debug())]
    InvalidKeyId {
        /// As given (truncated).
        given: String,
    },
    /// A `--key-type` value that is not one of the supported algorithms.
    #[error("unknown key type `{given}`")]
    UnknownKeyType {
        /// The value as given.
        given: String,
        /// The names that are known (`KeyType::NAMES`).
        known: &'static str,
    },
    /// The crypto backend could not generate a key.
    #[error("cannot generate a {key_type} key")]
    KeyGeneration {
        /// The algorithm asked for, by name.
        key_type: &'static str,
        /// The backend's error.
        #[source]
        source: rcgen::Error,
    },
    /// A private key PEM that could not be read.
    #[error("cannot read the private key (expected PKCS#8, PKCS#1 or SEC1 PEM)")]
    KeyParse {
        /// The parser's error.
        #[source]
        source: rcgen::Error,
    },
    /// A key algorithm this tool does not use.
    #[error("unsupported key algorithm {what}")]
    UnsupportedKey {
        /// What was found.
        what: String,
    },
    /// A certificate that could not be parsed.
    #[error("cannot parse certificate: {why}")]
    CertParse {
        /// Why.
        why: String,
    },
    /// A PEM document with no certificate in it.
    #[error("no certificate found in the PEM document")]
    NoCertificate,
    /// The CSR was refused by the signing policy.
    #[error("CSR refused: {reason}")]
    CsrRefused {
        /// Which rule it broke.
        reason: CsrRefusal,
    },
    /// Signing a certificate, CSR or CRL failed.
    #[error("cannot sign the {what}")]
    Signing {
        /// What was being signed.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// The CA key on disk does not belong to the CA certificate.
    #[error("the CA key does not match the CA certificate")]
    CaKeyMismatch,
    /// A private key that does not belong to the certificate it is paired with.
    #[error("the private key does not match the certificate")]
    KeyMismatch,
    /// A server certificate was requested without any subject alternative name.
    #[error("a server certificate needs at least one `--san` (the names clients verify)")]
    NoSans,
    /// A SAN that is neither an IP address nor a valid DNS name.
    #[error("invalid subject alternative name `{san}`")]
    BadSan {
        /// The SAN as given.
        san: String,
    },
    /// A PKCS#12 file could not be built or read.
    #[error("PKCS#12: {why}")]
    Keystore {
        /// Why.
        why: String,
    },
    /// The password does not open the PKCS#12 file.
    #[error("the keystore password does not open the keystore (MAC check failed)")]
    KeystorePassword,
    /// The inventory file could not be created (before SQLite opens it).
    #[error("cannot create inventory `{}`", path.display())]
    InventoryCreate {
        /// The inventory file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The inventory database could not be opened or set up.
    #[cfg(feature = "inventory")]
    #[error("cannot open inventory `{}`", path.display())]
    Inventory {
        /// The inventory file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The inventory was written by a newer build with a schema this one does not know.
    #[error(
        "inventory `{}` has schema version {found}; this build knows up to {supported}",
        path.display()
    )]
    InventorySchema {
        /// The inventory file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build reads.
        supported: i64,
    },
    /// A read or write of the inventory failed.
    #[cfg(feature = "inventory")]
    #[error("cannot {action} in the inventory")]
    InventoryQuery {
        /// What was being done, e.g. `record the new certificate`.
        action: &'static str,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// No certificate with this serial was ever issued by this CA.
    #[error("no certificate with serial `{serial}` in the inventory")]
    UnknownSerial {
        /// The serial asked for (its hex: this module names no type of the modules that
        /// return it, so they can all use it).
        serial: String,
    },
    /// The name was revoked with `revoke --name` and an admin has not unblocked it since.
    #[error(
        "`{name}` is blocked since its revocation at {}: no new certificate for it",
        crate::text::utc(*since)
    )]
    Blocked {
        /// The name.
        name: String,
        /// When it was blocked.
        since: time::OffsetDateTime,
    },
    /// Every random serial tried was already taken (should never happen with 120 random bits).
    #[error("no unused serial found after {attempts} random tries")]
    NoFreeSerial {
        /// How many serials were tried.
        attempts: usize,
    },
    /// A word that must be one of a fixed set (certificate kind, status, revocation reason).
    #[error("invalid {what} `{found}`")]
    InvalidChoice {
        /// What the word names, e.g. `revocation reason`.
        what: &'static str,
        /// The word as given (truncated).
        found: String,
        /// The accepted words, comma-separated.
        choices: &'static str,
    },
    /// A CRL validity that is not positive or ends past year 9999.
    #[error("cannot make a CRL valid for `{validity}`")]
    CrlValidity {
        /// The validity asked for.
        validity: time::Duration,
    },
    /// A CRL that cannot be read or was not signed by this CA.
    #[error("cannot read the CRL: {why}")]
    CrlParse {
        /// What is wrong with it.
        why: String,
    },
}

impl Error {
    /// One next step for the user, rendered by the CLIs as `hint: …`.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::UnknownSerial { .. } => {
                Some("run `shiqi-ca-agent list` to see the serials this CA issued".to_owned())
            }
            Self::InvalidChoice { choices, .. } => Some(format!("use one of: {choices}")),
            Self::Blocked { name, .. } => Some(format!(
                "if that revocation is over, an admin runs `shiqi-ca-agent unblock {name}` on the server"
            )),
            Self::InventorySchema { .. } => {
                Some("upgrade `shiqi-ca-agent`; a newer version wrote this inventory".to_owned())
            }
            Self::Lifetime { min, max, .. } => Some(format!(
                "pick {min} to {max} (`--lifetime`, `--days`, or `[lifetime]` in agent.toml); renew instead of issuing for longer"
            )),
            Self::InvalidSpan { .. } => Some(
                "write a whole number of minutes, hours or days: `10m`, `1h`, `30d`".to_owned(),
            ),
            Self::CrlValidity { .. } => {
                Some("use a positive validity; the default is 30 days".to_owned())
            }
            Self::InvalidHost { .. } | Self::InvalidHostPort { .. } => Some(
                "use a DNS name (letters, digits, `-` and dots) or an IP address, such as `localhost` or `10.0.0.5`"
                    .to_owned(),
            ),
            Self::InvalidName { .. } => Some(
                "names start with a lowercase letter and use only a-z, 0-9, `_` and `-` (at most 32)"
                    .to_owned(),
            ),
            Self::UnknownKeyType { known, .. } => Some(format!("use one of: {known}")),
            Self::CsrRefused { reason } => reason.hint(),
            Self::KeyMismatch => Some(
                "the profile mixes files from two issuances; run `shiqi-connect rotate` to make a fresh pair"
                    .to_owned(),
            ),
            Self::KeystorePassword => Some(
                "the password is in `keystore.password` next to the keystore".to_owned(),
            ),
            _ => None,
        }
    }
}

/// Why the signing policy refused a CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CsrRefusal {
    /// More than 64 KiB on stdin.
    TooLarge,
    /// Not a PEM `CERTIFICATE REQUEST`.
    NotPem,
    /// More than one PEM block.
    MoreThanOne,
    /// The DER inside does not parse as a PKCS#10 request.
    Malformed,
    /// The self-signature does not verify.
    BadSignature,
    /// The subject is not exactly `CN=<name>`.
    Subject {
        /// What the CSR carries.
        found: String,
        /// The name it was sent for.
        expected: String,
    },
    /// A key algorithm or size the policy does not accept.
    Key(String),
    /// The CSR asks to be a CA.
    AsksForCa,
    /// The CSR asks for an extension or attribute the policy does not allow.
    Extension(String),
}

impl std::fmt::Display for CsrRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge => write!(f, "larger than 64 KiB"),
            Self::NotPem => write!(f, "not a PEM `CERTIFICATE REQUEST`"),
            Self::MoreThanOne => write!(f, "more than one PEM block; send exactly one CSR"),
            Self::Malformed => write!(f, "malformed PKCS#10 request"),
            Self::BadSignature => write!(f, "the CSR's self-signature does not verify"),
            Self::Subject { found, expected } => {
                write!(f, "subject `{found}` is not `CN={expected}`")
            }
            Self::Key(k) => write!(
                f,
                "key {k} is not allowed (ECDSA P-256/P-384, Ed25519, or RSA of 2048-4096 bits with e = 65537)"
            ),
            Self::AsksForCa => write!(f, "it asks for CA basic constraints"),
            Self::Extension(e) => write!(f, "it asks for `{e}`, which the policy does not allow"),
        }
    }
}

impl CsrRefusal {
    fn hint(&self) -> Option<String> {
        match self {
            Self::Subject { expected, .. } => Some(format!(
                "make the CSR with CN={expected} and nothing else in the subject, or sign it with `--name` set to its CN"
            )),
            Self::Key(_) => Some("generate a P-256 key: `--key-type p256`".to_owned()),
            Self::Extension(_) | Self::AsksForCa => Some(
                "the agent sets key usage, EKU and CA:FALSE itself; request no extensions"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

/// A file-system error with the path it concerns.
#[derive(Debug, thiserror::Error)]
#[error("`{}`: {source}", path.display())]
pub struct PathError {
    /// The file or folder.
    pub path: PathBuf,
    /// What the OS said.
    #[source]
    pub source: std::io::Error,
}
