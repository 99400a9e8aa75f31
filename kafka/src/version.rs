//! Which version of each API we send, and the newest this build can decode. A version is part of
//! what goes on the wire: changing one changes which brokers answer (Kafka 4.0 dropped the old
//! ones, KIP-896) and what the answer holds.

use kafka_protocol::messages::ApiKey;

/// `ApiVersions` as the probes send it: v0, which every broker answers, before any authorization,
/// and answers in v0 even when it wants another version.
pub const API_VERSIONS: i16 = 0;
/// `Metadata` as the laptop's probes ask it (for no topics): v4, the oldest Kafka 4 still serves,
/// served since 1.0.
pub const PROBE_METADATA: i16 = 4;
/// `Metadata` as the agent asks it: v9, served by every Kafka from 2.4 to 4.x.
pub const ADMIN_METADATA: i16 = 9;
/// `DescribeCluster`, the newest we send: v2 adds `IncludeFencedBrokers` (KIP-1073, Kafka 4.0+);
/// an older broker gets the version [`agreed`] with it.
pub const DESCRIBE_CLUSTER: i16 = 2;
/// `CreateAcls`, `DescribeAcls` and `DeleteAcls`: v2, served by every Kafka from 2.4 to 4.x.
pub const ACLS: i16 = 2;

/// The newest version of `api_key` this build decodes (`kafka-protocol`'s definitions); `None`
/// for a key it does not know. The local endpoint caps what brokers offer at it, so no client is
/// talked into a version whose answers it could not read.
pub fn newest(api_key: i16) -> Option<i16> {
    ApiKey::try_from(api_key)
        .ok()
        .map(|key| key.valid_versions().max)
}

/// The version to send of an API we speak up to `ours`, to a broker whose `ApiVersions` answer
/// offers `theirs` (min, max): the highest both speak; `None` when it offers none (the API
/// unknown to it) or only versions newer than ours (KIP-896 dropped old ones).
pub fn agreed(ours: i16, theirs: Option<(i16, i16)>) -> Option<i16> {
    let (min, max) = theirs?;
    let v = max.min(ours);
    (v >= 0 && v >= min).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_we_send_is_within_what_this_build_encodes() {
        for (key, version) in [
            (ApiKey::ApiVersions, API_VERSIONS),
            (ApiKey::Metadata, PROBE_METADATA),
            (ApiKey::Metadata, ADMIN_METADATA),
            (ApiKey::DescribeCluster, DESCRIBE_CLUSTER),
            (ApiKey::CreateAcls, ACLS),
            (ApiKey::DescribeAcls, ACLS),
            (ApiKey::DeleteAcls, ACLS),
        ] {
            let range = key.valid_versions();
            assert!(
                (range.min..=range.max).contains(&version),
                "{key:?} v{version}"
            );
        }
        assert_eq!(newest(-1), None);
        assert_eq!(agreed(2, Some((0, 5))), Some(2));
        assert_eq!(agreed(2, Some((0, 1))), Some(1));
        assert_eq!(agreed(2, None), None);
        assert_eq!(agreed(2, Some((0, -1))), None);
        assert_eq!(agreed(2, Some((3, 5))), None);
        assert!(newest(ApiKey::Metadata as i16).is_some_and(|v| v >= ADMIN_METADATA));
    }
}
