//! Who may use the local endpoint, and how many at once (issue 42).
//!
//! The endpoint acts with the profile's certificate for whoever it serves, so it serves the
//! account the tunnel runs as only: each accepted connection's other end is looked up in the OS
//! (`os::port_owner::peer`), and a connection from another account is closed at once, logged
//! with its uid and counted for `tunnel status`. Where the OS cannot say who connects (the
//! lookup failed), every connection is served, as `setup` and `doctor` say.
//!
//! Every client connection also holds one of a fixed number of permits while it lasts
//! (`max_connections` in `profile.json`): a client that opens connections in a loop costs file
//! descriptors and SSH channels up to that number, then is refused with one log line.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::os::port_owner::{self, Peer};

/// Why a connection is not served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Another account's process connected.
    Stranger(String),
    /// `max_connections` client connections are open already.
    Full(usize),
    /// The client closed before it was looked up: nothing to serve, nothing to log.
    Gone,
}

/// The refusals so far, for the state file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Refused {
    /// How many connections from other accounts were closed.
    pub(crate) count: u64,
    /// The last one, in words (`127.0.0.1:40002, uid 1003 (`bob`), on port 9092`).
    pub(crate) last: Option<String>,
}

/// The endpoint's door: one per endpoint, shared by its Kafka and MySQL ports.
pub(crate) struct Gate {
    permits: Arc<Semaphore>,
    max: usize,
    /// Set when a connection found no permit, cleared when one gets a permit again: the limit
    /// is logged once each time it is reached, not once per connection.
    full: AtomicBool,
    refused: AtomicU64,
    last: Mutex<Option<String>>,
    /// Poked at each refusal of a stranger, so the daemon writes the count to the state file.
    changed: Arc<Notify>,
    /// Whether "the OS does not say who connects" was logged already.
    told_unknown: AtomicBool,
}

impl Gate {
    /// A gate that lets `max` client connections in at once (at least one).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            full: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            last: Mutex::new(None),
            changed: Arc::new(Notify::new()),
            told_unknown: AtomicBool::new(false),
        }
    }

    /// Lets the connection accepted at `local` from `peer` in, or says why not (logged here).
    /// The permit is held for as long as the connection is served.
    pub(crate) async fn admit(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Result<OwnedSemaphorePermit, Refusal> {
        let who = tokio::task::spawn_blocking(move || port_owner::peer(local, peer))
            .await
            .unwrap_or_else(|e| Peer::Unknown(format!("the lookup failed: {e}")));
        self.decide(local, peer, who)?;
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                self.full.store(false, Ordering::Relaxed);
                Ok(permit)
            }
            Err(_) => {
                if !self.full.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        max = self.max,
                        "local endpoint: {} client connections are open, the most this profile \
                         allows (`max_connections` in profile.json); refusing more until some close",
                        self.max
                    );
                }
                Err(Refusal::Full(self.max))
            }
        }
    }

    /// The owner check alone: the verdict on `who`, logged and counted when it is a refusal.
    fn decide(&self, local: SocketAddr, peer: SocketAddr, who: Peer) -> Result<(), Refusal> {
        match &who {
            Peer::Owner => Ok(()),
            Peer::Unknown(why) => {
                if !self.told_unknown.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "local endpoint: cannot tell which account connects ({why}); serving \
                         every local connection"
                    );
                }
                Ok(())
            }
            Peer::Gone => {
                tracing::debug!(%peer, port = local.port(), "local endpoint: the client closed before it was served");
                Err(Refusal::Gone)
            }
            Peer::Stranger { uid, .. } => {
                let line = format!("{peer}, {who}, on port {}", local.port());
                tracing::warn!(
                    port = local.port(),
                    %peer,
                    uid = uid.map(i64::from).unwrap_or(-1),
                    "local endpoint: refused a connection from another account: {line}"
                );
                self.refused.fetch_add(1, Ordering::Relaxed);
                *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(line.clone());
                self.changed.notify_one();
                Err(Refusal::Stranger(line))
            }
        }
    }

    /// The refusals so far.
    pub(crate) fn refused(&self) -> Refused {
        Refused {
            count: self.refused.load(Ordering::Relaxed),
            last: self
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    /// Fires after a refusal of a stranger.
    pub(crate) fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;

    fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn strangers_are_refused_counted_and_named() {
        let gate = Gate::new(4);
        assert_eq!(gate.decide(at(9092), at(40001), Peer::Owner), Ok(()));
        let stranger = Peer::Stranger {
            uid: Some(1003),
            name: Some("bob".to_owned()),
        };
        let err = gate
            .decide(at(9092), at(40002), stranger)
            .expect_err("refused");
        assert_eq!(
            err,
            Refusal::Stranger("127.0.0.1:40002, uid 1003 (`bob`), on port 9092".to_owned())
        );
        let r = gate.refused();
        assert_eq!(r.count, 1);
        assert_eq!(
            r.last.as_deref(),
            Some("127.0.0.1:40002, uid 1003 (`bob`), on port 9092")
        );
        // An OS that cannot say keeps the endpoint working.
        assert_eq!(
            gate.decide(at(9092), at(40003), Peer::Unknown("no way".to_owned())),
            Ok(())
        );
        assert_eq!(gate.refused().count, 1);
    }

    #[tokio::test]
    async fn the_owner_gets_in_up_to_the_limit() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let local = listener.local_addr().expect("addr");
        let gate = Gate::new(2);
        let mut held = Vec::new();
        for _ in 0..3 {
            let _client = std::net::TcpStream::connect(local).expect("connect");
            let (_server, peer) = listener.accept().expect("accept");
            held.push((_client, _server, gate.admit(local, peer).await));
        }
        assert!(held[0].2.is_ok() && held[1].2.is_ok());
        assert_eq!(held[2].2.as_ref().err(), Some(&Refusal::Full(2)));
        held.truncate(1);
        let _client = std::net::TcpStream::connect(local).expect("connect");
        let (_server, peer) = listener.accept().expect("accept");
        assert!(gate.admit(local, peer).await.is_ok(), "a permit came back");
        assert_eq!(gate.refused().count, 0);
    }
}
