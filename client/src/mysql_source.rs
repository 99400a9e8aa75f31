//! A profile's MySQL as a Java client (a JDBC URL, DataGrip) reaches it: the tunnel's local
//! port, the profile's files, and what the server shows through the tunnel before any login —
//! its version (MySQL or MariaDB: which driver fits) and its certificate's names (whether full
//! verification works against the tunnel's `127.0.0.1`). No printing; the command says what it
//! settled and why.

use std::path::{Path, PathBuf};

use shiqi_ca::cert::Cert;
use shiqi_ca::{ProfileName, Secret};

use crate::error::{DataGripError, Error, ProfileError};
use crate::jdbc::{Driver, Endpoint, TUNNEL_HOST, Verification};
use crate::probe::speaks::{self, Speaks};
use crate::profile::{Profile, files};

/// The MySQL side of a profile.
#[derive(Debug)]
pub(crate) struct Source {
    /// The profile (and MySQL user) name.
    pub(crate) name: ProfileName,
    /// Where the profile's files are.
    pub(crate) dir: PathBuf,
    /// The tunnel's local port for MySQL.
    pub(crate) port: u16,
    /// Reached through the tunnel's local endpoint: plaintext here, no SSL settings, no
    /// password; the tunnel does TLS with the certificate.
    pub(crate) local: bool,
}

/// What the server showed through the tunnel.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The version in its greeting, when something answered as MySQL.
    pub(crate) version: Option<String>,
    /// Whether its certificate names the tunnel's address, when it showed one.
    pub(crate) covers_tunnel: Option<bool>,
    /// The names its certificate holds (DNS names and IPs), when it showed one.
    pub(crate) names: Vec<String>,
    /// Why nothing could be learnt, in words (`nothing listens on 127.0.0.1:3306`).
    pub(crate) unseen: Option<String>,
}

impl Source {
    /// The profile's MySQL: its forward in `profile.json`.
    ///
    /// # Errors
    /// [`DataGripError::NoMysql`] when the server had no MySQL at setup.
    pub(crate) fn of(profile: &Profile, dir: &Path) -> Result<Self, Error> {
        let Some(m) = &profile.mysql else {
            return Err(Error::DataGrip(DataGripError::NoMysql {
                name: profile.name.to_string(),
            }));
        };
        // The forward setup recorded for it; the same port as on the server otherwise
        // (that is how setup picks it).
        let port = profile
            .forwards
            .iter()
            .find(|f| f.remote_host == m.host && f.remote_port == m.port)
            .map_or(m.port.get(), |f| f.local_port);
        Ok(Self {
            name: profile.name.clone(),
            dir: dir.to_path_buf(),
            port,
            local: !profile.endpoint.is_direct(),
        })
    }

    /// A file of the profile.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The PKCS#12 password.
    ///
    /// # Errors
    /// [`ProfileError::Read`] when `keystore.password` is missing or empty.
    pub(crate) fn password(&self) -> Result<Secret<String>, Error> {
        crate::profile::files::read_password(&self.dir).ok_or_else(|| {
            Error::Profile(ProfileError::Read {
                path: self.file(files::KEYSTORE_PASSWORD),
                why: "it is missing or empty".to_owned(),
            })
        })
    }

    /// Looks at the server through the tunnel: its greeting and certificate, no login.
    pub(crate) fn look(&self) -> Seen {
        seen(
            speaks::mysql(TUNNEL_HOST, self.port, TUNNEL_HOST),
            self.port,
        )
    }
}

/// The JDBC endpoint of `source` with `password`.
pub(crate) fn endpoint<'a>(
    source: &'a Source,
    paths: &'a Paths,
    password: &'a Secret<String>,
) -> Endpoint<'a> {
    Endpoint {
        port: source.port,
        user: &source.name,
        ca_crt: &paths.ca_crt,
        keystore: &paths.keystore,
        truststore: &paths.truststore,
        password,
    }
}

/// The profile files a MySQL client needs, absolute.
#[derive(Debug)]
pub(crate) struct Paths {
    /// The CA (PEM).
    pub(crate) ca_crt: PathBuf,
    /// The client certificate and chain (PEM).
    pub(crate) client_crt: PathBuf,
    /// The private key (PKCS#8 PEM).
    pub(crate) client_key: PathBuf,
    /// Key and chain (PKCS#12).
    pub(crate) keystore: PathBuf,
    /// The CA (PKCS#12).
    pub(crate) truststore: PathBuf,
}

impl Paths {
    /// The files of the profile in `dir`.
    pub(crate) fn of(dir: &Path) -> Self {
        Self {
            ca_crt: dir.join(files::CA_CRT),
            client_crt: dir.join(files::CLIENT_CRT),
            client_key: dir.join(files::CLIENT_KEY),
            keystore: dir.join(files::KEYSTORE),
            truststore: dir.join(files::TRUSTSTORE),
        }
    }
}

fn seen(speaks: Speaks, port: u16) -> Seen {
    let Speaks::Mysql {
        version,
        tls,
        chain,
    } = speaks
    else {
        return Seen {
            unseen: Some(format!(
                "`{TUNNEL_HOST}:{port}` shows no MySQL server ({})",
                speaks.describe()
            )),
            ..Seen::default()
        };
    };
    let cert = chain.first().map(|der| Cert::from_der(der));
    match cert {
        Some(Ok(cert)) => Seen {
            version: Some(version),
            covers_tunnel: Some(cert.covers_host(TUNNEL_HOST)),
            names: cert
                .dns_names()
                .iter()
                .cloned()
                .chain(cert.ip_addresses().iter().map(ToString::to_string))
                .collect(),
            unseen: None,
        },
        _ => Seen {
            version: Some(version),
            unseen: Some(if tls {
                "the server showed no readable certificate".to_owned()
            } else {
                "the server offers no TLS".to_owned()
            }),
            ..Seen::default()
        },
    }
}

/// How a choice was made, for the note the command prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// Given on the command line.
    Given,
    /// From what the server showed.
    Seen(String),
    /// Nothing was seen; this is the default.
    Default(String),
}

/// The driver: the flag, else the server's greeting, else MySQL Connector/J (which also logs
/// in to MariaDB).
pub(crate) fn driver(given: Option<Driver>, seen: &Seen) -> (Driver, Why) {
    if let Some(d) = given {
        return (d, Why::Given);
    }
    match &seen.version {
        Some(v) => (
            Driver::for_server_version(v),
            Why::Seen(format!("the server is `{v}`")),
        ),
        None => (
            Driver::Mysql,
            Why::Default(
                seen.unseen
                    .clone()
                    .unwrap_or_else(|| "the server was not asked".to_owned()),
            ),
        ),
    }
}

/// The verification: the flag, else the certificate's names, else full (what
/// `shiqi-ca-agent server-cert --kind mysql --san 127.0.0.1` gives and the README asks for).
pub(crate) fn verification(given: Option<Verification>, seen: &Seen) -> (Verification, Why) {
    if let Some(v) = given {
        return (v, Why::Given);
    }
    match seen.covers_tunnel {
        Some(covers) => {
            let names = if seen.names.is_empty() {
                "no name".to_owned()
            } else {
                format!("`{}`", seen.names.join("`, `"))
            };
            (
                Verification::for_names(covers),
                Why::Seen(format!("the server's certificate names {names}")),
            )
        }
        None => (
            Verification::Full,
            Why::Default(
                seen.unseen
                    .clone()
                    .unwrap_or_else(|| "the server was not asked".to_owned()),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::sample;

    #[test]
    fn finds_the_mysql_forward_or_refuses_a_profile_without_mysql() {
        let mut p = sample();
        let s = Source::of(&p, Path::new("/p")).expect("mysql");
        assert_eq!(s.port, 3306);
        p.forwards.push(crate::profile::ForwardRecord {
            local_port: 13306,
            remote_host: "127.0.0.1".parse().expect("host"),
            remote_port: shiqi_ca::Port::try_from(3306).expect("port"),
            purpose: "MySQL".into(),
        });
        assert_eq!(Source::of(&p, Path::new("/p")).expect("mysql").port, 13306);
        p.mysql = None;
        let e = Source::of(&p, Path::new("/p")).expect_err("no mysql");
        assert!(
            matches!(e, Error::DataGrip(DataGripError::NoMysql { .. })),
            "{e}"
        );
    }

    #[test]
    fn flags_win_then_the_server_then_the_defaults() {
        let nothing = seen(Speaks::Unreachable("connection refused".into()), 3306);
        let (d, why) = driver(None, &nothing);
        assert_eq!(d, Driver::Mysql);
        assert!(
            matches!(&why, Why::Default(w) if w.contains("connection refused")),
            "{why:?}"
        );
        assert_eq!(verification(None, &nothing).0, Verification::Full);
        assert_eq!(
            driver(Some(Driver::Mariadb), &nothing),
            (Driver::Mariadb, Why::Given)
        );

        let maria = Seen {
            version: Some("10.11.6-MariaDB-0+deb12u1".into()),
            covers_tunnel: Some(false),
            names: vec!["db.internal".into()],
            unseen: None,
        };
        assert_eq!(driver(None, &maria).0, Driver::Mariadb);
        let (v, why) = verification(None, &maria);
        assert_eq!(v, Verification::Ca);
        assert_eq!(
            why,
            Why::Seen("the server's certificate names `db.internal`".into())
        );
        assert_eq!(
            verification(Some(Verification::Full), &maria).0,
            Verification::Full
        );
    }
}
