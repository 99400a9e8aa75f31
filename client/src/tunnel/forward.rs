//! One local forward: accept on `127.0.0.1:P`, open a `direct-tcpip` channel to the target on
//! the server side, and copy both ways. The SSH connection is shared through a
//! [`watch`] channel: while it is down (`None`) new clients wait for the next one instead of
//! being refused, so a Kafka client that reconnects just sees a slow connect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use russh::client::Msg;
use russh::{Channel, ChannelStream};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use crate::profile::ForwardRecord;
use crate::ssh::Session;
use crate::tunnel::live::Live;

/// How long an accepted client waits for the connection to come back.
const WAIT_FOR_LINK: Duration = Duration::from_secs(20);

/// The current SSH connection, numbered so a forward can ask for a newer one than the one that
/// just failed it.
#[derive(Clone)]
pub(crate) struct Link {
    /// Counts connections since start.
    pub(crate) generation: u64,
    /// The connection.
    pub(crate) session: Arc<Session>,
}

/// What every forward shares with the supervisor.
#[derive(Clone)]
pub(crate) struct Shared {
    /// The current connection; `None` while reconnecting.
    pub(crate) link: watch::Receiver<Option<Link>>,
    /// Poked when a channel could not be opened on a connection that looks dead.
    pub(crate) lost: Arc<Notify>,
    /// Poked when sshd refused a channel as administratively prohibited: its `permitopen`
    /// list is the one of the login, so a target allowed since (`enroll --sync` after a broker
    /// joined, maybe after the daemon saw the broker and logged in again) needs another login.
    pub(crate) prohibited: Arc<Notify>,
    /// The figures `tunnel status --watch` shows.
    pub(crate) live: Arc<Live>,
}

/// Serves `listener` until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, forward: ForwardRecord, shared: Shared) {
    let forward = Arc::new(forward);
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                let forward = forward.clone();
                let shared = shared.clone();
                tokio::spawn(async move { bridge(socket, peer, &forward, &shared).await });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(port = forward.local_port, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

async fn bridge(socket: TcpStream, peer: SocketAddr, f: &ForwardRecord, shared: &Shared) {
    let meter = shared.live.port(f.local_port);
    let _open = meter.open();
    let _ = socket.set_nodelay(true);
    let target = (f.remote_host.as_str(), f.remote_port.get());
    let Some(channel) = open_channel(shared, target, peer, f.local_port).await else {
        return;
    };
    match super::pump::run(socket, channel, &meter).await {
        Ok((up, down)) => tracing::debug!(port = f.local_port, %peer, up, down, "closed"),
        Err(e) => tracing::debug!(port = f.local_port, %peer, error = %e, "closed"),
    }
}

/// [`open_channel`] as a byte stream (`AsyncRead` + `AsyncWrite`), for the local endpoints that
/// read and rewrite what passes.
pub(crate) async fn open(
    shared: &Shared,
    target: (&str, u16),
    peer: SocketAddr,
    port: u16,
) -> Option<ChannelStream<Msg>> {
    open_channel(shared, target, peer, port)
        .await
        .map(Channel::into_stream)
}

/// A `direct-tcpip` channel to `target` (as the server resolves it) for the client `peer` of
/// local `port`, on the current connection; `None`, logged, when there is none or the server
/// refuses the channel.
pub(crate) async fn open_channel(
    shared: &Shared,
    target: (&str, u16),
    peer: SocketAddr,
    port: u16,
) -> Option<Channel<Msg>> {
    let (host, remote_port) = target;
    let mut after = 0;
    // One retry: the first channel may fail on a connection that died a moment ago.
    for _ in 0..2 {
        let Some(link) = wait_for_link(shared.link.clone(), after).await else {
            tracing::warn!(
                port,
                %peer,
                "no SSH connection within {}s; closing the client connection",
                WAIT_FOR_LINK.as_secs()
            );
            return None;
        };
        let opened = link
            .session
            .handle()
            .channel_open_direct_tcpip(
                host,
                u32::from(remote_port),
                peer.ip().to_string(),
                u32::from(peer.port()),
            )
            .await;
        match opened {
            Ok(channel) => {
                tracing::debug!(port, %peer, "channel open");
                return Some(channel);
            }
            Err(e) if link.session.handle().is_closed() => {
                tracing::info!(port, error = %e, "the connection is gone");
                shared.lost.notify_one();
                after = link.generation;
            }
            Err(e) => {
                // The server refused this channel (e.g. the target port is closed, or
                // `AllowTcpForwarding no`): the client sees its connection closed.
                if matches!(
                    e,
                    russh::Error::ChannelOpenFailure(
                        russh::ChannelOpenFailure::AdministrativelyProhibited
                    )
                ) {
                    shared.prohibited.notify_one();
                }
                tracing::warn!(
                    port,
                    target = %format!("{host}:{remote_port}"),
                    error = %e,
                    "the server did not open the forward"
                );
                return None;
            }
        }
    }
    None
}

/// The first connection newer than generation `after`, waiting up to [`WAIT_FOR_LINK`].
async fn wait_for_link(mut rx: watch::Receiver<Option<Link>>, after: u64) -> Option<Link> {
    let wanted = |l: &Option<Link>| l.as_ref().is_some_and(|l| l.generation > after);
    let got = tokio::time::timeout(WAIT_FOR_LINK, rx.wait_for(wanted)).await;
    match got {
        Ok(Ok(link)) => link.clone(),
        _ => None,
    }
}
