//! The few Kafka protocol messages the laptop sends, encoded once: `ApiVersions` v0 (every broker
//! answers it, before any authorization) and `Metadata` v4 for no topics (the brokers the
//! cluster advertises; needs no ACL). Request header v1, response header v0, big-endian
//! (kafka.apache.org/protocol). No I/O here.

/// `ApiVersions`.
const API_VERSIONS: i16 = 18;
/// `Metadata`; v4 is the oldest Kafka 4 still serves (KIP-896) and has been served since 1.0.
const METADATA: i16 = 3;
const METADATA_VERSION: i16 = 4;
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
    // Each broker takes at least 14 bytes: a count beyond the body is a lie, not an allocation.
    if count > body.len() / 14 {
        return Err(format!(
            "a broker count of {count} in a {}-byte reply",
            body.len()
        ));
    }
    let mut brokers = Vec::with_capacity(count);
    for _ in 0..count {
        let id = r.i32()?;
        let host = r.string()?.ok_or("a broker without a host")?;
        let port = r.i32()?;
        let _rack = r.string()?;
        brokers.push(AdvertisedBroker { id, host, port });
    }
    Ok(brokers)
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
    fn tells_a_kafka_frame_from_a_tls_alert() {
        assert!(answers(&[0, 0, 0, 6, 0, 0, 0, 1, 0, 0], 1));
        assert!(!answers(&[0, 0, 0, 6, 0, 0, 0, 2, 0, 0], 1));
        // KAFKA-4090: the four bytes of a TLS alert record read as a frame of ~336 MiB.
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50];
        assert!(!answers(&alert, 1));
        assert_eq!(frame_size(&alert), Some(352_518_912));
    }
}
