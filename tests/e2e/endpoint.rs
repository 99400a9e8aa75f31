//! The tunnel's local endpoint on the real cluster, in both shapes the stack has: the
//! multi-host shape (`scripts/stack kafka-shape hosts`: every broker on port 9093 of its own
//! address, advertised as `broker-N.kafka.internal`, names only the server resolves) and
//! today's `localhost:N9094` shape. The clients are ones no one here wrote, with no TLS
//! settings: the Kafka console tools, kcat, and confluent-kafka (Python) with a transactional
//! producer. A broker stopped mid-consume, and a revocation, reach those clients as they reach
//! direct ones.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::kafka::{create_three_leader_topic, produce_via};
use crate::lifecycle::{Background, java_tool, within};
use crate::setup::{Home, laptop_kafka_tool};
use crate::stack::{Out, Stack, stack, unique_name};
use crate::tunnel::Tunnel;

/// Puts the stack's cluster in a shape for the agent, and back to `localhost` when dropped.
struct Shape<'a>(&'a Stack);

impl<'a> Shape<'a> {
    fn set(s: &'a Stack, shape: &str) -> Self {
        let guard = Self(s);
        run_stack(s, &["kafka-shape", shape]);
        guard
    }
}

impl Drop for Shape<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.0.script())
            .args(["kafka-shape", "localhost"])
            .output();
    }
}

fn run_stack(s: &Stack, args: &[&str]) {
    let out = std::process::Command::new(s.script())
        .args(args)
        .output()
        .expect("scripts/stack runs");
    assert!(
        out.status.success(),
        "scripts/stack {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The bootstrap address a profile's `client.properties` names.
fn bootstrap(profile: &Path) -> String {
    let props = std::fs::read_to_string(profile.join("client.properties")).expect("props");
    props
        .lines()
        .find_map(|l| l.strip_prefix("bootstrap.servers="))
        .expect("bootstrap.servers")
        .to_owned()
}

fn profile_json(profile: &Path) -> Value {
    let text = std::fs::read_to_string(profile.join("profile.json")).expect("profile.json");
    serde_json::from_str(&text).expect("json")
}

/// The Kafka client files of a local-mode profile hold no key material and no TLS setting.
#[track_caller]
fn assert_plain_client_files(profile: &Path, port: u16) {
    let props = std::fs::read_to_string(profile.join("client.properties")).expect("props");
    let rdkafka = std::fs::read_to_string(profile.join("librdkafka.conf")).expect("conf");
    let password = std::fs::read_to_string(profile.join("keystore.password")).expect("pw");
    for text in [&props, &rdkafka] {
        assert!(
            text.contains(&format!("bootstrap.servers=127.0.0.1:{port}\n")),
            "{text}"
        );
        assert!(!text.contains(password.trim()), "a password in:\n{text}");
        let settings: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(
            settings.iter().all(|l| !l.starts_with("ssl.")),
            "TLS settings in:\n{text}"
        );
    }
    assert!(props.contains("security.protocol=PLAINTEXT\n"), "{props}");
    assert!(
        rdkafka.contains("security.protocol=plaintext\n"),
        "{rdkafka}"
    );
}

/// A new profile `PREFIX-…` with the local endpoint on `port`, and its tunnel up (with `extra`
/// for `tunnel up`): the name, the profile folder and the tunnel (down when dropped).
pub(crate) fn local_with_tunnel<'a>(
    s: &'a Stack,
    home: &'a Home,
    prefix: &str,
    port: &str,
    extra: &[&str],
) -> (String, std::path::PathBuf, Tunnel<'a>) {
    let name = unique_name(prefix);
    home.setup(s, &name, &["--endpoint", "local", "--endpoint-port", port])
        .ok();
    let (tunnel, up) = Tunnel::up(s, home, &name, extra);
    up.ok();
    (name.clone(), home.profile(&name), tunnel)
}

/// A console consumer in the background through `bootstrap`, from the beginning of `topic` in
/// group `topic`, logging to the home's `consumer.log`; `extra` are more arguments.
fn consumer_plain<'a>(
    s: &'a Stack,
    home: &Home,
    profile: &Path,
    bootstrap: &str,
    topic: &str,
    extra: &[&str],
) -> Background<'a> {
    let config = profile.join("client.properties").display().to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--consumer.config",
        &config,
        "--topic",
        topic,
        "--group",
        topic,
        "--from-beginning",
    ];
    args.extend_from_slice(extra);
    let command = java_tool(s, "org.apache.kafka.tools.consumer.ConsoleConsumer", &args);
    Background::start(s, home.dir.join("consumer.log"), &command)
}

/// Console producer then a console consumer in a group, through `bootstrap` with the
/// profile's (plaintext) client.properties: every record back, from every partition.
fn round_trip(s: &Stack, profile: &Path, bootstrap: &str, topic: &str) {
    create_three_leader_topic(s, topic);
    let records: String = (0..30).map(|i| format!("k{i}:v{i}\n")).collect();
    let keyed = [
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    ];
    produce_via(s, profile, bootstrap, topic, &records, &keyed).ok();
    let config = profile.join("client.properties").display().to_string();
    let consumed = laptop_kafka_tool(
        s,
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--consumer.config",
            &config,
            "--topic",
            topic,
            "--group",
            topic,
            "--from-beginning",
            "--max-messages",
            "30",
            "--timeout-ms",
            "30000",
            "--property",
            "print.partition=true",
        ],
        None,
    )
    .ok();
    for i in 0..30 {
        assert!(
            consumed.stdout.contains(&format!("v{i}\n")),
            "record {i} not read back:\n{}",
            consumed.all()
        );
    }
    for partition in 0..3 {
        assert!(
            consumed.stdout.contains(&format!("Partition:{partition}")),
            "nothing from partition {partition}:\n{}",
            consumed.stdout
        );
    }
}

/// kcat -L with the profile's librdkafka.conf: every broker it is told of is a local port.
#[track_caller]
fn assert_kcat_sees_only_local_ports(s: &Stack, profile: &Path) {
    let conf = profile.join("librdkafka.conf").display().to_string();
    let out = s
        .laptop(&["kcat", "-F", &conf, "-L", "-m", "10"], &[], None)
        .ok();
    let brokers: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("broker ") && l.contains(" at "))
        .collect();
    assert_eq!(brokers.len(), 3, "{}", out.stdout);
    for b in brokers {
        assert!(b.contains(" at 127.0.0.1:"), "{b}");
    }
}

/// confluent-kafka (Python, librdkafka inside): a transactional producer commits ten records
/// and aborts one, and a read_committed consumer in a group reads exactly the ten; prints what
/// it read and the brokers the client was told of, as JSON.
const PYTHON_CLIENT: &str = r##"
import json, sys, time
from confluent_kafka import Consumer, Producer
conf_file, topic, tid, group = sys.argv[1:5]
conf = {}
for line in open(conf_file):
    line = line.strip()
    if line and not line.startswith("#"):
        k, v = line.split("=", 1)
        conf[k] = v
p = Producer({**conf, "transactional.id": tid})
p.init_transactions(60)
p.begin_transaction()
for i in range(10):
    p.produce(topic, key=f"k{i}", value=f"tx{i}")
p.commit_transaction(60)
p.begin_transaction()
p.produce(topic, value="aborted", partition=0)
p.flush(30)
p.abort_transaction(60)
# A committed record after the aborted one, in the same partition: once it is read, the
# aborted one has been passed over (or, wrongly, delivered), so the loop need not wait it out.
p.begin_transaction()
p.produce(topic, value="end", partition=0)
p.commit_transaction(60)
c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
              "isolation.level": "read_committed"})
c.subscribe([topic])
got, end = [], time.time() + 60
while ("end" not in got or len(got) < 11) and time.time() < end:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        print("error:", m.error(), file=sys.stderr)
        continue
    got.append(m.value().decode())
brokers = sorted(f"{b.host}:{b.port}" for b in c.list_topics(timeout=10).brokers.values())
c.close()
print(json.dumps({"got": sorted(v for v in got if v != "end"), "end": "end" in got,
                  "brokers": brokers}))
"##;

fn python_transactions(s: &Stack, profile: &Path, name: &str) -> Value {
    let topic = format!("app.{name}.tx");
    create_three_leader_topic(s, &topic);
    // Transactional ids are not in the agent's default grants: the admin allows this user's.
    s.kafka_tool(
        "org.apache.kafka.tools.AclCommand",
        &[
            "--bootstrap-server",
            s.info("kafka_bootstrap"),
            "--command-config",
            s.info("kafka_admin_properties"),
            "--add",
            "--allow-principal",
            &format!("User:{name}"),
            "--operation",
            "Write",
            "--operation",
            "Describe",
            "--transactional-id",
            &format!("{name}."),
            "--resource-pattern-type",
            "prefixed",
        ],
    )
    .ok();
    let conf = profile.join("librdkafka.conf").display().to_string();
    let out = s
        .laptop(
            &[
                s.info("python"),
                "-c",
                PYTHON_CLIENT,
                &conf,
                &topic,
                &format!("{name}.tx"),
                &format!("app.{name}.py"),
            ],
            &[],
            None,
        )
        .ok();
    let py: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("the Python client printed no JSON ({e}):\n{}", out.all()));
    // Read past the aborted record's offset: had it been delivered, `got` would show it.
    assert_eq!(
        py["end"], true,
        "the last committed record was not read: {py:#}"
    );
    py
}

#[test]
fn a_multi_host_cluster_works_through_the_local_endpoint_with_clients_that_have_no_tls_settings() {
    let s = stack();
    let _shape = Shape::set(s, "hosts");
    let home = Home::new(s, "endpoint");
    let name = unique_name("mh");

    // Direct mode cannot serve this shape: setup refuses, naming the local endpoint.
    let direct = home
        .setup(s, &format!("{name}d"), &["--endpoint", "direct"])
        .failed();
    assert!(
        direct.stderr.contains("both use port 9093") && direct.stderr.contains("--endpoint local"),
        "{}",
        direct.stderr
    );
    assert!(home.leftovers(&format!("{name}d")).is_empty());

    // Left to itself, setup picks the local endpoint and says why.
    let out = home.setup(s, &name, &[]).ok();
    assert!(
        out.stderr.contains("broker-1.kafka.internal:9093")
            && out.stderr.contains("local endpoint on 127.0.0.1:9092"),
        "{}",
        out.stderr
    );
    let profile = home.profile(&name);
    let json = profile_json(&profile);
    assert_eq!(json["endpoint"]["mode"], "local", "{json:#}");
    assert_eq!(json["endpoint"]["bootstrap_port"], 9092);
    assert_plain_client_files(&profile, 9092);
    let ssh_config = std::fs::read_to_string(profile.join("ssh_config")).expect("ssh_config");
    assert!(
        !ssh_config.contains("kafka.internal:9093"),
        "no broker forward in local mode:\n{ssh_config}"
    );

    // OpenSSH cannot be the endpoint.
    let refused = home
        .connect(s, &["tunnel", "up", &name, "--openssh"])
        .failed();
    assert!(
        refused.stderr.contains("OpenSSH cannot speak Kafka"),
        "{}",
        refused.stderr
    );

    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    let up = up.ok();
    for line in [
        "127.0.0.1:9092 -> broker-1.kafka.internal:9093",
        "127.0.0.1:9093 -> broker-1.kafka.internal:9093",
        "127.0.0.1:9094 -> broker-2.kafka.internal:9093",
        "127.0.0.1:9095 -> broker-3.kafka.internal:9093",
        "127.0.0.1:3306 -> 127.0.0.1:3306",
    ] {
        assert!(up.stdout.contains(line), "`up` lists {line}:\n{}", up.all());
    }
    let (status, json) = tunnel.status();
    assert_eq!(status.code, Some(0), "{}", status.all());
    let endpoint_rows: Vec<&Value> = json["forwards"]
        .as_array()
        .expect("forwards")
        .iter()
        .filter(|f| f["kind"] == "endpoint")
        .collect();
    assert_eq!(endpoint_rows.len(), 4, "{json:#}");
    for f in endpoint_rows {
        let detail = f["handshake"]["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("Metadata names only local ports"), "{f:#}");
    }
    // Loopback only.
    let ss = s.laptop(&["ss", "-Hltn"], &[], None).ok();
    for l in ss.stdout.lines().filter(|l| l.contains(":909")) {
        assert!(l.contains("127.0.0.1:909"), "{l}");
    }

    // The Java console tools: a producer, and a consumer in a group (FindCoordinator).
    round_trip(s, &profile, &bootstrap(&profile), &format!("app.{name}"));
    // kcat: every broker it is told of is a local port.
    assert_kcat_sees_only_local_ports(s, &profile);
    // confluent-kafka: a transaction (FindCoordinator for the transaction coordinator,
    // InitProducerId, AddPartitionsToTxn, EndTxn) and a read_committed consumer group.
    let py = python_transactions(s, &profile, &name);
    let want: Vec<String> = (0..10).map(|i| format!("tx{i}")).collect();
    assert_eq!(py["got"], serde_json::json!(want), "{py:#}");
    for b in py["brokers"].as_array().expect("brokers") {
        assert!(
            b.as_str().unwrap_or_default().starts_with("127.0.0.1:"),
            "{py:#}"
        );
    }

    // doctor agrees, and names the mode.
    let doctor = home.connect(s, &["doctor", &name]);
    assert_eq!(doctor.code, Some(0), "{}", doctor.all());
    assert!(
        doctor.stdout.contains("local endpoint"),
        "{}",
        doctor.stdout
    );

    // The log names connections, never records or secrets.
    let log = std::fs::read_to_string(profile.join("tunnel.log")).expect("log");
    assert!(
        log.contains("local endpoint: broker 2 on 127.0.0.1:9094"),
        "{log}"
    );
    assert!(!log.contains("tx3") && !log.contains("v17"), "{log}");
    drop(tunnel);

    // Direct mode cannot serve this shape: switching to it is refused, naming the fix…
    let refused = home
        .connect(s, &["tunnel", "up", &name, "--endpoint", "direct"])
        .failed();
    assert!(
        refused.stderr.contains("both use port 9093")
            && refused.stderr.contains("use the local endpoint"),
        "{}",
        refused.stderr
    );
    // …and doctor names the same fix for a direct profile of this cluster (as an older
    // profile.json, which had no `endpoint`, or an edit leaves it).
    let mut json = profile_json(&profile);
    json.as_object_mut().expect("object").remove("endpoint");
    std::fs::write(
        profile.join("profile.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )
    .expect("write");
    let doctor = home.connect(s, &["doctor", &name]);
    assert_eq!(doctor.code, Some(1), "{}", doctor.all());
    assert!(
        doctor.stdout.contains("use the local endpoint")
            && doctor
                .stdout
                .contains(&format!("shiqi-connect tunnel up {name} --endpoint local")),
        "{}",
        doctor.stdout
    );
}

#[test]
fn the_local_endpoint_serves_the_localhost_shape_too_and_the_mode_switches_both_ways() {
    let s = stack();
    let home = Home::new(s, "endpoint");
    let name = unique_name("lo");
    home.setup(
        s,
        &name,
        &["--endpoint", "local", "--endpoint-port", "19300"],
    )
    .ok();
    let profile = home.profile(&name);
    assert_plain_client_files(&profile, 19300);
    let json = profile_json(&profile);
    let ports: Vec<u64> = json["endpoint"]["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .map(|b| b["port"].as_u64().expect("port"))
        .collect();
    assert_eq!(ports, [19301, 19302, 19303], "{json:#}");

    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    round_trip(s, &profile, "127.0.0.1:19300", &format!("app.{name}"));
    let py = python_transactions(s, &profile, &name);
    let want: Vec<String> = (0..10).map(|i| format!("tx{i}")).collect();
    assert_eq!(py["got"], serde_json::json!(want), "{py:#}");
    assert_eq!(
        py["brokers"],
        serde_json::json!(["127.0.0.1:19301", "127.0.0.1:19302", "127.0.0.1:19303"]),
        "{py:#}"
    );

    // To direct: the running tunnel is restarted with forwards per broker, the files name the
    // brokers and do TLS themselves.
    let switched = home
        .connect(s, &["tunnel", "up", &name, "--endpoint", "direct"])
        .ok();
    assert!(
        switched.stderr.contains("stop the running tunnel")
            && switched
                .stderr
                .contains("switch Kafka and MySQL to the direct endpoint"),
        "{}",
        switched.all()
    );
    assert!(
        switched
            .stdout
            .contains("127.0.0.1:19094 -> localhost:19094"),
        "{}",
        switched.stdout
    );
    let props = std::fs::read_to_string(profile.join("client.properties")).expect("props");
    assert!(props.contains("security.protocol=SSL"), "{props}");
    assert_eq!(profile_json(&profile).get("endpoint"), None);
    crate::kafka::assert_round_trip_through_every_broker(s, &profile, &format!("{name}-d"));
    // MySQL follows: my.cnf does TLS with the certificate itself again.
    let cnf = std::fs::read_to_string(profile.join("my.cnf")).expect("my.cnf");
    assert!(cnf.contains("\nssl-cert="), "{cnf}");
    assert_eq!(mariadb_user(s, &profile), format!("{name}@127.0.0.1"));

    // And back, on another port.
    home.connect(
        s,
        &[
            "tunnel",
            "up",
            &name,
            "--endpoint",
            "local",
            "--endpoint-port",
            "19400",
        ],
    )
    .ok();
    assert_plain_client_files(&profile, 19400);
    assert_kcat_sees_only_local_ports(s, &profile);
    let cnf = std::fs::read_to_string(profile.join("my.cnf")).expect("my.cnf");
    assert!(!cnf.contains("ssl-"), "{cnf}");
    assert_eq!(mariadb_user(s, &profile), format!("{name}@127.0.0.1"));
    drop(tunnel);
}

/// `SELECT CURRENT_USER()` with the profile's my.cnf and nothing else.
fn mariadb_user(s: &Stack, profile: &Path) -> String {
    let cnf = format!("--defaults-file={}", profile.join("my.cnf").display());
    let out = s
        .laptop(
            &["mariadb", &cnf, "-N", "-e", "SELECT CURRENT_USER()"],
            &[],
            None,
        )
        .ok();
    out.stdout.trim().to_owned()
}

#[test]
fn a_broker_that_joins_gets_a_port_on_the_running_endpoint() {
    let s = stack();
    let home = Home::new(s, "endpoint");
    let (name, profile, tunnel) =
        local_with_tunnel(s, &home, "nb", "19700", &["--check-every", "5"]);
    let _four = crate::stack::ExtraBroker::start(s, 4, &[]);

    // No command typed: the daemon's look at the cluster (or any answer naming broker 4)
    // gives it a port, and a fresh login lets the channel to it through sshd's permitopen.
    let conf = profile.join("librdkafka.conf").display().to_string();
    let listed = within(Duration::from_secs(90), || {
        let out = s.laptop(&["kcat", "-F", &conf, "-L", "-m", "8"], &[], None);
        out.stdout.contains("broker 4 at 127.0.0.1:19704")
    });
    assert!(
        listed.is_some(),
        "broker 4 never appeared at its local port:\n{}",
        s.laptop(&["kcat", "-F", &conf, "-L", "-m", "8"], &[], None)
            .all()
    );
    // Records to a partition that broker 4 leads go through its new port.
    let topic = format!("app.{name}");
    crate::kafka::create_topic_on(s, &topic, "4");
    // Gone before broker 4 is (dropped first: declared after it).
    let _topic = crate::kafka::DeletedOnDrop(s, topic.clone());
    produce_via(s, &profile, "127.0.0.1:19700", &topic, "led by four\n", &[]).ok();
    let json = profile_json(&profile);
    let ports: Vec<u64> = json["endpoint"]["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .map(|b| b["port"].as_u64().expect("port"))
        .collect();
    assert!(ports.contains(&19704), "{json:#}");
    drop(tunnel);
}

#[test]
fn a_consumer_carries_on_through_the_endpoint_when_its_partition_leader_stops() {
    let s = stack();
    let _shape = Shape::set(s, "hosts");
    let home = Home::new(s, "endpoint");
    let name = unique_name("fo");
    home.setup(s, &name, &["--endpoint-port", "19500"]).ok();
    let profile = home.profile(&name);
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();

    // One partition led by broker 2, replicated on all three.
    let topic = format!("app.{name}");
    crate::kafka::create_topic_on(s, &topic, "2:3:1");
    let produce = |from: usize| -> Out {
        let records: String = (from..from + 20).map(|i| format!("r{i}\n")).collect();
        let acks = ["--producer-property", "acks=all"];
        produce_via(s, &profile, "127.0.0.1:19500", &topic, &records, &acks)
    };
    let max = ["--max-messages", "40"];
    let consumer = consumer_plain(s, &home, &profile, "127.0.0.1:19500", &topic, &max);
    produce(0).ok();
    assert!(
        within(Duration::from_secs(60), || consumer.log().contains("r19")).is_some(),
        "the consumer never read the first records:\n{}",
        consumer.log()
    );

    // The leader stops; the cluster moves leadership, the client learns it through the
    // endpoint's rewritten answers and carries on.
    let _restart = NodeBack(s, "2");
    run_stack(s, &["kafka-node", "down", "2"]);
    produce(20).ok();
    assert!(
        within(Duration::from_secs(90), || consumer.log().contains("r39")).is_some(),
        "the consumer did not carry on after broker 2 stopped:\n{}",
        consumer.log()
    );
    let log = consumer.log();
    for i in 0..40 {
        assert!(log.contains(&format!("r{i}\n")), "r{i} missing:\n{log}");
    }
    drop(tunnel);
}

/// Starts a stopped Kafka node again when dropped.
pub(crate) struct NodeBack<'a>(pub(crate) &'a Stack, pub(crate) &'a str);

impl Drop for NodeBack<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new(self.0.script())
            .args(["kafka-node", "up", self.1])
            .output();
    }
}

#[test]
fn revoking_a_name_reaches_the_endpoints_clients_as_it_reaches_direct_ones() {
    let s = stack();
    let home = Home::new(s, "endpoint");
    let (name, profile, tunnel) = local_with_tunnel(s, &home, "erv", "19600", &[]);
    let topic = format!("app.{name}");
    create_three_leader_topic(s, &topic);
    let consumer = consumer_plain(s, &home, &profile, "127.0.0.1:19600", &topic, &[]);
    produce_via(s, &profile, "127.0.0.1:19600", &topic, "before\n", &[]).ok();
    assert!(
        within(Duration::from_secs(60), || consumer
            .log()
            .contains("before"))
        .is_some(),
        "{}",
        consumer.log()
    );

    home.connect(
        s,
        &[
            "revoke",
            &name,
            "--server",
            s.info("ssh_destination"),
            "--reason",
            "key-compromise",
        ],
    )
    .ok();
    // The connected consumer: its ACLs are gone.
    assert!(
        within(Duration::from_secs(60), || {
            let log = consumer.log();
            log.contains("AuthorizationException") || log.contains("Not authorized")
        })
        .is_some(),
        "{}",
        consumer.log()
    );
    // A new client: the broker refuses the revoked certificate at the handshake, and the
    // endpoint closes the client's connection.
    let conf = profile.join("librdkafka.conf").display().to_string();
    assert!(
        within(Duration::from_secs(60), || {
            !s.laptop(&["kcat", "-F", &conf, "-L", "-m", "8"], &[], None)
                .success()
        })
        .is_some(),
        "kcat still lists metadata through the endpoint after the revocation"
    );
    let log = std::fs::read_to_string(profile.join("tunnel.log")).expect("log");
    assert!(
        log.contains("the server refused the profile's certificate"),
        "{log}"
    );
    drop(tunnel);
}

/// Moves a profile's certificate dates so that it is due for renewal (29 of 30 days gone), as
/// the renew e2e does: the daemon reads `profile.json` at each check.
fn make_due(profile: &Path) {
    let path = profile.join("profile.json");
    let mut p = profile_json(profile);
    let now = time::OffsetDateTime::now_utc();
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .expect("format")
    };
    p["certificate"]["not_before"] = rfc(now - time::Duration::days(29)).into();
    p["certificate"]["not_after"] = rfc(now + time::Duration::days(1)).into();
    std::fs::write(&path, serde_json::to_string_pretty(&p).expect("json")).expect("write");
}

/// Metadata with a certificate from the server's side, straight to broker 1 (no tunnel): what
/// the brokers think of that certificate now.
fn server_kcat_with(s: &Stack, dir: &Path) -> Out {
    let f = |n: &str| dir.join(n).display().to_string();
    s.server(
        None,
        &[
            "kcat",
            "-b",
            s.info("kafka_bootstrap"),
            "-X",
            "security.protocol=ssl",
            "-X",
            &format!("ssl.ca.location={}", f("ca.crt")),
            "-X",
            &format!("ssl.certificate.location={}", f("client.crt")),
            "-X",
            &format!("ssl.key.location={}", f("client.key")),
            "-L",
            "-m",
            "8",
        ],
        None,
    )
}

/// A MySQL login with a certificate from the server's side, straight to MariaDB (no tunnel).
fn server_mariadb_with(s: &Stack, dir: &Path, user: &str) -> Out {
    let f = |n: &str| dir.join(n).display().to_string();
    s.server(
        None,
        &[
            "mariadb",
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-u",
            user,
            &format!("--ssl-ca={}", f("ca.crt")),
            &format!("--ssl-cert={}", f("client.crt")),
            &format!("--ssl-key={}", f("client.key")),
            "-N",
            "-e",
            "SELECT 1",
        ],
        None,
    )
}

/// One PyMySQL connection (no `ssl`, no password) to `127.0.0.1:ARGV1` as ARGV2, one query a
/// second for ten minutes: `query N connection ID USER` per line, the error and exit 1 if it
/// breaks.
const MYSQL_SESSION: &str = r#"
import sys, time, pymysql
c = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user=sys.argv[2])
cur = c.cursor()
for i in range(600):
    cur.execute("SELECT CONNECTION_ID(), CURRENT_USER()")
    cid, who = cur.fetchone()
    print(f"query {i} connection {cid} {who}", flush=True)
    time.sleep(1)
"#;

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn the_tunnel_renews_its_certificate_and_clients_of_the_endpoint_never_notice() {
    let s = stack();
    let home = Home::new(s, "endpoint");
    let (name, profile, tunnel) = local_with_tunnel(s, &home, "rn", "19800", &[]);
    let topic = format!("app.{name}");
    create_three_leader_topic(s, &topic);
    let produce = |record: &str| {
        let line = format!("{record}\n");
        produce_via(s, &profile, "127.0.0.1:19800", &topic, &line, &[]).ok();
    };
    let consumer = consumer_plain(s, &home, &profile, "127.0.0.1:19800", &topic, &[]);
    produce("before");
    assert!(
        within(Duration::from_secs(60), || consumer
            .log()
            .contains("before"))
        .is_some(),
        "{}",
        consumer.log()
    );
    // A MySQL session through the endpoint, open across the renewal: one query a second.
    let session = Background::start(
        s,
        home.dir.join("mysql-session.log"),
        &format!(
            "{} -c {} 3306 {name}",
            s.info("python"),
            shell_quote(MYSQL_SESSION)
        ),
    );
    assert!(
        within(Duration::from_secs(30), || session
            .log()
            .contains("query 1 "))
        .is_some(),
        "{}",
        session.log()
    );

    // The old certificate, kept aside to ask the brokers about it afterwards.
    let old = s.scratch();
    for f in ["ca.crt", "client.crt", "client.key"] {
        std::fs::copy(profile.join(f), old.path().join(f)).expect("copy");
    }
    let old_serial = crate::lifecycle::serial_of(&profile);
    make_due(&profile);
    let renewed = within(Duration::from_secs(90), || {
        crate::lifecycle::serial_of(&profile) != old_serial
    });
    assert!(
        renewed.is_some(),
        "the tunnel did not renew:\n{}",
        std::fs::read_to_string(profile.join("tunnel.log")).unwrap_or_default()
    );
    let (_, status) = tunnel.status();
    let last = status["tunnel"]["renewal"]["last"]
        .as_str()
        .unwrap_or_default();
    assert!(
        last.contains(&format!("serial {old_serial} → ")) && last.contains("old one is revoked"),
        "{status:#}"
    );

    // The brokers refuse the old certificate once the CRL says so; the endpoint's new
    // connections present the new one, and the consumer connected before never noticed.
    assert!(
        within(Duration::from_secs(60), || !server_kcat_with(s, old.path())
            .success())
        .is_some(),
        "the brokers still take the old certificate"
    );
    assert_kcat_sees_only_local_ports(s, &profile);
    produce("after");
    assert!(
        within(Duration::from_secs(60), || consumer.log().contains("after")).is_some(),
        "the consumer connected before the renewal stopped:\n{}",
        consumer.log()
    );
    assert!(consumer.alive(), "{}", consumer.log());
    // MariaDB refuses the old certificate too (the renewal revoked it and reloaded the CRL);
    // the session opened before goes on, on the same connection, and a new login works: the
    // endpoint presented the new certificate.
    assert!(
        within(Duration::from_secs(30), || !server_mariadb_with(
            s,
            old.path(),
            &name
        )
        .success())
        .is_some(),
        "MariaDB still takes the old certificate"
    );
    let queries = session.log().lines().count();
    assert!(
        within(Duration::from_secs(15), || session.log().lines().count()
            > queries + 3)
        .is_some(),
        "the MySQL session opened before the renewal stopped:\n{}",
        session.log()
    );
    let log = session.log();
    let connections: std::collections::BTreeSet<&str> = log
        .lines()
        .filter_map(|l| l.split(" connection ").nth(1))
        .map(|rest| rest.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(connections.len(), 1, "{}", session.log());
    let cnf = format!("--defaults-file={}", profile.join("my.cnf").display());
    let out = s
        .laptop(
            &["mariadb", &cnf, "-N", "-e", "SELECT CURRENT_USER()"],
            &[],
            None,
        )
        .ok();
    assert_eq!(
        out.stdout.trim(),
        format!("{name}@127.0.0.1"),
        "{}",
        out.all()
    );
    drop(session);

    // A daemon frozen past the renewal point renews within a minute of going on.
    let pid = std::fs::read_to_string(profile.join("tunnel.pid")).expect("pid");
    let pid = pid.trim();
    let second = crate::lifecycle::serial_of(&profile);
    s.laptop(&["kill", "-STOP", pid], &[], None).ok();
    make_due(&profile);
    std::thread::sleep(Duration::from_secs(30));
    s.laptop(&["kill", "-CONT", pid], &[], None).ok();
    let took = within(Duration::from_secs(60), || {
        crate::lifecycle::serial_of(&profile) != second
    });
    assert!(
        took.is_some(),
        "a frozen tunnel did not renew within a minute of SIGCONT:\n{}",
        std::fs::read_to_string(profile.join("tunnel.log")).unwrap_or_default()
    );
    eprintln!("renewed {:?} after SIGCONT", took.unwrap_or_default());
    assert_kcat_sees_only_local_ports(s, &profile);
    drop(tunnel);
}
