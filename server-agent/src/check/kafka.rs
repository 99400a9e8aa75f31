//! Kafka, tried broker by broker at the address each advertises: a client without a
//! certificate is refused, the throwaway is accepted but may see nothing, an ACL for `User:CN`
//! lets it see its topic (the principal mapping), and after revocation it is refused again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use shiqi_ca::issue::Ca;

use super::throwaway::Throwaway;
use super::{Finding, Status};
use crate::acl::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};
use crate::kafka::{Admin, AskError, METADATA_VERSION, Node, ask, tls_config};
use crate::state::Context;

/// Kafka's `TOPIC_AUTHORIZATION_FAILED`.
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new ACL may take to reach every broker's copy of the metadata.
const ACL_WAIT: Duration = Duration::from_secs(20);

const CLIENT_AUTH_FIX: &str = "set `ssl.client.auth=required` on the broker's SSL listener \
                               (`listener.name.ssl.ssl.client.auth` or `ssl.client.auth`), then \
                               restart it";
const AUTHORIZER_FIX: &str = "set `authorizer.class.name=org.apache.kafka.metadata.authorizer.\
                              StandardAuthorizer` and `allow.everyone.if.no.acl.found=false`, \
                              then restart the broker";
const MAPPING_FIX: &str = "set `ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/$1/,DEFAULT` so \
                           that a certificate's CN is its principal, then restart the broker";
const REVOCATION_FIX: &str = "start the broker's JVM with `-Dcom.sun.net.ssl.checkRevocation=true \
                              -Dcom.sun.security.enableCRLDP=true` (KAFKA_OPTS) and make `[crl] \
                              publish_dir` readable by it";

/// A broker that accepted the throwaway certificate: what the revocation check asks again.
pub(super) struct Accepting {
    node: Node,
    tls: Arc<rustls::ClientConfig>,
    /// The agent's admin identity, not revoked: a broker that refuses it too refuses everyone.
    control: Option<Arc<rustls::ClientConfig>>,
    topics: [String; 2],
}

impl Accepting {
    fn id(&self) -> String {
        broker_id(&self.node)
    }

    /// `Some(why)` once the broker refuses the (revoked) throwaway.
    ///
    /// A refusal counts only while the broker still accepts the agent's (valid) admin
    /// identity: a broker restarting, or one that cannot read the CRL, refuses everyone.
    pub(super) fn refuses(&self, ctx: &Context) -> Option<String> {
        match ctx.block_on(metadata(&self.tls, &self.node, &self.topics)) {
            Err(AskError::Refused(why)) => {
                let control = self
                    .control
                    .as_ref()
                    .map(|c| ctx.block_on(metadata(c, &self.node, &self.topics)));
                matches!(control, Some(Ok(_))).then_some(why)
            }
            _ => None,
        }
    }
}

fn broker_id(node: &Node) -> String {
    format!("broker {} at {}:{}", node.id, node.host, node.port)
}

fn target(node: &Node) -> (String, u16) {
    (
        node.host.clone(),
        u16::try_from(node.port).unwrap_or_default(),
    )
}

/// Metadata for `topics` (never creating them): each topic's error code, in order.
async fn metadata(
    tls: &Arc<rustls::ClientConfig>,
    node: &Node,
    topics: &[String],
) -> Result<Vec<i16>, AskError> {
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                })
                .collect(),
        ));
    let reply = ask(
        tls.clone(),
        target(node),
        request,
        METADATA_VERSION,
        PROBE_TIMEOUT,
    )
    .await?;
    Ok(topics
        .iter()
        .map(|t| {
            reply
                .topics
                .iter()
                .find(|r| r.name.as_ref().is_some_and(|n| n.0.as_str() == t))
                .map_or(-1, |r| r.error_code)
        })
        .collect())
}

/// Runs the Kafka checks; returns the brokers that accepted the throwaway.
pub(super) fn check(
    ctx: &Context,
    ca: &Ca,
    probe: &Throwaway,
    findings: &mut Vec<Finding>,
) -> Vec<Accepting> {
    if ctx.config.kafka.bootstrap.is_empty() {
        findings.push(Finding::skip(
            "kafka",
            "Kafka is not configured ([kafka] bootstrap is empty)",
        ));
        return Vec::new();
    }
    let admin = match Admin::connect(ctx, ca) {
        Ok(a) => a,
        Err(e) => {
            findings.push(Finding::fail("kafka", e.to_string(), hint(&e)));
            return Vec::new();
        }
    };
    let nodes = match admin.nodes() {
        Ok(n) if !n.is_empty() => n,
        Ok(_) => {
            findings.push(Finding::fail(
                "kafka.metadata",
                "the cluster reports no brokers",
                "check the brokers' logs",
            ));
            return Vec::new();
        }
        Err(e) => {
            findings.push(Finding::fail("kafka.metadata", e.to_string(), hint(&e)));
            return Vec::new();
        }
    };
    findings.push(listeners(ctx, &admin, &nodes));
    let control = ctx
        .admin_identity(ca)
        .ok()
        .and_then(|a| tls_config(ca, Some((&a.key, &a.cert))).ok());
    let (plain, ours) = match (
        tls_config(ca, None),
        tls_config(ca, Some((&probe.key, &probe.cert))),
    ) {
        (Ok(p), Ok(o)) => (p, o),
        (Err(why), _) | (_, Err(why)) => {
            findings.push(Finding::fail("kafka.tls", why, "check the CA's files"));
            return Vec::new();
        }
    };
    let topics = [format!("{}-cn", probe.name), format!("{}-dn", probe.name)];
    let mut accepting = Vec::new();
    for node in nodes {
        let id = broker_id(&node);
        match ctx.block_on(metadata(&plain, &node, &topics)) {
            Ok(_) => findings.push(Finding::fail(
                format!("kafka.client_auth@{}", node.id),
                format!("{id} answers a client without a certificate"),
                CLIENT_AUTH_FIX,
            )),
            Err(AskError::Refused(_)) => findings.push(Finding::ok(
                format!("kafka.client_auth@{}", node.id),
                format!("{id} refuses a client without a certificate"),
            )),
            Err(e) => {
                findings.push(Finding::fail(
                    format!("kafka.reach@{}", node.id),
                    format!("{id}: {e}"),
                    "the broker must listen where it advertises, as seen from this server",
                ));
                continue;
            }
        }
        let codes = match ctx.block_on(metadata(&ours, &node, &topics)) {
            Ok(codes) => codes,
            Err(e) => {
                findings.push(Finding::fail(
                    format!("kafka.accepts@{}", node.id),
                    format!("{id} refuses a certificate from this CA: {e}"),
                    "the broker's truststore must hold this CA's ca.crt, and with revocation \
                     checks on, the CRL its certificates name must be readable by the broker",
                ));
                continue;
            }
        };
        findings.push(Finding::ok(
            format!("kafka.accepts@{}", node.id),
            format!("{id} accepts a certificate from this CA"),
        ));
        if codes.iter().all(|&c| c == TOPIC_AUTHORIZATION_FAILED) {
            findings.push(Finding::ok(
                format!("kafka.authorizer@{}", node.id),
                format!("{id} denies a principal without ACLs"),
            ));
        } else {
            findings.push(Finding::fail(
                format!("kafka.authorizer@{}", node.id),
                format!("{id} lets a principal without ACLs describe topics"),
                AUTHORIZER_FIX,
            ));
        }
        accepting.push(Accepting {
            node,
            tls: ours.clone(),
            control: control.clone(),
            topics: topics.clone(),
        });
    }
    principal_mapping(&admin, ctx, probe, &accepting, findings);
    accepting
}

/// Gives `User:CN` Describe on one topic and `User:CN=…` (the whole DN, Kafka's default
/// mapping) Describe on another, then asks each broker which one it lets the throwaway see.
fn principal_mapping(
    admin: &Admin<'_>,
    ctx: &Context,
    probe: &Throwaway,
    accepting: &[Accepting],
    findings: &mut Vec<Finding>,
) {
    let passed = |findings: &[Finding], check: &str, a: &Accepting| {
        findings
            .iter()
            .any(|f| f.id == format!("kafka.{check}@{}", a.node.id) && f.status == Status::Ok)
    };
    let mut denying = Vec::new();
    for a in accepting {
        if !passed(findings, "client_auth", a) {
            findings.push(Finding::skip(
                format!("kafka.principal@{}", a.node.id),
                format!(
                    "{} asks for no client certificate, so every client is User:ANONYMOUS",
                    a.id()
                ),
            ));
        } else if passed(findings, "authorizer", a) {
            denying.push(a);
        }
    }
    if denying.is_empty() {
        return;
    }
    let principals = [
        format!("User:{}", probe.name),
        format!("User:CN={}", probe.name),
    ];
    let Some(topics) = denying.first().map(|a| a.topics.clone()) else {
        return;
    };
    let bindings: Vec<AclBinding> = principals
        .iter()
        .zip(&topics)
        .map(|(principal, topic)| AclBinding {
            resource: ResourceType::Topic,
            name: topic.clone(),
            pattern: PatternType::Literal,
            principal: principal.clone(),
            host: "*".to_owned(),
            operation: Operation::Describe,
            permission: Permission::Allow,
        })
        .collect();
    if let Err(e) = admin.create_acls(&bindings) {
        findings.push(Finding::fail(
            "kafka.principal",
            format!("cannot create the throwaway's ACLs: {e}"),
            hint(&e),
        ));
        return;
    }
    await_mapping(ctx, probe, denying, findings);
    let filters: Vec<AclFilter> = principals
        .iter()
        .map(|p| AclFilter {
            principal: Some(p.clone()),
            ..AclFilter::default()
        })
        .collect();
    if let Err(e) = admin.delete_acls(&filters) {
        findings.push(Finding::warn(
            "kafka.cleanup",
            format!("cannot delete the throwaway's ACLs: {e}"),
            format!(
                "delete them by hand: kafka-acls --remove --allow-principal User:{} …",
                probe.name
            ),
        ));
    }
}

/// Asks each broker in `denying` which of the two topics it lets the throwaway see, until each
/// answered or [`ACL_WAIT`] passed (ACLs reach every broker a little after they are created).
fn await_mapping(
    ctx: &Context,
    probe: &Throwaway,
    denying: Vec<&Accepting>,
    findings: &mut Vec<Finding>,
) {
    let started = Instant::now();
    let mut pending: Vec<&Accepting> = denying;
    while !pending.is_empty() && started.elapsed() < ACL_WAIT {
        pending.retain(|a| {
            let id = format!("kafka.principal@{}", a.node.id);
            match ctx
                .block_on(metadata(&a.tls, &a.node, &a.topics))
                .as_deref()
            {
                Ok([cn, _]) if *cn != TOPIC_AUTHORIZATION_FAILED => {
                    findings.push(Finding::ok(
                        id,
                        format!("{} maps CN={} to User:{}", a.id(), probe.name, probe.name),
                    ));
                    false
                }
                Ok([_, dn]) if *dn != TOPIC_AUTHORIZATION_FAILED => {
                    findings.push(Finding::fail(
                        id,
                        format!(
                            "{} maps a certificate to its whole DN (User:CN={}), not its CN: ACLs \
                             for User:NAME never match",
                            a.id(),
                            probe.name
                        ),
                        MAPPING_FIX,
                    ));
                    false
                }
                _ => true,
            }
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    for a in pending {
        findings.push(Finding::fail(
            format!("kafka.principal@{}", a.node.id),
            format!(
                "{} lets the throwaway see neither topic after {} s: its principal is neither \
                 User:{} nor User:CN={}",
                a.id(),
                ACL_WAIT.as_secs(),
                probe.name,
                probe.name
            ),
            MAPPING_FIX,
        ));
    }
}

/// Whether each advertised address resolves here: the tunnel connects to it from this server.
fn listeners(ctx: &Context, admin: &Admin<'_>, nodes: &[Node]) -> Finding {
    if let Err(e) = crate::kafka::brokers(admin) {
        return Finding::fail("kafka.listeners", e.to_string(), hint(&e));
    }
    let mut unresolved = Vec::new();
    for n in nodes {
        let found = ctx.block_on(async {
            tokio::time::timeout(PROBE_TIMEOUT, tokio::net::lookup_host((n.host.as_str(), 0)))
                .await
                .ok()
                .and_then(Result::ok)
                .is_some_and(|mut a| a.next().is_some())
        });
        if !found {
            unresolved.push(broker_id(n));
        }
    }
    let list = nodes
        .iter()
        .map(|n| format!("{}:{}", n.host, n.port))
        .collect::<Vec<_>>()
        .join(", ");
    if unresolved.is_empty() {
        Finding::ok(
            "kafka.listeners",
            format!(
                "{} broker(s) advertise {list}; each resolves here, so the tunnel can carry them",
                nodes.len()
            ),
        )
    } else {
        Finding::fail(
            "kafka.listeners",
            format!(
                "{} advertise(s) a name this server cannot resolve",
                unresolved.join(", ")
            ),
            "each broker's advertised.listeners must name a host this server resolves (the \
             tunnel connects from here): fix it, or add it to /etc/hosts",
        )
    }
}

/// The finding for a broker that refused the revoked throwaway after `took`.
pub(super) fn revoked(a: &Accepting, took: Duration, why: &str) -> Finding {
    let secs = took.as_secs_f64();
    Finding::ok(
        format!("kafka.revocation@{}", a.node.id),
        format!(
            "{} refused the revoked certificate after {secs:.1} s ({})",
            a.id(),
            shiqi_ca::text::one_line(why, 120)
        ),
    )
    .with_seconds(secs)
}

/// The finding for a broker that still accepts the revoked throwaway.
pub(super) fn not_revoked(a: &Accepting) -> Finding {
    Finding::fail(
        format!("kafka.revocation@{}", a.node.id),
        format!(
            "{} still accepts the revoked certificate after {} s",
            a.id(),
            super::REVOCATION_WAIT.as_secs()
        ),
        REVOCATION_FIX,
    )
}

fn hint(e: &crate::AgentError) -> String {
    e.hint()
        .map_or_else(|| "see the error".to_owned(), |h| h.to_string())
}
