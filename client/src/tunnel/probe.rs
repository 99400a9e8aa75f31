//! Checks a forward end to end, with the profile's own certificate.
//!
//! - Kafka: a TLS handshake through `127.0.0.1:P` (rustls, `ca.crt` as the only root,
//!   `client.crt`/`client.key` as the client certificate, server name = the advertised host, as
//!   the Java client checks it), then one `ApiVersions` request. The answer matters: in TLS 1.3
//!   the client certificate is judged after the handshake completes, so only a reply proves the
//!   broker accepted it.
//! - MySQL: a real login with `mysql_async` (TLS after the server greeting, which is how the
//!   MySQL protocol does it) as the profile's certificate-only user, then `SELECT CURRENT_USER()`.
//!
//! A result is data for `tunnel status`, not an error: every failure becomes its one-line
//! reason.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::profile::files;
use crate::tunnel::ports::loopback;

/// How long one probe may take; a tunnel that is reconnecting makes clients wait.
const PROBE_TIMEOUT: Duration = Duration::from_secs(6);
/// How long a TCP connect to a local port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// `ApiVersions` (API key 18), version 0: every broker answers it, before any authorization.
const API_VERSIONS: i16 = 18;
/// The broker's reply when it wants another ApiVersions version; still a Kafka answer.
const UNSUPPORTED_VERSION: i16 = 35;
/// A correlation id to recognise our reply by.
const CORRELATION_ID: i32 = 0x5331_0001;

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Whether it worked.
    pub ok: bool,
    /// What worked, or why not.
    pub detail: String,
}

impl Check {
    fn ok(detail: impl Into<String>) -> Self {
        Self {
            ok: true,
            detail: detail.into(),
        }
    }

    fn fail(detail: impl Into<String>) -> Self {
        Self {
            ok: false,
            detail: detail.into(),
        }
    }
}

/// Whether something accepts TCP connections on `127.0.0.1:port`.
pub async fn listening(port: u16) -> bool {
    matches!(
        tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(loopback(port))).await,
        Ok(Ok(_))
    )
}

/// The profile's TLS client settings, read once for every Kafka probe.
#[derive(Clone)]
pub struct KafkaTls(Result<Arc<rustls::ClientConfig>, String>);

impl KafkaTls {
    /// Reads `ca.crt`, `client.crt` and `client.key` from the profile folder.
    pub fn from_profile(dir: &Path) -> Self {
        Self(client_config(dir).map(Arc::new))
    }
}

fn client_config(dir: &Path) -> Result<rustls::ClientConfig, String> {
    let read_certs = |name: &str| -> Result<Vec<CertificateDer<'static>>, String> {
        let path = dir.join(name);
        let certs = CertificateDer::pem_file_iter(&path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("`{}` holds no certificate", path.display()));
        }
        Ok(certs)
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in read_certs(files::CA_CRT)? {
        roots
            .add(ca)
            .map_err(|e| format!("cannot use `{}`: {e}", files::CA_CRT))?;
    }
    let chain = read_certs(files::CLIENT_CRT)?;
    let key_path = dir.join(files::CLIENT_KEY);
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|e| format!("cannot read `{}`: {e}", key_path.display()))?;
    // The provider the whole workspace uses (design.md: one crypto stack), named explicitly so
    // no process-wide default has to be installed.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("`client.crt` and `client.key` do not go together: {e}"))
}

/// TLS with the profile's certificate through `127.0.0.1:port`, checked as `server_name` (the
/// advertised host), then `ApiVersions`.
pub async fn kafka(port: u16, server_name: &str, tls: &KafkaTls) -> Check {
    let config = match &tls.0 {
        Ok(c) => c.clone(),
        Err(why) => return Check::fail(why.clone()),
    };
    let Ok(name) = ServerName::try_from(server_name.to_owned()) else {
        return Check::fail(format!("`{server_name}` is not a valid TLS server name"));
    };
    match tokio::time::timeout(PROBE_TIMEOUT, kafka_inner(port, name, config)).await {
        Ok(Ok(detail)) => Check::ok(detail),
        Ok(Err(why)) => Check::fail(why),
        Err(_) => Check::fail(format!(
            "no answer within {}s (the tunnel may be reconnecting)",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

async fn kafka_inner(
    port: u16,
    name: ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
) -> Result<String, String> {
    let tcp = TcpStream::connect(loopback(port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake failed: {e}"))?;
    let version = tls
        .get_ref()
        .1
        .protocol_version()
        .and_then(|v| v.as_str())
        .unwrap_or("TLS")
        .replace('_', ".");
    tls.write_all(&api_versions_request())
        .await
        .map_err(|e| format!("{version} handshake done, then sending failed: {e}"))?;
    tls.flush()
        .await
        .map_err(|e| format!("{version} handshake done, then sending failed: {e}"))?;
    let mut len = [0u8; 4];
    tls.read_exact(&mut len).await.map_err(|e| {
        format!("{version} handshake done, but the broker closed the connection ({e}); it refused the client certificate or is not Kafka")
    })?;
    let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
    if !(6..=1 << 20).contains(&len) {
        return Err(format!(
            "{version} handshake done, but the reply is not Kafka's (length {len})"
        ));
    }
    let mut body = vec![0u8; len];
    tls.read_exact(&mut body)
        .await
        .map_err(|e| format!("{version} handshake done, but the reply was cut off: {e}"))?;
    let _ = tls.shutdown().await;
    read_api_versions(&body)
        .map(|apis| format!("{version} handshake with the profile's certificate; the broker answered ApiVersions ({apis} APIs)"))
        .map_err(|why| format!("{version} handshake done, but {why}"))
}

/// `ApiVersions` v0 with client id `shiqi-connect`, length-prefixed.
fn api_versions_request() -> Vec<u8> {
    let client_id = b"shiqi-connect";
    let mut body = Vec::new();
    body.extend_from_slice(&API_VERSIONS.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    // The id is a constant of 13 bytes.
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// Reads an `ApiVersions` v0 response body: correlation id, error code, API count.
fn read_api_versions(body: &[u8]) -> Result<usize, String> {
    let be32 = |b: &[u8]| b.try_into().map(i32::from_be_bytes).ok();
    let be16 = |b: &[u8]| b.try_into().map(i16::from_be_bytes).ok();
    let correlation = body.get(0..4).and_then(be32);
    if correlation != Some(CORRELATION_ID) {
        return Err("the reply is not an answer to our request".to_owned());
    }
    let error = body.get(4..6).and_then(be16).unwrap_or(-1);
    if error != 0 && error != UNSUPPORTED_VERSION {
        return Err(format!("the broker answered with error code {error}"));
    }
    let count = body
        .get(6..10)
        .and_then(be32)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    Ok(count)
}

/// Logs in to MySQL through `127.0.0.1:port` as `user` with the profile's certificate; the
/// server certificate is checked as `server_name` (where the server says MySQL listens).
pub async fn mysql(port: u16, server_name: &str, user: &str, dir: &Path) -> Check {
    match tokio::time::timeout(PROBE_TIMEOUT, mysql_inner(port, server_name, user, dir)).await {
        Ok(Ok(who)) => Check::ok(format!(
            "TLS login with the profile's certificate; `SELECT CURRENT_USER()` = `{who}`"
        )),
        Ok(Err(why)) => Check::fail(why),
        Err(_) => Check::fail(format!(
            "no answer within {}s (the tunnel may be reconnecting)",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

async fn mysql_inner(
    port: u16,
    server_name: &str,
    user: &str,
    dir: &Path,
) -> Result<String, String> {
    use mysql_async::prelude::Queryable;
    use mysql_async::{ClientIdentity, Conn, OptsBuilder, SslOpts};
    let ssl = SslOpts::default()
        .with_root_certs(vec![dir.join(files::CA_CRT).into()])
        .with_disable_built_in_roots(true)
        .with_client_identity(Some(ClientIdentity::new(
            dir.join(files::CLIENT_CRT).into(),
            dir.join(files::CLIENT_KEY).into(),
        )))
        // The certificate names the server as it sees itself, not the tunnel's 127.0.0.1.
        .with_danger_tls_hostname_override(Some(server_name.to_owned()));
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        // Never switch to a local unix socket the server names: that would bypass the tunnel.
        .prefer_socket(false)
        .ssl_opts(ssl);
    let mut conn = Conn::new(opts)
        .await
        .map_err(|e| format!("login failed: {e}"))?;
    let who: Option<String> = conn
        .query_first("SELECT CURRENT_USER()")
        .await
        .map_err(|e| format!("logged in, but `SELECT CURRENT_USER()` failed: {e}"))?;
    let _ = conn.disconnect().await;
    Ok(who.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_api_versions_v0_and_reads_its_reply() {
        let req = api_versions_request();
        assert_eq!(
            req,
            [
                0, 0, 0, 23, // length
                0, 18, 0, 0, // ApiVersions v0
                0x53, 0x31, 0, 1, // correlation id
                0, 13, b's', b'h', b'i', b'q', b'i', b'-', b'c', b'o', b'n', b'n', b'e', b'c',
                b't',
            ]
        );
        let mut reply = CORRELATION_ID.to_be_bytes().to_vec();
        reply.extend_from_slice(&0i16.to_be_bytes());
        reply.extend_from_slice(&2i32.to_be_bytes());
        assert_eq!(read_api_versions(&reply), Ok(2));
        reply[5] = 35;
        assert_eq!(read_api_versions(&reply), Ok(2));
        reply[5] = 58;
        assert!(read_api_versions(&reply).is_err());
        assert!(read_api_versions(b"HTTP/1.1 400").is_err());
    }

    #[tokio::test]
    async fn a_missing_profile_fails_every_kafka_probe_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = KafkaTls::from_profile(dir.path());
        let c = kafka(1, "localhost", &tls).await;
        assert!(!c.ok);
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
        let c = kafka_inner(
            port,
            ServerName::try_from("localhost").expect("name"),
            Arc::new(test_config()),
        )
        .await
        .expect_err("not TLS");
        assert!(c.starts_with("TLS handshake failed"), "{c}");
    }

    fn test_config() -> rustls::ClientConfig {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()
    }
}
