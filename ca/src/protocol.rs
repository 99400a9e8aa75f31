//! The agent's wire format: what `shiqi-ca-agent` prints on stdout for the client to read.
//!
//! Pure serde types, no I/O. Every document carries `version`; a client refuses a version it does
//! not know instead of guessing. Add fields with `#[serde(default)]` so that old clients keep
//! reading new agents.

use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::error::Category;
use time::OffsetDateTime;

use crate::crl::Reason;
use crate::error::Error;
use crate::host::{Bootstrap, Host, Port};
use crate::name::{ProfileName, Serial};
use crate::span::Span;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request the laptop sends the agent, as one value on both sides: the laptop turns it into
/// the agent's command line ([`Request::to_argv`], every word from a validated type, so no
/// quoting is needed); the agent parses that line with its own command-line types and converts
/// it back, and a test there holds the two to the same meaning for every variant. Each request
/// has one reply type ([`RequestKind`] names it). A request's facts here are its variant, its
/// line in the `request_kinds!` table (subcommand, refusal), and its arm in `Request::spelled`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Sign the CSR on stdin for `name`, grant its Kafka ACLs, create its MySQL user:
    /// [`ProvisionResponse`].
    Provision {
        /// The profile name.
        name: ProfileName,
        /// The lifetime the laptop asks for (the agent's default when absent); the agent signs
        /// at most its maximum for the caller's role.
        lifetime: Option<Span>,
    },
    /// Sign the CSR on stdin for `name`, replacing `replaces` (a rotation): [`SignResponse`].
    Sign {
        /// The profile name.
        name: ProfileName,
        /// The certificate the new one replaces.
        replaces: Option<Serial>,
        /// As [`Request::Provision`]'s.
        lifetime: Option<Span>,
    },
    /// The brokers the cluster advertises: [`BrokersResponse`].
    Brokers,
    /// The agent's build and protocol: [`VersionResponse`] (read with [`decode_version`], since
    /// it is how a laptop learns that the two differ).
    Version,
    /// Revoke certificates: [`RevokeResponse`].
    Revoke {
        /// Which.
        target: RevokeTarget,
        /// Why (the CRL's reason code).
        reason: Reason,
    },
}

/// What a [`Request::Revoke`] revokes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RevokeTarget {
    /// One certificate.
    Serial(Serial),
    /// Every valid client certificate of the name.
    Name(ProfileName),
    /// The name's certificates for one key (a setup that did not finish).
    Key(ProfileName, crate::KeyId),
}

/// Declares [`RequestKind`], each kind's subcommand and the laptop's words for its refusal, from
/// one table.
macro_rules! request_kinds {
    ($($kind:ident => $subcommand:literal, $refusal:literal;)*) => {
        /// Which request, without its values: for messages and for the reply type.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum RequestKind {
            $(
                #[doc = concat!("`", $subcommand, "`.")]
                $kind,
            )*
        }

        impl RequestKind {
            /// The agent's subcommand.
            pub fn subcommand(self) -> &'static str {
                match self {
                    $(Self::$kind => $subcommand,)*
                }
            }

            /// What the user reads first when the agent refused (or failed) this request:
            /// `the server's agent refused the CSR`.
            pub fn refusal(self) -> &'static str {
                match self {
                    $(Self::$kind => $refusal,)*
                }
            }
        }
    };
}

request_kinds! {
    Provision => "provision", "the server's agent refused";
    Sign => "sign", "the server's agent refused the CSR";
    Brokers => "brokers", "the server's agent could not list the Kafka brokers";
    Version => "version", "the server's agent could not say its version";
    Revoke => "revoke", "the server's agent could not revoke";
}

impl Request {
    /// Which request this is.
    pub fn kind(&self) -> RequestKind {
        self.spelled().0
    }

    /// The agent's command line after the program's name: `provision --name saige`. Names,
    /// serials, key ids and reasons print as `[a-z0-9-]` words only.
    pub fn to_argv(&self) -> Vec<String> {
        let (kind, words) = self.spelled();
        std::iter::once(kind.subcommand().to_owned())
            .chain(words)
            .collect()
    }

    /// Which request this is and its words after the subcommand: the one place each request
    /// is spelled.
    fn spelled(&self) -> (RequestKind, Vec<String>) {
        let mut words = Vec::new();
        let mut push = |w: &[&str]| words.extend(w.iter().map(|w| (*w).to_owned()));
        let kind = match self {
            Self::Provision { name, lifetime } => {
                push(&["--name", name.as_str()]);
                if let Some(span) = lifetime {
                    push(&["--lifetime", &span.to_string()]);
                }
                RequestKind::Provision
            }
            Self::Sign {
                name,
                replaces,
                lifetime,
            } => {
                push(&["--name", name.as_str()]);
                if let Some(old) = replaces {
                    push(&["--replaces", &old.to_string()]);
                }
                if let Some(span) = lifetime {
                    push(&["--lifetime", &span.to_string()]);
                }
                RequestKind::Sign
            }
            Self::Brokers => {
                push(&["--json"]);
                RequestKind::Brokers
            }
            Self::Version => {
                push(&["--json"]);
                RequestKind::Version
            }
            Self::Revoke { target, reason } => {
                match target {
                    RevokeTarget::Serial(serial) => push(&[&serial.to_string()]),
                    RevokeTarget::Name(name) => push(&["--name", name.as_str()]),
                    RevokeTarget::Key(name, key) => {
                        push(&["--name", name.as_str(), "--key", &key.to_string()]);
                    }
                }
                push(&["--reason", &reason.to_string()]);
                RequestKind::Revoke
            }
        };
        (kind, words)
    }
}

/// Parses an agent reply into its strict type, refusing a version this build does not speak.
///
/// This is the one way the laptop reads what the agent printed: every field is typed, so a value
/// that could break a config file, a command line or the terminal is refused here, and the error
/// names the field (`facts.kafka.brokers[1].host`) with the offending value escaped.
///
/// # Errors
/// [`Error::Reply`] naming the first field that does not parse.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    #[derive(Deserialize)]
    struct Versioned {
        version: u32,
    }
    let fail = |field: String, why: String| Error::Reply {
        field: if field.is_empty() {
            ".".to_owned()
        } else {
            field
        },
        why: crate::text::one_line(&why, 200),
    };
    // Peek at the version first, so an agent from the future gets a clear answer rather than an
    // error about whichever field changed.
    let version = serde_json::from_slice::<Versioned>(bytes)
        .map_err(|e| match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => {
                fail(".".to_owned(), format!("not JSON ({})", strip_position(&e)))
            }
            Category::Data => fail("version".to_owned(), strip_position(&e)),
        })?
        .version;
    if version != PROTOCOL_VERSION {
        return Err(Error::ReplyVersion {
            found: version,
            expected: PROTOCOL_VERSION,
        });
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        fail(field, strip_position(e.inner()))
    })?;
    Ok(value)
}

/// serde_json's message without its ` at line L column C` suffix (the field path says where).
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

/// The longest free text accepted in a reply field (a warning, a reason, an error line).
pub const MAX_TEXT_LEN: usize = 1024;

/// Free text from the agent that the laptop only ever shows (warnings, reasons, MySQL errors):
/// one line, at most [`MAX_TEXT_LEN`] characters, no control characters. Quotes stay allowed
/// (MariaDB's own errors carry them) because a `Text` never reaches a file or a command line.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text(String);

impl Text {
    /// The text (no control characters by construction).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Text {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = |why: &'static str| Error::InvalidText {
            text: crate::text::one_line(s, 64),
            why,
        };
        if s.chars().any(char::is_control) {
            return Err(invalid(
                "it holds control characters (a newline, an escape sequence)",
            ));
        }
        if s.chars().count() > MAX_TEXT_LEN {
            return Err(invalid("it is longer than 1024 characters"));
        }
        Ok(Self(s.to_owned()))
    }
}

impl Text {
    /// Builds a `Text` from text the agent composed (an error's message), writing control
    /// characters as escapes and cutting it to [`MAX_TEXT_LEN`], so the agent never emits what
    /// the laptop would refuse.
    pub fn lossy(s: &str) -> Self {
        Self(crate::text::one_line(s, MAX_TEXT_LEN))
    }
}

impl From<String> for Text {
    /// [`Text::lossy`]: for the agent's own messages.
    fn from(s: String) -> Self {
        Self::lossy(&s)
    }
}

impl From<&str> for Text {
    /// [`Text::lossy`]: for the agent's own messages.
    fn from(s: &str) -> Self {
        Self::lossy(s)
    }
}

/// One certificate as PEM: exactly one `CERTIFICATE` block whose DER parses as X.509, kept in
/// its canonical encoding (64 columns, `\n`), so nothing else from the server rides along into
/// the files it is written to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPem(String);

impl CertPem {
    /// The canonical PEM text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The PEM of a certificate this process holds.
    pub fn of(cert: &crate::cert::Cert) -> Self {
        Self(cert.pem())
    }
}

impl FromStr for CertPem {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: String| Error::CertParse { why };
        let blocks = pem::parse_many(s).map_err(|e| bad(format!("bad PEM: {e}")))?;
        let [block] = blocks.as_slice() else {
            return Err(bad(format!(
                "expected one PEM block, found {}",
                blocks.len()
            )));
        };
        if block.tag() != "CERTIFICATE" {
            return Err(bad("the PEM block is not a CERTIFICATE".to_owned()));
        }
        // Text outside the block (pem skips it) must not be there either.
        let trimmed = s.trim();
        if !trimmed.starts_with("-----BEGIN CERTIFICATE-----")
            || !trimmed.ends_with("-----END CERTIFICATE-----")
        {
            return Err(bad("text outside the PEM block".to_owned()));
        }
        let cert = crate::cert::Cert::from_der(block.contents())?;
        Ok(Self::of(&cert))
    }
}

/// The reply to `shiqi-ca-agent sign --name NAME` (CSR on stdin).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SignResponse {
    /// Always [`PROTOCOL_VERSION`] for documents this build writes.
    pub version: u32,
    /// The name the certificate was issued for (its CN).
    pub name: ProfileName,
    /// The issued certificate's serial number.
    pub serial: Serial,
    /// Start of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    /// End of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// The leaf certificate, PEM.
    pub certificate_pem: CertPem,
    /// The issuing chain above the leaf, PEM, nearest first; the last one is the root CA.
    pub chain_pem: Vec<CertPem>,
    /// The root CA the client should trust for servers (brokers, MySQL), PEM.
    pub ca_pem: CertPem,
    /// The server's connection facts as far as the agent could learn them.
    pub facts: ServerFacts,
    /// The agent's maximum for the caller, when it signed for less than was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped_at: Option<Span>,
}

/// What the client needs to know to reach the server's services.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServerFacts {
    /// Kafka, if the agent could ask the cluster.
    #[serde(default)]
    pub kafka: Option<KafkaFacts>,
    /// MySQL, if configured.
    #[serde(default)]
    pub mysql: Option<MysqlFacts>,
    /// Facts the agent could not learn, each with the reason; signing still succeeded.
    #[serde(default)]
    pub missing: Vec<MissingFact>,
}

/// The Kafka cluster as its brokers advertise it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct KafkaFacts {
    /// The bootstrap addresses as the server sees them (from the agent's config).
    pub bootstrap: Bootstrap,
    /// Every broker with its advertised host and port, sorted by id.
    pub brokers: Vec<Broker>,
}

/// One broker's advertised address.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Broker {
    /// The broker's node id.
    pub id: i32,
    /// The advertised host name (what the client dials and verifies).
    pub host: Host,
    /// The advertised port.
    pub port: Port,
}

/// The MySQL server as clients reach it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MysqlFacts {
    /// Host the server listens on, as the server sees it (the tunnel's target).
    pub host: Host,
    /// Port the server listens on.
    pub port: Port,
    /// The MySQL user name for this certificate: the profile's name.
    pub user: ProfileName,
}

/// A fact the agent could not learn.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MissingFact {
    /// Which fact: `kafka.brokers`, `mysql`.
    pub fact: Text,
    /// Why, in one line (no secrets).
    pub reason: Text,
}

/// The reply to `shiqi-ca-agent mysql-user NAME`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MysqlUserResponse {
    /// Always [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The account's user part: the profile's name.
    pub user: ProfileName,
    /// The account's host part (`127.0.0.1`: SSH forwards arrive from the server's loopback).
    pub host: Host,
    /// The `REQUIRE SUBJECT` string, built from the issued certificate.
    pub subject: Text,
    /// The `REQUIRE ISSUER` string, built from the CA certificate.
    pub issuer: Text,
    /// True if the account was created now, false if it existed and was brought up to date.
    pub created: bool,
}

/// The reply to `shiqi-ca-agent kafka-user NAME [--revoke]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KafkaUserResponse {
    /// Always [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The Kafka principal, `User:NAME` (the brokers map `CN=NAME` to it).
    pub principal: Text,
    /// Every ACL the principal holds after the call (none after `--revoke`), sorted.
    pub acls: Vec<KafkaAcl>,
    /// The ACLs this call created (empty when they all existed already).
    #[serde(default)]
    pub created: Vec<KafkaAcl>,
    /// The ACLs this call deleted (`--revoke`).
    #[serde(default)]
    pub deleted: Vec<KafkaAcl>,
}

/// One Kafka ACL, in the spellings of the agent's `[[kafka.grants]]` config.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct KafkaAcl {
    /// `User:NAME`.
    pub principal: Text,
    /// `topic`, `group`, `cluster`, `transactional-id` (or `unknown`).
    pub resource: Text,
    /// `literal` or `prefixed`.
    pub pattern: Text,
    /// The resource name or prefix.
    pub name: Text,
    /// `read`, `write`, `describe`, `describe-configs`, …
    pub operation: Text,
    /// `allow` or `deny`.
    pub permission: Text,
    /// The client host the ACL applies to, `*` for any.
    pub host: Text,
}

/// The reply to `shiqi-ca-agent provision --name NAME` (CSR on stdin): what `sign`,
/// `kafka-user` and `mysql-user` answer, from one process with one Kafka connection.
///
/// The agent prints it even when a step after signing failed (and then exits non-zero), so the
/// client knows a certificate was issued and revokes it; a refusal before signing prints none.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProvisionResponse {
    /// Always [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The certificate and the server's facts, as `sign` answers them.
    pub certificate: SignResponse,
    /// The principal's ACLs; absent when the facts name no Kafka cluster (or that step failed).
    #[serde(default)]
    pub kafka: Option<KafkaUserResponse>,
    /// The MySQL account; absent when the facts name no MySQL (or that step failed).
    #[serde(default)]
    pub mysql: Option<MysqlUserResponse>,
}

/// The reply to `shiqi-ca-agent brokers --json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BrokersResponse {
    /// Always [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The cluster as its brokers advertise it.
    pub kafka: KafkaFacts,
}

/// The reply to `shiqi-ca-agent version --json`: what any agent, whatever its protocol, keeps
/// answering in this shape.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VersionResponse {
    /// The protocol the agent speaks ([`PROTOCOL_VERSION`] for this build).
    pub version: u32,
    /// The agent's build: `0.1.0 (e2d2f97bc811, x86_64-unknown-linux-musl)`.
    pub agent: Text,
}

/// Parses a [`VersionResponse`] of any protocol version: the one reply read before knowing
/// whether the two sides agree.
///
/// # Errors
/// [`Error::Reply`] naming the field that does not parse.
pub fn decode_version(bytes: &[u8]) -> Result<VersionResponse, Error> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| Error::Reply {
        field: match e.path().to_string() {
            p if p.is_empty() => ".".to_owned(),
            p => p,
        },
        why: crate::text::one_line(&strip_position(e.inner()), 200),
    })
}

/// The reply to `shiqi-ca-agent revoke SERIAL | --name NAME`.
///
/// Revocation is recorded (inventory, CRL) before anything else is tried; the `mysql` and
/// `kafka` parts then say what was done to make it effective, or why it could not be.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RevokeResponse {
    /// Always [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The name whose certificates were revoked (a server certificate's name is a host).
    pub name: Text,
    /// The certificates this call revoked (or found already revoked), oldest first.
    pub revoked: Vec<RevokedCert>,
    /// Serials of the name's client certificates that are still valid afterwards.
    #[serde(default)]
    pub still_valid: Vec<Serial>,
    /// The CRL written by this call.
    pub crl: CrlFacts,
    /// What was done on MySQL (`None` when MySQL is not configured or the certificate is not a
    /// client certificate).
    #[serde(default)]
    pub mysql: Option<MysqlRevocation>,
    /// What was done on Kafka (`None` when Kafka is not configured or the certificate is not a
    /// client certificate).
    #[serde(default)]
    pub kafka: Option<KafkaRevocation>,
    /// Limits of what this revocation could do, one line each.
    #[serde(default)]
    pub warnings: Vec<Text>,
}

/// One revoked certificate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RevokedCert {
    /// Its serial.
    pub serial: Serial,
    /// `client`, `server` or `admin`.
    pub kind: Text,
    /// The reason recorded (kebab-case, e.g. `superseded`).
    #[serde(default)]
    pub reason: Option<Reason>,
    /// When it was (first) revoked.
    #[serde(with = "time::serde::rfc3339")]
    pub revoked_at: OffsetDateTime,
    /// True if it had been revoked before this call (nothing changed for it).
    #[serde(default)]
    pub already: bool,
}

/// A CRL as written to disk.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CrlFacts {
    /// Its CRL number.
    pub number: u64,
    /// Its `thisUpdate`.
    #[serde(with = "time::serde::rfc3339")]
    pub this_update: OffsetDateTime,
    /// Its `nextUpdate`.
    #[serde(with = "time::serde::rfc3339")]
    pub next_update: OffsetDateTime,
    /// How many serials it lists.
    pub revoked: usize,
    /// The PEM copy in the state directory (shown, never used as a path by the laptop).
    pub path: Text,
    /// The PEM copy in the publish directory, if one is configured.
    #[serde(default)]
    pub published: Option<Text>,
}

/// What `revoke` did on MySQL.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MysqlRevocation {
    /// The statement that made the server re-read its CRL (`FLUSH SSL` on MariaDB, `ALTER
    /// INSTANCE RELOAD TLS` on MySQL), if it succeeded.
    #[serde(default)]
    pub reloaded_with: Option<Text>,
    /// The connection ids of the user's sessions that were killed.
    #[serde(default)]
    pub killed: Vec<u64>,
    /// True if the account was locked (no valid certificate is left for the name).
    #[serde(default)]
    pub locked: bool,
    /// Why (part of) it failed, if it did.
    #[serde(default)]
    pub error: Option<Text>,
}

/// What `revoke` did on Kafka.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KafkaRevocation {
    /// The ACLs of `User:NAME` that were deleted (only when no valid certificate is left).
    #[serde(default)]
    pub deleted: Vec<KafkaAcl>,
    /// Why the ACLs were kept, if they were (another valid certificate still needs them).
    #[serde(default)]
    pub kept_because: Option<Text>,
    /// Why it failed, if it did.
    #[serde(default)]
    pub error: Option<Text>,
}

/// The reply to `shiqi-ca-agent crl [--refresh] --json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CrlResponse {
    /// Always [`PROTOCOL_VERSION`].
    pub version: u32,
    /// False when `--refresh` found the CRL fresh and did nothing.
    pub regenerated: bool,
    /// The CRL now on disk.
    pub crl: CrlFacts,
    /// The statement that made MySQL re-read the CRL, if one was run and succeeded.
    #[serde(default)]
    pub mysql_reloaded_with: Option<Text>,
    /// Problems that did not stop the CRL from being written.
    #[serde(default)]
    pub warnings: Vec<Text>,
}

crate::name::string_type!(Text, display);
crate::name::string_type!(CertPem, display);

#[cfg(test)]
mod tests {
    use super::*;

    /// A real certificate's PEM, made now (no fixture to go stale).
    fn cert_pem() -> String {
        let validity = crate::issue::Validity::starting_now(
            time::OffsetDateTime::now_utc(),
            time::Duration::days(1),
        );
        let ca = crate::issue::Ca::create(crate::key::KeyType::EcdsaP256, "test CA", validity)
            .expect("CA");
        ca.cert().pem()
    }

    /// A `SignResponse` document with `pem` in every PEM field.
    fn sign_json(pem: &str) -> String {
        let pem = serde_json::to_string(pem).expect("string");
        format!(
            r#"{{"version":1,"name":"saige","serial":"0a1b","not_before":"2026-01-01T00:00:00Z",
            "not_after":"2026-02-01T00:00:00Z","certificate_pem":{pem},"chain_pem":[{pem}],
            "ca_pem":{pem},"facts":{{}}}}"#
        )
    }

    #[test]
    fn requests_spell_their_subcommand_and_words() {
        let name: ProfileName = "saige".parse().expect("name");
        let serial: Serial = "0a1b".parse().expect("serial");
        let key: crate::KeyId = "ab".repeat(32).parse().expect("key id");
        for (request, argv) in [
            (
                Request::Provision {
                    name: name.clone(),
                    lifetime: None,
                },
                "provision --name saige".to_owned(),
            ),
            (
                Request::Provision {
                    name: name.clone(),
                    lifetime: "1h".parse().ok(),
                },
                "provision --name saige --lifetime 1h".to_owned(),
            ),
            (
                Request::Sign {
                    name: name.clone(),
                    replaces: Some(serial.clone()),
                    lifetime: "90m".parse().ok(),
                },
                "sign --name saige --replaces 0a1b --lifetime 90m".to_owned(),
            ),
            (Request::Brokers, "brokers --json".to_owned()),
            (Request::Version, "version --json".to_owned()),
            (
                Request::Revoke {
                    target: RevokeTarget::Serial(serial),
                    reason: Reason::Superseded,
                },
                "revoke 0a1b --reason superseded".to_owned(),
            ),
            (
                Request::Revoke {
                    target: RevokeTarget::Key(name, key),
                    reason: Reason::Unspecified,
                },
                format!(
                    "revoke --name saige --key {} --reason unspecified",
                    "ab".repeat(32)
                ),
            ),
        ] {
            assert_eq!(request.to_argv().join(" "), argv);
            assert_eq!(Some(request.kind().subcommand()), argv.split(' ').next());
        }
    }

    #[test]
    fn pem_fields_hold_exactly_one_certificate() {
        let pem = cert_pem();
        assert!(decode::<SignResponse>(sign_json(&pem).as_bytes()).is_ok());
        for bad in [
            "x".to_owned(),
            format!("{pem}{pem}"),
            format!("{pem}\n[mysql]\npager=x\n"),
            format!("junk\n{pem}"),
            pem.replace("CERTIFICATE", "PRIVATE KEY"),
        ] {
            let e = decode::<SignResponse>(sign_json(&bad).as_bytes()).expect_err(&bad);
            assert!(e.to_string().contains("certificate_pem"), "{e}");
        }
    }

    #[test]
    fn sign_response_round_trips_and_tolerates_missing_optional_fields() {
        let json = sign_json(&cert_pem());
        let r: SignResponse = serde_json::from_str(&json).expect("valid document");
        assert_eq!(r.name.as_str(), "saige");
        assert!(r.facts.kafka.is_none() && r.facts.missing.is_empty());
        let back = serde_json::to_string(&r).expect("serializes");
        assert!(back.contains(r#""serial":"0a1b""#));
    }

    #[test]
    fn revoke_response_round_trips_with_only_the_required_fields() {
        let json = r#"{"version":1,"name":"saige","revoked":[{"serial":"0a","kind":"client",
            "revoked_at":"2026-01-01T00:00:00Z"}],"crl":{"number":3,
            "this_update":"2026-01-01T00:00:00Z","next_update":"2026-01-31T00:00:00Z",
            "revoked":1,"path":"/var/lib/shiqi-ca/crl.pem"}}"#;
        let r: RevokeResponse = serde_json::from_str(json).expect("valid document");
        assert_eq!(r.revoked[0].serial.to_hex(), "0a");
        assert!(!r.revoked[0].already && r.mysql.is_none() && r.warnings.is_empty());
        let back: RevokeResponse =
            serde_json::from_str(&serde_json::to_string(&r).expect("serializes")).expect("reads");
        assert_eq!(back.crl, r.crl);
    }

    #[test]
    fn decode_names_the_field_and_escapes_the_value() {
        // A JSON string escape becomes a real newline and ESC once parsed.
        let json = r#"{"version":1,"name":"saige\n[mysql]\u001b[2J","serial":"0a1b",
            "not_before":"2026-01-01T00:00:00Z","not_after":"2026-02-01T00:00:00Z",
            "certificate_pem":"x","chain_pem":["y"],"ca_pem":"y","facts":{}}"#;
        let err = decode::<SignResponse>(json.as_bytes()).expect_err("hostile name");
        let msg = err.to_string();
        assert!(msg.contains(": name: "), "{msg}");
        assert!(!msg.chars().any(char::is_control), "{msg}");
        let future = r#"{"version":2}"#;
        let e = decode::<SignResponse>(future.as_bytes()).expect_err("v2");
        assert!(
            matches!(
                e,
                Error::ReplyVersion {
                    found: 2,
                    expected: 1
                }
            ),
            "{e}"
        );
        let msg = decode::<SignResponse>(b"Welcome!\n{")
            .expect_err("motd")
            .to_string();
        assert!(msg.contains("not JSON"), "{msg}");
    }

    #[test]
    fn refuses_a_bad_name_in_a_document() {
        let json = r#"{"version":1,"name":"../x","serial":"01","not_before":"2026-01-01T00:00:00Z",
            "not_after":"2026-02-01T00:00:00Z","certificate_pem":"x","chain_pem":[],"ca_pem":"y","facts":{}}"#;
        assert!(serde_json::from_str::<SignResponse>(json).is_err());
    }
}
