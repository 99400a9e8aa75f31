//! Proving that a certificate logs in, before anything depends on it: `rotate` checks the new
//! certificate here before it replaces the old profile and before the old serial is revoked.
//! Setup and `tunnel up` ask the same way which brokers are registered but not serving.
//!
//! The checks run through the SSH session the command already holds, not through the tunnel:
//! each one binds an ephemeral port on this machine's 127.0.0.1, and the one connection made to
//! it is carried over an SSH `direct-tcpip` channel to the service as the server sees it (the
//! broker's advertised host and port, MySQL's host and port). So they work whether or not a
//! tunnel runs, never touch the tunnel's fixed ports, and cannot be fooled by something else
//! listening on them. The probes are `tunnel status`'s ([`crate::probe`]): a TLS
//! handshake plus `ApiVersions` for each broker (only a reply proves the broker accepted the
//! client certificate under TLS 1.3), and a real MySQL login as the certificate-only user.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use tokio::net::TcpListener;

use shiqi_ca::protocol::Broker;

use crate::probe::kafka_wire::Registration;
use crate::probe::{self, Outcome, ProfileTls};
use crate::profile::Profile;
use crate::ssh::Session;

/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(6);

/// One service's verdict on a certificate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Login {
    /// `Kafka broker 1 (localhost:19094)`, `MySQL (127.0.0.1:3306)`.
    pub(crate) service: String,
    /// The verdict.
    pub(crate) check: Outcome,
    /// True when the service could not be reached at all (no verdict on the certificate).
    pub(crate) unreachable: bool,
}

/// The verdicts on the certificate in `identity_dir` (`ca.crt`, `client.crt`, `client.key`):
/// every broker of `profile`, then MySQL.
pub(crate) async fn logins(
    session: &Session,
    identity_dir: &Path,
    profile: &Profile,
) -> Vec<Login> {
    let mut out = Vec::new();
    let tls = ProfileTls::from_identity(&crate::profile::files::identity(identity_dir));
    for b in &profile.brokers {
        let service = format!("Kafka broker {} ({}:{})", b.id, b.host, b.port);
        let (check, unreachable) = through_ssh(session, b.host.as_str(), b.port.get(), |port| {
            let tls = tls.clone();
            let host = b.host.clone();
            async move { probe::kafka::api_versions(port, host.as_str(), &tls, PROBE_TIMEOUT).await }
        })
        .await;
        out.push(Login {
            service,
            check,
            unreachable,
        });
    }
    if let Some(m) = &profile.mysql {
        let service = format!("MySQL ({}:{}) as `{}`", m.host, m.port, m.user);
        let (check, unreachable) = through_ssh(session, m.host.as_str(), m.port.get(), |port| {
            let (host, user) = (m.host.clone(), m.user.clone());
            async move {
                probe::mysql::login(
                    port,
                    host.as_str(),
                    user.as_str(),
                    &crate::profile::files::identity(identity_dir),
                    PROBE_TIMEOUT,
                )
                .await
            }
        })
        .await;
        out.push(Login {
            service,
            check,
            unreachable,
        });
    }
    out
}

/// Every broker registered with the cluster (`DescribeCluster`, fenced ones included), asked
/// with the certificate in `identity_dir` of the first of `brokers` that answers, through
/// `session`.
///
/// # Errors
/// Why no broker answered (the last one's reason).
pub(crate) async fn registered(
    session: &Session,
    identity_dir: &Path,
    brokers: &[Broker],
) -> Result<Registration, String> {
    let tls = ProfileTls::from_identity(&crate::profile::files::identity(identity_dir));
    let mut last = "no broker to ask".to_owned();
    for b in brokers {
        let asked = carried(session, b.host.as_str(), b.port.get(), |port| {
            let tls = tls.clone();
            let host = b.host.clone();
            async move { probe::kafka::registered(port, host.as_str(), &tls, PROBE_TIMEOUT).await }
        })
        .await;
        match asked {
            Ok(Ok(list)) => return Ok(list),
            Ok(Err(why)) | Err(why) => last = format!("broker {}: {why}", b.id),
        }
    }
    Err(last)
}

/// One line per broker that is registered but not serving (stopped, mid-restart), for setup
/// and `tunnel up` to warn with: the metadata the agent read leaves it out, so the profile has
/// no forward for it yet. A cluster that cannot tell (Kafka before 4.0) gives none.
pub(crate) async fn not_serving(
    session: &Session,
    identity_dir: &Path,
    brokers: &[Broker],
) -> Vec<String> {
    if brokers.is_empty() {
        return Vec::new();
    }
    match registered(session, identity_dir, brokers)
        .await
        .and_then(probe::kafka::Registered::parse)
    {
        Ok(r) => r.not_serving(),
        Err(why) => {
            tracing::debug!("cannot ask which brokers are registered: {why}");
            Vec::new()
        }
    }
}

/// Runs `probe(port)` against a local port whose one connection is carried to `host:port` on
/// the server. Returns the check and whether the server could not reach the service.
async fn through_ssh<F, Fut>(session: &Session, host: &str, port: u16, probe: F) -> (Outcome, bool)
where
    F: FnOnce(u16) -> Fut,
    Fut: std::future::Future<Output = Outcome>,
{
    match carried(session, host, port, probe).await {
        Ok(check) => (check, false),
        Err(why) => (Outcome::fail(why), true),
    }
}

/// Runs `probe(port)` against a local port whose one connection is carried to `host:port` on
/// the server: the probe's answer, or why the server could not reach the service.
async fn carried<F, Fut, T>(session: &Session, host: &str, port: u16, probe: F) -> Result<T, String>
where
    F: FnOnce(u16) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?
        .port();
    let channel_error = std::sync::Mutex::new(None::<String>);
    let serve = async {
        let Ok((mut tcp, _)) = listener.accept().await else {
            return std::future::pending::<()>().await;
        };
        match session
            .handle()
            .channel_open_direct_tcpip(host, u32::from(port), "127.0.0.1", u32::from(local))
            .await
        {
            Ok(channel) => {
                let mut remote = channel.into_stream();
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut remote).await;
            }
            Err(e) => {
                if let Ok(mut slot) = channel_error.lock() {
                    *slot = Some(e.to_string());
                }
            }
        }
        // Dropping `tcp` here (on error) ends the probe's connection; then wait for its verdict.
        drop(tcp);
        std::future::pending::<()>().await
    };
    let answer = tokio::select! {
        answer = probe(local) => answer,
        () = serve => unreachable!("serve never completes"),
    };
    match channel_error.lock().ok().and_then(|mut e| e.take()) {
        Some(why) => Err(format!(
            "the server cannot reach `{host}:{port}` (SSH direct-tcpip: {why})"
        )),
        None => Ok(answer),
    }
}
