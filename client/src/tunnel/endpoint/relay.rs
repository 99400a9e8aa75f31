//! One client connection of the local endpoint: plaintext Kafka from the client, TLS with the
//! profile's certificate to the broker through a `direct-tcpip` channel, frames relayed both
//! ways. Requests go up unchanged; answers come down unchanged unless they name brokers
//! ([`rewrite::response`]). Kafka answers in request order on a connection, so a queue of the
//! requests still owed an answer pairs each answer with its request.
//!
//! A failure ends this one connection with a log line (never the contents): an unparsable
//! answer, a frame over the limit, an answer to no request, a refused channel or handshake.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::pki_types::ServerName;
use shiqi_kafka::frame::{self, Frame};
use shiqi_kafka::message;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};

use super::rewrite::{self, Node, Request};
use super::{LocalEndpoint, Role};
use crate::tunnel::forward;
use crate::tunnel::live::{self, Counted, Way};

/// The largest request a client may send (the broker's own default).
const MAX_REQUEST: usize = frame::MAX_RELAYED_REQUEST;
/// The largest answer passed on.
const MAX_ANSWER: usize = frame::MAX_RELAYED_ANSWER;
/// How long one broker may take to open a channel and finish TLS (the SSH connection coming
/// back is waited for inside, up to its own limit).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(25);
/// Read and write buffers per direction: two full SSH packets.
const BUFFER: usize = 64 * 1024;

/// Answers being decoded for a rewrite, all connections together, counted in KiB of their
/// frames: at most one largest answer's worth at a time. Decoding allocates a few times a
/// frame's bytes (a struct per entry), so without this every open connection could hold that at
/// once; answers that need no rewrite are never decoded and pass at once.
static DECODING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_ANSWER / 1024);

/// Serves `listener` until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, role: Role, ep: Arc<LocalEndpoint>) {
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                let ep = ep.clone();
                tokio::spawn(async move { connection(socket, peer, role, &ep).await });
            }
            Err(e) => {
                tracing::warn!(?role, error = %e, "local endpoint: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
}

async fn connection(socket: TcpStream, peer: SocketAddr, role: Role, ep: &Arc<LocalEndpoint>) {
    let Ok(local) = socket.local_addr() else {
        return;
    };
    // Kafka has no way to tell a client why before it sends a request: a refused one is closed
    // (and logged by the gate).
    let Ok(_permit) = ep.gate().admit(local, peer).await else {
        return;
    };
    let _ = socket.set_nodelay(true);
    let port = local.port();
    let client = ep.shared().live.client(port, peer);
    let candidates = ep.upstreams(role);
    if candidates.is_empty() {
        tracing::warn!(
            port,
            ?role,
            "local endpoint: no broker address known for this port yet; closing the client \
             connection"
        );
        return;
    }
    let tls = match ep.tls().config() {
        Ok(c) => tokio_rustls::TlsConnector::from(c),
        Err(why) => {
            tracing::warn!(port, "local endpoint: no TLS identity: {why}");
            return;
        }
    };
    // The bootstrap port starts at a different broker each time, so one broker that does not
    // answer costs each client at most one timeout, not every connection.
    let start = usize::from(peer.port()) % candidates.len();
    let mut upstream = None;
    for u in candidates[start..].iter().chain(&candidates[..start]) {
        let Ok(name) = ServerName::try_from(u.host.to_string()) else {
            continue;
        };
        let target = (u.host.as_str(), u.port.get());
        let attempt = async {
            let channel = forward::open(ep.shared(), target, peer, port).await?;
            match tls.connect(name, channel).await {
                Ok(stream) => Some(stream),
                Err(e) => {
                    tracing::warn!(
                        port,
                        broker = %format!("{}:{}", u.host, u.port),
                        error = %e,
                        "local endpoint: TLS with the broker failed"
                    );
                    None
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Some(stream)) => {
                upstream = Some((u.clone(), stream));
                break;
            }
            Ok(None) => {}
            Err(_) => tracing::warn!(
                port,
                broker = %format!("{}:{}", u.host, u.port),
                "local endpoint: the broker did not answer within {}s",
                CONNECT_TIMEOUT.as_secs()
            ),
        }
    }
    let Some((to, stream)) = upstream else {
        return;
    };
    tracing::debug!(port, %peer, broker = %format!("{}:{}", to.host, to.port), "relaying");
    client.relayed_to(format!("{}:{}", to.host, to.port));
    let (client_r, client_w) = socket.into_split();
    let (broker_r, broker_w) = tokio::io::split(stream);
    let owed = Arc::new(Mutex::new(VecDeque::new()));
    let up = requests(
        BufReader::with_capacity(BUFFER, client_r),
        Counted::new(broker_w, client.meters(), Way::Up),
        &owed,
        &client,
    );
    let down = answers(
        BufReader::with_capacity(BUFFER, broker_r),
        BufWriter::with_capacity(BUFFER, Counted::new(client_w, client.meters(), Way::Down)),
        &owed,
        ep,
    );
    let ended = tokio::select! {
        r = up => r.map_err(|why| format!("client side: {why}")),
        r = down => r.map_err(|why| format!("broker side: {why}")),
    };
    match ended {
        Ok(()) => tracing::debug!(port, %peer, "closed"),
        Err(why) => tracing::warn!(
            port,
            %peer,
            broker = %format!("{}:{}", to.host, to.port),
            "local endpoint: closing one connection: {why}"
        ),
    }
}

type Owed = Arc<Mutex<VecDeque<Request>>>;

/// Client to broker: each request is noted (when it will be answered) before it is sent, and
/// counted by its API for `--watch`.
async fn requests<R, W>(
    mut from: R,
    mut to: W,
    owed: &Owed,
    client: &live::Client,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while let Some(frame) = read_frame(&mut from, MAX_REQUEST).await? {
        let request = Request::peek(&frame.body())?;
        client.request(request.api_key);
        if request.answered {
            owed.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(request);
        }
        to.write_all(frame.as_bytes())
            .await
            .map_err(|e| format!("cannot send: {e}"))?;
        to.flush().await.map_err(|e| format!("cannot send: {e}"))?;
    }
    Ok(())
}

/// Broker to client: each answer is paired with the oldest request owed one and rewritten when
/// it names brokers.
async fn answers<R, W>(
    mut from: R,
    mut to: W,
    owed: &Owed,
    ep: &Arc<LocalEndpoint>,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while let Some(frame) = read_frame(&mut from, MAX_ANSWER).await? {
        let body = frame.body();
        let Some(correlation_id) = message::correlation(&body) else {
            return Err("an answer shorter than its header".to_owned());
        };
        let request = owed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let request = match request {
            Some(r) if r.correlation_id == correlation_id => r,
            _ => return Err(format!("an answer ({correlation_id}) to no request sent")),
        };
        let mut ports = EndpointPorts(ep);
        let decoding = if rewrite::rewrites(request.api_key, request.version) {
            // A frame is at most MAX_ANSWER, so its share never exceeds the whole budget.
            let kib = u32::try_from(body.len() / 1024 + 1).unwrap_or(u32::MAX);
            let all = u32::try_from(MAX_ANSWER / 1024).unwrap_or(u32::MAX);
            Some(
                DECODING
                    .acquire_many(kib.min(all))
                    .await
                    .map_err(|_| "the decoding budget is closed")?,
            )
        } else {
            None
        };
        let rewritten = rewrite::response(&request, &body, &mut ports)?;
        // Released before writing: a slow client must not hold up other connections' answers.
        drop(decoding);
        match rewritten {
            None => to.write_all(frame.as_bytes()).await,
            Some(rewritten) => {
                let out = frame::prefixed(&rewritten).map_err(|_| "an answer too large")?;
                to.write_all(&out).await
            }
        }
        .map_err(|e| format!("cannot answer the client: {e}"))?;
        to.flush()
            .await
            .map_err(|e| format!("cannot answer the client: {e}"))?;
    }
    Ok(())
}

struct EndpointPorts<'a>(&'a Arc<LocalEndpoint>);

impl rewrite::Ports for EndpointPorts<'_> {
    fn local_port(&mut self, node: &Node) -> Option<u16> {
        self.0.port_for(node)
    }
}

/// One length-prefixed frame of at most `max` bytes; `None` at a clean end of stream.
async fn read_frame<R: AsyncRead + Unpin>(
    from: &mut R,
    max: usize,
) -> Result<Option<Frame>, String> {
    match frame::read(from, max).await {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.at_boundary() => Ok(None),
        Err(e) => Err(e.io().and_then(refused).unwrap_or_else(|| e.to_string())),
    }
}

/// A read error in words; a server's TLS alert about the certificate says what it means (under
/// TLS 1.3 the server judges the client certificate after the handshake, so a refusal arrives
/// as an alert on the first read).
pub(super) fn explain(e: &std::io::Error) -> String {
    refused(e).unwrap_or_else(|| format!("cannot read: {e}"))
}

/// What a TLS alert about the profile's certificate means, when `e` is one.
pub(super) fn refused(e: &std::io::Error) -> Option<String> {
    use rustls::AlertDescription as A;
    let alert = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|r| match r {
            rustls::Error::AlertReceived(a) => Some(*a),
            _ => None,
        })?;
    matches!(
        alert,
        A::CertificateUnknown
            | A::BadCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::UnknownCA
            | A::AccessDenied
    )
    .then(|| {
        format!(
            "the server refused the profile's certificate ({alert:?}): revoked, expired or \
             from another CA (`shiqi-connect doctor` says which)"
        )
    })
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_read_whole_and_bounded() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let _ = b.write_all(&[0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 9, 1]).await;
        });
        let f = read_frame(&mut a, 16).await.expect("frame").expect("some");
        assert_eq!(&f.as_bytes()[..], [0, 0, 0, 3, 1, 2, 3]);
        let err = read_frame(&mut a, 16).await.expect_err("cut short");
        assert!(err.contains("ended inside"), "{err}");

        let (mut a, mut b) = tokio::io::duplex(64);
        tokio::spawn(async move {
            let _ = b.write_all(&[0x7f, 0xff, 0xff, 0xff]).await;
        });
        let err = read_frame(&mut a, MAX_ANSWER).await.expect_err("too big");
        assert!(err.contains("over the"), "{err}");
        let (mut a, b) = tokio::io::duplex(64);
        drop(b);
        assert_eq!(read_frame(&mut a, 16).await, Ok(None));
    }
}
