//! Kafka through rdkafka: the agent's admin connection and the cluster's metadata.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use shiqi_ca::issue::Ca;
use shiqi_ca::protocol::{Broker, KafkaFacts};
use shiqi_ca::{Bootstrap, Error, Host, Port};

use crate::error::AgentError;
use crate::state::Context;

/// The agent's admin connection to the cluster: one librdkafka client, authenticated with the
/// agent's admin identity, for metadata and ACLs alike (`provision` uses one for both).
pub struct Admin {
    /// The client; its `inner()` answers metadata requests.
    pub client: AdminClient<DefaultClientContext>,
    /// `[kafka] timeout_secs`, at least one second.
    pub timeout: Duration,
    /// `[kafka] bootstrap` as configured, for errors.
    pub bootstrap: String,
}

impl Admin {
    /// A client for `[kafka] bootstrap`. It connects lazily: nothing is sent until a request.
    ///
    /// # Errors
    /// [`AgentError::KafkaDisabled`] without a bootstrap; the admin identity's or librdkafka's
    /// error otherwise.
    pub fn connect(ctx: &Context, ca: &Ca) -> Result<Self, AgentError> {
        let bootstrap = ctx.config.kafka.bootstrap.clone();
        if bootstrap.is_empty() {
            return Err(AgentError::KafkaDisabled);
        }
        let admin = ctx.admin_identity(ca)?;
        let client = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("security.protocol", "ssl")
            .set("ssl.ca.pem", ca.cert().pem())
            .set("ssl.certificate.pem", admin.cert.pem())
            .set("ssl.key.pem", admin.key.to_pkcs8_pem().expose())
            .set("ssl.endpoint.identification.algorithm", "https")
            .set("socket.timeout.ms", "5000")
            .create()
            .map_err(|e| AgentError::Kafka {
                bootstrap: bootstrap.clone(),
                why: e.to_string(),
            })?;
        Ok(Self {
            client,
            timeout: Duration::from_secs(ctx.config.kafka.timeout_secs.max(1)),
            bootstrap,
        })
    }

    /// An [`AgentError::Kafka`] naming this cluster.
    pub fn error(&self, why: String) -> AgentError {
        AgentError::Kafka {
            bootstrap: self.bootstrap.clone(),
            why,
        }
    }
}

/// Every broker's advertised host and port, sorted by id.
///
/// The metadata is the brokers' word, relayed to laptops that write it into their configs, so
/// each advertised host and port is parsed into the wire types here: a broker advertising
/// something that is not a host name is refused, naming the broker.
pub fn brokers(admin: &Admin) -> Result<KafkaFacts, AgentError> {
    let kafka_error = |why: String| admin.error(why);
    let bootstrap: Bootstrap = admin
        .bootstrap
        .parse()
        .map_err(|e| kafka_error(format!("agent.toml [kafka] bootstrap: {e}")))?;
    let metadata = admin
        .client
        .inner()
        .fetch_metadata(None, admin.timeout)
        .map_err(|e| kafka_error(e.to_string()))?;
    let mut brokers = metadata
        .brokers()
        .iter()
        .map(|b| {
            let port = u16::try_from(b.port())
                .map_err(|_| Error::InvalidPort {
                    port: b.port().into(),
                })
                .and_then(Port::try_from)
                .map_err(|e| kafka_error(format!("broker {} advertises {e}", b.id())))?;
            let host: Host = b.host().parse().map_err(|e| {
                kafka_error(format!(
                    "broker {} advertises {e}; fix its advertised.listeners",
                    b.id()
                ))
            })?;
            Ok(Broker {
                id: b.id(),
                host,
                port,
            })
        })
        .collect::<Result<Vec<_>, AgentError>>()?;
    if brokers.is_empty() {
        return Err(kafka_error("the cluster reported no brokers".to_owned()));
    }
    brokers.sort();
    Ok(KafkaFacts { bootstrap, brokers })
}
