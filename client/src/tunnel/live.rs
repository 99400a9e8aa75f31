//! The running tunnel's live figures, for `tunnel status --watch`: per local port the
//! connections open and the bytes each way, each local-endpoint client with the Kafka requests it
//! sent, the SSH connection's count, and the daemon's state as it last saved it.
//!
//! The pump and the endpoint's relays add to atomics as they move bytes (no lock on the data
//! path; a client's request mix takes one uncontended lock per request). Nothing is kept of a
//! connection that has closed but its port's totals. A [`Snapshot`] is made only when a watcher
//! asks, over the daemon's control channel (`os::control`), so nothing is written to disk once a
//! second.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tokio::io::AsyncWrite;

use crate::tunnel::State;

/// Counters of one local port, or of one client connection.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    open: AtomicU64,
    total: AtomicU64,
    up: AtomicU64,
    down: AtomicU64,
}

impl Meter {
    /// Counts a connection opened; it counts as open until the guard is dropped.
    pub(crate) fn open(self: &Arc<Self>) -> Open {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
        Open(self.clone())
    }

    /// Bytes sent towards the server.
    pub(crate) fn up(&self, n: u64) {
        self.up.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes sent towards the local client.
    pub(crate) fn down(&self, n: u64) {
        self.down.fetch_add(n, Ordering::Relaxed);
    }

    fn figures(&self, port: u16) -> PortFigures {
        PortFigures {
            port,
            open: self.open.load(Ordering::Relaxed),
            total: self.total.load(Ordering::Relaxed),
            up: self.up.load(Ordering::Relaxed),
            down: self.down.load(Ordering::Relaxed),
        }
    }
}

/// One open connection of a [`Meter`].
#[derive(Debug)]
pub(crate) struct Open(Arc<Meter>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Which way a [`Counted`] writer's bytes go.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Way {
    /// Towards the server.
    Up,
    /// Towards the local client.
    Down,
}

/// A writer that adds what it writes to its meters.
pub(crate) struct Counted<W> {
    inner: W,
    meters: Vec<Arc<Meter>>,
    way: Way,
}

impl<W> Counted<W> {
    /// Wraps `inner`, counting its bytes `way` on every meter of `meters`.
    pub(crate) fn new(inner: W, meters: Vec<Arc<Meter>>, way: Way) -> Self {
        Self { inner, meters, way }
    }

    fn add(&self, n: usize) {
        let n = n as u64;
        for m in &self.meters {
            match self.way {
                Way::Up => m.up(n),
                Way::Down => m.down(n),
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Counted<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.add(n);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled {
            self.add(n);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// One client of the local endpoint while it is connected.
#[derive(Debug)]
struct ClientMeter {
    peer: SocketAddr,
    port: u16,
    since: OffsetDateTime,
    bytes: Arc<Meter>,
    broker: Mutex<Option<String>>,
    requests: Mutex<BTreeMap<i16, u64>>,
}

/// A connected endpoint client; dropping it forgets the client (its port keeps the totals).
#[derive(Debug)]
pub(crate) struct Client {
    live: Arc<Live>,
    id: u64,
    meter: Arc<ClientMeter>,
    _open: Open,
}

impl Client {
    /// The meters its bytes count on: its own and its port's.
    pub(crate) fn meters(&self) -> Vec<Arc<Meter>> {
        vec![self.meter.bytes.clone(), self.live.port(self.meter.port)]
    }

    /// Records which broker (`host:port` as advertised) it was relayed to.
    pub(crate) fn relayed_to(&self, broker: String) {
        *self
            .meter
            .broker
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(broker);
    }

    /// Counts one request of Kafka API `key`.
    pub(crate) fn request(&self, key: i16) {
        *self
            .meter
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default() += 1;
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        lock(&self.live.clients).remove(&self.id);
    }
}

/// Everything the daemon counts.
#[derive(Debug)]
pub(crate) struct Live {
    started: Instant,
    ports: Mutex<BTreeMap<u16, Arc<Meter>>>,
    clients: Mutex<BTreeMap<u64, Arc<ClientMeter>>>,
    next_client: AtomicU64,
    connections: AtomicU64,
    reconnects: AtomicU64,
    state: Mutex<Option<State>>,
}

impl Live {
    /// Nothing counted yet.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            ports: Mutex::default(),
            clients: Mutex::default(),
            next_client: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            state: Mutex::default(),
        })
    }

    /// The meter of local `port` (made at its first use).
    pub(crate) fn port(&self, port: u16) -> Arc<Meter> {
        lock(&self.ports).entry(port).or_default().clone()
    }

    /// Counts a new endpoint client of `port`, open until the result is dropped.
    pub(crate) fn client(self: &Arc<Self>, port: u16, peer: SocketAddr) -> Client {
        let meter = Arc::new(ClientMeter {
            peer,
            port,
            since: OffsetDateTime::now_utc(),
            bytes: Arc::default(),
            broker: Mutex::default(),
            requests: Mutex::default(),
        });
        let id = self.next_client.fetch_add(1, Ordering::Relaxed);
        lock(&self.clients).insert(id, meter.clone());
        let open = self.port(port).open();
        Client {
            live: self.clone(),
            id,
            meter,
            _open: open,
        }
    }

    /// The SSH connection now in use is the `n`th since the start.
    pub(crate) fn connection(&self, n: u64) {
        self.connections.store(n, Ordering::Relaxed);
    }

    /// The connection was lost and made again.
    pub(crate) fn reconnected(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// The daemon's state as it just saved it.
    pub(crate) fn state(&self, state: &State) {
        *lock(&self.state) = Some(state.clone());
    }

    /// Every figure at this moment.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let ports = lock(&self.ports)
            .iter()
            .map(|(port, m)| m.figures(*port))
            .collect();
        let mut clients: Vec<ClientFigures> = lock(&self.clients)
            .values()
            .map(|c| {
                let bytes = c.bytes.figures(c.port);
                ClientFigures {
                    peer: c.peer.to_string(),
                    port: c.port,
                    since: c.since,
                    broker: lock(&c.broker).clone(),
                    up: bytes.up,
                    down: bytes.down,
                    requests: lock(&c.requests)
                        .iter()
                        .map(|(k, n)| (api_name(*k), *n))
                        .collect(),
                }
            })
            .collect();
        clients.sort_by(|a, b| (a.port, &a.peer).cmp(&(b.port, &b.peer)));
        Snapshot {
            uptime_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            connections: self.connections.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            ports,
            clients,
            state: lock(&self.state).clone(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain counters and strings: still usable after a panic elsewhere.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Kafka API's name (`Produce`, `Fetch`), or its number when this build does not know it.
fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map_or_else(|()| format!("api {key}"), |k| format!("{k:?}"))
}

/// The figures one `live` request is answered with (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// Milliseconds since the daemon started: rates are differences over this, not over the
    /// watcher's clock.
    pub(crate) uptime_ms: u64,
    /// SSH connections made since the start (logins again and reconnects included).
    pub(crate) connections: u64,
    /// How many of those followed a lost connection.
    pub(crate) reconnects: u64,
    /// Every local port that has had a connection, in port order.
    pub(crate) ports: Vec<PortFigures>,
    /// The local endpoint's clients connected now.
    pub(crate) clients: Vec<ClientFigures>,
    /// The daemon's state, as in `tunnel.state.json`.
    pub(crate) state: Option<State>,
}

/// One local port's counters since the daemon started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PortFigures {
    /// The port on 127.0.0.1.
    pub(crate) port: u16,
    /// Connections open now.
    pub(crate) open: u64,
    /// Connections accepted in all.
    pub(crate) total: u64,
    /// Bytes sent towards the server.
    pub(crate) up: u64,
    /// Bytes sent towards the local clients.
    pub(crate) down: u64,
}

/// One connected endpoint client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClientFigures {
    /// Its address (`127.0.0.1:PORT`).
    pub(crate) peer: String,
    /// The endpoint port it connected to.
    pub(crate) port: u16,
    /// When it connected.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) since: OffsetDateTime,
    /// The broker it is relayed to, once chosen (as the cluster advertises it).
    pub(crate) broker: Option<String>,
    /// Bytes sent towards the broker.
    pub(crate) up: u64,
    /// Bytes sent towards the client.
    pub(crate) down: u64,
    /// Requests by Kafka API name.
    pub(crate) requests: BTreeMap<String, u64>,
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use tokio::io::AsyncWriteExt as _;

    use super::*;

    #[tokio::test]
    async fn a_client_counts_on_its_port_and_leaves_only_the_totals_when_it_closes() {
        let live = Live::new();
        let peer: SocketAddr = "127.0.0.1:50000".parse().expect("address");
        let client = live.client(19092, peer);
        client.relayed_to("kafka-1.internal:9093".into());
        for key in [18, 3, 0, 0] {
            client.request(key);
        }
        client.request(32_000);
        let mut up = Counted::new(tokio::io::sink(), client.meters(), Way::Up);
        up.write_all(&[0; 300]).await.expect("written");
        let mut down = Counted::new(Vec::new(), client.meters(), Way::Down);
        down.write_all(&[0; 7000]).await.expect("written");

        let snap = live.snapshot();
        assert_eq!(
            snap.ports,
            vec![PortFigures {
                port: 19092,
                open: 1,
                total: 1,
                up: 300,
                down: 7000
            }]
        );
        let c = &snap.clients[0];
        assert_eq!(
            (c.peer.as_str(), c.up, c.down),
            ("127.0.0.1:50000", 300, 7000)
        );
        assert_eq!(c.broker.as_deref(), Some("kafka-1.internal:9093"));
        let mix: Vec<(&str, u64)> = c.requests.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            mix,
            [
                ("ApiVersions", 1),
                ("Metadata", 1),
                ("Produce", 2),
                ("api 32000", 1)
            ]
        );

        drop(client);
        let snap = live.snapshot();
        assert!(snap.clients.is_empty());
        assert_eq!((snap.ports[0].open, snap.ports[0].total), (0, 1));
        assert_eq!(snap.ports[0].down, 7000);
        // What a watcher reads back is what was sent.
        let json = serde_json::to_vec(&snap).expect("json");
        assert_eq!(
            serde_json::from_slice::<Snapshot>(&json).expect("parsed"),
            snap
        );
    }
}
