//! What a port really speaks, found by talking to it: a TLS ClientHello (rustls, with a verifier
//! that records the server's chain and trusts nothing), a plaintext Kafka `ApiVersions` request,
//! the MySQL greeting (then `SSLRequest` and TLS), and the SSH banner. Blocking std sockets with
//! timeouts; nothing here prints.
//!
//! [`super::kafka`] does a full handshake with the profile's certificate; these probes send none
//! on purpose, so they work before the certificate does.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

use crate::probe::kafka_wire;
use crate::text::quote;

/// The correlation id of the plaintext `ApiVersions` request.
const CORRELATION_ID: i32 = 1;

/// How long one probe may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// What answered on a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Speaks {
    /// A TLS server: it answered the ClientHello and showed this chain (DER, leaf first).
    Tls {
        /// `TLSv1_3`, `TLSv1_2`.
        version: String,
        /// The certificates it sent.
        chain: Vec<Vec<u8>>,
    },
    /// A TLS server that refused the handshake with this alert before showing a certificate.
    TlsAlert {
        /// The alert description byte (RFC 8446 §6).
        description: u8,
    },
    /// Kafka without TLS: it answered `ApiVersions` in the clear.
    PlainKafka,
    /// A MySQL/MariaDB server.
    Mysql {
        /// The version in its greeting, escaped and cut ([`quote`]).
        version: String,
        /// Whether it offers TLS (`CLIENT_SSL`).
        tls: bool,
        /// Its certificate chain, when TLS was offered and the handshake got that far.
        chain: Vec<Vec<u8>>,
    },
    /// It accepted the connection and closed it without a byte (an SSH forward whose target
    /// is down or wrong does this).
    Closed,
    /// It accepted the connection and said nothing within the timeout.
    Silent,
    /// Something else; its first bytes.
    Other(Vec<u8>),
    /// Nothing accepted the connection.
    Unreachable(String),
}

impl Speaks {
    /// Whether it is a TLS server (handshake or alert).
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Self::Tls { .. } | Self::TlsAlert { .. })
    }

    /// The server's leaf certificate (DER), if it showed one.
    pub(crate) fn leaf(&self) -> Option<&[u8]> {
        match self {
            Self::Tls { chain, .. } | Self::Mysql { chain, .. } => chain.first().map(Vec::as_slice),
            _ => None,
        }
    }

    /// What it speaks, in words.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Tls { version, .. } => format!("TLS ({version})"),
            Self::TlsAlert { description } => {
                format!("TLS (it refused our hello with alert {description})")
            }
            Self::PlainKafka => "plaintext Kafka".to_owned(),
            Self::Mysql { version, tls, .. } => format!(
                "MySQL protocol ({version}), {}",
                if *tls { "TLS offered" } else { "no TLS" }
            ),
            Self::Closed => "nothing: it accepted and closed the connection at once".to_owned(),
            Self::Silent => format!("nothing: no answer within {}s", TIMEOUT.as_secs()),
            Self::Other(b) => format!("something unknown (first bytes {})", hex(b)),
            Self::Unreachable(why) => format!("nothing: {why}"),
        }
    }
}

/// Bytes as `15 03 03 00 02`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Connects to the first address of `host:port` that accepts.
///
/// # Errors
/// The last connect error, or a resolution error.
pub(crate) fn connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A Kafka port: TLS first; if the answer is not TLS, plaintext `ApiVersions`. A plaintext
/// broker reads a ClientHello's first bytes as a ~369 MB request size and just closes the
/// connection, so a close (or silence) is tried in the clear too.
pub(crate) fn kafka(host: &str, port: u16, sni: &str) -> Speaks {
    match tls(host, port, sni) {
        first @ (Speaks::Other(_) | Speaks::Closed | Speaks::Silent) => {
            match kafka_plaintext(host, port) {
                Ok(reply) if kafka_wire::answers(&reply, CORRELATION_ID) => Speaks::PlainKafka,
                _ => first,
            }
        }
        other => other,
    }
}

/// A TLS ClientHello to `host:port` with SNI `sni` and no client certificate.
pub(crate) fn tls(host: &str, port: u16, sni: &str) -> Speaks {
    let mut sock = match connect(host, port, TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Speaks::Unreachable(e.to_string()),
    };
    handshake(&mut sock, sni)
}

/// Sends a plaintext `ApiVersions` v0 request and returns the first bytes of the reply.
///
/// A TLS listener answers with a TLS alert (`15 03 03 …`); a Java client reads those first four
/// bytes as the size of the response and allocates it (KAFKA-4090).
///
/// # Errors
/// When nothing accepts the connection or nothing comes back.
pub(crate) fn kafka_plaintext(host: &str, port: u16) -> io::Result<Vec<u8>> {
    let mut sock = connect(host, port, TIMEOUT)?;
    sock.write_all(&kafka_wire::api_versions_request(CORRELATION_ID))?;
    read_some(&mut sock, 16)
}

/// The SSH server's banner line (`SSH-2.0-OpenSSH_9.2p1 …`), escaped and cut ([`quote`]).
///
/// # Errors
/// When nothing accepts the connection or it sends no banner.
pub(crate) fn ssh_banner(host: &str, port: u16) -> io::Result<String> {
    let mut sock = connect(host, port, TIMEOUT)?;
    let bytes = read_some(&mut sock, 255)?;
    let text = String::from_utf8_lossy(&bytes);
    // Sent before any host key is checked: anyone on the path may have written it.
    Ok(quote(text.lines().next().unwrap_or_default().trim()))
}

/// A MySQL port: the greeting, then `SSLRequest` and a TLS handshake when TLS is offered.
pub(crate) fn mysql(host: &str, port: u16, sni: &str) -> Speaks {
    let mut sock = match connect(host, port, TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Speaks::Unreachable(e.to_string()),
    };
    let first = match read_packet(&mut sock) {
        Ok(p) => p,
        Err(e) if is_timeout(&e) => return Speaks::Silent,
        Err(_) => return Speaks::Closed,
    };
    let Some(greeting) = Greeting::parse(&first) else {
        return Speaks::Other(first.into_iter().take(16).collect());
    };
    if !greeting.tls {
        return Speaks::Mysql {
            version: greeting.version,
            tls: false,
            chain: Vec::new(),
        };
    }
    let chain = match sock.write_all(&ssl_request()) {
        Ok(()) => match handshake(&mut sock, sni) {
            Speaks::Tls { chain, .. } => chain,
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    };
    Speaks::Mysql {
        version: greeting.version,
        tls: true,
        chain,
    }
}

/// The parts of a MySQL "initial handshake" packet (protocol 10) the doctor needs.
#[derive(Debug, PartialEq, Eq)]
struct Greeting {
    version: String,
    tls: bool,
}

/// `CLIENT_SSL` in the capability flags.
const CLIENT_SSL: u32 = 0x0800;

impl Greeting {
    /// Parses the payload (without the 4-byte header).
    fn parse(p: &[u8]) -> Option<Self> {
        if p.first() != Some(&10) {
            return None;
        }
        let rest = &p[1..];
        let nul = rest.iter().position(|b| *b == 0)?;
        let version = String::from_utf8_lossy(&rest[..nul]).into_owned();
        // connection id (4), auth data part 1 (8), filler (1), then the low capability bytes.
        let caps_at = nul + 1 + 4 + 8 + 1;
        let low = rest.get(caps_at..caps_at + 2)?;
        let caps = u32::from(u16::from_le_bytes([low[0], low[1]]));
        // MariaDB prefixes its version with `5.5.5-` for old clients. The rest is the server's
        // word, up to 64 kB of it, quoted in reports and notes.
        let version = quote(version.strip_prefix("5.5.5-").unwrap_or(&version));
        Some(Self {
            version,
            tls: caps & CLIENT_SSL != 0,
        })
    }
}

/// `SSLRequest`: capabilities, max packet, charset, 23 zero bytes; sequence id 1.
fn ssl_request() -> Vec<u8> {
    const CLIENT_LONG_PASSWORD: u32 = 0x1;
    const CLIENT_PROTOCOL_41: u32 = 0x200;
    const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
    let caps = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION;
    let mut payload = Vec::with_capacity(32);
    payload.extend_from_slice(&caps.to_le_bytes());
    payload.extend_from_slice(&(16u32 << 20).to_le_bytes());
    payload.push(33); // utf8_general_ci
    payload.extend_from_slice(&[0; 23]);
    let mut out = vec![32, 0, 0, 1];
    out.extend_from_slice(&payload);
    out
}

fn read_packet(sock: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut header = [0u8; 4];
    sock.read_exact(&mut header)?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0u8; len.min(64 * 1024)];
    sock.read_exact(&mut payload)?;
    Ok(payload)
}

fn read_some(sock: &mut TcpStream, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; max];
    let n = sock.read(&mut buf)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed without a byte",
        ));
    }
    buf.truncate(n);
    Ok(buf)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Drives a rustls handshake on `sock` and says what came back.
fn handshake(sock: &mut TcpStream, sni: &str) -> Speaks {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let recorder = Arc::new(Recorder {
        chain: Mutex::new(Vec::new()),
        provider: provider.clone(),
    });
    let config =
        match ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
            Ok(b) => b
                .dangerous()
                .with_custom_certificate_verifier(recorder.clone())
                .with_no_client_auth(),
            Err(e) => return Speaks::Unreachable(format!("cannot set up TLS: {e}")),
        };
    let name = ServerName::try_from(sni.trim_matches(['[', ']']).to_owned())
        .unwrap_or_else(|_| ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let mut conn = match ClientConnection::new(Arc::new(config), name) {
        Ok(c) => c,
        Err(e) => return Speaks::Unreachable(format!("cannot set up TLS: {e}")),
    };
    let mut io = Recording {
        sock,
        first: Vec::new(),
    };
    let deadline = Instant::now() + TIMEOUT;
    let mut error = None;
    while conn.is_handshaking() && Instant::now() < deadline {
        match conn.complete_io(&mut io) {
            Ok((0, 0)) => break,
            Ok(_) => {}
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let chain = recorder.chain.lock().map(|c| c.clone()).unwrap_or_default();
    if !conn.is_handshaking() || !chain.is_empty() {
        conn.send_close_notify();
        let _ = conn.write_tls(&mut io);
        let version = conn
            .protocol_version()
            .map(|v| format!("{v:?}").replace("TLSv1_", "TLS 1."))
            .unwrap_or_else(|| "TLS".to_owned());
        return Speaks::Tls { version, chain };
    }
    match io.first.as_slice() {
        [] => match error {
            Some(e) if is_timeout(&e) => Speaks::Silent,
            _ if Instant::now() >= deadline => Speaks::Silent,
            _ => Speaks::Closed,
        },
        // An alert record: type 0x15, version, length, level, description.
        [0x15, 0x03, _, _, _, _, description, ..] => Speaks::TlsAlert {
            description: *description,
        },
        [0x16, 0x03, ..] => Speaks::Tls {
            version: "TLS".to_owned(),
            chain,
        },
        other => Speaks::Other(other.to_vec()),
    }
}

/// A socket that remembers the first bytes read from it.
struct Recording<'a> {
    sock: &'a mut TcpStream,
    first: Vec<u8>,
}

impl Read for Recording<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        let room = 16usize.saturating_sub(self.first.len());
        self.first.extend_from_slice(&buf[..n.min(room)]);
        Ok(n)
    }
}

impl Write for Recording<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// Accepts any server certificate and keeps the chain: the doctor judges it afterwards against
/// what it expects (names, issuer), and sends nothing secret over this connection.
#[derive(Debug)]
struct Recorder {
    chain: Mutex<Vec<Vec<u8>>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Ok(mut c) = self.chain.lock() {
            c.clear();
            c.push(end_entity.to_vec());
            c.extend(intermediates.iter().map(|d| d.to_vec()));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A one-shot server on 127.0.0.1 that reads a little, writes `reply`, and closes.
    fn serve(reply: &'static [u8]) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for _ in 0..2 {
                if let Ok((mut s, _)) = l.accept() {
                    let mut buf = [0u8; 512];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(reply);
                }
            }
        });
        port
    }

    #[test]
    fn tells_an_alert_from_plaintext_kafka_and_silence() {
        let port = serve(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50]);
        assert_eq!(
            tls("127.0.0.1", port, "localhost"),
            Speaks::TlsAlert { description: 0x50 }
        );

        // Plaintext Kafka: a frame with our correlation id (two connections: TLS, then ApiVersions).
        let port = serve(&[0, 0, 0, 6, 0, 0, 0, 1, 0, 0]);
        assert_eq!(kafka("127.0.0.1", port, "localhost"), Speaks::PlainKafka);

        let port = serve(b"");
        assert_eq!(tls("127.0.0.1", port, "localhost"), Speaks::Closed);

        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        drop(l);
        assert!(matches!(
            tls("127.0.0.1", port, "localhost"),
            Speaks::Unreachable(_)
        ));
    }

    #[test]
    fn parses_a_mariadb_greeting() {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.19-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&[1, 0, 0, 0]); // connection id
        p.extend_from_slice(b"abcdefgh"); // auth data
        p.push(0);
        p.extend_from_slice(&0xfffeu16.to_le_bytes()); // caps with CLIENT_SSL (0x0800)
        let g = Greeting::parse(&p).expect("greeting");
        assert_eq!(g.version, "10.11.19-MariaDB-0+deb12u1");
        assert!(g.tls);
        let n = p.len();
        p[n - 1] = 0xf7; // 0xf7fe: without 0x0800
        assert!(!Greeting::parse(&p).expect("greeting").tls);
        assert!(Greeting::parse(b"\xffno").is_none());
        assert_eq!(ssl_request().len(), 36);
    }
}
