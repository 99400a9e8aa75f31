//! MySQL through the local endpoint: the client speaks plaintext MySQL to 127.0.0.1 with no
//! SSL settings and no password; the endpoint does the TLS part of the handshake for it with
//! the profile's certificate (the server's certificate checked against the profile's CA and
//! its name), so the server logs the client in as the certificate's account.
//!
//! The MySQL protocol starts TLS *inside* its handshake, so the endpoint takes part in it:
//! 1. the server's greeting goes to the client without `CLIENT_SSL` (this side is plaintext);
//! 2. the client's handshake response arrives in the clear; its first 32 bytes are exactly an
//!    `SSLRequest` (capability flags, packet size, character set, MariaDB's extended flags), which
//!    goes up with `CLIENT_SSL` set, then TLS, then the whole response with `CLIENT_SSL` set;
//! 3. the server now counts one packet more than the client has seen (the `SSLRequest`), so
//!    until the login ends (the server's `OK` or `ERR`) sequence ids are shifted by one each
//!    way; after that every command starts again at 0 and bytes pass as they are.
//!
//! Only a bit and a sequence id are changed, in place: nothing of the client's or the server's
//! is rebuilt, so MariaDB's and MySQL's extensions pass untouched. docs/design.md says what that
//! means for `LOAD DATA LOCAL`, compression and `caching_sha2_password`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::{LocalEndpoint, Upstream, gate, relay};
use crate::text::quote;
use crate::tunnel::forward;
use crate::tunnel::live::{Counted, Meter, Way};

/// `CLIENT_PROTOCOL_41`: the handshake response this module understands (every client since
/// MySQL 4.1 sends it).
const CLIENT_PROTOCOL_41: u32 = 0x0200;
/// `CLIENT_SSL`: the client asks for (the server offers) TLS.
const CLIENT_SSL: u32 = 0x0800;
/// An `SSLRequest` is the first 32 bytes of a `HandshakeResponse41`.
const SSL_REQUEST: usize = 32;
/// The largest packet read while logging in (a greeting, a response with connection
/// attributes, an authentication exchange): real ones are a few hundred bytes.
const MAX_LOGIN_PACKET: usize = 1024 * 1024;
/// How long the channel, the greeting and the server's TLS handshake may take together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(25);
/// How long a client may take to answer the greeting.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// After the client closed its side, how long the server's last bytes are still passed on.
const LINGER: Duration = Duration::from_secs(5);
/// Read buffer per direction.
const BUFFER: usize = 64 * 1024;

/// Error codes the endpoint answers with, with their SQL states: server codes, because
/// clients take a code from the client library's range (2000–2999) in a server's packet as a
/// malformed packet.
const ER_UNKNOWN_ERROR: (u16, &str) = (1105, "HY000");
const ER_ACCESS_DENIED: (u16, &str) = (1045, "28000");
const ER_NOT_SUPPORTED_AUTH_MODE: (u16, &str) = (1251, "08004");
const ER_CON_COUNT_ERROR: (u16, &str) = (1040, "08004");

/// Serves `listener` until the task is aborted: every connection goes to `upstream` (MySQL as
/// the server sees it).
pub(crate) async fn serve(listener: TcpListener, upstream: Upstream, ep: Arc<LocalEndpoint>) {
    let upstream = Arc::new(upstream);
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                let (ep, upstream) = (ep.clone(), upstream.clone());
                tokio::spawn(async move { connection(socket, peer, &upstream, &ep).await });
            }
            Err(e) => {
                tracing::warn!(error = %e, "local endpoint (MySQL): accept failed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Why a connection ends before the login is relayed: told to the client as an `ERR` packet
/// (with the sequence id it expects next) and logged.
struct Refusal {
    code: (u16, &'static str),
    why: String,
    /// The sequence id the client expects next; 0 before the greeting.
    seq: u8,
}

impl Refusal {
    fn before_greeting(code: (u16, &'static str), why: String) -> Self {
        Self { code, why, seq: 0 }
    }

    fn after_response(code: (u16, &'static str), why: String) -> Self {
        Self { code, why, seq: 2 }
    }
}

async fn connection(mut client: TcpStream, peer: SocketAddr, to: &Upstream, ep: &LocalEndpoint) {
    let Ok(local) = client.local_addr() else {
        return;
    };
    let _ = client.set_nodelay(true);
    let port = local.port();
    // The gate logs its refusals; the client is told in the packet it reads first.
    let _permit = match ep.gate().admit(local, peer).await {
        Ok(permit) => permit,
        Err(refusal) => {
            let (code, why) = match refusal {
                gate::Refusal::Stranger(_) => (
                    ER_ACCESS_DENIED,
                    "this endpoint serves only the account that runs the tunnel; use your own \
                     profile (`shiqi-connect setup`)"
                        .to_owned(),
                ),
                gate::Refusal::Full(max) => (
                    ER_CON_COUNT_ERROR,
                    format!(
                        "{max} connections are open, the most this profile allows \
                         (`max_connections` in profile.json)"
                    ),
                ),
                gate::Refusal::Gone => return,
            };
            let _ = write_packet(&mut client, 0, &err_payload(code, &why, false)).await;
            return;
        }
    };
    let meter = ep.shared().live.port(port);
    let _open = meter.open();
    let outcome = match login(&mut client, peer, port, to, ep).await {
        Ok(Some(server)) => splice(client, server, meter).await,
        Ok(None) => Ok(()),
        Err(r) => {
            // Before the greeting a client reads an error without SQL state; after it, with.
            let packet = err_payload(r.code, &r.why, r.seq > 0);
            let _ = write_packet(&mut client, r.seq, &packet).await;
            Err(r.why)
        }
    };
    match outcome {
        Ok(()) => tracing::debug!(port, %peer, "closed"),
        Err(why) => tracing::warn!(
            port,
            %peer,
            "local endpoint (MySQL): closing one connection: {why}"
        ),
    }
}

type ServerStream = tokio_rustls::client::TlsStream<russh::ChannelStream<russh::client::Msg>>;

/// The handshake up to the client's response sent over TLS; `None` when the server refused
/// the connection in its greeting (its `ERR` went to the client as it was).
async fn login(
    client: &mut TcpStream,
    peer: SocketAddr,
    port: u16,
    to: &Upstream,
    ep: &LocalEndpoint,
) -> Result<Option<ServerStream>, Refusal> {
    let unreachable = |why: String| Refusal::before_greeting(ER_UNKNOWN_ERROR, why);
    let tls = ep
        .tls()
        .config()
        .map(tokio_rustls::TlsConnector::from)
        .map_err(|why| unreachable(format!("the profile has no TLS identity: {why}")))?;
    let name = ServerName::try_from(to.host.to_string())
        .map_err(|_| unreachable(format!("`{}` is not a TLS server name", to.host)))?;
    let target = format!("{}:{}", to.host, to.port);

    let greet = async {
        let Some(mut channel) =
            forward::open(ep.shared(), (to.host.as_str(), to.port.get()), peer, port).await
        else {
            return Err(unreachable(format!(
                "the tunnel cannot reach MySQL at {target} on the server (`shiqi-connect \
                 tunnel status` says why)"
            )));
        };
        let greeting = read_packet(&mut channel, MAX_LOGIN_PACKET)
            .await
            .map_err(|why| unreachable(format!("MySQL at {target}: {why}")))?
            .ok_or_else(|| unreachable(format!("MySQL at {target} closed before greeting")))?;
        Ok((channel, greeting))
    };
    let (mut channel, (seq, greeting)) = tokio::time::timeout(CONNECT_TIMEOUT, greet)
        .await
        .map_err(|_| {
            unreachable(format!(
                "MySQL at {target} did not greet within {}s",
                CONNECT_TIMEOUT.as_secs()
            ))
        })??;
    if greeting.first() == Some(&0xff) {
        // The server refuses this host or has too many connections: its words, as they are.
        let _ = write_packet(client, seq, &greeting).await;
        return Ok(None);
    }
    let plain = plain_greeting(&greeting)
        .map_err(|why| unreachable(format!("MySQL at {target}: {why}")))?;
    write_packet(client, seq, &plain)
        .await
        .map_err(|e| unreachable(format!("cannot answer the client: {e}")))?;

    let Some((seq, mut response)) =
        tokio::time::timeout(CLIENT_TIMEOUT, read_packet(client, MAX_LOGIN_PACKET))
            .await
            .map_err(|_| {
                Refusal::after_response(ER_UNKNOWN_ERROR, "the client did not log in".into())
            })?
            .map_err(|why| Refusal::after_response(ER_UNKNOWN_ERROR, format!("client: {why}")))?
    else {
        // A client that only looks at the greeting (`jdbc`, `datagrip`, a health check).
        tracing::debug!(port, %peer, "the client left after the greeting");
        return Ok(None);
    };
    with_ssl_flag(&mut response)
        .map_err(|why| Refusal::after_response(ER_NOT_SUPPORTED_AUTH_MODE, why.to_owned()))?;

    let up = async {
        write_packet(&mut channel, seq, &response[..SSL_REQUEST]).await?;
        let mut server = tls.connect(name, channel).await?;
        write_packet(&mut server, seq.wrapping_add(1), &response).await?;
        Ok::<_, std::io::Error>(server)
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, up).await {
        Ok(Ok(server)) => Ok(Some(server)),
        Ok(Err(e)) => Err(match relay::refused(&e) {
            Some(why) => Refusal::after_response(ER_ACCESS_DENIED, why),
            None => Refusal::after_response(
                ER_UNKNOWN_ERROR,
                format!(
                    "TLS with MySQL at {target} failed: {} (its certificate must come from the \
                     profile's CA and name `{}`)",
                    quote(&e.to_string()),
                    to.host
                ),
            ),
        }),
        Err(_) => Err(Refusal::after_response(
            ER_UNKNOWN_ERROR,
            format!(
                "TLS with MySQL at {target} took over {}s",
                CONNECT_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// The rest of the login with sequence ids shifted (see the module's notes), then bytes both
/// ways until either side ends.
async fn splice(client: TcpStream, server: ServerStream, meter: Arc<Meter>) -> Result<(), String> {
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = tokio::io::split(server);
    let mut client_w = Counted::new(client_w, vec![meter.clone()], Way::Down);
    let mut server_w = Counted::new(server_w, vec![meter], Way::Up);
    let mut client_r = BufReader::with_capacity(BUFFER, client_r);
    let mut server_r = BufReader::with_capacity(BUFFER, server_r);
    let logged_in = AtomicBool::new(false);
    // What the client expects next: it sent its response as 1.
    let client_expects = AtomicU8::new(2);

    let up = async {
        loop {
            let mut header = [0u8; 4];
            if let Err(e) = client_r.read_exact(&mut header).await {
                return if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    Ok(())
                } else {
                    Err(format!("client side: {e}"))
                };
            }
            if logged_in.load(Ordering::Acquire) {
                // A command (possibly compressed, with a longer header): from here on bytes.
                server_w
                    .write_all(&header)
                    .await
                    .map_err(|e| format!("server side: {e}"))?;
                break;
            }
            let len = packet_len(&header);
            if len > MAX_LOGIN_PACKET {
                return Err(format!("client side: a login packet of {len} bytes"));
            }
            let mut payload = vec![0; len];
            client_r
                .read_exact(&mut payload)
                .await
                .map_err(|e| format!("client side: {e}"))?;
            client_expects.store(header[3].wrapping_add(1), Ordering::Release);
            header[3] = header[3].wrapping_add(1);
            server_w
                .write_all(&header)
                .await
                .map_err(|e| format!("server side: {e}"))?;
            server_w
                .write_all(&payload)
                .await
                .map_err(|e| format!("server side: {e}"))?;
            server_w
                .flush()
                .await
                .map_err(|e| format!("server side: {e}"))?;
        }
        tokio::io::copy(&mut client_r, &mut server_w)
            .await
            .map_err(|e| format!("client side: {e}"))?;
        let _ = server_w.shutdown().await;
        Ok(())
    };

    let down = async {
        loop {
            let (seq, payload) = match read_packet(&mut server_r, MAX_LOGIN_PACKET).await {
                Ok(Some(p)) => p,
                Ok(None) => return Err("the server closed during the login".to_owned()),
                Err(e) => {
                    // Under TLS 1.3 a refused certificate arrives here, as an alert.
                    let (code, why) = match relay::refused(&e) {
                        Some(why) => (ER_ACCESS_DENIED, why),
                        None => (ER_UNKNOWN_ERROR, relay::explain(&e)),
                    };
                    let seq = client_expects.load(Ordering::Acquire);
                    let _ = write_packet(&mut client_w, seq, &err_payload(code, &why, true)).await;
                    return Err(format!("server side: {why}"));
                }
            };
            // The login ends with the server's OK or ERR; other packets (an auth switch, more
            // auth data) ask the client for more.
            let ended = matches!(payload.first(), Some(0x00 | 0xff));
            if ended {
                logged_in.store(true, Ordering::Release);
            }
            let seq = seq.wrapping_sub(1);
            client_expects.store(seq.wrapping_add(1), Ordering::Release);
            write_packet(&mut client_w, seq, &payload)
                .await
                .map_err(|e| format!("client side: {e}"))?;
            if ended {
                break;
            }
        }
        match tokio::io::copy(&mut server_r, &mut client_w).await {
            // MariaDB ends a session (after COM_QUIT, or its wait_timeout) by closing TCP
            // without TLS's close_notify: the client gets the same end of stream either way.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
            Err(e) => Err(format!("server side: {e}")),
            Ok(_) => Ok(()),
        }
    };

    tokio::pin!(up, down);
    tokio::select! {
        r = &mut down => r,
        r = &mut up => match r {
            // The client is done sending: its last answers may still be on the way.
            Ok(()) => tokio::time::timeout(LINGER, &mut down).await.unwrap_or(Ok(())),
            Err(e) => Err(e),
        },
    }
}

/// The greeting as the client sees it: the server's, with `CLIENT_SSL` cleared.
///
/// # Errors
/// Not a protocol-10 greeting, cut short, or a server that offers no TLS (the endpoint never
/// sends the client's login in the clear).
fn plain_greeting(greeting: &[u8]) -> Result<Vec<u8>, String> {
    // Protocol version, the server's version (NUL-terminated), connection id (4), the first
    // 8 bytes of the scramble and a filler byte; then the lower capability flags.
    if greeting.first() != Some(&10) {
        return Err("not a MySQL protocol-10 greeting".to_owned());
    }
    let nul = greeting
        .iter()
        .skip(1)
        .position(|b| *b == 0)
        .ok_or("a greeting without its version's end")?;
    let lower = 1 + nul + 1 + 4 + 8 + 1;
    let flags = greeting
        .get(lower..lower + 2)
        .ok_or("a greeting cut short")?;
    let flags = u16::from_le_bytes([flags[0], flags[1]]);
    if u32::from(flags) & CLIENT_SSL == 0 {
        return Err(
            "the server offers no TLS; the endpoint never sends a login in the clear \
             (give MySQL `ssl_cert`/`ssl_key` as `shiqi-ca-agent server-cert` prints them)"
                .to_owned(),
        );
    }
    let mut out = greeting.to_vec();
    let cleared = (u32::from(flags) & !CLIENT_SSL).to_le_bytes();
    out[lower] = cleared[0];
    out[lower + 1] = cleared[1];
    Ok(out)
}

/// Sets `CLIENT_SSL` in a client's `HandshakeResponse41` (which then starts with the
/// `SSLRequest` to send first).
///
/// # Errors
/// The client asked for TLS itself, or sent an old or short response.
fn with_ssl_flag(response: &mut [u8]) -> Result<(), &'static str> {
    let Some(flags) = response.get(..4) else {
        return Err("a handshake response cut short");
    };
    let flags = u32::from_le_bytes([flags[0], flags[1], flags[2], flags[3]]);
    if flags & CLIENT_SSL != 0 {
        return Err(
            "the client asked for TLS, but the tunnel's local endpoint speaks plaintext on \
             127.0.0.1 and does TLS itself: drop the client's SSL settings (ssl-mode=DISABLED)",
        );
    }
    if flags & CLIENT_PROTOCOL_41 == 0 || response.len() < SSL_REQUEST {
        return Err("the client speaks the pre-4.1 protocol; use a current MySQL client");
    }
    response[..4].copy_from_slice(&(flags | CLIENT_SSL).to_le_bytes());
    Ok(())
}

/// An `ERR` packet's payload; the SQL state only when the client speaks 4.1 (after the
/// greeting).
fn err_payload((code, state): (u16, &str), message: &str, sql_state: bool) -> Vec<u8> {
    let mut out = vec![0xff];
    out.extend_from_slice(&code.to_le_bytes());
    if sql_state {
        out.push(b'#');
        out.extend_from_slice(state.as_bytes());
    }
    out.extend_from_slice(format!("shiqi-connect tunnel: {message}").as_bytes());
    out
}

fn packet_len(header: &[u8; 4]) -> usize {
    usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16
}

/// One packet's sequence id and payload; `None` at a clean end of stream.
async fn read_packet<R: AsyncRead + Unpin>(
    from: &mut R,
    max: usize,
) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut header = [0u8; 4];
    match from.read_exact(&mut header).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = packet_len(&header);
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a login packet of {len} bytes (at most {max})"),
        ));
    }
    let mut payload = vec![0; len];
    from.read_exact(&mut payload).await?;
    Ok(Some((header[3], payload)))
}

async fn write_packet<W: AsyncWrite + Unpin>(
    to: &mut W,
    seq: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|n| *n < 1 << 24)
        .ok_or_else(|| std::io::Error::other("a packet too large for one frame"))?
        .to_le_bytes();
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&[len[0], len[1], len[2], seq]);
    out.extend_from_slice(payload);
    to.write_all(&out).await?;
    to.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MariaDB 10.11 greeting's shape: version, id, scramble, flags with `CLIENT_SSL`.
    fn greeting(flags: u16) -> Vec<u8> {
        let mut g = vec![10];
        g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
        g.extend_from_slice(&7u32.to_le_bytes());
        g.extend_from_slice(b"abcdefgh\0");
        g.extend_from_slice(&flags.to_le_bytes());
        g.extend_from_slice(&[45, 2, 0, 0xff, 0x81, 21]);
        g.extend_from_slice(&[0; 6]);
        g.extend_from_slice(&[0x1d, 0, 0, 0]);
        g.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
        g
    }

    #[test]
    fn the_greeting_loses_only_the_ssl_flag() {
        let server = greeting(0xfffe);
        let plain = plain_greeting(&server).expect("greeting");
        let at = 1 + b"5.5.5-10.11.6-MariaDB".len() + 1 + 4 + 8 + 1;
        assert_eq!(
            u16::from_le_bytes([plain[at], plain[at + 1]]),
            0xfffe & !0x0800
        );
        let differing: Vec<usize> = (0..server.len())
            .filter(|i| server[*i] != plain[*i])
            .collect();
        assert_eq!(differing, vec![at + 1], "one byte changes, no more");

        let err = plain_greeting(&greeting(0xfffe & !0x0800)).expect_err("no TLS");
        assert!(err.contains("offers no TLS"), "{err}");
        assert!(plain_greeting(&[10, b'5', 0, 1, 2]).is_err(), "cut short");
        assert!(plain_greeting(&[9, 0]).is_err(), "old protocol");
        assert!(plain_greeting(&[10, b'5']).is_err(), "no NUL");
        assert!(plain_greeting(&[]).is_err());
    }

    #[test]
    fn the_response_asks_for_tls_and_keeps_the_rest() {
        let mut response = vec![0u8; 40];
        response[..4].copy_from_slice(&(0x000a_a20du32).to_le_bytes());
        response[28..32].copy_from_slice(&[1, 2, 3, 4]);
        let before = response.clone();
        with_ssl_flag(&mut response).expect("4.1 response");
        assert_eq!(
            u32::from_le_bytes([response[0], response[1], response[2], response[3]]),
            0x000a_a20d | CLIENT_SSL
        );
        assert_eq!(response[4..], before[4..]);

        let mut wants_tls = before.clone();
        wants_tls[1] |= 0x08;
        let err = with_ssl_flag(&mut wants_tls).expect_err("client TLS");
        assert!(err.contains("ssl-mode=DISABLED"), "{err}");
        let mut old = before.clone();
        old[1] &= !0x02;
        assert!(with_ssl_flag(&mut old).is_err(), "pre-4.1");
        assert!(with_ssl_flag(&mut [0, 2, 0]).is_err(), "short");
        assert!(
            with_ssl_flag(&mut before[..20].to_vec()).is_err(),
            "shorter than SSLRequest"
        );
    }

    #[test]
    fn errors_carry_the_state_only_after_the_greeting() {
        let before = err_payload(ER_UNKNOWN_ERROR, "x", false);
        assert_eq!(&before[..3], &[0xff, 0x51, 0x04]);
        assert!(before[3..].starts_with(b"shiqi-connect tunnel: x"));
        let after = err_payload(ER_ACCESS_DENIED, "y", true);
        assert_eq!(&after[3..9], b"#28000");
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "a test builds its own runtime")]
    fn packets_are_bounded_and_framed() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut out = Vec::new();
            write_packet(&mut out, 3, b"hello").await.expect("write");
            assert_eq!(out, [5, 0, 0, 3, b'h', b'e', b'l', b'l', b'o']);
            let mut r = &out[..];
            assert_eq!(
                read_packet(&mut r, 16).await.expect("read"),
                Some((3, b"hello".to_vec()))
            );
            assert_eq!(read_packet(&mut r, 16).await.expect("eof"), None);
            let mut big = &[0xff, 0xff, 0xff, 0][..];
            assert!(read_packet(&mut big, 16).await.is_err());
            let mut cut = &[5, 0, 0, 0, b'h'][..];
            assert!(read_packet(&mut cut, 16).await.is_err());
        });
    }
}
