//! The few Kafka protocol messages the laptop sends, encoded once: `ApiVersions` v0 (every broker
//! answers it, before any authorization), `Metadata` v4 for no topics (the brokers the cluster
//! advertises; needs no ACL) and `DescribeCluster` v2 with fenced brokers (every registered
//! broker, serving or not; KIP-1073, Kafka 4.0+; needs no ACL either). Request header v1 (v2 for
//! the flexible DescribeCluster), response header v0 (v1), big-endian
//! (kafka.apache.org/protocol). No I/O here.
//!
//! The agent speaks Kafka through `kafka-protocol` to its own brokers; the laptop keeps these
//! few decoders because it reads any server a config names (`doctor --bootstrap`), and
//! `kafka-protocol` 0.18 sizes each array with `Vec::with_capacity` of the count the server
//! sends (up to 2^31 entries), which a hostile server could use to abort the process. Here a
//! count beyond what the reply's bytes can hold is refused before anything is allocated.

/// `ApiVersions`.
const API_VERSIONS: i16 = 18;
/// `Metadata`; v4 is the oldest Kafka 4 still serves (KIP-896) and has been served since 1.0.
const METADATA: i16 = 3;
const METADATA_VERSION: i16 = 4;
/// `DescribeCluster`; v2 adds `IncludeFencedBrokers`.
const DESCRIBE_CLUSTER: i16 = 60;
const DESCRIBE_CLUSTER_VERSION: i16 = 2;
/// `DescribeCluster`'s `EndpointType`: the brokers' listeners (not the controllers').
const ENDPOINT_BROKERS: u8 = 1;
/// The broker's reply when it wants another ApiVersions version; still a Kafka answer.
const UNSUPPORTED_VERSION: i16 = 35;
/// Our client id in requests (brokers log it).
pub const CLIENT_ID: &str = "shiqi-connect";
/// Frames larger than this are not an answer to these requests.
pub const MAX_FRAME: usize = 1 << 20;

/// A length-prefixed request: header v1 (`api_key`, `api_version`, `correlation`, client id),
/// then `body`.
fn request(api_key: i16, api_version: i16, correlation: i32, body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + 10 + CLIENT_ID.len() + body.len());
    frame.extend_from_slice(&[0; 4]);
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&api_version.to_be_bytes());
    frame.extend_from_slice(&correlation.to_be_bytes());
    // A 13-byte constant: fits the i16 length.
    frame.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    frame.extend_from_slice(CLIENT_ID.as_bytes());
    frame.extend_from_slice(body);
    let len = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    frame
}

/// `ApiVersions` v0.
pub fn api_versions_request(correlation: i32) -> Vec<u8> {
    request(API_VERSIONS, 0, correlation, &[])
}

/// `Metadata` v4 for no topics (an empty array, not null, which means all topics), without
/// creating any.
pub fn metadata_request(correlation: i32) -> Vec<u8> {
    let mut body = 0i32.to_be_bytes().to_vec();
    body.push(0);
    request(METADATA, METADATA_VERSION, correlation, &body)
}

/// `DescribeCluster` v2 asking for fenced brokers too. A flexible request: header v2 (the
/// classic client id, then no tagged fields), a compact body.
pub fn describe_cluster_request(correlation: i32) -> Vec<u8> {
    let body = [
        0, // header tagged fields
        0, // IncludeClusterAuthorizedOperations: false
        ENDPOINT_BROKERS,
        1, // IncludeFencedBrokers: true
        0, // body tagged fields
    ];
    request(
        DESCRIBE_CLUSTER,
        DESCRIBE_CLUSTER_VERSION,
        correlation,
        &body,
    )
}

/// One broker registered with the cluster, as `DescribeCluster` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredBroker {
    /// `node.id`.
    pub id: i32,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: i32,
    /// Registered but not serving: stopped, restarting, or cut off from the controllers. The
    /// brokers leave it out of `Metadata` until it is back.
    pub fenced: bool,
}

/// Reads a `DescribeCluster` v2 response body (after the length): every registered broker.
///
/// # Errors
/// A reply to another request, the broker's error (with its message), or a malformed body.
pub fn read_describe_cluster(
    body: &[u8],
    correlation: i32,
) -> Result<Vec<RegisteredBroker>, String> {
    let mut r = Reader::after_header(body, correlation)?;
    r.skip_tagged_fields()?;
    let _throttle_ms = r.i32()?;
    let error = r.i16()?;
    let message = r.compact_string()?;
    if error != 0 {
        return Err(format!(
            "the broker answered DescribeCluster with error code {error}{}",
            message.map(|m| format!(": {m}")).unwrap_or_default()
        ));
    }
    let _endpoint_type = r.take(1)?;
    let _cluster_id = r.compact_string()?;
    let _controller = r.i32()?;
    let count = r.compact_len()?.ok_or("a null broker list")?;
    let mut brokers = Vec::with_capacity(broker_count(count, body, 12)?);
    for _ in 0..count {
        let id = r.i32()?;
        let host = r.compact_string()?.ok_or("a broker without a host")?;
        let port = r.i32()?;
        let _rack = r.compact_string()?;
        let fenced = r.take(1)?[0] != 0;
        r.skip_tagged_fields()?;
        brokers.push(RegisteredBroker {
            id,
            host,
            port,
            fenced,
        });
    }
    Ok(brokers)
}

/// What a Java client makes of a reply's first four bytes: the size it will allocate
/// (KAFKA-4090: a TLS alert reads as ~336 MiB).
pub fn frame_size(reply: &[u8]) -> Option<u32> {
    let b: [u8; 4] = reply.get(..4)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

/// Whether the first bytes of a reply (length prefix included) are a Kafka frame answering
/// `correlation`.
pub fn answers(reply: &[u8], correlation: i32) -> bool {
    frame_size(reply).is_some_and(|n| (6..=MAX_FRAME as u32).contains(&n))
        && reply.get(4..8) == Some(&correlation.to_be_bytes()[..])
}

/// Reads an `ApiVersions` v0 response body (after the length): the number of APIs offered.
///
/// # Errors
/// A reply to another request, a broker error, or a cut-off body.
pub fn read_api_versions(body: &[u8], correlation: i32) -> Result<usize, String> {
    let mut r = Reader::after_header(body, correlation)?;
    let error = r.i16()?;
    if error != 0 && error != UNSUPPORTED_VERSION {
        return Err(format!("the broker answered with error code {error}"));
    }
    // v0 is answered in v0 even on UNSUPPORTED_VERSION, so the array follows either way.
    Ok(usize::try_from(r.i32()?).unwrap_or(0))
}

/// One broker of a `Metadata` answer, as the cluster advertises it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedBroker {
    /// `node.id`.
    pub id: i32,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: i32,
}

/// Reads a `Metadata` v4 response body (after the length): the brokers.
///
/// # Errors
/// A reply to another request or a malformed body.
pub fn read_metadata(body: &[u8], correlation: i32) -> Result<Vec<AdvertisedBroker>, String> {
    let mut r = Reader::after_header(body, correlation)?;
    let _throttle_ms = r.i32()?;
    let count = r.i32()?;
    let count = usize::try_from(count).map_err(|_| format!("a broker count of {count}"))?;
    let mut brokers = Vec::with_capacity(broker_count(count, body, 14)?);
    for _ in 0..count {
        let id = r.i32()?;
        let host = r.string()?.ok_or("a broker without a host")?;
        let port = r.i32()?;
        let _rack = r.string()?;
        brokers.push(AdvertisedBroker { id, host, port });
    }
    Ok(brokers)
}

/// `count` brokers of at least `each` bytes must fit in `body`: a count beyond it is a lie, not
/// an allocation.
fn broker_count(count: usize, body: &[u8], each: usize) -> Result<usize, String> {
    if count > body.len() / each {
        return Err(format!(
            "a broker count of {count} in a {}-byte reply",
            body.len()
        ));
    }
    Ok(count)
}

/// A cursor over a response body.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Past response header v0 (the correlation id), which must be ours.
    fn after_header(body: &'a [u8], correlation: i32) -> Result<Self, String> {
        let mut r = Self { body, at: 0 };
        match r.i32() {
            Ok(c) if c == correlation => Ok(r),
            _ => Err("the reply is not an answer to our request".to_owned()),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.body.len());
        let end = end.ok_or_else(|| format!("the reply ends early (at byte {})", self.at))?;
        let bytes = &self.body[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An unsigned varint (flexible versions' lengths and tags), at most 32 bits.
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint longer than 5 bytes".to_owned())
    }

    /// A compact length: the varint is length + 1, 0 for null.
    fn compact_len(&mut self) -> Result<Option<usize>, String> {
        let n = self.uvarint()?;
        Ok(n.checked_sub(1).map(|n| n as usize))
    }

    /// A compact (nullable) string.
    fn compact_string(&mut self) -> Result<Option<String>, String> {
        match self.compact_len()? {
            None => Ok(None),
            Some(len) => Ok(Some(String::from_utf8_lossy(self.take(len)?).into_owned())),
        }
    }

    /// Tagged fields we do not read: a count, then each tag's id and sized bytes.
    fn skip_tagged_fields(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }

    /// A (nullable) string: i16 length, -1 for null.
    fn string(&mut self) -> Result<Option<String>, String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
    }
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
        assert_eq!(read_api_versions(&reply, 9), Ok(2));
        reply[5] = 35;
        assert_eq!(read_api_versions(&reply, 9), Ok(2));
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
    fn encodes_describe_cluster_v2_with_fenced_brokers() {
        let r = describe_cluster_request(7);
        assert_eq!(frame_size(&r), Some(r.len() as u32 - 4));
        assert_eq!(&r[4..12], &[0, 60, 0, 2, 0, 0, 0, 7]);
        // Header tags, no authorized operations, broker endpoints, fenced too, body tags.
        assert_eq!(&r[r.len() - 5..], &[0, 0, 1, 1, 0]);
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
        b.push(ENDPOINT_BROKERS);
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
        let brokers = read_describe_cluster(&reply, 5).expect("brokers");
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
                read_describe_cluster(&reply[..cut], 5).is_err(),
                "cut at {cut}"
            );
        }
        assert!(read_describe_cluster(&reply, 6).is_err());
        let refused = describe_cluster_reply(5, 35, &[]);
        let why = read_describe_cluster(&refused, 5).expect_err("an error code");
        assert!(why.contains("error code 35: no"), "{why}");
        // A varint that never ends is an error, not a loop.
        let mut endless = 5i32.to_be_bytes().to_vec();
        endless.extend_from_slice(&[0xff; 8]);
        assert!(read_describe_cluster(&endless, 5).is_err());
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
