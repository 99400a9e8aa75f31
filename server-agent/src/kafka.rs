//! Kafka for the agent: its admin connection (TLS with the agent's admin identity, rustls, the
//! workspace's one crypto stack), the cluster's metadata, and the ACL requests `kafka-user` and
//! `revoke` send (CreateAcls, DescribeAcls, DeleteAcls). The messages are `kafka-protocol`'s,
//! generated from Kafka's own message definitions, framed by `shiqi_kafka` (the laptop's probes
//! and local endpoint use it too), one request per connection. No C library and no `unsafe`.
//!
//! A request goes to the first bootstrap server that answers, except `DescribeAcls` sent to one
//! broker (its advertised address): each broker authorizes from its own copy of the metadata,
//! and `revoke` asks each one until none lists a deleted ACL.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, BytesMut};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, MetadataRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use shiqi_ca::cert::Cert;
use shiqi_ca::issue::Ca;
use shiqi_ca::key::PrivateKey;
use shiqi_ca::protocol::{Broker, KafkaFacts};
use shiqi_ca::{Bootstrap, Error, Host, Port};
use shiqi_kafka::frame::{self, ExchangeError};
use shiqi_kafka::message::{self, AnswerError, ClientId};
use shiqi_kafka::version;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use crate::acl::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};
use crate::error::AgentError;
use crate::state::Context;

/// Versions every Kafka from 2.4 to 4.x serves (4.0 dropped the older ones, KIP-896).
pub(crate) const METADATA_VERSION: i16 = version::ADMIN_METADATA;
const ACLS_VERSION: i16 = version::ACLS;
/// Larger frames are not an answer to these requests.
const MAX_FRAME: usize = frame::MAX_ADMIN_ANSWER;

/// The agent's admin connection to the cluster: the TLS identity and where to reach it. Nothing
/// is sent until a request; each request opens its own connection.
pub(crate) struct Admin<'a> {
    ctx: &'a Context,
    tls: Arc<rustls::ClientConfig>,
    servers: Vec<(String, u16)>,
    /// `[kafka] timeout_secs`, at least one second.
    pub(crate) timeout: Duration,
    /// `[kafka] bootstrap` as configured, for errors.
    pub(crate) bootstrap: String,
}

/// One broker as the metadata names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// `node.id`.
    pub(crate) id: i32,
    /// The advertised host.
    pub(crate) host: String,
    /// The advertised port.
    pub(crate) port: i32,
}

impl<'a> Admin<'a> {
    /// A client for `[kafka] bootstrap`, authenticated with the agent's admin identity.
    ///
    /// # Errors
    /// [`AgentError::KafkaDisabled`] without a bootstrap; the admin identity's or TLS's error.
    pub(crate) fn connect(ctx: &'a Context, ca: &Ca) -> Result<Self, AgentError> {
        let bootstrap = ctx.config.kafka.bootstrap.clone();
        if bootstrap.is_empty() {
            return Err(AgentError::KafkaDisabled);
        }
        let parsed: Bootstrap = bootstrap.parse()?;
        let servers = parsed
            .addresses()
            .iter()
            .map(|s| (s.host.to_string(), s.port.get()))
            .collect();
        let admin = ctx.admin_identity(ca)?;
        let tls =
            tls_config(ca, Some((&admin.key, &admin.cert))).map_err(|why| AgentError::Kafka {
                bootstrap: bootstrap.clone(),
                why,
            })?;
        Ok(Self {
            ctx,
            tls,
            servers,
            timeout: Duration::from_secs(ctx.config.kafka.timeout_secs.max(1)),
            bootstrap,
        })
    }

    /// An [`AgentError::Kafka`] naming this cluster.
    pub(crate) fn error(&self, why: String) -> AgentError {
        AgentError::Kafka {
            bootstrap: self.bootstrap.clone(),
            why,
        }
    }

    /// Every broker the cluster advertises, as it says them.
    ///
    /// # Errors
    /// [`AgentError::Kafka`] when no bootstrap server answers.
    pub(crate) fn nodes(&self) -> Result<Vec<Node>, AgentError> {
        let request = MetadataRequest::default().with_topics(Some(Vec::new()));
        let reply = self
            .ctx
            .block_on(self.ask_first(&self.servers, request, METADATA_VERSION, self.timeout))
            .map_err(|why| self.error(why))?;
        Ok(reply
            .brokers
            .iter()
            .map(|b| Node {
                id: b.node_id.0,
                host: b.host.to_string(),
                port: b.port,
            })
            .collect())
    }

    /// Creates the ACLs. Creating one that exists already succeeds (Kafka treats it as a no-op).
    ///
    /// # Errors
    /// [`AgentError::InvalidAcl`] before anything is sent for an `Unknown` field;
    /// [`AgentError::KafkaAcl`] when the request fails or the cluster refuses any binding.
    pub(crate) fn create_acls(&self, bindings: &[AclBinding]) -> Result<(), AgentError> {
        if bindings.is_empty() {
            return Ok(());
        }
        let creations = bindings
            .iter()
            .map(|b| {
                Ok(AclCreation::default()
                    .with_resource_type(code(b.resource.wire(), "resource type")?)
                    .with_resource_name(StrBytes::from_string(b.name.clone()))
                    .with_resource_pattern_type(code(b.pattern.wire(), "pattern type")?)
                    .with_principal(StrBytes::from_string(b.principal.clone()))
                    .with_host(StrBytes::from_string(b.host.clone()))
                    .with_operation(code(b.operation.wire(), "operation")?)
                    .with_permission_type(code(b.permission.wire(), "permission")?))
            })
            .collect::<Result<Vec<_>, AgentError>>()?;
        let request = CreateAclsRequest::default().with_creations(creations);
        let reply = self
            .ctx
            .block_on(self.ask_first(&self.servers, request, ACLS_VERSION, self.timeout))
            .map_err(|why| failed("CreateAcls", why))?;
        for (binding, result) in bindings.iter().zip(&reply.results) {
            refused(
                "CreateAcls",
                result.error_code,
                result.error_message.as_deref(),
            )
            .map_err(|e| with_subject(e, &binding.to_string()))?;
        }
        Ok(())
    }

    /// The ACLs matching `filter`, from the first bootstrap server that answers, or from `node`
    /// (its own copy of the metadata) within `timeout`.
    ///
    /// # Errors
    /// [`AgentError::KafkaAcl`] when the request fails or the broker answers with an error.
    pub(crate) fn describe_acls(
        &self,
        filter: &AclFilter,
        node: Option<&Node>,
        timeout: Duration,
    ) -> Result<Vec<AclBinding>, AgentError> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource.map_or(ANY, ResourceType::wire))
            .with_resource_name_filter(filter.name.clone().map(StrBytes::from_string))
            .with_pattern_type_filter(filter.pattern.map_or(ANY, PatternType::wire))
            .with_principal_filter(filter.principal.clone().map(StrBytes::from_string))
            .with_host_filter(filter.host.clone().map(StrBytes::from_string))
            .with_operation(filter.operation.map_or(ANY, Operation::wire))
            .with_permission_type(filter.permission.map_or(ANY, Permission::wire));
        let targets = match node {
            None => self.servers.clone(),
            Some(n) => vec![(n.host.clone(), u16::try_from(n.port).unwrap_or_default())],
        };
        let reply = self
            .ctx
            .block_on(self.ask_first(&targets, request, ACLS_VERSION, timeout))
            .map_err(|why| failed("DescribeAcls", why))?;
        refused(
            "DescribeAcls",
            reply.error_code,
            reply.error_message.as_deref(),
        )?;
        Ok(reply
            .resources
            .iter()
            .flat_map(|r| {
                r.acls.iter().map(|a| AclBinding {
                    resource: ResourceType::from_wire(r.resource_type),
                    name: r.resource_name.to_string(),
                    pattern: PatternType::from_wire(r.pattern_type),
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: Operation::from_wire(a.operation),
                    permission: Permission::from_wire(a.permission_type),
                })
            })
            .collect())
    }

    /// Deletes every ACL matching any of `filters`; returns what was deleted.
    ///
    /// # Errors
    /// [`AgentError::KafkaAcl`] when the request fails or the cluster refuses a filter.
    pub(crate) fn delete_acls(&self, filters: &[AclFilter]) -> Result<Vec<AclBinding>, AgentError> {
        let wire = filters
            .iter()
            .map(|f| {
                DeleteAclsFilter::default()
                    .with_resource_type_filter(f.resource.map_or(ANY, ResourceType::wire))
                    .with_resource_name_filter(f.name.clone().map(StrBytes::from_string))
                    .with_pattern_type_filter(f.pattern.map_or(ANY, PatternType::wire))
                    .with_principal_filter(f.principal.clone().map(StrBytes::from_string))
                    .with_host_filter(f.host.clone().map(StrBytes::from_string))
                    .with_operation(f.operation.map_or(ANY, Operation::wire))
                    .with_permission_type(f.permission.map_or(ANY, Permission::wire))
            })
            .collect();
        let request = DeleteAclsRequest::default().with_filters(wire);
        let reply = self
            .ctx
            .block_on(self.ask_first(&self.servers, request, ACLS_VERSION, self.timeout))
            .map_err(|why| failed("DeleteAcls", why))?;
        let mut deleted = Vec::new();
        for result in &reply.filter_results {
            refused(
                "DeleteAcls",
                result.error_code,
                result.error_message.as_deref(),
            )?;
            for m in &result.matching_acls {
                refused("DeleteAcls", m.error_code, m.error_message.as_deref())?;
                deleted.push(AclBinding {
                    resource: ResourceType::from_wire(m.resource_type),
                    name: m.resource_name.to_string(),
                    pattern: PatternType::from_wire(m.pattern_type),
                    principal: m.principal.to_string(),
                    host: m.host.to_string(),
                    operation: Operation::from_wire(m.operation),
                    permission: Permission::from_wire(m.permission_type),
                });
            }
        }
        Ok(deleted)
    }

    /// `request` to the first of `targets` that answers.
    async fn ask_first<R: Request + Clone>(
        &self,
        targets: &[(String, u16)],
        request: R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, String> {
        let mut last = "no server to ask".to_owned();
        for target in targets {
            match self
                .ask(target.clone(), request.clone(), version, timeout)
                .await
            {
                Ok(reply) => return Ok(reply),
                Err(why) => last = format!("{}:{}: {why}", target.0, target.1),
            }
        }
        Err(last)
    }

    async fn ask<R: Request>(
        &self,
        target: (String, u16),
        request: R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, String> {
        ask(self.tls.clone(), target, request, version, timeout)
            .await
            .map_err(|e| e.to_string())
    }
}

/// A TLS client for the brokers: the CA as the only root, presenting `identity` (key and
/// certificate) when given.
///
/// # Errors
/// When the CA or the identity cannot be used.
pub(crate) fn tls_config(
    ca: &Ca,
    identity: Option<(&PrivateKey, &Cert)>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.cert().der().to_vec()))
        .map_err(|e| format!("cannot use the CA certificate: {e}"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots);
    let tls = match identity {
        Some((key, cert)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                    key.to_pkcs8_der().expose().clone(),
                )),
            )
            .map_err(|e| format!("cannot set up TLS: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(tls))
}

/// How one request to one broker failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AskError {
    /// No TCP connection (nothing listens, no route, the name does not resolve).
    Connect(String),
    /// The TLS handshake failed, or the broker closed the connection before answering: what a
    /// broker does to a certificate it refuses (TLS 1.3 refuses it after the handshake).
    Refused(String),
    /// No answer in time.
    Timeout(Duration),
    /// An answer that is not Kafka's, or a request that could not be encoded.
    Protocol(String),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(why) => write!(f, "cannot connect: {why}"),
            Self::Refused(why) => write!(f, "{why}"),
            Self::Timeout(t) => write!(f, "no answer within {} s", t.as_secs()),
            Self::Protocol(why) => f.write_str(why),
        }
    }
}

/// One request over one TLS connection to `host:port`, the server checked as `host`.
///
/// # Errors
/// [`AskError`], telling a refusal from a broker that is not there.
pub(crate) async fn ask<R: Request>(
    tls: Arc<rustls::ClientConfig>,
    (host, port): (String, u16),
    request: R,
    version: i16,
    timeout: Duration,
) -> Result<R::Response, AskError> {
    let run = async {
        let name = ServerName::try_from(host.clone())
            .map_err(|_| AskError::Protocol(format!("`{host}` is not a TLS server name")))?;
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| AskError::Connect(e.to_string()))?;
        let mut tls = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| {
                // Our side refusing the broker's certificate is not the broker refusing ours.
                let ours = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                    .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
                if ours {
                    AskError::Protocol(format!("the broker's certificate is not trusted: {e}"))
                } else {
                    AskError::Refused(format!("TLS handshake failed: {e}"))
                }
            })?;
        let framed = encode(&request, version)
            .map_err(|e| AskError::Protocol(format!("cannot encode: {e}")))?;
        let body = frame::exchange(&mut tls, &framed, MAX_FRAME)
            .await
            .map_err(|e| match e {
                ExchangeError::Send(_) => AskError::Refused(e.to_string()),
                ExchangeError::Closed(_) => {
                    AskError::Refused(format!("{e}; it may refuse the certificate"))
                }
                _ => AskError::Protocol(e.to_string()),
            })?;
        let _ = tls.shutdown().await;
        decode::<R>(body, version).map_err(AskError::Protocol)
    };
    tokio::time::timeout(timeout, run)
        .await
        .unwrap_or(Err(AskError::Timeout(timeout)))
}

/// The correlation id of our requests (one per connection).
const CORRELATION: i32 = 1;
/// The wire's `ANY` in filters (resource, pattern, operation, permission).
const ANY: i8 = 1;

/// `request` framed: length, request header, body.
fn encode<R: Request>(request: &R, version: i16) -> Result<BytesMut, message::EncodeError> {
    message::request(request, version, CORRELATION, ClientId::Agent)
}

/// A response body (after the length) for `R` at `version`, which must answer our request.
fn decode<R: Request>(mut body: bytes::Bytes, version: i16) -> Result<R::Response, String> {
    let reply = message::answer::<R>(&mut body, version, CORRELATION).map_err(|e| match e {
        AnswerError::Correlation { .. } => "the reply is not an answer to our request".to_owned(),
        AnswerError::Malformed(why) => format!("a malformed reply: {why}"),
        _ => e.to_string(),
    })?;
    if body.has_remaining() {
        tracing::debug!(left = body.remaining(), "bytes after the reply");
    }
    Ok(reply)
}

/// A field that has no wire value (`Unknown`) refuses the whole request.
fn code(value: i8, what: &str) -> Result<i8, AgentError> {
    if value == 0 {
        return Err(AgentError::InvalidAcl {
            why: format!("the {what} is unknown"),
        });
    }
    Ok(value)
}

/// A Kafka error code in the spelling the hints match (`CLUSTER_AUTHORIZATION_FAILED`).
fn code_name(code: i16) -> String {
    let name = kafka_protocol::error::ResponseError::try_from_code(code)
        .map(|e| format!("{e:?}"))
        .filter(|n| n.chars().all(|c| c.is_ascii_alphabetic()));
    let Some(name) = name else {
        return format!("ERROR_{code}");
    };
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn refused(request: &'static str, code: i16, message: Option<&str>) -> Result<(), AgentError> {
    if code == 0 {
        return Ok(());
    }
    let name = code_name(code);
    Err(AgentError::KafkaAcl {
        request,
        why: message
            .filter(|m| !m.is_empty())
            .map_or_else(|| name.to_lowercase().replace('_', " "), str::to_owned),
        code: name,
    })
}

fn failed(request: &'static str, why: String) -> AgentError {
    let code = if why.starts_with("no answer within") {
        "_TIMED_OUT"
    } else {
        "_TRANSPORT"
    };
    AgentError::KafkaAcl {
        request,
        code: code.to_owned(),
        why,
    }
}

fn with_subject(e: AgentError, subject: &str) -> AgentError {
    match e {
        AgentError::KafkaAcl { request, code, why } => AgentError::KafkaAcl {
            request,
            code,
            why: format!("{subject}: {why}"),
        },
        other => other,
    }
}

/// Every broker's advertised host and port, sorted by id.
///
/// The metadata is the brokers' word, relayed to laptops that write it into their configs, so
/// each advertised host and port is parsed into the wire types here: a broker advertising
/// something that is not a host name is refused, naming the broker.
pub(crate) fn brokers(admin: &Admin<'_>) -> Result<KafkaFacts, AgentError> {
    let kafka_error = |why: String| admin.error(why);
    let bootstrap: Bootstrap = admin
        .bootstrap
        .parse()
        .map_err(|e| kafka_error(format!("agent.toml [kafka] bootstrap: {e}")))?;
    let mut brokers = admin
        .nodes()?
        .into_iter()
        .map(|b| {
            let port = u16::try_from(b.port)
                .map_err(|_| Error::InvalidPort {
                    port: b.port.into(),
                })
                .and_then(Port::try_from)
                .map_err(|e| kafka_error(format!("broker {} advertises {e}", b.id)))?;
            let host: Host = b.host.parse().map_err(|e| {
                kafka_error(format!(
                    "broker {} advertises {e}; fix its advertised.listeners",
                    b.id
                ))
            })?;
            Ok(Broker {
                id: b.id,
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

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::{DescribeAclsResponse, ResponseHeader};
    use kafka_protocol::protocol::{Encodable as _, HeaderVersion as _};

    use super::*;

    #[test]
    fn frames_a_request_and_reads_only_its_own_answer() -> anyhow::Result<()> {
        let frame = encode(&DescribeAclsRequest::default(), ACLS_VERSION)?;
        assert_eq!(
            usize::try_from(i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]))?,
            frame.len() - 4
        );
        // API key 29 (DescribeAcls), version 2, our correlation id, then the client id.
        assert_eq!(&frame[4..12], &[0, 29, 0, 2, 0, 0, 0, 1]);
        assert_eq!(&frame[12..14], &[0, 14]);
        assert_eq!(&frame[14..28], b"shiqi-ca-agent");

        let answer = |correlation: i32| -> anyhow::Result<Bytes> {
            let mut b = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(correlation)
                .encode(&mut b, DescribeAclsResponse::header_version(ACLS_VERSION))?;
            DescribeAclsResponse::default()
                .with_error_code(31)
                .encode(&mut b, ACLS_VERSION)?;
            Ok(b.freeze())
        };
        let reply = decode::<DescribeAclsRequest>(answer(CORRELATION)?, ACLS_VERSION)
            .map_err(anyhow::Error::msg)?;
        let e = refused("DescribeAcls", reply.error_code, None).expect_err("code 31");
        assert!(
            e.to_string().contains("CLUSTER_AUTHORIZATION_FAILED"),
            "{e}"
        );
        assert!(e.hint().is_some_and(|h| h.contains("super.users")));
        assert_eq!(
            decode::<DescribeAclsRequest>(answer(7)?, ACLS_VERSION)
                .err()
                .as_deref(),
            Some("the reply is not an answer to our request")
        );
        // Cut anywhere: an error, never a panic.
        let whole = answer(CORRELATION)?;
        for cut in 0..whole.len() {
            let why = decode::<DescribeAclsRequest>(whole.slice(..cut), ACLS_VERSION)
                .expect_err("cut short");
            assert!(why.starts_with("a malformed reply: "), "{why}");
        }
        Ok(())
    }

    #[test]
    fn unknown_fields_are_refused_before_sending() {
        assert!(code(ResourceType::Unknown.wire(), "resource type").is_err());
        assert_eq!(
            code(ResourceType::Cluster.wire(), "resource type").ok(),
            Some(4)
        );
        assert_eq!(code_name(54), "SECURITY_DISABLED");
        assert_eq!(code_name(-2), "ERROR_-2");
    }
}
