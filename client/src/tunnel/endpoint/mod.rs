//! The local endpoint (`endpoint = local` in `profile.json`): the tunnel speaks Kafka for the
//! laptop's clients, so they need no keystore and the brokers may advertise anything.
//!
//! It listens on 127.0.0.1 only: one bootstrap port and one port per broker id. Each client
//! connection gets a `direct-tcpip` channel to its broker's advertised address *as the server
//! resolves it*, TLS over that with the profile's certificate (the broker's name checked against
//! the profile's CA, as a Java client checks it), and `relay` in between, which passes requests
//! as they are and rewrites every broker address in the answers to this endpoint's ports
//! ([`rewrite`]). A broker that appears in an answer gets its port then and there.
//!
//! The certificate acts for whoever the endpoint serves, so `gate` serves the tunnel's own
//! account only (where the OS says who connects) and caps connections. Requests and records
//! are never logged.

pub(crate) mod gate;
pub(crate) mod mysql;
pub(crate) mod relay;
pub mod rewrite;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use shiqi_ca::protocol::Broker;
use shiqi_ca::{Host, Port};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::probe::ProfileTls;
use crate::profile::{Endpoint, LocalBroker, files};
use crate::tunnel::forward::Shared;
use crate::tunnel::ports;

/// The most brokers the endpoint opens ports for.
const MAX_BROKERS: usize = 128;

/// Which upstream a local port leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The bootstrap port: any broker that answers.
    Bootstrap,
    /// One broker, by id.
    Broker(i32),
}

/// A broker's address as the server resolves it (parsed from the cluster's answers into the
/// strict types that may reach a channel request and a TLS server name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Upstream {
    /// The advertised host.
    pub(crate) host: Host,
    /// The advertised port.
    pub(crate) port: Port,
}

struct Slot {
    port: u16,
    upstream: Option<Upstream>,
    task: JoinHandle<()>,
}

struct State {
    bootstrap_port: u16,
    bootstrap_task: Option<JoinHandle<()>>,
    brokers: BTreeMap<i32, Slot>,
    changed: bool,
}

/// The running endpoint: its listeners and what each leads to.
pub(crate) struct LocalEndpoint {
    state: Mutex<State>,
    shared: Shared,
    dir: PathBuf,
    tls: Mutex<Option<(Option<Vec<u8>>, ProfileTls)>>,
    /// Poked when a broker gets its first port: sshd fixes a login's `permitopen` when it logs
    /// in, so the daemon logs in afresh for channels to the new broker.
    new_broker: Arc<Notify>,
    /// Who may connect, and how many at once (Kafka and MySQL ports together).
    gate: gate::Gate,
}

impl LocalEndpoint {
    /// Binds the bootstrap port and every broker's port of `endpoint` (a direct profile binds
    /// nothing).
    ///
    /// # Errors
    /// [`TunnelError::PortInUse`](crate::error::TunnelError::PortInUse) when a port is taken: the commonest failure, found before login.
    pub(crate) fn bind(endpoint: &Endpoint) -> Result<Option<Vec<(Role, TcpListener)>>, Error> {
        let Endpoint::Local {
            bootstrap_port,
            brokers: ports_of,
        } = endpoint
        else {
            return Ok(None);
        };
        let mut out = vec![(Role::Bootstrap, ports::bind(*bootstrap_port)?)];
        // Brokers not serving now keep their ports: clients may still dial them, and they
        // get their address back from the next answer that names them.
        for b in ports_of {
            out.push((Role::Broker(b.id), ports::bind(b.port)?));
        }
        Ok(Some(out))
    }

    /// Serves the listeners from [`Self::bind`], at most `max_connections` client connections
    /// at once.
    pub(crate) fn start(
        dir: PathBuf,
        listeners: Vec<(Role, TcpListener)>,
        brokers: &[Broker],
        shared: Shared,
        max_connections: usize,
    ) -> Arc<Self> {
        let ep = Arc::new(Self {
            state: Mutex::new(State {
                bootstrap_port: 0,
                bootstrap_task: None,
                brokers: BTreeMap::new(),
                changed: false,
            }),
            shared,
            dir,
            tls: Mutex::new(None),
            new_broker: Arc::new(Notify::new()),
            gate: gate::Gate::new(max_connections),
        });
        for (role, listener) in listeners {
            let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
            let task = tokio::spawn(relay::serve(listener, role, ep.clone()));
            let mut st = ep.lock();
            match role {
                Role::Bootstrap => {
                    st.bootstrap_port = port;
                    st.bootstrap_task = Some(task);
                    tracing::info!("local endpoint: Kafka bootstrap on 127.0.0.1:{port}");
                }
                Role::Broker(id) => {
                    let upstream = brokers.iter().find(|b| b.id == id).map(|b| Upstream {
                        host: b.host.clone(),
                        port: b.port,
                    });
                    log_broker(id, port, upstream.as_ref());
                    st.brokers.insert(
                        id,
                        Slot {
                            port,
                            upstream,
                            task,
                        },
                    );
                }
            }
        }
        ep
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding it leaves plain data behind: still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where a connection to `role` goes: its broker, or for the bootstrap port every known
    /// broker in id order (the first that answers serves).
    pub(crate) fn upstreams(&self, role: Role) -> Vec<Upstream> {
        let st = self.lock();
        match role {
            Role::Broker(id) => st
                .brokers
                .get(&id)
                .and_then(|s| s.upstream.clone())
                .into_iter()
                .collect(),
            Role::Bootstrap => st
                .brokers
                .values()
                .filter_map(|s| s.upstream.clone())
                .collect(),
        }
    }

    /// Takes what `profile.json` records (after `tunnel up` asked the agent): a broker with a
    /// recorded port but no listener gets one on that port, then every broker's address is
    /// learned as from an answer.
    pub(crate) fn adopt(self: &Arc<Self>, endpoint: &Endpoint, brokers: &[Broker]) {
        if let Endpoint::Local { brokers: ports, .. } = endpoint {
            let mut st = self.lock();
            for b in ports {
                if st.brokers.contains_key(&b.id) || st.brokers.values().any(|s| s.port == b.port) {
                    continue;
                }
                match ports::try_bind(b.port) {
                    Ok(listener) => {
                        let task =
                            tokio::spawn(relay::serve(listener, Role::Broker(b.id), self.clone()));
                        st.brokers.insert(
                            b.id,
                            Slot {
                                port: b.port,
                                upstream: None,
                                task,
                            },
                        );
                        st.changed = true;
                        self.new_broker.notify_one();
                    }
                    Err(e) => tracing::warn!(
                        "local endpoint: cannot listen on 127.0.0.1:{} for broker {}: {e}",
                        b.port,
                        b.id
                    ),
                }
            }
        }
        self.learn(brokers);
    }

    /// Records the cluster's current brokers (the daemon's look at the cluster), binding a port
    /// for any new one.
    pub(crate) fn learn(self: &Arc<Self>, brokers: &[Broker]) {
        for b in brokers {
            let node = rewrite::Node {
                id: b.id,
                host: b.host.to_string(),
                port: i32::from(b.port.get()),
            };
            let _ = self.port_for(&node);
        }
    }

    /// The local port for `node`, bound now if the broker is new; its upstream follows the
    /// latest answer. `None` when its address is not a host and port, or no port is free.
    pub(crate) fn port_for(self: &Arc<Self>, node: &rewrite::Node) -> Option<u16> {
        let upstream = Upstream {
            host: node.host.parse().ok()?,
            port: u16::try_from(node.port)
                .ok()
                .and_then(|p| Port::try_from(p).ok())?,
        };
        let mut st = self.lock();
        if let Some(slot) = st.brokers.get_mut(&node.id) {
            if slot.upstream.as_ref() != Some(&upstream) {
                log_broker(node.id, slot.port, Some(&upstream));
                slot.upstream = Some(upstream);
                st.changed = true;
            }
            return st.brokers.get(&node.id).map(|s| s.port);
        }
        // A hostile answer could name thousands of ids: each would cost a listener, a task and
        // a line in profile.json. Real clusters are far below this.
        if st.brokers.len() >= MAX_BROKERS {
            tracing::warn!(
                broker = node.id,
                "an answer names more than {MAX_BROKERS} brokers; refusing to open more ports"
            );
            return None;
        }
        let taken: Vec<u16> = st.brokers.values().map(|s| s.port).collect();
        let listener = crate::profile::broker_ports(st.bootstrap_port)
            .filter(|p| !taken.contains(p))
            .find_map(|p| ports::try_bind(p).ok().map(|l| (p, l)));
        let Some((port, listener)) = listener else {
            tracing::warn!(
                broker = node.id,
                "no free local port for a new broker in the {} above {}",
                Endpoint::PORT_SEARCH,
                st.bootstrap_port
            );
            return None;
        };
        let task = tokio::spawn(relay::serve(
            listener,
            Role::Broker(node.id),
            Arc::clone(self),
        ));
        log_broker(node.id, port, Some(&upstream));
        st.brokers.insert(
            node.id,
            Slot {
                port,
                upstream: Some(upstream),
                task,
            },
        );
        st.changed = true;
        self.new_broker.notify_one();
        Some(port)
    }

    /// Fires after a broker got its first port (see the field).
    pub(crate) fn new_broker(&self) -> Arc<Notify> {
        self.new_broker.clone()
    }

    /// Marks the endpoint as changed again (its last [`Self::take_changes`] could not be written).
    pub(crate) fn keep_changes(&self) {
        self.lock().changed = true;
    }

    /// The endpoint as `profile.json` keeps it, when its brokers changed since the last call.
    pub(crate) fn take_changes(&self) -> Option<(Endpoint, Vec<Broker>)> {
        let mut st = self.lock();
        if !std::mem::take(&mut st.changed) {
            return None;
        }
        let endpoint = Endpoint::Local {
            bootstrap_port: st.bootstrap_port,
            brokers: st
                .brokers
                .iter()
                .map(|(id, s)| LocalBroker {
                    id: *id,
                    port: s.port,
                })
                .collect(),
        };
        let brokers = st
            .brokers
            .iter()
            .filter_map(|(id, s)| {
                s.upstream.as_ref().map(|u| Broker {
                    id: *id,
                    host: u.host.clone(),
                    port: u.port,
                })
            })
            .collect();
        Some((endpoint, brokers))
    }

    /// The profile's TLS identity, read again when `client.crt` changed (`rotate`, `renew`,
    /// the daemon's own renewal): every new upstream connection presents the newest
    /// certificate. The file is small; comparing its bytes cannot miss a change as a time
    /// stamp can.
    pub(crate) fn tls(&self) -> ProfileTls {
        let crt = std::fs::read(self.dir.join(files::CLIENT_CRT)).ok();
        let mut cached = self.tls.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cached {
            Some((seen, tls)) if *seen == crt => tls.clone(),
            _ => {
                let tls = ProfileTls::from_identity(&crate::profile::files::identity(&self.dir));
                *cached = Some((crt, tls.clone()));
                tls
            }
        }
    }

    /// Who may connect.
    pub(crate) fn gate(&self) -> &gate::Gate {
        &self.gate
    }

    /// The SSH connection the channels go through.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Stops every listener (open client connections end with the SSH connection).
    pub(crate) fn stop(&self) {
        let mut st = self.lock();
        if let Some(t) = st.bootstrap_task.take() {
            t.abort();
        }
        for (_, s) in std::mem::take(&mut st.brokers) {
            s.task.abort();
        }
    }

    /// Every port it listens on, bootstrap first, with what it leads to.
    pub(crate) fn listening(&self) -> Vec<(Role, u16, Option<Upstream>)> {
        let st = self.lock();
        let mut out = vec![(Role::Bootstrap, st.bootstrap_port, None)];
        for (id, s) in &st.brokers {
            out.push((Role::Broker(*id), s.port, s.upstream.clone()));
        }
        out
    }
}

fn log_broker(id: i32, port: u16, upstream: Option<&Upstream>) {
    match upstream {
        Some(u) => tracing::info!(
            "local endpoint: broker {id} on 127.0.0.1:{port} -> {}:{} (as the server resolves it)",
            u.host,
            u.port
        ),
        None => tracing::info!("local endpoint: broker {id} on 127.0.0.1:{port} (not serving)"),
    }
}
