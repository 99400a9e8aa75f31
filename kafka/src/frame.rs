//! Kafka's framing: every request and every answer is a 4-byte big-endian length, then that many
//! bytes. Reading one is where a hostile or confused peer first gets to ask for memory, so
//! [`read`] refuses a length over the caller's limit before reading a byte of the frame, and grows
//! the buffer with the bytes that arrive rather than by what the prefix claims.
//!
//! The limits differ by what is read, so each caller names its own (the constants below).

use std::fmt;
use std::io;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// The length prefix's size.
pub const PREFIX: usize = 4;

/// The largest answer the laptop's probes read: `ApiVersions`, `Metadata` for no topics and
/// `DescribeCluster` are a few KiB even for a large cluster.
pub const MAX_PROBE_ANSWER: usize = 1 << 20;
/// The largest answer the agent reads: its `DescribeAcls` lists every ACL of a principal or of
/// the whole cluster, which may run to megabytes.
pub const MAX_ADMIN_ANSWER: usize = 16 << 20;
/// The largest request the local endpoint passes from a client: the broker's own default
/// `socket.request.max.bytes`.
pub const MAX_RELAYED_REQUEST: usize = 100 * 1024 * 1024;
/// The largest answer the local endpoint passes to a client (a Fetch answer is at most
/// `fetch.max.bytes`, 50 MiB by default, plus headers; a client that raises it past this sees its
/// connection closed).
pub const MAX_RELAYED_ANSWER: usize = 256 * 1024 * 1024;

/// A frame's memory grows with the bytes that arrive, from at most this much: a length prefix
/// alone reserves nothing large.
const FIRST_RESERVE: usize = 64 * 1024;

/// One frame as read: its length prefix and the bytes it counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame(Bytes);

impl Frame {
    /// The bytes after the prefix: a request's or an answer's header, then its body.
    pub fn body(&self) -> Bytes {
        self.0.slice(PREFIX..)
    }

    /// The whole frame, prefix included, as it came (what a relay passes on unchanged).
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }
}

/// Why no frame was read.
#[derive(Debug)]
#[non_exhaustive]
pub enum FrameError {
    /// The stream ended or failed before a whole length prefix. An end of stream
    /// ([`io::ErrorKind::UnexpectedEof`]) falls between frames: see [`FrameError::at_boundary`].
    Closed(io::Error),
    /// A length over the caller's limit, refused before any of the frame was read.
    TooLarge {
        /// The length the prefix gave.
        len: u32,
        /// The caller's limit.
        max: usize,
    },
    /// The stream ended or failed inside the frame; an end reads as tokio's `early eof`, as
    /// `read_exact` says it.
    Cut {
        /// The length the prefix gave.
        len: u32,
        /// The read's error.
        source: io::Error,
    },
}

impl FrameError {
    /// Whether the stream simply ended between two frames: the peer closed the connection.
    pub fn at_boundary(&self) -> bool {
        matches!(self, Self::Closed(e) if e.kind() == io::ErrorKind::UnexpectedEof)
    }

    /// The I/O error behind this one, if any (a TLS alert, a reset).
    pub fn io(&self) -> Option<&io::Error> {
        match self {
            Self::Closed(e) | Self::Cut { source: e, .. } => Some(e),
            Self::TooLarge { .. } => None,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed(e) => write!(f, "cannot read: {e}"),
            Self::TooLarge { len, max } => {
                write!(f, "a frame of {len} bytes is over the {max}-byte limit")
            }
            Self::Cut { len, source } if source.kind() == io::ErrorKind::UnexpectedEof => {
                write!(f, "the stream ended inside a frame of {len} bytes")
            }
            Self::Cut { source, .. } => write!(f, "cannot read: {source}"),
        }
    }
}

impl std::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Closed(e) | Self::Cut { source: e, .. } => Some(e),
            Self::TooLarge { .. } => None,
        }
    }
}

/// Reads one frame of at most `max` bytes (after the prefix).
///
/// # Errors
/// [`FrameError`]: the stream closed before a frame, a length over `max` (nothing more is read),
/// or a frame cut off.
pub async fn read<R: AsyncRead + Unpin>(from: &mut R, max: usize) -> Result<Frame, FrameError> {
    let mut prefix = [0u8; PREFIX];
    from.read_exact(&mut prefix)
        .await
        .map_err(FrameError::Closed)?;
    let len = u32::from_be_bytes(prefix);
    let n = usize::try_from(len).unwrap_or(usize::MAX);
    if n > max {
        return Err(FrameError::TooLarge { len, max });
    }
    let mut buf = BytesMut::with_capacity(PREFIX + n.min(FIRST_RESERVE));
    buf.extend_from_slice(&prefix);
    let mut rest = from.take(u64::from(len));
    while buf.len() < PREFIX + n {
        buf.reserve((PREFIX + n - buf.len()).min(FIRST_RESERVE.max(buf.len())));
        let got = rest
            .read_buf(&mut buf)
            .await
            .map_err(|source| FrameError::Cut { len, source })?;
        if got == 0 {
            return Err(FrameError::Cut {
                len,
                // tokio's read_exact words an early end so; callers show it.
                source: io::Error::new(io::ErrorKind::UnexpectedEof, "early eof"),
            });
        }
    }
    Ok(Frame(buf.freeze()))
}

/// `body` behind its length prefix.
///
/// # Errors
/// A body longer than Kafka's lengths (an `INT32`) can say.
pub fn prefixed(body: &[u8]) -> Result<BytesMut, TooLong> {
    let len = i32::try_from(body.len()).map_err(|_| TooLong(body.len()))?;
    let mut out = BytesMut::with_capacity(PREFIX + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// A frame longer than a Kafka length can say (2 GiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong(pub usize);

impl fmt::Display for TooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a frame of {} bytes is longer than Kafka's lengths",
            self.0
        )
    }
}

impl std::error::Error for TooLong {}

/// What the first bytes of a reply declare, read as a Java client reads them: the size it will
/// allocate (KAFKA-4090: a TLS alert reads as ~336 MiB).
pub fn declared_len(reply: &[u8]) -> Option<u32> {
    let b: [u8; PREFIX] = reply.get(..PREFIX)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

/// How one request and its answer failed ([`exchange`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The request could not be written.
    Send(io::Error),
    /// The stream ended or failed before the answer's length: what a broker does to a client
    /// certificate it refuses (under TLS 1.3 it judges it after the handshake).
    Closed(io::Error),
    /// A length no answer has: under the 4 bytes of a correlation id, or over the caller's limit.
    NotKafka {
        /// The length the prefix gave.
        len: u32,
    },
    /// The answer was cut off.
    Cut(io::Error),
}

impl fmt::Display for ExchangeError {
    /// The words the probes and the agent show; a closed connection's likely cause is theirs to
    /// add.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Send(e) => write!(f, "sending failed: {e}"),
            Self::Closed(e) => write!(f, "the broker closed the connection ({e})"),
            Self::NotKafka { len } => write!(f, "the reply is not Kafka's (length {len})"),
            Self::Cut(e) => write!(f, "the reply was cut off: {e}"),
        }
    }
}

impl std::error::Error for ExchangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Send(e) | Self::Closed(e) | Self::Cut(e) => Some(e),
            Self::NotKafka { .. } => None,
        }
    }
}

/// Writes one framed `request` and reads one answer of at most `max` bytes: its body (after the
/// prefix), for [`crate::message::answer`].
///
/// # Errors
/// [`ExchangeError`].
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &[u8],
    max: usize,
) -> Result<Bytes, ExchangeError> {
    stream
        .write_all(request)
        .await
        .map_err(ExchangeError::Send)?;
    stream.flush().await.map_err(ExchangeError::Send)?;
    let frame = read(stream, max).await.map_err(|e| match e {
        FrameError::Closed(e) => ExchangeError::Closed(e),
        FrameError::TooLarge { len, .. } => ExchangeError::NotKafka { len },
        FrameError::Cut { source, .. } => ExchangeError::Cut(source),
    })?;
    let body = frame.body();
    if body.len() < 4 {
        return Err(ExchangeError::NotKafka {
            len: u32::try_from(body.len()).unwrap_or(u32::MAX),
        });
    }
    Ok(body)
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt as _;

    use super::*;

    /// Long enough for a read that would not wait; a read that waits for bytes never sent fails.
    const QUICK: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn frames_are_read_whole_one_after_another() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        b.write_all(&[0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 1, 9])
            .await
            .expect("write");
        drop(b);
        let f = read(&mut a, 16).await.expect("frame");
        assert_eq!(&f.as_bytes()[..], [0, 0, 0, 3, 1, 2, 3]);
        assert_eq!(&f.body()[..], [1, 2, 3]);
        assert!(
            read(&mut a, 16)
                .await
                .expect("empty frame")
                .body()
                .is_empty()
        );
        assert_eq!(&read(&mut a, 16).await.expect("frame").body()[..], [9]);
        let end = read(&mut a, 16).await.expect_err("end");
        assert!(end.at_boundary(), "{end}");
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_before_its_bytes_are_read() {
        // The writer stays open and sends nothing after the prefix: a reader that went on to
        // read (or allocate) the 2 GiB it claims would wait here, not answer.
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(&[0x7f, 0xff, 0xff, 0xff]).await.expect("write");
        let err = tokio::time::timeout(QUICK, read(&mut a, MAX_RELAYED_ANSWER))
            .await
            .expect("refused at once")
            .expect_err("too big");
        assert!(matches!(
            err,
            FrameError::TooLarge {
                len: 0x7fff_ffff,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "a frame of 2147483647 bytes is over the 268435456-byte limit"
        );
        // One byte over, too; the limit itself passes.
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(&[0, 0, 0, 5, 1, 2, 3, 4, 5])
            .await
            .expect("write");
        assert!(matches!(
            read(&mut a, 4).await,
            Err(FrameError::TooLarge { len: 5, max: 4 })
        ));
        drop(b);
        // A TLS alert's first four bytes (KAFKA-4090) are a length like any other.
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50])
            .await
            .expect("write");
        assert!(matches!(
            read(&mut a, MAX_PROBE_ANSWER).await,
            Err(FrameError::TooLarge {
                len: 352_518_912,
                ..
            })
        ));
        drop(b);
    }

    #[tokio::test]
    async fn a_short_read_is_an_error_with_tokios_words() {
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(&[0, 0, 0, 9, 1, 2]).await.expect("write");
        drop(b);
        let err = read(&mut a, 16).await.expect_err("cut short");
        assert!(!err.at_boundary());
        assert_eq!(
            err.to_string(),
            "the stream ended inside a frame of 9 bytes"
        );
        let FrameError::Cut { source, .. } = err else {
            panic!("not a cut frame: {err}");
        };
        assert_eq!(source.to_string(), "early eof");
        // Half a prefix: closed, as read_exact says it.
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(&[0, 0]).await.expect("write");
        drop(b);
        let err = read(&mut a, 16).await.expect_err("half a prefix");
        assert!(err.at_boundary());
        assert_eq!(err.to_string(), "cannot read: early eof");
    }

    #[tokio::test]
    async fn an_exchange_sends_the_request_and_reads_one_answer() {
        let (mut client, mut server) = tokio::io::duplex(256);
        let broker = tokio::spawn(async move {
            let request = read(&mut server, 64).await.expect("request");
            server
                .write_all(&[0, 0, 0, 5, 0, 0, 0, 9, 42, 0, 0])
                .await
                .expect("answer");
            request
        });
        let body = exchange(&mut client, &[0, 0, 0, 2, 7, 7], MAX_PROBE_ANSWER)
            .await
            .expect("answer");
        assert_eq!(&body[..], [0, 0, 0, 9, 42]);
        let request = broker.await.expect("broker");
        assert_eq!(&request.body()[..], [7, 7]);

        // Under a correlation id, over the limit, closed, cut off: each in the words shown.
        for (reply, words) in [
            (
                &[0, 0, 0, 2, 1, 2][..],
                "the reply is not Kafka's (length 2)",
            ),
            (
                &[0x15, 0x03, 0x03, 0x00, 0x02][..],
                "the reply is not Kafka's (length 352518912)",
            ),
            (&[][..], "the broker closed the connection (early eof)"),
            (&[0, 0, 0, 8, 1][..], "the reply was cut off: early eof"),
        ] {
            let (mut client, mut server) = tokio::io::duplex(256);
            server.write_all(reply).await.expect("answer");
            drop(server);
            let err = exchange(&mut client, &[], MAX_PROBE_ANSWER)
                .await
                .expect_err("not an answer");
            assert_eq!(err.to_string(), words);
        }
    }

    #[test]
    fn prefixes_and_declared_lengths() {
        let framed = prefixed(&[1, 2, 3]).expect("short");
        assert_eq!(&framed[..], [0, 0, 0, 3, 1, 2, 3]);
        assert_eq!(declared_len(&framed), Some(3));
        assert_eq!(declared_len(&[0, 0, 1]), None);
    }
}
