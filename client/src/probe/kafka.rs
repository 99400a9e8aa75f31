//! Kafka with the profile's certificate, as a client would: a TLS handshake (the profile's
//! [`ProfileTls`], server name = the advertised host, as the Java client checks it), then one
//! request. The answer matters: in TLS 1.3 the client certificate is judged after the handshake
//! completes, so only a reply proves the broker accepted it.
//!
//! - [`api_versions`] through one local port (`tunnel status`, rotate's verification);
//! - [`metadata`] from a bootstrap address (doctor): the brokers the cluster advertises;
//! - [`registered`] through one local port (setup, `tunnel up`, the tunnel daemon): every broker
//!   registered with the cluster, fenced ones (stopped, restarting) included.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use rustls::pki_types::ServerName;
use shiqi_kafka::frame::{self, ExchangeError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::probe::Outcome;
use shiqi_ca::protocol::Broker;

use crate::probe::kafka_wire::{self, AdvertisedBroker, Registration};
use crate::probe::tls::ProfileTls;

/// How long a TCP connect to a local port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A correlation id to recognise our reply by.
const CORRELATION_ID: i32 = 0x5331_0001;

/// `127.0.0.1:port`: the tunnel's forwards bind loopback only.
fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Whether something accepts TCP connections on `127.0.0.1:port`.
pub(crate) async fn listening(port: u16) -> bool {
    matches!(
        tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(loopback(port))).await,
        Ok(Ok(_))
    )
}

/// TLS with the profile's certificate through `127.0.0.1:port`, checked as `server_name` (the
/// advertised host), then `ApiVersions`.
pub(crate) async fn api_versions(
    port: u16,
    server_name: &str,
    tls: &ProfileTls,
    timeout: Duration,
) -> Outcome {
    let run = async {
        let tcp = TcpStream::connect(loopback(port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let (version, body) = exchange(
            tcp,
            server_name,
            tls,
            &kafka_wire::api_versions_request(CORRELATION_ID),
        )
        .await?;
        kafka_wire::read_api_versions(&body, CORRELATION_ID)
            .map(|apis| {
                format!(
                    "{version} handshake with the profile's certificate; the broker answered \
                     ApiVersions ({} APIs)",
                    apis.len()
                )
            })
            .map_err(|why| format!("{version} handshake done, but {why}"))
    };
    within(timeout, run).await
}

/// `run`'s verdict, or a failure naming the timeout.
async fn within(
    timeout: Duration,
    run: impl std::future::Future<Output = Result<String, String>>,
) -> Outcome {
    match tokio::time::timeout(timeout, run).await {
        Ok(Ok(detail)) => Outcome::ok(detail),
        Ok(Err(why)) => Outcome::fail(why),
        Err(_) => Outcome::fail(format!(
            "no answer within {}s (the tunnel may be reconnecting)",
            timeout.as_secs()
        )),
    }
}

/// Every broker registered with the cluster (`DescribeCluster`, fenced brokers too where the
/// cluster lists them: Kafka 4.0+), asked through `127.0.0.1:port` over TLS with the profile's
/// certificate, checked as `server_name`.
///
/// # Errors
/// The connect, handshake or protocol failure.
pub(crate) async fn registered(
    port: u16,
    server_name: &str,
    tls: &ProfileTls,
    timeout: Duration,
) -> Result<Registration, String> {
    let run = async {
        let tcp = TcpStream::connect(loopback(port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let (version, mut stream) = handshake(tcp, server_name, tls).await?;
        let asked = describe_cluster(&mut stream)
            .await
            .map_err(|why| format!("{version} handshake done, but {why}"));
        let _ = stream.shutdown().await;
        asked
    };
    tokio::time::timeout(timeout, run)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", timeout.as_secs())))
}

/// [`registered`] asked of the tunnel's local endpoint (plaintext on `127.0.0.1:port`): the ids
/// are the cluster's, the addresses the endpoint's.
///
/// # Errors
/// The connect or protocol failure.
pub(crate) async fn registered_plain(port: u16, timeout: Duration) -> Result<Registration, String> {
    let run = async {
        let mut tcp = TcpStream::connect(loopback(port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        describe_cluster(&mut tcp).await
    };
    tokio::time::timeout(timeout, run)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", timeout.as_secs())))
}

/// The tunnel's local endpoint on `127.0.0.1:port`, as a client without TLS settings sees it:
/// it answers ApiVersions and Metadata, and the Metadata names only local ports (a broker
/// address that is not `127.0.0.1` would send the client around the tunnel).
pub(crate) async fn endpoint(port: u16, timeout: Duration) -> Outcome {
    let run = async {
        let mut tcp = TcpStream::connect(loopback(port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let body =
            request_response(&mut tcp, &kafka_wire::api_versions_request(CORRELATION_ID)).await?;
        let apis = kafka_wire::read_api_versions(&body, CORRELATION_ID)?;
        let body =
            request_response(&mut tcp, &kafka_wire::metadata_request(CORRELATION_ID)).await?;
        let brokers = kafka_wire::read_metadata(&body, CORRELATION_ID)?;
        let outside: Vec<String> = brokers
            .iter()
            .filter(|b| b.host != "127.0.0.1")
            .map(|b| format!("broker {} at {}:{}", b.id, b.host, b.port))
            .collect();
        if brokers.is_empty() {
            return Err("Metadata names no broker".to_owned());
        }
        if !outside.is_empty() {
            return Err(format!(
                "Metadata names addresses outside the endpoint: {}",
                outside.join(", ")
            ));
        }
        let ports: Vec<String> = brokers.iter().map(|b| b.port.to_string()).collect();
        Ok(format!(
            "answers ApiVersions ({} APIs); Metadata names only local ports ({})",
            apis.len(),
            ports.join(", ")
        ))
    };
    within(timeout, run).await
}

/// The brokers the cluster advertises, asked of `host:port` (every address it resolves to, in
/// turn) over TLS with the profile's certificate, the server name being `host`.
///
/// # Errors
/// Why no address answered: the last connect, handshake or protocol failure.
pub(crate) async fn metadata(
    host: &str,
    port: u16,
    tls: &ProfileTls,
    timeout: Duration,
) -> Result<Vec<AdvertisedBroker>, String> {
    let run = async {
        let addrs: Vec<_> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("`{host}` does not resolve: {e}"))?
            .collect();
        let mut last = format!("`{host}` resolves to no address");
        for addr in addrs {
            let tcp = match TcpStream::connect(addr).await {
                Ok(t) => t,
                Err(e) => {
                    last = format!("cannot connect to {addr}: {e}");
                    continue;
                }
            };
            let request = kafka_wire::metadata_request(CORRELATION_ID);
            match exchange(tcp, host, tls, &request).await {
                Ok((version, body)) => {
                    return kafka_wire::read_metadata(&body, CORRELATION_ID)
                        .map_err(|why| format!("{version} handshake done, but {why}"));
                }
                Err(why) => last = why,
            }
        }
        Err(last)
    };
    tokio::time::timeout(timeout, run)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", timeout.as_secs())))
}

/// The brokers the cluster advertises, asked of one address: over TLS as `server_name` with
/// `tls`, or in the clear when `tls` is `None` (a PLAINTEXT listener answers anyone).
///
/// # Errors
/// The connect, handshake or protocol failure.
pub(crate) async fn metadata_at(
    addr: SocketAddr,
    server_name: &str,
    tls: Option<&ProfileTls>,
    timeout: Duration,
) -> Result<Vec<AdvertisedBroker>, String> {
    let run = async {
        let mut tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let request = kafka_wire::metadata_request(CORRELATION_ID);
        let (version, body) = match tls {
            Some(tls) => exchange(tcp, server_name, tls, &request).await?,
            None => (
                "plaintext".to_owned(),
                request_response(&mut tcp, &request).await?,
            ),
        };
        kafka_wire::read_metadata(&body, CORRELATION_ID)
            .map_err(|why| format!("{version} connection made, but {why}"))
    };
    tokio::time::timeout(timeout, run)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", timeout.as_secs())))
}

/// What the cluster's registrations say about its brokers (`DescribeCluster` with fenced
/// brokers), each parsed into the strict types a config file may hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Registered {
    /// Serving now: what a client's metadata names.
    pub(crate) serving: Vec<Broker>,
    /// Registered but fenced (stopped, restarting, cut off from the controllers): back in the
    /// metadata when they return.
    pub(crate) fenced: Vec<Broker>,
    /// Whether the cluster listed fenced brokers (Kafka 4.0+): before, one that is not serving
    /// is just missing from the answer.
    pub(crate) fenced_listed: bool,
}

impl Registered {
    /// Parses the cluster's answer, sorted by id.
    ///
    /// # Errors
    /// The broker whose advertised host or port is not one (nothing of the answer is used).
    pub(crate) fn parse(answer: Registration) -> Result<Self, String> {
        let mut out = Self {
            fenced_listed: answer.fenced_listed,
            ..Self::default()
        };
        for b in answer.brokers {
            let host = b
                .host
                .parse()
                .map_err(|e| format!("broker {} advertises an unusable host: {e}", b.id))?;
            let port = u16::try_from(b.port)
                .ok()
                .and_then(|p| shiqi_ca::Port::try_from(p).ok())
                .ok_or_else(|| format!("broker {} advertises port {}", b.id, b.port))?;
            let broker = Broker {
                id: b.id,
                host,
                port,
            };
            if b.fenced {
                out.fenced.push(broker);
            } else {
                out.serving.push(broker);
            }
        }
        out.serving.sort_by_key(|b| b.id);
        out.fenced.sort_by_key(|b| b.id);
        Ok(out)
    }

    /// One line per registered broker that is not serving, for setup, `tunnel up` and the
    /// tunnel's log.
    pub(crate) fn not_serving(&self) -> Vec<String> {
        self.fenced
            .iter()
            .map(|b| {
                format!(
                    "broker {0} ({1}:{2}) is registered but not serving now; `shiqi-connect \
                     tunnel up` adds its forward when it returns (a broker removed for good is \
                     unregistered: `kafka-cluster.sh unregister --id {0}`)",
                    b.id, b.host, b.port
                )
            })
            .collect()
    }

    /// [`Registered::not_serving`], and on a cluster that does not list fenced brokers (Kafka
    /// before 4.0), a line for each broker in `known` (id, `host:port`) missing from the answer.
    pub(crate) fn not_serving_of(&self, known: &[(i32, String)]) -> Vec<String> {
        let mut lines = self.not_serving();
        if !self.fenced_listed {
            for (id, at) in known {
                if !self.serving.iter().any(|b| b.id == *id) {
                    lines.push(format!(
                        "broker {id} ({at}) is missing from the cluster's answer: stopped, \
                         restarting or removed (a Kafka before 4.0 does not say which); its \
                         forward stays for when it returns"
                    ));
                }
            }
        }
        lines
    }
}

/// `DescribeCluster` on `stream` at the highest version the broker and we both speak, which
/// its `ApiVersions` answer says first: a Kafka before 4.0 closes the connection on v2.
async fn describe_cluster<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
) -> Result<Registration, String> {
    let body = request_response(stream, &kafka_wire::api_versions_request(CORRELATION_ID)).await?;
    let offered = kafka_wire::read_api_versions(&body, CORRELATION_ID)?;
    let version = kafka_wire::describe_cluster_version(
        offered.range(kafka_protocol::messages::ApiKey::DescribeCluster),
    )
    .ok_or("the broker speaks no DescribeCluster version this build knows (Kafka before 2.8?)")?;
    let request = kafka_wire::describe_cluster_request(CORRELATION_ID, version);
    let body = request_response(stream, &request).await?;
    Ok(Registration {
        brokers: kafka_wire::read_describe_cluster(&body, CORRELATION_ID, version)?,
        fenced_listed: version >= 2,
    })
}

/// TLS over `tcp` as `server_name` with the profile's certificate: the TLS version and the stream.
async fn handshake(
    tcp: TcpStream,
    server_name: &str,
    tls: &ProfileTls,
) -> Result<(String, tokio_rustls::client::TlsStream<TcpStream>), String> {
    let config = tls.config()?;
    let name = ServerName::try_from(server_name.trim_matches(['[', ']']).to_owned())
        .map_err(|_| format!("`{server_name}` is not a valid TLS server name"))?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake failed: {e}"))?;
    let version = stream
        .get_ref()
        .1
        .protocol_version()
        .and_then(|v| v.as_str())
        .unwrap_or("TLS")
        .replace('_', ".");
    Ok((version, stream))
}

/// TLS over `tcp` as `server_name`, one request, one response body; returns the TLS version too.
async fn exchange(
    tcp: TcpStream,
    server_name: &str,
    tls: &ProfileTls,
    request: &[u8],
) -> Result<(String, Vec<u8>), String> {
    let (version, mut stream) = handshake(tcp, server_name, tls).await?;
    let body = request_response(&mut stream, request)
        .await
        .map_err(|why| format!("{version} handshake done, but {why}"))?;
    let _ = stream.shutdown().await;
    Ok((version, body))
}

/// Writes one framed request and reads one framed response body.
async fn request_response<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    match frame::exchange(stream, request, kafka_wire::MAX_FRAME).await {
        Ok(body) => Ok(body.to_vec()),
        Err(e @ ExchangeError::Closed(_)) => Err(format!(
            "{e}; it refused the client certificate or is not Kafka"
        )),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_missing_profile_fails_every_kafka_probe_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = ProfileTls::from_identity(&crate::profile::files::identity(dir.path()));
        let c = api_versions(1, "localhost", &tls, TIMEOUT).await;
        assert!(!c.ok);
        let why = metadata("127.0.0.1", 1, &tls, TIMEOUT)
            .await
            .expect_err("no port 1");
        assert!(why.contains("cannot connect"), "{why}");
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        let c = api_versions(port, "localhost", &tls, TIMEOUT).await;
        assert!(c.detail.contains("ca.crt"), "{}", c.detail);
    }

    #[tokio::test]
    async fn a_plaintext_server_is_not_a_tls_handshake() {
        // What a PLAINTEXT listener (or anything not TLS) looks like through the tunnel.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        assert!(listening(port).await);
        let tls = ProfileTls::without_client_certificate();
        let c = api_versions(port, "localhost", &tls, TIMEOUT).await;
        assert!(c.detail.starts_with("TLS handshake failed"), "{}", c.detail);
        let why = metadata("localhost", port, &tls, TIMEOUT)
            .await
            .expect_err("not TLS");
        assert!(why.starts_with("TLS handshake failed"), "{why}");
    }

    #[tokio::test]
    async fn reads_one_framed_answer() {
        let (mut client, mut server) = tokio::io::duplex(256);
        tokio::spawn(async move {
            let mut req = [0u8; 27];
            let _ = server.read_exact(&mut req).await;
            let _ = server.write_all(&[0, 0, 0, 4, 0, 0, 0, 9]).await;
        });
        let body = request_response(&mut client, &kafka_wire::api_versions_request(9))
            .await
            .expect("answer");
        assert_eq!(body, [0, 0, 0, 9]);
    }

    #[test]
    fn registrations_split_serving_from_fenced_and_refuse_bad_hosts() {
        let reg = |id, host: &str, fenced| kafka_wire::RegisteredBroker {
            id,
            host: host.to_owned(),
            port: 9093,
            fenced,
        };
        let v2 = |brokers| Registration {
            brokers,
            fenced_listed: true,
        };
        let r = Registered::parse(v2(vec![
            reg(3, "localhost", false),
            reg(2, "broker-2.kafka.internal", true),
            reg(1, "localhost", false),
        ]))
        .expect("valid");
        assert_eq!(r.serving.iter().map(|b| b.id).collect::<Vec<_>>(), [1, 3]);
        let fenced_line = "broker 2 (broker-2.kafka.internal:9093) is registered but not serving \
                           now; `shiqi-connect tunnel up` adds its forward when it returns (a \
                           broker removed for good is unregistered: `kafka-cluster.sh unregister \
                           --id 2`)";
        assert_eq!(r.not_serving(), [fenced_line]);
        // Listing fenced brokers, the cluster says it all: what we knew adds nothing.
        let known = [
            (2, "broker-2.kafka.internal:9093".to_owned()),
            (4, "x:1".to_owned()),
        ];
        assert_eq!(r.not_serving_of(&known), [fenced_line]);
        // Kafka before 4.0 lists serving brokers only: a known one missing is said as such.
        let old = Registered::parse(Registration {
            brokers: vec![reg(1, "localhost", false)],
            fenced_listed: false,
        })
        .expect("valid");
        let lines = old.not_serving_of(&[(1, "localhost:9093".to_owned()), known[0].clone()]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with(
                "broker 2 (broker-2.kafka.internal:9093) is missing from the cluster's answer"
            ),
            "{lines:?}"
        );
        let bad =
            Registered::parse(v2(vec![reg(4, "evil\n1.2.3.4 bank", false)])).expect_err("bad");
        assert!(
            bad.starts_with("broker 4 advertises an unusable host"),
            "{bad}"
        );
        let mut zero = reg(5, "localhost", false);
        zero.port = 0;
        assert!(Registered::parse(v2(vec![zero])).is_err());
    }
}
