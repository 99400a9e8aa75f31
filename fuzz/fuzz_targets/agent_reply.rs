//! The laptop's reading of every agent answer: `protocol::decode` refuses or returns values
//! whose strings hold no control character, and what it accepts survives a round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shiqi_ca::protocol::{
    BrokersResponse, CrlResponse, KafkaUserResponse, MysqlUserResponse, RevokeResponse,
    SignResponse, decode,
};

fn check<T: DeserializeOwned + Serialize>(data: &[u8]) {
    let Ok(value) = decode::<T>(data) else {
        return;
    };
    let json = serde_json::to_string(&value).expect("a decoded reply serializes");
    // Every string that survived decoding is free of control characters (JSON escapes them
    // as \u00XX or \n; a raw one can only come from a field that failed to refuse it).
    let reparsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_no_controls(&reparsed);
    decode::<T>(json.as_bytes()).expect("a decoded reply decodes again");
}

fn assert_no_controls(v: &serde_json::Value) {
    match v {
        serde_json::Value::String(s) => assert!(
            !s.chars().any(|c| c.is_control() && c != '\n'),
            "control character in {s:?}"
        ),
        serde_json::Value::Array(a) => a.iter().for_each(assert_no_controls),
        serde_json::Value::Object(o) => o.values().for_each(assert_no_controls),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((which, rest)) = data.split_first() else {
        return;
    };
    match which % 6 {
        0 => check::<SignResponse>(rest),
        1 => check::<MysqlUserResponse>(rest),
        2 => check::<KafkaUserResponse>(rest),
        3 => check::<BrokersResponse>(rest),
        4 => check::<RevokeResponse>(rest),
        _ => check::<CrlResponse>(rest),
    }
});
