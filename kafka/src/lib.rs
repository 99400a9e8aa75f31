//! The Kafka wire as shiqi speaks it, in one place for the laptop's probes, its local endpoint
//! and the agent's admin connection: [`frame`] (the 4-byte length prefix and the size limits,
//! a frame over its limit refused before a byte of it is read), [`message`] (a request framed
//! behind its header with our [`ClientId`], an answer decoded only when it repeats the request's
//! correlation id) and [`version`] (which version of each API we send, and the newest this build
//! decodes).
//!
//! The messages themselves are `kafka-protocol`'s, generated from Kafka's own definitions (the
//! vendored copy refuses an array count beyond the bytes left: vendor/kafka-protocol/PATCHED.md).
//! No sockets, no TLS, no printing: callers bring the stream and word the errors for their reader.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod frame;
pub mod message;
pub mod version;

pub use message::ClientId;
