//! The tunnel's forwards and the endpoint a profile gets (`profile.json` keeps both), planned from what the cluster
//! advertises: this is where a cluster that cannot work through forwards of its own (two brokers
//! on one port) is refused, and where the local endpoint is chosen instead. Pure.

use shiqi_ca::Host;
use shiqi_ca::protocol::{Broker, MysqlFacts};

use super::{Endpoint, ForwardRecord};
use crate::error::{Error, InputError, ProfileError};

/// The tunnel's forwards. Direct: one per advertised broker (after bootstrap a Kafka client
/// dials every broker at its advertised address, so each needs its own local port), then MySQL;
/// warnings name brokers the laptop would not reach through the tunnel. With the local endpoint
/// Kafka needs no forward (the endpoint has its own ports): MySQL only, which the endpoint
/// serves (its clients need no SSL settings).
///
/// # Errors
/// [`ProfileError::DuplicatePort`] when two brokers (or a broker and MySQL) share a port.
// Seed: kafka-day-journal — a one-port tunnel hangs on brokers 2 and 3.
pub(crate) fn forwards(
    brokers: &[Broker],
    mysql: Option<&MysqlFacts>,
    endpoint: &Endpoint,
) -> Result<(Vec<ForwardRecord>, Vec<String>), Error> {
    let brokers = if endpoint.is_direct() { brokers } else { &[] };
    let mut out: Vec<ForwardRecord> = Vec::new();
    let mut claimed: Vec<(u16, String, Host)> = Vec::new();
    let mut warnings = Vec::new();
    let mut claim = |f: ForwardRecord, who: String| -> Result<(), Error> {
        if let Some((_, first, first_host)) = claimed.iter().find(|c| c.0 == f.local_port) {
            return Err(Error::Profile(ProfileError::DuplicatePort {
                port: f.local_port,
                first: first.clone(),
                first_host: first_host.to_string(),
                second: who,
                second_host: f.remote_host.to_string(),
            }));
        }
        claimed.push((f.local_port, who, f.remote_host.clone()));
        out.push(f);
        Ok(())
    };
    let mut sorted: Vec<&Broker> = brokers.iter().collect();
    sorted.sort_by_key(|b| b.id);
    for b in sorted {
        if !b.host.is_loopback() {
            // Seed: wasted-weekend-on-kafka — advertised names that resolve differently on each
            // side of the tunnel send clients around it.
            warnings.push(format!(
                "broker {} advertises `{}:{}`; the laptop resolves `{}` itself, so its \
                 connections will not use the tunnel unless that name points to 127.0.0.1 \
                 (use the local endpoint: `shiqi-connect tunnel up NAME --endpoint local`)",
                b.id, b.host, b.port, b.host
            ));
        }
        let who = format!("broker {}", b.id);
        let f = ForwardRecord {
            local_port: b.port.get(),
            remote_host: b.host.clone(),
            remote_port: b.port,
            purpose: format!("Kafka broker {} (advertised {}:{})", b.id, b.host, b.port),
        };
        claim(f, who)?;
    }
    if let Some(m) = mysql {
        let purpose = if endpoint.is_direct() {
            format!("MySQL (on the server's {}:{})", m.host, m.port)
        } else {
            format!(
                "MySQL, local endpoint (plaintext here; TLS with the certificate to the \
                 server's {}:{})",
                m.host, m.port
            )
        };
        let f = ForwardRecord {
            local_port: m.port.get(),
            remote_host: m.host.clone(),
            remote_port: m.port,
            purpose,
        };
        claim(f, "MySQL".to_owned())?;
    }
    Ok((out, warnings))
}

/// What `--endpoint` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EndpointMode {
    /// Direct when the cluster's shape allows it, local otherwise.
    #[default]
    Auto,
    /// The tunnel speaks Kafka for the clients.
    Local,
    /// Clients do TLS to each broker through its forward.
    Direct,
}

/// The endpoint a profile gets: `local`, `direct`, or for `auto` direct when every broker
/// advertises `localhost` on a port of its own and local otherwise, with a note saying why. `port` moves the local bootstrap port (default
/// [`Endpoint::DEFAULT_PORT`], or the one `current` has); brokers keep their ports.
///
/// # Errors
/// As [`forwards`], for `direct` on a cluster with two brokers on one port (the error's hint
/// names the local endpoint).
pub(crate) fn choose_endpoint(
    mode: EndpointMode,
    port: Option<u16>,
    current: &Endpoint,
    brokers: &[Broker],
    mysql: Option<&MysqlFacts>,
) -> Result<(Endpoint, Option<String>), Error> {
    let bootstrap = port.unwrap_or(match current {
        Endpoint::Local { bootstrap_port, .. } => *bootstrap_port,
        Endpoint::Direct => Endpoint::DEFAULT_PORT,
    });
    if bootstrap == 0 || bootstrap > Endpoint::MAX_PORT {
        return Err(Error::Input(InputError::InvalidValue {
            what: "endpoint port",
            given: bootstrap.to_string(),
            why: "use a port from 1 to 65000 (the brokers get the ones just above it)",
        }));
    }
    let avoid: Vec<u16> = mysql.iter().map(|m| m.port.get()).collect();
    if avoid.contains(&bootstrap) {
        return Err(Error::Input(InputError::InvalidValue {
            what: "endpoint port",
            given: bootstrap.to_string(),
            why: "the tunnel forwards MySQL on that port; pick another",
        }));
    }
    let make_local = || current.local(bootstrap, brokers, &avoid);
    match mode {
        EndpointMode::Local => Ok((make_local(), None)),
        EndpointMode::Direct => {
            forwards(brokers, mysql, &Endpoint::Direct)?;
            Ok((Endpoint::Direct, None))
        }
        EndpointMode::Auto if brokers.is_empty() => Ok((Endpoint::Direct, None)),
        EndpointMode::Auto => match forwards(brokers, mysql, &Endpoint::Direct) {
            Ok((_, warnings)) if warnings.is_empty() => Ok((Endpoint::Direct, None)),
            _ => {
                let advertised: Vec<String> = brokers
                    .iter()
                    .map(|b| shiqi_render::hostport(b.host.as_str(), b.port.get()))
                    .collect();
                Ok((
                    make_local(),
                    Some(format!(
                        "the brokers advertise {}, which the laptop cannot dial through \
                         forwards of their own: Kafka clients use the local endpoint on \
                         127.0.0.1:{bootstrap} (no keystore needed)",
                        advertised.join(", ")
                    )),
                ))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brokers(ports: &[u16]) -> Vec<Broker> {
        ports
            .iter()
            .enumerate()
            .map(|(i, p)| Broker {
                id: i as i32 + 1,
                host: "localhost".parse().expect("host"),
                port: shiqi_ca::Port::try_from(*p).expect("port"),
            })
            .collect()
    }

    fn mysql() -> MysqlFacts {
        MysqlFacts {
            host: "127.0.0.1".parse().expect("host"),
            port: shiqi_ca::Port::try_from(3306).expect("port"),
            user: "saige".parse().expect("name"),
        }
    }

    #[test]
    // Seed: kafka-day-journal, one-port tunnel hangs on broker 2
    fn forwards_every_advertised_broker_and_mysql() {
        let m = mysql();
        let (f, warnings) = forwards(
            &brokers(&[39094, 19094, 29094]),
            Some(&m),
            &Endpoint::Direct,
        )
        .expect("ok");
        let ports: Vec<_> = f.iter().map(|f| f.local_port).collect();
        assert_eq!(ports, [39094, 19094, 29094, 3306]);
        assert!(warnings.is_empty());
        assert_eq!(f[3].remote_host.as_str(), "127.0.0.1");
    }

    #[test]
    fn refuses_two_brokers_on_one_port() {
        let e = forwards(&brokers(&[19094, 19094]), None, &Endpoint::Direct).expect_err("dup");
        assert_eq!(
            e.to_string(),
            "broker 1 and broker 2 both use port 19094 (`localhost:19094`, `localhost:19094`): \
             one local port cannot forward to two servers"
        );
        let e = forwards(&brokers(&[3306]), Some(&mysql()), &Endpoint::Direct)
            .expect_err("mysql clash");
        assert!(matches!(
            e,
            Error::Profile(ProfileError::DuplicatePort { port: 3306, .. })
        ));
    }

    #[test]
    fn warns_about_brokers_the_laptop_resolves_itself() {
        let b = vec![Broker {
            id: 2,
            host: "kafka-2.internal".parse().expect("host"),
            port: shiqi_ca::Port::try_from(9093).expect("port"),
        }];
        let (_, w) = forwards(&b, None, &Endpoint::Direct).expect("ok");
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("kafka-2.internal:9093"), "{}", w[0]);
    }
}
