//! A message behind its header: [`request`] frames a `kafka-protocol` request with our
//! [`ClientId`] and a correlation id; [`answer`] decodes an answer's body only when its header
//! repeats that id (Kafka answers in request order on a connection, and a stray answer read as
//! ours would be believed). [`peek_request`] and [`correlation`] read the ids a relay pairs
//! requests and answers by, without decoding anything else.

use std::fmt;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable as _, Encodable as _, HeaderVersion, Request, StrBytes};

use crate::frame::{self, PREFIX};

/// Who we are in a request header (brokers log it; quotas may key on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientId {
    /// The laptop's probes: `shiqi-connect`.
    Connect,
    /// The agent's admin connection: `shiqi-ca-agent`.
    Agent,
}

impl ClientId {
    /// The id as it goes on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "shiqi-connect",
            Self::Agent => "shiqi-ca-agent",
        }
    }
}

/// A request that could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError(String);

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncodeError {}

/// `body` at `version` behind its request header, length prefix first: the bytes to send.
///
/// # Errors
/// A field out of its type's range at `version` (kafka-protocol's reason), or a frame longer
/// than a Kafka length.
pub fn request<R: Request>(
    body: &R,
    version: i16,
    correlation: i32,
    client: ClientId,
) -> Result<BytesMut, EncodeError> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str(client.as_str())));
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&[0; PREFIX]);
    header
        .encode(&mut frame, R::header_version(version))
        .and_then(|()| body.encode(&mut frame, version))
        .map_err(|e| EncodeError(e.to_string()))?;
    let len = i32::try_from(frame.len() - PREFIX)
        .map_err(|_| EncodeError(frame::TooLong(frame.len() - PREFIX).to_string()))?;
    frame[..PREFIX].copy_from_slice(&len.to_be_bytes());
    Ok(frame)
}

/// Why an answer was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerError {
    /// Not a header and body of the expected message at that version (kafka-protocol's reason).
    Malformed(String),
    /// The header answers another request.
    Correlation {
        /// The id our request carried.
        expected: i32,
        /// The id the answer repeats.
        found: i32,
    },
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "a malformed answer: {why}"),
            Self::Correlation { found, .. } => {
                write!(f, "an answer to another request (correlation id {found})")
            }
        }
    }
}

impl std::error::Error for AnswerError {}

/// Decodes the answer to `R` at `version` from `body` (a frame after its prefix), which must
/// repeat `correlation`. What follows the message is left in `body`.
///
/// # Errors
/// [`AnswerError`]: a cut-off or garbled answer (an error, never a panic or a large
/// allocation), or one to another request.
pub fn answer<R: Request>(
    body: &mut Bytes,
    version: i16,
    correlation: i32,
) -> Result<R::Response, AnswerError> {
    let header = ResponseHeader::decode(body, R::Response::header_version(version))
        .map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if header.correlation_id != correlation {
        return Err(AnswerError::Correlation {
            expected: correlation,
            found: header.correlation_id,
        });
    }
    R::Response::decode(body, version).map_err(|e| AnswerError::Malformed(e.to_string()))
}

/// The correlation id an answer's body (after the prefix) starts with; `None` when it is
/// shorter than that.
pub fn correlation(body: &[u8]) -> Option<i32> {
    let b: [u8; 4] = body.get(..4)?.try_into().ok()?;
    Some(i32::from_be_bytes(b))
}

/// The start of a request header, which every version shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestKey {
    /// The API key.
    pub api_key: i16,
    /// The API version.
    pub version: i16,
    /// The id the answer repeats.
    pub correlation_id: i32,
}

/// Reads the API key, version and correlation id at the start of a request's body (after the
/// prefix); `None` when it is shorter than that.
pub fn peek_request(body: &[u8]) -> Option<RequestKey> {
    let [k0, k1, v0, v1, c0, c1, c2, c3, ..] = *body else {
        return None;
    };
    Some(RequestKey {
        api_key: i16::from_be_bytes([k0, k1]),
        version: i16::from_be_bytes([v0, v1]),
        correlation_id: i32::from_be_bytes([c0, c1, c2, c3]),
    })
}

/// Whether the first bytes of a reply (prefix included) are a Kafka frame of at most `max` bytes
/// answering `correlation`: what a plaintext Kafka listener sends back, and a TLS alert is not.
pub fn answers(reply: &[u8], correlation: i32, max: usize) -> bool {
    frame::declared_len(reply)
        .and_then(|n| usize::try_from(n).ok())
        .is_some_and(|n| (6..=max).contains(&n))
        && reply.get(PREFIX..PREFIX + 4) == Some(&correlation.to_be_bytes()[..])
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{ApiVersionsRequest, DescribeAclsRequest, DescribeAclsResponse};
    use kafka_protocol::protocol::Encodable as _;

    use super::*;

    #[test]
    fn a_request_is_its_prefix_header_and_body() {
        let r = request(
            &ApiVersionsRequest::default(),
            0,
            0x5331_0001,
            ClientId::Connect,
        )
        .expect("encodes");
        assert_eq!(
            &r[..],
            [
                0, 0, 0, 23, // length
                0, 18, 0, 0, // ApiVersions v0
                0x53, 0x31, 0, 1, // correlation id
                0, 13, b's', b'h', b'i', b'q', b'i', b'-', b'c', b'o', b'n', b'n', b'e', b'c',
                b't',
            ]
        );
        let r = request(&DescribeAclsRequest::default(), 2, 1, ClientId::Agent).expect("encodes");
        assert_eq!(frame::declared_len(&r), u32::try_from(r.len() - 4).ok());
        assert_eq!(&r[4..14], &[0, 29, 0, 2, 0, 0, 0, 1, 0, 14]);
        assert_eq!(&r[14..28], b"shiqi-ca-agent");
        assert_eq!(
            peek_request(&r[4..]),
            Some(RequestKey {
                api_key: 29,
                version: 2,
                correlation_id: 1
            })
        );
        assert_eq!(peek_request(&[0, 3, 0]), None);
    }

    fn describe_acls_answer(correlation: i32) -> Bytes {
        let mut b = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation)
            .encode(&mut b, DescribeAclsResponse::header_version(2))
            .expect("header");
        DescribeAclsResponse::default()
            .with_error_code(31)
            .encode(&mut b, 2)
            .expect("body");
        b.freeze()
    }

    #[test]
    fn only_the_answer_to_our_correlation_id_is_taken() {
        let whole = describe_acls_answer(1);
        let mut body = whole.clone();
        let m = answer::<DescribeAclsRequest>(&mut body, 2, 1).expect("ours");
        assert_eq!(m.error_code, 31);
        assert!(body.is_empty());
        assert_eq!(correlation(&whole), Some(1));

        let err = answer::<DescribeAclsRequest>(&mut describe_acls_answer(7), 2, 1)
            .expect_err("another request's");
        assert_eq!(
            err,
            AnswerError::Correlation {
                expected: 1,
                found: 7
            }
        );
        assert_eq!(
            err.to_string(),
            "an answer to another request (correlation id 7)"
        );
        // Cut anywhere: an error, never a panic.
        for cut in 0..whole.len() {
            let err = answer::<DescribeAclsRequest>(&mut whole.slice(..cut), 2, 1)
                .expect_err("cut short");
            assert!(matches!(err, AnswerError::Malformed(_)), "cut at {cut}");
        }
        assert_eq!(correlation(&[0, 0, 1]), None);
    }

    #[test]
    fn a_count_the_bytes_cannot_hold_is_refused_not_allocated() {
        let mut reply = 9i32.to_be_bytes().to_vec();
        reply.extend_from_slice(&0i16.to_be_bytes());
        reply.extend_from_slice(&i32::MAX.to_be_bytes());
        let err = answer::<ApiVersionsRequest>(&mut Bytes::from(reply), 0, 9).expect_err("lie");
        assert!(err.to_string().starts_with("a malformed answer: "), "{err}");
    }

    #[test]
    fn tells_a_kafka_frame_from_a_tls_alert() {
        assert!(answers(&[0, 0, 0, 6, 0, 0, 0, 1, 0, 0], 1, 1 << 20));
        assert!(!answers(&[0, 0, 0, 6, 0, 0, 0, 2, 0, 0], 1, 1 << 20));
        assert!(!answers(&[0, 0, 0, 5, 0, 0, 0, 1, 0], 1, 1 << 20));
        // KAFKA-4090: the four bytes of a TLS alert record read as a frame of ~336 MiB.
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50];
        assert!(!answers(&alert, 1, 1 << 20));
        assert!(answers(&[0, 0, 0, 6, 0, 0, 0, 1], 1, 6));
        assert!(!answers(&[0, 0, 0, 7, 0, 0, 0, 1], 1, 6));
    }
}
