//! A profile on disk: `$SHIQI_HOME/NAME/`, its file names, and `profile.json`, which later
//! commands (`tunnel`, `doctor`, `rotate`, `status`) read instead of asking the server again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shiqi_ca::key::KeyType;
use shiqi_ca::keystore::P12Format;
use shiqi_ca::protocol::{Broker, MysqlFacts};
use shiqi_ca::{Host, Port, ProfileName, Serial, Span};
use time::OffsetDateTime;

use crate::error::{Error, ProfileError};

pub(crate) mod files;
pub(crate) mod lock;
pub(crate) mod plan;
pub(crate) mod render;
pub(crate) mod roots;
pub(crate) mod store;

pub(crate) use crate::ssh::auth::KeyUsed;

pub(crate) use roots::{Roots, tilde};

/// The `profile.json` format version this build writes and reads.
pub(crate) const PROFILE_VERSION: u32 = 1;

/// The alias of the key entry in `keystore.p12`.
pub(crate) const KEYSTORE_ALIAS: &str = "client";
/// The alias of the CA entry in `truststore.p12`.
pub(crate) const TRUSTSTORE_ALIAS: &str = "shiqi-ca";

/// The folder of profile `name` under `root`.
pub(crate) fn dir(root: &Path, name: &ProfileName) -> PathBuf {
    root.join(name.as_str())
}

/// `profile.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Profile {
    /// [`PROFILE_VERSION`].
    pub(crate) version: u32,
    /// The profile (and certificate CN, MySQL user) name.
    pub(crate) name: ProfileName,
    /// When setup wrote it.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) created: OffsetDateTime,
    /// Where the server is and how we got in.
    pub(crate) server: Server,
    /// The certificate.
    pub(crate) certificate: Certificate,
    /// The brokers as they advertise themselves (empty when the agent could not list them).
    pub(crate) brokers: Vec<Broker>,
    /// The MySQL server and user, if the server has one.
    pub(crate) mysql: Option<MysqlFacts>,
    /// The `Host` name in `ssh_config`.
    pub(crate) tunnel_host: String,
    /// The local ports the tunnel forwards, with their targets on the server.
    pub(crate) forwards: Vec<ForwardRecord>,
    /// Encryption of the PKCS#12 files.
    pub(crate) p12_format: P12Format,
    /// How Kafka clients reach the cluster (profiles from before the local endpoint: direct).
    #[serde(default, skip_serializing_if = "Endpoint::is_direct")]
    pub(crate) endpoint: Endpoint,
    /// What the local endpoint allows (absent: the defaults).
    #[serde(default, skip_serializing_if = "EndpointOptions::is_default")]
    pub(crate) endpoint_options: EndpointOptions,
    /// The certificate lifetime asked for by `setup --lifetime` (absent: [`Profile::asked_lifetime`]'s
    /// default for the profile's endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) lifetime: Option<Span>,
}

/// What a profile whose Kafka clients use the local endpoint asks for when `setup` was given no
/// `--lifetime`: its clients never hold the certificate, so a renewal is invisible to them and a
/// stolen certificate is worth an hour. Direct profiles ask for nothing and get the agent's
/// default (30 days unless its admin says otherwise): their clients load the keystores once and
/// would need a restart after every renewal.
pub(crate) const ENDPOINT_LIFETIME: Span = match Span::minutes(60) {
    Some(s) => s,
    None => panic!("an hour is a span"),
};

/// What the local endpoint allows its clients (issue 42).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct EndpointOptions {
    /// The most client connections it serves at once, Kafka and MySQL together: each costs a
    /// file descriptor and an SSH channel, and up to a frame's worth of memory.
    #[serde(default = "EndpointOptions::default_max_connections")]
    pub(crate) max_connections: u32,
    /// Whether `my.cnf` and the JDBC URL let the MySQL server ask for local files
    /// (`LOAD DATA LOCAL INFILE`): off unless `setup --allow-local-infile`, since a server (or a
    /// process posing as the endpoint while the tunnel is down) may ask for any file.
    #[serde(default)]
    pub(crate) allow_local_infile: bool,
}

impl EndpointOptions {
    /// The default `max_connections`: far above what a laptop's clients open (a Kafka client
    /// holds one per broker and one to its coordinator), well below the usual 1024 descriptors.
    pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 256;

    fn default_max_connections() -> u32 {
        Self::DEFAULT_MAX_CONNECTIONS
    }

    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl Default for EndpointOptions {
    fn default() -> Self {
        Self {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            allow_local_infile: false,
        }
    }
}

/// How Kafka clients on the laptop reach the brokers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub(crate) enum Endpoint {
    /// The client dials every broker's advertised address, forwarded on the same port, and does
    /// TLS with the profile's keystore itself: needs brokers that advertise `localhost:P`, each
    /// on a port of its own.
    #[default]
    Direct,
    /// The tunnel speaks Kafka for the client: plaintext on 127.0.0.1, TLS to each broker with
    /// the profile's certificate, broker addresses in answers rewritten to local ports. Works
    /// whatever the brokers advertise.
    Local {
        /// The port clients bootstrap from.
        bootstrap_port: u16,
        /// The local port of each broker seen so far, by id.
        brokers: Vec<LocalBroker>,
    },
}

/// One broker's port on the local endpoint.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LocalBroker {
    /// The broker's node id.
    pub(crate) id: i32,
    /// Its port on 127.0.0.1.
    pub(crate) port: u16,
}

impl Endpoint {
    /// The local endpoint's default bootstrap port: Kafka's own, as a local broker would have.
    pub(crate) const DEFAULT_PORT: u16 = 9092;
    /// The highest bootstrap port: the brokers' ports are above it.
    pub(crate) const MAX_PORT: u16 = 65000;
    /// How many ports above the bootstrap port a broker's port is looked for.
    pub(crate) const PORT_SEARCH: u16 = 256;

    /// Whether clients go to the brokers themselves.
    pub(crate) fn is_direct(&self) -> bool {
        matches!(self, Self::Direct)
    }

    /// `local` or `direct`, as `--endpoint` takes it.
    pub(crate) fn mode(&self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Local { .. } => "local",
        }
    }

    /// A local endpoint on `bootstrap_port` with a port for each of `brokers` (kept from `self`
    /// where it has one, else the next free one above the bootstrap port, skipping `avoid`:
    /// the profile's other forwards).
    pub(crate) fn local(&self, bootstrap_port: u16, brokers: &[Broker], avoid: &[u16]) -> Self {
        let mut kept = match self {
            Self::Local {
                bootstrap_port: b,
                brokers,
            } if *b == bootstrap_port => brokers.clone(),
            _ => Vec::new(),
        };
        let mut ids: Vec<i32> = brokers.iter().map(|b| b.id).collect();
        ids.sort_unstable();
        for id in ids {
            if !kept.iter().any(|k| k.id == id) {
                let port = next_port(bootstrap_port, &kept, avoid);
                kept.push(LocalBroker { id, port });
            }
        }
        kept.sort();
        Self::Local {
            bootstrap_port,
            brokers: kept,
        }
    }
}

/// The ports a broker of the local endpoint may get, in the order they are tried: the
/// [`Endpoint::PORT_SEARCH`] ports just above the bootstrap port. The one port policy: planned
/// here for `profile.json` ([`next_port`]) and bound in this order by the running endpoint
/// for a broker it meets first.
pub(crate) fn broker_ports(bootstrap: u16) -> impl Iterator<Item = u16> {
    let first = u32::from(bootstrap) + 1;
    let last = (first + u32::from(Endpoint::PORT_SEARCH)).min(u32::from(u16::MAX));
    (first..=last).filter_map(|p| u16::try_from(p).ok())
}

/// The first of [`broker_ports`] that no broker in `taken` has and `avoid` does not name
/// (callers keep the bootstrap port below [`Endpoint::MAX_PORT`], so there is room: a broker
/// count is far below the search's width).
pub(crate) fn next_port(bootstrap: u16, taken: &[LocalBroker], avoid: &[u16]) -> u16 {
    broker_ports(bootstrap)
        .find(|p| !taken.iter().any(|t| t.port == *p) && !avoid.contains(p))
        .unwrap_or(u16::MAX)
}

/// The SSH side of a profile.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Server {
    /// `--server` as given.
    pub(crate) destination: String,
    /// The remote user.
    pub(crate) user: String,
    /// The host dialled (`HostName`).
    pub(crate) host: String,
    /// The port dialled.
    pub(crate) port: u16,
    /// The known_hosts file that vouches for the host key.
    pub(crate) known_hosts: PathBuf,
    /// The key that authenticated.
    pub(crate) ssh_key: KeyUsed,
    /// The agent command used on the server.
    pub(crate) agent_command: String,
    /// `--jump` as given at setup; the config's own `ProxyJump` is read again each time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) jump: Option<String>,
    /// The jump hosts setup went through, nearest first (the tunnel's ssh_config names them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) jumps: Vec<JumpHost>,
    /// The user certificate that logged in with the key, when it came from a `CertificateFile`
    /// (one beside the key, `KEY-cert.pub`, or in the agent, OpenSSH finds by itself): the
    /// tunnel's ssh_config names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) certificate_file: Option<PathBuf>,
}

/// A jump host on the way to the server, as setup went through it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct JumpHost {
    /// The host dialled (`HostName`).
    pub(crate) host: String,
    /// The port dialled.
    pub(crate) port: u16,
    /// The user.
    pub(crate) user: String,
    /// The known_hosts file that vouched for its host key.
    pub(crate) known_hosts: PathBuf,
    /// The key that authenticated.
    pub(crate) ssh_key: KeyUsed,
}

/// The issued certificate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Certificate {
    /// Serial number (hex).
    pub(crate) serial: Serial,
    /// Start of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) not_before: OffsetDateTime,
    /// End of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) not_after: OffsetDateTime,
    /// The key algorithm.
    pub(crate) key_type: KeyType,
}

/// One `LocalForward` of the tunnel.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ForwardRecord {
    /// Port on the laptop's 127.0.0.1.
    pub(crate) local_port: u16,
    /// Host as the server resolves it.
    pub(crate) remote_host: Host,
    /// Port on that host.
    pub(crate) remote_port: Port,
    /// `kafka broker 1`, `mysql`.
    pub(crate) purpose: String,
}

impl Profile {
    /// The lifetime to ask the agent for: `setup --lifetime`, else [`ENDPOINT_LIFETIME`] with the
    /// local endpoint, else none (the agent's default).
    pub(crate) fn asked_lifetime(&self) -> Option<Span> {
        self.lifetime
            .or_else(|| default_lifetime(!self.endpoint.is_direct()))
    }

    /// Reads `profile.json` from a profile folder.
    ///
    /// # Errors
    /// [`ProfileError::Read`] when it is missing, malformed, or from a newer version.
    pub(crate) fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(files::PROFILE_JSON);
        let bad = |why: String| {
            Error::Profile(ProfileError::Read {
                path: path.clone(),
                why,
            })
        };
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(PROFILE_VERSION) => {}
            Some(v) => {
                return Err(bad(format!(
                    "it is version {v}; this build reads {PROFILE_VERSION}"
                )));
            }
            None => return Err(bad("it has no `version`".to_owned())),
        }
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))
    }

    /// Writes it as `dir/profile.json` (0600, atomically). The one in-place writer of the file,
    /// and only [`store::update`]'s to call: under the profile's lock, never with a profile read
    /// before the lock was taken.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written.
    fn save(&self, dir: &Path) -> Result<(), Error> {
        crate::fsutil::write_private(&dir.join(files::PROFILE_JSON), self.to_json().as_bytes())
    }

    /// Writes it as `dir/profile.json` in a test's own folder, which no other run shares (so no
    /// lock): the fixtures' one way to make a profile folder.
    #[cfg(test)]
    pub(crate) fn write_fixture(&self, dir: &Path) {
        self.save(dir).expect("profile.json");
    }

    /// Pretty JSON with a trailing newline.
    pub(crate) fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// A profile's lifetime when `setup` was given none, by whether its Kafka clients use the
/// local endpoint: see [`ENDPOINT_LIFETIME`].
pub(crate) fn default_lifetime(local_endpoint: bool) -> Option<Span> {
    local_endpoint.then_some(ENDPOINT_LIFETIME)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_catalogue_names_each_file_once_with_its_template_and_facts_last() {
        let names: std::collections::BTreeSet<&str> =
            files::CATALOGUE.iter().map(|k| k.name).collect();
        assert_eq!(names.len(), files::CATALOGUE.len(), "a name twice");
        assert_eq!(
            files::CATALOGUE.last().map(|k| k.source),
            Some(files::Source::Facts)
        );
        let env = shiqi_render::environment();
        for k in files::CATALOGUE {
            if let files::Source::Template(t) = k.source {
                assert!(
                    env.get_template(t).is_ok(),
                    "no template `{t}.j2` for {}",
                    k.name
                );
            }
        }
        let mut p = sample();
        let has = |p: &Profile| -> Vec<&str> {
            files::CATALOGUE
                .iter()
                .filter(|k| k.present(p))
                .map(|k| k.name)
                .collect()
        };
        assert!(has(&p).contains(&files::MY_CNF) && has(&p).contains(&files::LIBRDKAFKA_CONF));
        p.mysql = None;
        p.brokers.clear();
        let bare = has(&p);
        assert!(!bare.contains(&files::MY_CNF) && !bare.contains(&files::CLIENT_PROPERTIES));
        assert!(files::kind(files::CLIENT_KEY).is_some_and(|k| k.secret));
        assert!(files::kind("tunnel.log").is_none());
    }

    pub(crate) fn sample() -> Profile {
        Profile {
            version: PROFILE_VERSION,
            name: "saige".parse().expect("name"),
            created: time::macros::datetime!(2026-10-10 08:00 UTC),
            server: Server {
                destination: "shiqi-dev@10.231.0.1".into(),
                user: "shiqi-dev".parse().expect("name"),
                host: "10.231.0.1".parse().expect("host"),
                port: 22,
                known_hosts: "/home/saige/.ssh/known_hosts".into(),
                ssh_key: KeyUsed::File {
                    path: "/home/saige/.ssh/id_ed25519".into(),
                    fingerprint: "SHA256:abc".into(),
                },
                agent_command: "shiqi-ca-agent".into(),
                certificate_file: None,
                jump: None,
                jumps: Vec::new(),
            },
            certificate: Certificate {
                serial: "0a1b".parse().expect("serial"),
                not_before: time::macros::datetime!(2026-10-10 07:59 UTC),
                not_after: time::macros::datetime!(2026-11-09 07:59 UTC),
                key_type: KeyType::EcdsaP256,
            },
            brokers: (1..=3)
                .map(|id| Broker {
                    id,
                    host: "localhost".parse().expect("host"),
                    port: shiqi_ca::Port::try_from((id * 10000 + 9094) as u16).expect("port"),
                })
                .collect(),
            mysql: Some(MysqlFacts {
                host: "127.0.0.1".parse().expect("host"),
                port: shiqi_ca::Port::try_from(3306).expect("port"),
                user: "saige".parse().expect("name"),
            }),
            tunnel_host: "shiqi-tunnel".parse().expect("host"),
            forwards: vec![],
            p12_format: P12Format::Modern,
            endpoint: Endpoint::Direct,
            endpoint_options: EndpointOptions::default(),
            lifetime: None,
        }
    }

    #[test]
    fn broker_ports_follow_one_policy() {
        let ports: Vec<u16> = broker_ports(9092).collect();
        assert_eq!(ports.first(), Some(&9093));
        assert_eq!(ports.len(), usize::from(Endpoint::PORT_SEARCH) + 1);
        assert_eq!(broker_ports(65530).last(), Some(u16::MAX));
        let taken = [LocalBroker { id: 1, port: 9093 }];
        assert_eq!(next_port(9092, &taken, &[9094]), 9095);
        let all: Vec<LocalBroker> = broker_ports(9092)
            .map(|port| LocalBroker { id: 0, port })
            .collect();
        assert_eq!(
            next_port(9092, &all, &[]),
            u16::MAX,
            "none left in the search"
        );
    }

    #[test]
    fn round_trips_and_refuses_newer_versions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = sample();
        crate::fsutil::write_private(
            &dir.path().join(files::PROFILE_JSON),
            p.to_json().as_bytes(),
        )
        .expect("write");
        assert_eq!(Profile::load(dir.path()).expect("load"), p);

        let newer = p.to_json().replace("\"version\": 1", "\"version\": 2");
        crate::fsutil::write_private(&dir.path().join(files::PROFILE_JSON), newer.as_bytes())
            .expect("write");
        let e = Profile::load(dir.path()).expect_err("newer");
        assert!(e.to_string().contains("version 2"), "{e}");
    }
}
