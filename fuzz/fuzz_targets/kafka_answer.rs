//! The Kafka codec (`shiqi_kafka`) on arbitrary bytes, as a broker (or anything a config names)
//! may answer the probes and the agent: an answer is taken or refused, never a panic or a large
//! allocation; one taken repeats our correlation id; the ids a relay pairs by are read from any
//! bytes.
//!
//! Input layout (the seeds in fuzz/seeds/kafka_answer/ follow it):
//!
//! - byte 0: which request it answers, `byte % 7`: 0 ApiVersions v0, 1 Metadata v4 (the probes),
//!   2 DescribeCluster v2, 3 Metadata v9 (the agent), 4 CreateAcls v2, 5 DescribeAcls v2,
//!   6 DeleteAcls v2;
//! - the rest: the answer frame without its length prefix (response header, starting with the
//!   correlation id 1, then the body).
//!
//! The whole input is also read as a request's start and as a reply's first bytes.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    DescribeClusterRequest, MetadataRequest,
};
use kafka_protocol::protocol::Request;
use libfuzzer_sys::fuzz_target;
use shiqi_kafka::{frame, message, version};

/// The correlation id every seed's answer repeats.
const CORRELATION: i32 = 1;

fn take<R: Request>(body: &[u8], version: i16) {
    let mut buf = Bytes::copy_from_slice(body);
    if message::answer::<R>(&mut buf, version, CORRELATION).is_ok() {
        assert_eq!(message::correlation(body), Some(CORRELATION));
        assert!(buf.len() <= body.len());
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = message::peek_request(data);
    let _ = message::answers(data, CORRELATION, frame::MAX_PROBE_ANSWER);
    let _ = frame::declared_len(data);

    let [which, body @ ..] = data else {
        return;
    };
    match which % 7 {
        0 => take::<ApiVersionsRequest>(body, version::API_VERSIONS),
        1 => take::<MetadataRequest>(body, version::PROBE_METADATA),
        2 => take::<DescribeClusterRequest>(body, version::DESCRIBE_CLUSTER),
        3 => take::<MetadataRequest>(body, version::ADMIN_METADATA),
        4 => take::<CreateAclsRequest>(body, version::ACLS),
        5 => take::<DescribeAclsRequest>(body, version::ACLS),
        _ => take::<DeleteAclsRequest>(body, version::ACLS),
    }
});
