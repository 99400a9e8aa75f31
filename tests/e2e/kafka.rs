//! Kafka as the user's own tools see it: the console producer and consumer from the fetched
//! jars, run on the laptop with a profile's `client.properties`, through whatever tunnel is up.

use std::path::Path;

use crate::setup::laptop_kafka_tool;
use crate::stack::{Out, Stack};

/// Arguments every console producer here takes: its `--timeout` is `linger.ms` and defaults to
/// 1000 ms, which `--sync` waits out for each record (30 records took 31 s; with 0, 1.6 s).
pub(crate) const SEND_AT_ONCE: [&str; 2] = ["--timeout", "0"];

/// Creates `topic` (as the admin, on the server) with one partition led by each broker.
pub(crate) fn create_three_leader_topic(s: &Stack, topic: &str) {
    create_topic_on(s, topic, "1:2:3,2:3:1,3:1:2");
}

/// Creates `topic` (as the admin, on the server) with the partitions and replicas `assignment`
/// names (`--replica-assignment`: `2:3:1` is one partition led by broker 2).
pub(crate) fn create_topic_on(s: &Stack, topic: &str, assignment: &str) {
    s.kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            s.info("kafka_bootstrap"),
            "--command-config",
            s.info("kafka_admin_properties"),
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            assignment,
        ],
    )
    .ok();
}

/// A topic deleted (as the admin) when it goes out of scope: one whose replicas are all on a
/// broker a test adds and then purges would stay leaderless, and a client that reads the whole
/// cluster's metadata then fails on it (KafkaJS gives up on any partition without a leader).
pub(crate) struct DeletedOnDrop<'a>(pub(crate) &'a Stack, pub(crate) String);

impl Drop for DeletedOnDrop<'_> {
    fn drop(&mut self) {
        let out = self.0.kafka_tool(
            "org.apache.kafka.tools.TopicCommand",
            &[
                "--bootstrap-server",
                self.0.info("kafka_bootstrap"),
                "--command-config",
                self.0.info("kafka_admin_properties"),
                "--delete",
                "--topic",
                &self.1,
            ],
        );
        if !out.success() {
            eprintln!("deleting topic {}: {}", self.1, out.all());
        }
    }
}

/// The console producer on the laptop with the profile's `client.properties`: `records` (one
/// per line) to `topic` through the first broker's forward; `--sync`, so an error exits non-zero.
pub(crate) fn produce(s: &Stack, profile: &Path, topic: &str, records: &str) -> Out {
    produce_via(s, profile, "localhost:19094", topic, records, &[])
}

/// [`produce`] through `bootstrap` (a local endpoint's port), with `extra` arguments
/// (`--producer-property acks=all`).
pub(crate) fn produce_via(
    s: &Stack,
    profile: &Path,
    bootstrap: &str,
    topic: &str,
    records: &str,
    extra: &[&str],
) -> Out {
    let config = profile.join("client.properties").display().to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--producer.config",
        &config,
        "--topic",
        topic,
        "--sync",
    ];
    args.extend_from_slice(&SEND_AT_ONCE);
    args.extend_from_slice(extra);
    laptop_kafka_tool(
        s,
        "org.apache.kafka.tools.ConsoleProducer",
        &args,
        Some(records.as_bytes()),
    )
}

/// Writes `count` keyed records (`k0:v0`…).
pub(crate) fn produce_keyed(s: &Stack, profile: &Path, topic: &str, count: usize) -> Out {
    let records: String = (0..count).map(|i| format!("k{i}:v{i}\n")).collect();
    let keyed = [
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    ];
    produce_via(s, profile, "localhost:19094", topic, &records, &keyed)
}

/// Reads up to `count` records from the beginning in consumer group `group`, printing the
/// partition of each.
pub(crate) fn consume(s: &Stack, profile: &Path, topic: &str, group: &str, count: usize) -> Out {
    let config = profile.join("client.properties").display().to_string();
    let count = count.to_string();
    laptop_kafka_tool(
        s,
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            "localhost:19094",
            "--consumer.config",
            &config,
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--max-messages",
            &count,
            "--timeout-ms",
            "30000",
            "--property",
            "print.partition=true",
        ],
        None,
    )
}

/// Writes 30 records to a new three-leader topic `app.<name>` and reads every one back from
/// every partition: proof that the client reached all three brokers at their advertised
/// addresses (seed: kafka-day-journal, the one-port tunnel that hung on broker 2).
pub(crate) fn assert_round_trip_through_every_broker(s: &Stack, profile: &Path, name: &str) {
    let topic = format!("app.{name}");
    create_three_leader_topic(s, &topic);
    produce_keyed(s, profile, &topic, 30).ok();
    let consumed = consume(s, profile, &topic, &format!("app.{name}"), 30).ok();
    for i in 0..30 {
        assert!(
            consumed.stdout.contains(&format!("v{i}")),
            "record {i} not read back:\n{}",
            consumed.all()
        );
    }
    for partition in 0..3 {
        assert!(
            consumed.stdout.contains(&format!("Partition:{partition}")),
            "nothing from partition {partition} (leader {}):\n{}",
            partition + 1,
            consumed.stdout
        );
    }
}
