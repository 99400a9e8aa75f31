//! The local endpoint's only change to Kafka traffic: every broker address in an answer becomes
//! `127.0.0.1:<the local port of that broker>`. Pure (no I/O); the messages are `kafka-protocol`'s,
//! generated from Kafka's own definitions, so every version a client may use is covered.
//!
//! Answers that name brokers: Metadata, FindCoordinator (one coordinator before v4, a batch
//! after), DescribeCluster, and the `node_endpoints` that Produce (v10+), Fetch (v16+),
//! ShareFetch and ShareAcknowledge return with a "not the leader" error so the client can go
//! straight to the new leader (KIP-951). ApiVersions passes through, except that the APIs
//! rewritten here are capped at the newest version this build can decode: a newer broker must
//! not talk a client into a version whose addresses would pass unrewritten.
//!
//! Requests pass through byte for byte; [`Request::peek`] reads only what the relay needs to pair
//! each answer with its request (and whether one comes at all: Produce with `acks=0`).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DescribeClusterResponse, FetchResponse, FindCoordinatorResponse,
    MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader,
    ShareAcknowledgeResponse, ShareFetchResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use shiqi_kafka::{message, version};

/// The host every rewritten address names.
pub const LOCAL_HOST: &str = "127.0.0.1";

/// The largest answer decoded among those that carry no records (Metadata, FindCoordinator,
/// DescribeCluster, ApiVersions): decoding allocates a struct per entry, several times the
/// entry's bytes, so a hostile broker's 256 MiB Metadata could cost gigabytes. A cluster of
/// 200,000 partitions answers Metadata in about 10 MiB.
pub const MAX_DECODED: usize = 32 * 1024 * 1024;

/// A broker as an answer names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The node id.
    pub id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
}

/// Gives each broker its local port (binding one for a broker seen for the first time);
/// `None` when none can be had, and the answer is then refused rather than passed on with an
/// address that leads around the tunnel.
pub trait Ports {
    /// The local port for `node`.
    fn local_port(&mut self, node: &Node) -> Option<u16>;
}

/// What the relay needs of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The API key.
    pub api_key: i16,
    /// The API version.
    pub version: i16,
    /// The id the answer repeats.
    pub correlation_id: i32,
    /// Whether the broker answers it (not Produce with `acks=0`).
    pub answered: bool,
}

impl Request {
    /// Reads the header of one request frame (without its length prefix).
    ///
    /// # Errors
    /// A frame too short for a header, or a Produce request that does not decode.
    pub fn peek(frame: &Bytes) -> Result<Self, String> {
        let Some(key) = message::peek_request(frame) else {
            return Err(format!(
                "a request of {} bytes is shorter than its header",
                frame.len()
            ));
        };
        let answered = if key.api_key == ApiKey::Produce as i16 {
            produce_acks(frame, key.version)? != 0
        } else {
            true
        };
        Ok(Self {
            api_key: key.api_key,
            version: key.version,
            correlation_id: key.correlation_id,
            answered,
        })
    }
}

/// The `acks` of a Produce request (its records are sliced, not copied).
fn produce_acks(frame: &Bytes, version: i16) -> Result<i16, String> {
    let mut buf = frame.clone();
    let header_version = ProduceRequest::header_version(version);
    RequestHeader::decode(&mut buf, header_version)
        .and_then(|_| ProduceRequest::decode(&mut buf, version))
        .map(|r| r.acks)
        .map_err(|e| format!("a Produce v{version} request does not decode: {e}"))
}

/// Whether answers to `api_key` may name brokers (and so must be decoded).
pub fn rewrites(api_key: i16, version: i16) -> bool {
    match ApiKey::try_from(api_key) {
        Ok(ApiKey::Metadata | ApiKey::FindCoordinator | ApiKey::DescribeCluster) => true,
        Ok(ApiKey::ApiVersions | ApiKey::ShareFetch | ApiKey::ShareAcknowledge) => true,
        Ok(ApiKey::Produce) => version >= 10,
        Ok(ApiKey::Fetch) => version >= 16,
        _ => false,
    }
}

/// The answer (one frame, without its length prefix) to `request` with every broker address
/// made local; `None` when it names none and passes unchanged.
///
/// # Errors
/// An answer that does not decode as the request's API and version, or a broker that could not
/// get a local port. The relay closes that one client connection.
pub fn response(
    request: &Request,
    frame: &Bytes,
    ports: &mut dyn Ports,
) -> Result<Option<BytesMut>, String> {
    if !rewrites(request.api_key, request.version) {
        return Ok(None);
    }
    let Ok(key) = ApiKey::try_from(request.api_key) else {
        return Ok(None);
    };
    let v = request.version;
    let carries_records = matches!(
        key,
        ApiKey::Produce | ApiKey::Fetch | ApiKey::ShareFetch | ApiKey::ShareAcknowledge
    );
    if !carries_records && frame.len() > MAX_DECODED {
        return Err(format!(
            "a {key:?} answer of {} bytes is over the {MAX_DECODED} bytes this endpoint decodes",
            frame.len()
        ));
    }
    let bad = |e: anyhow::Error| format!("a {key:?} v{v} answer does not decode: {e}");
    let mut buf = frame.clone();
    let header = ResponseHeader::decode(&mut buf, key.response_header_version(v)).map_err(bad)?;
    let mut out = Rewriter {
        ports,
        changed: false,
    };
    let body = match key {
        ApiKey::Metadata => {
            let mut m = MetadataResponse::decode(&mut buf, v).map_err(bad)?;
            for b in &mut m.brokers {
                out.node(b.node_id.0, &mut b.host, &mut b.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::FindCoordinator => {
            let mut m = FindCoordinatorResponse::decode(&mut buf, v).map_err(bad)?;
            // v4 batched the answer: the single coordinator's fields are absent (zeroes).
            if v < 4 {
                out.node(m.node_id.0, &mut m.host, &mut m.port)?;
            }
            for c in &mut m.coordinators {
                out.node(c.node_id.0, &mut c.host, &mut c.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::DescribeCluster => {
            let mut m = DescribeClusterResponse::decode(&mut buf, v).map_err(bad)?;
            for b in &mut m.brokers {
                out.node(b.broker_id.0, &mut b.host, &mut b.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::Produce => {
            let mut m = ProduceResponse::decode(&mut buf, v).map_err(bad)?;
            for n in &mut m.node_endpoints {
                out.node(n.node_id.0, &mut n.host, &mut n.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::Fetch => {
            let mut m = FetchResponse::decode(&mut buf, v).map_err(bad)?;
            for n in &mut m.node_endpoints {
                out.node(n.node_id.0, &mut n.host, &mut n.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::ShareFetch => {
            let mut m = ShareFetchResponse::decode(&mut buf, v).map_err(bad)?;
            for n in &mut m.node_endpoints {
                out.node(n.node_id.0, &mut n.host, &mut n.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::ShareAcknowledge => {
            let mut m = ShareAcknowledgeResponse::decode(&mut buf, v).map_err(bad)?;
            for n in &mut m.node_endpoints {
                out.node(n.node_id.0, &mut n.host, &mut n.port)?;
            }
            out.encode(&m, v)?
        }
        ApiKey::ApiVersions => return api_versions(frame, v),
        _ => return Ok(None),
    };
    let Some(body) = body else { return Ok(None) };
    let mut framed = BytesMut::with_capacity(frame.len() + 16);
    header
        .encode(&mut framed, key.response_header_version(v))
        .map_err(|e| format!("cannot encode a {key:?} header: {e}"))?;
    framed.extend_from_slice(&body);
    Ok(Some(framed))
}

struct Rewriter<'a> {
    ports: &'a mut dyn Ports,
    changed: bool,
}

impl Rewriter<'_> {
    /// Points one broker entry at its local port. The entry for "no broker" (id -1 and an
    /// empty host: no coordinator yet) stays as it is; a host under a negative id is refused,
    /// since clients would still dial it (Java's coordinator code takes any id), and so is an
    /// empty host under a broker's id: Java and Go clients dial `""` as this machine, which is
    /// whatever listens on that port here (issue 42).
    fn node(&mut self, id: i32, host: &mut StrBytes, port: &mut i32) -> Result<(), String> {
        if host.is_empty() && id < 0 {
            return Ok(());
        }
        if host.is_empty() {
            return Err(format!(
                "an answer names broker {id} with no host (port {port}); closing the connection \
                 rather than sending the client to this machine's port {port}"
            ));
        }
        if id < 0 {
            return Err(format!(
                "an answer names {:?} under broker id {id}; closing the connection rather than \
                 sending the client there",
                host.as_str()
            ));
        }
        let node = Node {
            id,
            host: host.to_string(),
            port: *port,
        };
        let local = self.ports.local_port(&node).ok_or_else(|| {
            format!(
                "broker {id} ({:?}, port {}) has no local port; closing the connection rather \
                 than sending the client around the tunnel",
                node.host, node.port
            )
        })?;
        *host = StrBytes::from_static_str(LOCAL_HOST);
        *port = i32::from(local);
        self.changed = true;
        Ok(())
    }

    /// The body, encoded again when something changed, and read back: an encoding that does
    /// not decode to what was meant (an encoder bug, such as the one the fuzzer found in
    /// `kafka-protocol`'s tagged fields) could make the client read an address this module never
    /// saw, so it is refused rather than sent.
    fn encode<M>(&self, m: &M, version: i16) -> Result<Option<BytesMut>, String>
    where
        M: Encodable + Decodable + PartialEq,
    {
        if !self.changed {
            return Ok(None);
        }
        let mut body = BytesMut::new();
        m.encode(&mut body, version)
            .map_err(|e| format!("cannot encode a rewritten answer: {e}"))?;
        let mut back = Bytes::copy_from_slice(&body);
        let faithful = M::decode(&mut back, version).is_ok_and(|b| b == *m) && back.is_empty();
        if !faithful {
            return Err("a rewritten answer does not read back as written".to_owned());
        }
        Ok(Some(body))
    }
}

/// ApiVersions with every rewritten API capped at the newest version this build decodes. Its
/// header is v0 at every version. An answer that does not decode at the request's version (a
/// broker that does not support it answers in v0, KIP-511) passes unchanged: the client reads
/// it as the error it is.
fn api_versions(frame: &Bytes, v: i16) -> Result<Option<BytesMut>, String> {
    let mut buf = frame.clone();
    let header_version = ApiKey::ApiVersions.response_header_version(v);
    let Ok(header) = ResponseHeader::decode(&mut buf, header_version) else {
        return Ok(None);
    };
    let Ok(mut m) = ApiVersionsResponse::decode(&mut buf, v) else {
        return Ok(None);
    };
    let mut changed = false;
    m.api_keys.retain_mut(|a| {
        if !rewrites(a.api_key, a.max_version) {
            return true;
        }
        let Some(newest) = version::newest(a.api_key) else {
            return true;
        };
        if a.max_version > newest {
            a.max_version = newest;
            changed = true;
        }
        let keep = a.min_version <= a.max_version;
        changed |= !keep;
        keep
    });
    if !changed {
        return Ok(None);
    }
    let mut out = BytesMut::with_capacity(frame.len());
    header
        .encode(&mut out, header_version)
        .and_then(|()| m.encode(&mut out, v))
        .map_err(|e| format!("cannot encode an ApiVersions answer: {e}"))?;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    use kafka_protocol::messages::metadata_response::MetadataResponseBroker;

    use super::*;

    /// Ports 40000 + id, remembering what it was asked.
    #[derive(Default)]
    struct Fixed(BTreeMap<i32, (String, i32)>, bool);

    impl Ports for Fixed {
        fn local_port(&mut self, n: &Node) -> Option<u16> {
            if self.1 {
                return None;
            }
            self.0.insert(n.id, (n.host.clone(), n.port));
            u16::try_from(40000 + n.id).ok()
        }
    }

    fn frame<M: Encodable + HeaderVersion>(correlation_id: i32, m: &M, v: i16) -> Bytes {
        let mut b = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut b, M::header_version(v))
            .expect("header");
        m.encode(&mut b, v).expect("body");
        b.freeze()
    }

    fn req(key: ApiKey, version: i16) -> Request {
        Request {
            api_key: key as i16,
            version,
            correlation_id: 7,
            answered: true,
        }
    }

    fn metadata() -> MetadataResponse {
        let broker = |id: i32, host: &'static str| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_static_str(host))
                .with_port(9093)
        };
        MetadataResponse::default().with_brokers(vec![
            broker(1, "broker-1.kafka.internal"),
            broker(2, "broker-2.kafka.internal"),
        ])
    }

    #[test]
    fn metadata_names_only_local_ports_at_every_version() {
        for v in 0..=ApiKey::Metadata.valid_versions().max {
            let mut ports = Fixed::default();
            let out = response(
                &req(ApiKey::Metadata, v),
                &frame(7, &metadata(), v),
                &mut ports,
            )
            .expect("rewrite")
            .expect("changed")
            .freeze();
            let mut buf = out;
            let h = ResponseHeader::decode(&mut buf, MetadataResponse::header_version(v))
                .expect("header");
            assert_eq!(h.correlation_id, 7);
            let m = MetadataResponse::decode(&mut buf, v).expect("body");
            let got: Vec<(i32, String, i32)> = m
                .brokers
                .iter()
                .map(|b| (b.node_id.0, b.host.to_string(), b.port))
                .collect();
            assert_eq!(
                got,
                [
                    (1, "127.0.0.1".to_owned(), 40001),
                    (2, "127.0.0.1".to_owned(), 40002)
                ],
                "v{v}"
            );
            assert_eq!(ports.0[&2], ("broker-2.kafka.internal".to_owned(), 9093));
        }
    }

    #[test]
    fn coordinators_single_and_batched() {
        let one = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(3))
            .with_host(StrBytes::from_static_str("broker-3.kafka.internal"))
            .with_port(9093);
        let out = response(
            &req(ApiKey::FindCoordinator, 3),
            &frame(7, &one, 3),
            &mut Fixed::default(),
        )
        .expect("rewrite")
        .expect("changed");
        let mut buf = out.freeze();
        ResponseHeader::decode(&mut buf, FindCoordinatorResponse::header_version(3)).expect("h");
        let m = FindCoordinatorResponse::decode(&mut buf, 3).expect("body");
        assert_eq!((m.host.as_str(), m.port), ("127.0.0.1", 40003));

        let batch = FindCoordinatorResponse::default().with_coordinators(vec![
            Coordinator::default()
                .with_key(StrBytes::from_static_str("group-a"))
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("broker-2.kafka.internal"))
                .with_port(9093),
            // Not known yet: left as the broker said.
            Coordinator::default()
                .with_key(StrBytes::from_static_str("group-b"))
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(15),
        ]);
        for v in 4..=ApiKey::FindCoordinator.valid_versions().max {
            let out = response(
                &req(ApiKey::FindCoordinator, v),
                &frame(7, &batch, v),
                &mut Fixed::default(),
            )
            .expect("rewrite")
            .expect("changed");
            let mut buf = out.freeze();
            ResponseHeader::decode(&mut buf, FindCoordinatorResponse::header_version(v))
                .expect("h");
            let m = FindCoordinatorResponse::decode(&mut buf, v).expect("body");
            let c: Vec<(&str, i32)> = m
                .coordinators
                .iter()
                .map(|c| (c.host.as_str(), c.port))
                .collect();
            assert_eq!(c, [("127.0.0.1", 40002), ("", -1)], "v{v}");
        }
    }

    #[test]
    fn unknown_tagged_fields_survive_the_rewrite_even_past_two_to_the_31() {
        // The fuzzer's find: a tag of 2^31 or more is kept as a negative key, and the encoder
        // counted it without writing it, so the client read the next bytes as that field.
        for tag in [5_i32, -1_014_559_204] {
            let mut m = FindCoordinatorResponse::default()
                .with_node_id(BrokerId(3))
                .with_host(StrBytes::from_static_str("broker-3.kafka.internal"))
                .with_port(9093);
            m.unknown_tagged_fields
                .insert(tag, Bytes::from_static(b"opaque"));
            let out = response(
                &req(ApiKey::FindCoordinator, 3),
                &frame(7, &m, 3),
                &mut Fixed::default(),
            )
            .expect("rewrite")
            .expect("changed");
            let mut buf = out.freeze();
            ResponseHeader::decode(&mut buf, FindCoordinatorResponse::header_version(3))
                .expect("h");
            let back = FindCoordinatorResponse::decode(&mut buf, 3).expect("body");
            assert!(buf.is_empty(), "tag {tag}: bytes left over");
            assert_eq!((back.host.as_str(), back.port), ("127.0.0.1", 40003));
            assert_eq!(
                back.unknown_tagged_fields[&tag],
                &b"opaque"[..],
                "tag {tag}"
            );
        }
    }

    #[test]
    fn a_host_under_a_negative_id_is_refused_not_passed() {
        let m = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::from_static_str("evil.example"))
            .with_port(9092);
        let err = response(
            &req(ApiKey::FindCoordinator, 3),
            &frame(7, &m, 3),
            &mut Fixed::default(),
        )
        .expect_err("refused");
        assert!(err.contains("\"evil.example\" under broker id -1"), "{err}");
    }

    #[test]
    fn an_empty_host_under_a_broker_id_is_refused_and_no_coordinator_passes() {
        // Seed: issue 42, a broker entry `""` that Java and Go clients dial as loopback.
        for m in [
            FindCoordinatorResponse::default()
                .with_node_id(BrokerId(2))
                .with_port(3306),
            FindCoordinatorResponse::default().with_coordinators(vec![
                Coordinator::default()
                    .with_node_id(BrokerId(0))
                    .with_port(22),
            ]),
        ] {
            let v = if m.coordinators.is_empty() { 3 } else { 4 };
            let err = response(
                &req(ApiKey::FindCoordinator, v),
                &frame(7, &m, v),
                &mut Fixed::default(),
            )
            .expect_err("refused");
            assert!(err.contains("with no host"), "{err}");
        }
        let mut meta = metadata();
        meta.brokers[1].host = StrBytes::from_static_str("");
        let err = response(
            &req(ApiKey::Metadata, 12),
            &frame(7, &meta, 12),
            &mut Fixed::default(),
        )
        .expect_err("refused");
        assert!(err.contains("broker 2 with no host"), "{err}");
        // "No coordinator yet" (id -1, no host) is what brokers say; it passes as it was.
        let none = FindCoordinatorResponse::default()
            .with_error_code(15)
            .with_node_id(BrokerId(-1))
            .with_port(-1);
        let got = response(
            &req(ApiKey::FindCoordinator, 3),
            &frame(7, &none, 3),
            &mut Fixed::default(),
        );
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn an_answer_without_records_over_the_decode_limit_is_refused_undecoded() {
        let mut big = vec![0_u8; MAX_DECODED + 1];
        big[3] = 7; // the correlation id
        let big = Bytes::from(big);
        for key in [
            ApiKey::Metadata,
            ApiKey::FindCoordinator,
            ApiKey::DescribeCluster,
        ] {
            let err = response(&req(key, 1), &big, &mut Fixed::default()).expect_err("refused");
            assert!(err.contains("over the"), "{err}");
        }
    }

    #[test]
    fn answers_without_brokers_pass_unchanged() {
        // A Produce answer with no node endpoints is not re-encoded.
        let p = ProduceResponse::default();
        let got = response(
            &req(ApiKey::Produce, 11),
            &frame(7, &p, 11),
            &mut Fixed::default(),
        );
        assert_eq!(got, Ok(None));
        // Nor is any API that never names a broker (not even decoded).
        let junk = Bytes::from_static(b"\0\0\0\x07not a kafka message");
        let got = response(&req(ApiKey::JoinGroup, 9), &junk, &mut Fixed::default());
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn a_broker_without_a_port_or_a_garbled_answer_is_refused() {
        let mut none = Fixed(BTreeMap::new(), true);
        let err = response(
            &req(ApiKey::Metadata, 12),
            &frame(7, &metadata(), 12),
            &mut none,
        )
        .expect_err("no port");
        assert!(err.contains("broker 1"), "{err}");
        // A count of two billion brokers in eight bytes: an error, not an abort.
        let hostile = Bytes::from_static(b"\0\0\0\x07\0\0\0\0\x7f\xff\xff\xff\0\0");
        let err = response(&req(ApiKey::Metadata, 1), &hostile, &mut Fixed::default())
            .expect_err("garbled");
        assert!(err.contains("Metadata v1"), "{err}");
    }

    #[test]
    fn api_versions_caps_what_cannot_be_rewritten() {
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        let newest = ApiKey::Metadata.valid_versions().max;
        let m = ApiVersionsResponse::default().with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(ApiKey::Metadata as i16)
                .with_min_version(0)
                .with_max_version(newest + 5),
            ApiVersion::default()
                .with_api_key(ApiKey::JoinGroup as i16)
                .with_min_version(0)
                .with_max_version(99),
        ]);
        let out = response(
            &req(ApiKey::ApiVersions, 3),
            &frame(7, &m, 3),
            &mut Fixed::default(),
        )
        .expect("rewrite")
        .expect("changed");
        let mut buf = out.freeze();
        ResponseHeader::decode(&mut buf, 0).expect("h");
        let back = ApiVersionsResponse::decode(&mut buf, 3).expect("body");
        let caps: Vec<(i16, i16)> = back
            .api_keys
            .iter()
            .map(|a| (a.api_key, a.max_version))
            .collect();
        assert_eq!(
            caps,
            [
                (ApiKey::Metadata as i16, newest),
                (ApiKey::JoinGroup as i16, 99)
            ]
        );
    }

    #[test]
    fn produce_with_acks_zero_expects_no_answer() {
        for (acks, answered) in [(0, false), (1, true), (-1, true)] {
            let mut b = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(ApiKey::Produce as i16)
                .with_request_api_version(9)
                .with_correlation_id(42)
                .encode(&mut b, ProduceRequest::header_version(9))
                .expect("h");
            ProduceRequest::default()
                .with_acks(acks)
                .encode(&mut b, 9)
                .expect("body");
            let r = Request::peek(&b.freeze()).expect("peek");
            assert_eq!((r.correlation_id, r.answered), (42, answered));
        }
        assert!(Request::peek(&Bytes::from_static(b"\0\x03")).is_err());
    }
}
