//! The local endpoint's rewrite of broker answers (`tunnel::endpoint::rewrite`) on arbitrary
//! bytes: an error or an answer, never a panic; a rewritten answer decodes again, and rewriting
//! it again gives the same bytes.
//!
//! Input layout (the seeds in fuzz/seeds/kafka_rewrite/ follow it):
//!
//! - byte 0: the API key, `KEYS[byte % KEYS.len()]` (index 0 Produce, 1 Fetch, 2 Metadata,
//!   3 FindCoordinator, 4 ApiVersions, 5 DescribeCluster, 6 ShareFetch, 7 ShareAcknowledge;
//!   then ones never rewritten: 8 ListOffsets, 9 JoinGroup, 10 `-1`, 11 `999`);
//! - byte 1: the version, `byte % 24 - 2` (-2..=21: below, inside and above every range);
//! - the rest: the answer frame without its length prefix (response header, starting with the
//!   correlation id, then the body).
//!
//! The whole input is also given to `Request::peek` as a request frame.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use shiqi_connect::tunnel::endpoint::rewrite::{Node, Ports, Request, response};

/// API keys: the eight whose answers may name brokers, then four that are passed through.
const KEYS: [i16; 12] = [0, 1, 3, 10, 18, 60, 78, 79, 2, 11, -1, 999];

/// A port for every broker but those whose id is 7 mod 8, so the refusal path runs too. It
/// depends on the id alone: a rewritten answer keeps its ids, so a second pass gets the same
/// ports.
struct ByNodeId;

impl Ports for ByNodeId {
    fn local_port(&mut self, node: &Node) -> Option<u16> {
        if node.id % 8 == 7 {
            return None;
        }
        u16::try_from(40000 + node.id % 20000).ok()
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = Request::peek(&Bytes::copy_from_slice(data));

    let [k, v, answer @ ..] = data else {
        return;
    };
    let request = Request {
        api_key: KEYS[usize::from(*k) % KEYS.len()],
        version: i16::from(*v % 24) - 2,
        correlation_id: 0,
        answered: true,
    };
    let frame = Bytes::copy_from_slice(answer);
    let Ok(Some(out)) = response(&request, &frame, &mut ByNodeId) else {
        return;
    };
    let out = out.freeze();
    match response(&request, &out, &mut ByNodeId) {
        Ok(None) => {}
        Ok(Some(again)) => assert_eq!(again, out, "a second rewrite changed the answer"),
        Err(e) => panic!("a rewritten answer is refused: {e}"),
    }
});
