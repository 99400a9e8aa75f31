//! Kafka through rdkafka: the cluster's metadata, asked with the agent's own admin certificate.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use shiqi_ca::issue::Ca;
use shiqi_ca::protocol::{Broker, KafkaFacts};
use shiqi_ca::{Bootstrap, Error, Host, Port};

use crate::error::AgentError;
use crate::state::Context;

/// A librdkafka client config that authenticates as the agent's admin identity.
pub fn admin_client_config(ctx: &Context, ca: &Ca) -> Result<ClientConfig, AgentError> {
    let bootstrap = &ctx.config.kafka.bootstrap;
    if bootstrap.is_empty() {
        return Err(AgentError::KafkaDisabled);
    }
    let admin = ctx.admin_identity(ca)?;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("security.protocol", "ssl")
        .set("ssl.ca.pem", ca.cert().pem())
        .set("ssl.certificate.pem", admin.cert.pem())
        .set("ssl.key.pem", admin.key.to_pkcs8_pem().expose())
        .set("ssl.endpoint.identification.algorithm", "https")
        .set("socket.timeout.ms", "5000");
    Ok(config)
}

/// Every broker's advertised host and port, sorted by id.
///
/// The metadata is the brokers' word, relayed to laptops that write it into their configs, so
/// each advertised host and port is parsed into the wire types here: a broker advertising
/// something that is not a host name is refused, naming the broker.
pub fn brokers(ctx: &Context, ca: &Ca) -> Result<KafkaFacts, AgentError> {
    let configured = ctx.config.kafka.bootstrap.clone();
    let kafka_error = |why: String| AgentError::Kafka {
        bootstrap: configured.clone(),
        why,
    };
    let bootstrap: Bootstrap = configured
        .parse()
        .map_err(|e| kafka_error(format!("agent.toml [kafka] bootstrap: {e}")))?;
    let consumer: BaseConsumer = admin_client_config(ctx, ca)?
        .create()
        .map_err(|e| kafka_error(e.to_string()))?;
    let timeout = Duration::from_secs(ctx.config.kafka.timeout_secs.max(1));
    let metadata = consumer
        .fetch_metadata(None, timeout)
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
