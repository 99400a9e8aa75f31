//! The few Kafka protocol messages the laptop's probes send, and what they read in the answers:
//! `ApiVersions` v0 (every broker answers it, before any authorization), `Metadata` v4 for no
//! topics (the brokers the cluster advertises; needs no ACL) and `DescribeCluster` (needs no ACL
//! either) at the highest version both sides speak: v2 lists fenced brokers too (every registered
//! broker, serving or not; KIP-1073, Kafka 4.0+), v1 (3.7+) and v0 (2.8+) only serving ones.
//! Framing, the correlation check, our client id and the versions are `shiqi_kafka`'s, the one
//! Kafka wire home the local endpoint and the agent use too. No I/O here.
//!
//! The probes read any server a config names (`doctor --bootstrap`): the vendored crate refuses
//! an array count beyond the bytes left before allocating (vendor/kafka-protocol/PATCHED.md),
//! and a frame over [`MAX_FRAME`] is not read at all.

use bytes::Bytes;
use kafka_protocol::messages::{ApiVersionsRequest, DescribeClusterRequest, MetadataRequest};
use kafka_protocol::protocol::Request;
use shiqi_kafka::{ClientId, frame, message, version};

/// `DescribeCluster`'s `EndpointType`: the brokers' listeners (not the controllers').
const ENDPOINT_BROKERS: i8 = 1;
/// The broker's reply when it wants another ApiVersions version; still a Kafka answer.
const UNSUPPORTED_VERSION: i16 = 35;
/// Frames larger than this are not an answer to these requests.
pub(crate) const MAX_FRAME: usize = frame::MAX_PROBE_ANSWER;

/// A length-prefixed request: `body` at `version` behind its header.
fn request<R: Request>(version: i16, correlation: i32, body: &R) -> Vec<u8> {
    // These fixed requests always encode (every field is within its type's range, pinned by
    // the tests below); an empty request would read as a closed connection, never be sent torn.
    message::request(body, version, correlation, ClientId::Connect)
        .map(|frame| frame.to_vec())
        .unwrap_or_default()
}

/// `ApiVersions` v0.
pub(crate) fn api_versions_request(correlation: i32) -> Vec<u8> {
    request(
        version::API_VERSIONS,
        correlation,
        &ApiVersionsRequest::default(),
    )
}

/// `Metadata` v4 for no topics (an empty array, not null, which means all topics), without
/// creating any.
pub(crate) fn metadata_request(correlation: i32) -> Vec<u8> {
    let body = MetadataRequest::default()
        .with_topics(Some(Vec::new()))
        .with_allow_auto_topic_creation(false);
    request(version::PROBE_METADATA, correlation, &body)
}

/// `DescribeCluster` at `version` (at most ours, [`version::DESCRIBE_CLUSTER`]): the brokers'
/// listeners (v1+), fenced brokers too (v2+). A field the version lacks is left at its default,
/// which is what leaves it out of the encoding.
pub(crate) fn describe_cluster_request(correlation: i32, version: i16) -> Vec<u8> {
    let version = version.min(version::DESCRIBE_CLUSTER);
    let mut body =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(false);
    if version >= 1 {
        body = body.with_endpoint_type(ENDPOINT_BROKERS);
    }
    if version >= 2 {
        body = body.with_include_fenced_brokers(true);
    }
    request(version, correlation, &body)
}

/// The `DescribeCluster` version to send to a broker whose `ApiVersions` answer offers the range
/// `theirs` (min, max): [`version::agreed`] with ours; `None` before Kafka 2.8.
pub(crate) fn describe_cluster_version(theirs: Option<(i16, i16)>) -> Option<i16> {
    version::agreed(version::DESCRIBE_CLUSTER, theirs)
}

/// One broker registered with the cluster, as `DescribeCluster` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RegisteredBroker {
    /// `node.id`.
    pub(crate) id: i32,
    /// The advertised host.
    pub(crate) host: String,
    /// The advertised port.
    pub(crate) port: i32,
    /// Registered but not serving: stopped, restarting, or cut off from the controllers. The
    /// brokers leave it out of `Metadata` until it is back.
    pub(crate) fenced: bool,
}

/// What `DescribeCluster` said: the brokers, and whether it lists fenced ones (v2, Kafka 4.0+);
/// below v2 a broker that is not serving is simply not there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    /// The brokers listed.
    pub(crate) brokers: Vec<RegisteredBroker>,
    /// Whether fenced brokers are among them (else only serving ones are).
    pub(crate) fenced_listed: bool,
}

/// Decodes an answer body (after the length) to a request of ours: its header must repeat
/// `correlation`.
fn answer<R: Request>(body: &[u8], correlation: i32, version: i16) -> Result<R::Response, String> {
    if body.len() > MAX_FRAME {
        return Err(format!("a {}-byte answer", body.len()));
    }
    let mut buf = Bytes::copy_from_slice(body);
    message::answer::<R>(&mut buf, version, correlation).map_err(|e| e.to_string())
}

/// Reads a `DescribeCluster` response body (after the length) to a request sent at `version`:
/// every registered broker (below v2, every serving one).
///
/// # Errors
/// A reply to another request, the broker's error (with its message), or a malformed body.
pub(crate) fn read_describe_cluster(
    body: &[u8],
    correlation: i32,
    version: i16,
) -> Result<Vec<RegisteredBroker>, String> {
    let m = answer::<DescribeClusterRequest>(body, correlation, version)?;
    if m.error_code != 0 {
        return Err(format!(
            "the broker answered DescribeCluster with error code {}{}",
            m.error_code,
            m.error_message
                .map(|msg| format!(": {msg}"))
                .unwrap_or_default()
        ));
    }
    Ok(m.brokers
        .into_iter()
        .map(|b| RegisteredBroker {
            id: b.broker_id.0,
            host: b.host.to_string(),
            port: b.port,
            fenced: b.is_fenced,
        })
        .collect())
}

/// What a Java client makes of a reply's first four bytes: the size it will allocate
/// (KAFKA-4090: a TLS alert reads as ~336 MiB).
pub(crate) fn frame_size(reply: &[u8]) -> Option<u32> {
    frame::declared_len(reply)
}

/// Whether the first bytes of a reply (length prefix included) are a Kafka frame answering
/// `correlation`.
pub(crate) fn answers(reply: &[u8], correlation: i32) -> bool {
    message::answers(reply, correlation, MAX_FRAME)
}

/// What a broker's `ApiVersions` answer offers: each API's versions (min, max), by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Offered(std::collections::BTreeMap<i16, (i16, i16)>);

impl Offered {
    /// How many APIs.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The versions (min, max) of `key` the broker speaks, if any.
    pub(crate) fn range(&self, key: kafka_protocol::messages::ApiKey) -> Option<(i16, i16)> {
        self.0.get(&(key as i16)).copied()
    }
}

/// Reads an `ApiVersions` v0 response body (after the length): the APIs offered.
///
/// # Errors
/// A reply to another request, a broker error, or a cut-off body.
pub(crate) fn read_api_versions(body: &[u8], correlation: i32) -> Result<Offered, String> {
    // v0 is answered in v0 even on UNSUPPORTED_VERSION, so the array follows either way.
    let m = answer::<ApiVersionsRequest>(body, correlation, version::API_VERSIONS)?;
    if m.error_code != 0 && m.error_code != UNSUPPORTED_VERSION {
        return Err(format!(
            "the broker answered with error code {}",
            m.error_code
        ));
    }
    Ok(Offered(
        m.api_keys
            .iter()
            .map(|a| (a.api_key, (a.min_version, a.max_version)))
            .collect(),
    ))
}

/// One broker of a `Metadata` answer, as the cluster advertises it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AdvertisedBroker {
    /// `node.id`.
    pub(crate) id: i32,
    /// The advertised host.
    pub(crate) host: String,
    /// The advertised port.
    pub(crate) port: i32,
}

/// Reads a `Metadata` v4 response body (after the length): the brokers.
///
/// # Errors
/// A reply to another request or a malformed body.
pub(crate) fn read_metadata(
    body: &[u8],
    correlation: i32,
) -> Result<Vec<AdvertisedBroker>, String> {
    let m = answer::<MetadataRequest>(body, correlation, version::PROBE_METADATA)?;
    Ok(m.brokers
        .into_iter()
        .map(|b| AdvertisedBroker {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_api_versions_v0() {
        assert_eq!(
            api_versions_request(0x5331_0001),
            [
                0, 0, 0, 23, // length
                0, 18, 0, 0, // ApiVersions v0
                0x53, 0x31, 0, 1, // correlation id
                0, 13, b's', b'h', b'i', b'q', b'i', b'-', b'c', b'o', b'n', b'n', b'e', b'c',
                b't',
            ]
        );
    }

    #[test]
    fn encodes_metadata_v4_for_no_topics() {
        let r = metadata_request(7);
        assert_eq!(frame_size(&r), Some(r.len() as u32 - 4));
        assert_eq!(&r[4..12], &[0, 3, 0, 4, 0, 0, 0, 7]);
        // topics: an empty array (0), not null (-1); allow_auto_topic_creation: false.
        assert_eq!(&r[r.len() - 5..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn reads_api_versions_answers_and_refuses_others() {
        let mut reply = 9i32.to_be_bytes().to_vec();
        reply.extend_from_slice(&0i16.to_be_bytes());
        reply.extend_from_slice(&2i32.to_be_bytes());
        // Two entries (key, min, max): Metadata 0-13, ApiVersions 0-4.
        for v in [3i16, 0, 13, 18, 0, 4] {
            reply.extend_from_slice(&v.to_be_bytes());
        }
        let offered = read_api_versions(&reply, 9).expect("offered");
        assert_eq!(offered.len(), 2);
        assert_eq!(
            offered.range(kafka_protocol::messages::ApiKey::Metadata),
            Some((0, 13))
        );
        assert_eq!(
            offered.range(kafka_protocol::messages::ApiKey::DescribeCluster),
            None
        );
        // A count the bytes cannot hold is refused, not allocated.
        let mut lie = reply.clone();
        lie[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(read_api_versions(&lie, 9).is_err());
        reply[5] = 35;
        assert_eq!(read_api_versions(&reply, 9).map(|o| o.len()), Ok(2));
        reply[5] = 58;
        assert!(read_api_versions(&reply, 9).is_err());
        assert!(read_api_versions(&reply, 8).is_err());
        assert!(read_api_versions(b"HTTP/1.1 400", 9).is_err());
    }

    fn metadata_reply(correlation: i32, brokers: &[(i32, &str, i32)]) -> Vec<u8> {
        let mut b = correlation.to_be_bytes().to_vec();
        b.extend_from_slice(&0i32.to_be_bytes()); // throttle
        b.extend_from_slice(&(brokers.len() as i32).to_be_bytes());
        for (id, host, port) in brokers {
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&(host.len() as i16).to_be_bytes());
            b.extend_from_slice(host.as_bytes());
            b.extend_from_slice(&port.to_be_bytes());
            b.extend_from_slice(&(-1i16).to_be_bytes()); // no rack
        }
        b.extend_from_slice(&(-1i16).to_be_bytes()); // cluster id
        b.extend_from_slice(&1i32.to_be_bytes()); // controller
        b.extend_from_slice(&0i32.to_be_bytes()); // topics
        b
    }

    #[test]
    fn reads_the_brokers_of_a_metadata_answer() {
        let reply = metadata_reply(3, &[(1, "localhost", 19094), (2, "kafka-2", 29094)]);
        let brokers = read_metadata(&reply, 3).expect("brokers");
        assert_eq!(
            brokers,
            [
                AdvertisedBroker {
                    id: 1,
                    host: "localhost".into(),
                    port: 19094
                },
                AdvertisedBroker {
                    id: 2,
                    host: "kafka-2".into(),
                    port: 29094
                },
            ]
        );
        // Cut anywhere inside the brokers: an error, never a panic.
        for cut in 4..reply.len() - 10 {
            assert!(read_metadata(&reply[..cut], 3).is_err(), "cut at {cut}");
        }
        let mut lying = reply.clone();
        lying[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(read_metadata(&lying, 3).is_err());
    }

    #[test]
    fn encodes_describe_cluster_at_the_version_both_speak() {
        let r = describe_cluster_request(7, 2);
        assert_eq!(frame_size(&r), Some(r.len() as u32 - 4));
        assert_eq!(&r[4..12], &[0, 60, 0, 2, 0, 0, 0, 7]);
        // Header tags, no authorized operations, broker endpoints, fenced too, body tags.
        assert_eq!(&r[r.len() - 5..], &[0, 0, 1, 1, 0]);
        // Kafka 3.7-3.9 (v1): broker endpoints, no fenced flag; 2.8-3.6 (v0): neither.
        let v1 = describe_cluster_request(7, 1);
        assert_eq!(&v1[4..12], &[0, 60, 0, 1, 0, 0, 0, 7]);
        assert_eq!(&v1[v1.len() - 4..], &[0, 0, 1, 0]);
        let v0 = describe_cluster_request(7, 0);
        assert_eq!(&v0[4..12], &[0, 60, 0, 0, 0, 0, 0, 7]);
        assert_eq!(&v0[v0.len() - 3..], &[0, 0, 0]);
        // A newer broker gets ours; one without the API gets none.
        assert_eq!(describe_cluster_version(Some((0, 5))), Some(2));
        assert_eq!(describe_cluster_version(Some((0, 1))), Some(1));
        assert_eq!(describe_cluster_version(None), None);
        assert_eq!(describe_cluster_version(Some((0, -1))), None);
        // A broker that dropped every version we speak (as KIP-896 dropped old ones).
        assert_eq!(describe_cluster_version(Some((3, 5))), None);
    }

    fn compact(b: &mut Vec<u8>, s: Option<&str>) {
        match s {
            None => b.push(0),
            Some(s) => {
                b.push(s.len() as u8 + 1);
                b.extend_from_slice(s.as_bytes());
            }
        }
    }

    fn describe_cluster_reply(
        correlation: i32,
        error: i16,
        brokers: &[(i32, &str, i32, bool)],
    ) -> Vec<u8> {
        let mut b = correlation.to_be_bytes().to_vec();
        b.push(0); // header tags
        b.extend_from_slice(&0i32.to_be_bytes()); // throttle
        b.extend_from_slice(&error.to_be_bytes());
        compact(&mut b, (error != 0).then_some("no"));
        b.push(ENDPOINT_BROKERS as u8);
        compact(&mut b, Some("cluster-id"));
        b.extend_from_slice(&1i32.to_be_bytes()); // controller
        b.push(brokers.len() as u8 + 1);
        for (id, host, port, fenced) in brokers {
            b.extend_from_slice(&id.to_be_bytes());
            compact(&mut b, Some(host));
            b.extend_from_slice(&port.to_be_bytes());
            compact(&mut b, None); // rack
            b.push(u8::from(*fenced));
            // One tagged field of 2 bytes, which a reader must skip.
            b.extend_from_slice(&[1, 9, 2, 0xaa, 0xbb]);
        }
        b.extend_from_slice(&i32::MIN.to_be_bytes()); // authorized operations
        b.push(0);
        b
    }

    #[test]
    fn reads_registered_brokers_fenced_or_not() {
        let reply = describe_cluster_reply(
            5,
            0,
            &[
                (1, "localhost", 19094, false),
                (2, "broker-2.kafka.internal", 9093, true),
            ],
        );
        let brokers = read_describe_cluster(&reply, 5, 2).expect("brokers");
        assert_eq!(
            brokers,
            [
                RegisteredBroker {
                    id: 1,
                    host: "localhost".into(),
                    port: 19094,
                    fenced: false
                },
                RegisteredBroker {
                    id: 2,
                    host: "broker-2.kafka.internal".into(),
                    port: 9093,
                    fenced: true
                },
            ]
        );
        for cut in 4..reply.len() - 5 {
            assert!(
                read_describe_cluster(&reply[..cut], 5, 2).is_err(),
                "cut at {cut}"
            );
        }
        assert!(read_describe_cluster(&reply, 6, 2).is_err());
        let refused = describe_cluster_reply(5, 35, &[]);
        let why = read_describe_cluster(&refused, 5, 2).expect_err("an error code");
        assert!(why.contains("error code 35: no"), "{why}");
        // A varint that never ends is an error, not a loop.
        let mut endless = 5i32.to_be_bytes().to_vec();
        endless.extend_from_slice(&[0xff; 8]);
        assert!(read_describe_cluster(&endless, 5, 2).is_err());
    }

    #[test]
    fn tells_a_kafka_frame_from_a_tls_alert() {
        assert!(answers(&[0, 0, 0, 6, 0, 0, 0, 1, 0, 0], 1));
        assert!(!answers(&[0, 0, 0, 6, 0, 0, 0, 2, 0, 0], 1));
        // KAFKA-4090: the four bytes of a TLS alert record read as a frame of ~336 MiB.
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50];
        assert!(!answers(&alert, 1));
        assert_eq!(frame_size(&alert), Some(352_518_912));
    }
}
