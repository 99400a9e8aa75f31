//! `doctor --config FILE` with no profile on the machine, as the person in the second journal
//! would run it against a cluster this tool did not set up: configs written by hand, the stack's
//! brokers reached through an OpenSSH tunnel, node 1's PLAINTEXT listener (advertised under a
//! name only the server's side knows), and the laptop's own /etc/hosts.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::lifecycle::{Background, within};
use crate::setup::{Home, OpenSshTunnel};
use crate::stack::{Out, Stack, stack, unique_name};

/// A profile (for its certificate files and tunnel) and an empty home to run the doctor from.
/// Fields drop in order: the forwards close before their profile's folder goes.
struct Cluster<'a> {
    _plain: Background<'a>,
    _tunnel: OpenSshTunnel<'a>,
    s: &'a Stack,
    profile: PathBuf,
    bare: Home,
    _home: Home,
}

impl<'a> Cluster<'a> {
    fn new(s: &'a Stack, label: &str) -> Self {
        let home = Home::new(s, label);
        let name = unique_name(label);
        home.setup(s, &name, &[]).ok();
        let profile = home.profile(&name);
        let tunnel = OpenSshTunnel::open(s, &profile);
        // One more forward, to node 1's PLAINTEXT listener, in its own ssh (the laptop user's
        // key and known_hosts; the profile's config would repeat its forwards). Through the
        // operator's shell account: enrolled keys may reach only the brokers' TLS listeners and
        // MySQL (their `permitopen`), which a test elsewhere checks.
        let plain_port = port_of(s.info("kafka_plaintext"));
        let forward = format!("127.0.0.1:{plain_port}:localhost:{plain_port}");
        let plain = Background::start(
            s,
            home.dir.join("plain-forward.log"),
            &format!(
                "ssh -N -o BatchMode=yes -o ExitOnForwardFailure=yes -L {forward} {}",
                s.info("shell_destination")
            ),
        );
        let open = || {
            s.laptop(
                &[
                    "bash",
                    "-c",
                    &format!("exec 3<>/dev/tcp/127.0.0.1/{plain_port}"),
                ],
                &[],
                None,
            )
            .success()
        };
        assert!(
            within(Duration::from_secs(20), open).is_some(),
            "the forward to the PLAINTEXT listener did not open:\n{}",
            plain.log()
        );
        Self {
            s,
            profile,
            bare: Home::new(s, &format!("{label}-bare")),
            _home: home,
            _tunnel: tunnel,
            _plain: plain,
        }
    }

    /// Writes a config by hand into the bare home.
    fn write(&self, file: &str, text: &str) -> String {
        let path = self.bare.dir.join(file);
        std::fs::write(&path, text).expect("write config");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        path.display().to_string()
    }

    fn profile_file(&self, f: &str) -> String {
        self.profile.join(f).display().to_string()
    }

    fn password(&self) -> String {
        std::fs::read_to_string(self.profile.join("keystore.password"))
            .expect("password")
            .trim()
            .to_owned()
    }

    /// A Java config with the profile's PKCS#12 stores.
    fn java_ssl(&self, bootstrap: &str) -> String {
        let pw = self.password();
        format!(
            "bootstrap.servers={bootstrap}\nsecurity.protocol=SSL\n\
             ssl.keystore.type=PKCS12\nssl.keystore.location={}\nssl.keystore.password={pw}\n\
             ssl.truststore.type=PKCS12\nssl.truststore.location={}\nssl.truststore.password={pw}\n",
            self.profile_file("keystore.p12"),
            self.profile_file("truststore.p12"),
        )
    }

    /// `shiqi-connect --json doctor ARGS` with no profile anywhere.
    fn doctor(&self, args: &[&str]) -> (Out, Vec<Value>) {
        let mut full = vec!["--json", "doctor"];
        full.extend_from_slice(args);
        let out = self.bare.connect(self.s, &full);
        let report: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}):\n{}", out.all()));
        assert!(report["profile"].is_null(), "{report:#}");
        let checks = report["checks"].as_array().cloned().unwrap_or_default();
        (out, checks)
    }
}

fn port_of(host_port: &str) -> u16 {
    host_port
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("host:port")
}

fn of<'v>(checks: &'v [Value], id: &str) -> Vec<&'v Value> {
    checks.iter().filter(|c| c["check"] == id).collect()
}

fn dump(checks: &[Value]) -> String {
    serde_json::to_string_pretty(checks).unwrap_or_default()
}

/// The one check of `id` with `status`, whose text says each of `says`.
#[track_caller]
fn one<'v>(checks: &'v [Value], id: &str, status: &str, says: &[&str]) -> &'v Value {
    let found: Vec<&Value> = of(checks, id)
        .into_iter()
        .filter(|c| c["status"] == status)
        .collect();
    assert_eq!(found.len(), 1, "one {status} `{id}`:\n{}", dump(checks));
    let text = format!(
        "{} {} {}",
        found[0]["found"], found[0]["fix"], found[0]["notes"]
    );
    for s in says {
        assert!(
            text.contains(s),
            "`{id}` does not say `{s}`:\n{}",
            dump(checks)
        );
    }
    found[0]
}

/// Adds lines to the laptop's /etc/hosts, restored on drop.
struct HostsEntry {
    path: PathBuf,
    before: String,
}

impl HostsEntry {
    fn add(s: &Stack, line: &str) -> Self {
        let path = PathBuf::from(s.info("laptop_hosts"));
        let before = std::fs::read_to_string(&path).expect("laptop hosts");
        // In place: the laptop's namespace sees this file through a bind mount of its inode.
        std::fs::write(&path, format!("{before}{line}\n")).expect("hosts");
        Self { path, before }
    }
}

impl Drop for HostsEntry {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.before);
    }
}

#[test]
fn a_config_without_security_protocol_against_the_tls_brokers_is_the_out_of_memory_error() {
    let s = stack();
    let c = Cluster::new(s, "cl-oom");
    let file = c.write("his.properties", "bootstrap.servers=localhost:19094\n");
    let (out, checks) = c.doctor(&["--config", &file]);
    assert_eq!(out.code, Some(1), "{}", dump(&checks));
    one(
        &checks,
        "cluster.bootstrap",
        "fail",
        &[
            "sets no `security.protocol`, so the client uses `PLAINTEXT`",
            "speaks TLS",
            "java.lang.OutOfMemoryError",
            "KAFKA-4090",
            "add the line `security.protocol=SSL`",
        ],
    );
    // Nothing more is tried against a cluster the client cannot talk to.
    assert_eq!(
        of(&checks, "cluster.brokers")[0]["status"],
        "skip",
        "{}",
        dump(&checks)
    );

    // The same without a file: what the port speaks and what a client needs.
    let (out, checks) = c.doctor(&["--bootstrap", "localhost:19094"]);
    assert_eq!(out.code, Some(0), "{}", dump(&checks));
    one(
        &checks,
        "cluster.bootstrap",
        "ok",
        &["speaks TLS", "security.protocol=SSL"],
    );
}

#[test]
fn ssl_against_a_plaintext_listener_fails_and_names_the_listener() {
    let s = stack();
    let c = Cluster::new(s, "cl-ssl");
    let file = c.write("ssl.properties", &c.java_ssl(s.info("kafka_plaintext")));
    let (out, checks) = c.doctor(&["--config", &file]);
    assert_eq!(out.code, Some(1), "{}", dump(&checks));
    one(
        &checks,
        "cluster.bootstrap",
        "fail",
        &[
            "`security.protocol=SSL`",
            "plaintext listener",
            "`listeners`",
        ],
    );
}

#[test]
fn a_broker_name_that_does_not_resolve_here_and_one_that_resolves_elsewhere_are_named() {
    let s = stack();
    let c = Cluster::new(s, "cl-names");
    let advertised = s.info("kafka_plaintext_advertised");
    let name = advertised.rsplit_once(':').expect("host:port").0;
    let file = c.write(
        "plain.properties",
        &format!("bootstrap.servers={}\n", s.info("kafka_plaintext")),
    );

    // The bootstrap answers (PLAINTEXT, as the file says), broker 1 advertises a name the
    // laptop cannot resolve.
    let (out, checks) = c.doctor(&["--config", &file]);
    assert_eq!(out.code, Some(1), "{}", dump(&checks));
    one(&checks, "cluster.bootstrap", "ok", &["plaintext Kafka"]);
    let f = one(
        &checks,
        "cluster.brokers",
        "fail",
        &[
            &format!("broker 1 advertises `{advertised}`"),
            "does not resolve on this machine",
            &format!("`127.0.0.1 {name}` to /etc/hosts"),
            "advertised.listeners",
            "networkaddress.cache.ttl",
        ],
    );
    assert!(
        f["subject"]
            .as_str()
            .unwrap_or_default()
            .contains("broker 1")
    );

    // A hosts entry that sends the name to the server's public address: the client would leave
    // the tunnel, and nothing listens there.
    {
        let _entry = HostsEntry::add(s, &format!("{} {name}", s.info("server_ip")));
        let (_, checks) = c.doctor(&["--config", &file]);
        one(
            &checks,
            "cluster.brokers",
            "fail",
            &[
                s.info("server_ip"),
                "leaves the tunnel",
                &format!("`127.0.0.1 {name}`"),
            ],
        );
    }

    // Fixed as the doctor says: everything passes.
    let _entry = HostsEntry::add(s, &format!("127.0.0.1 {name}"));
    let (out, checks) = c.doctor(&["--config", &file]);
    assert_eq!(out.code, Some(0), "{}", dump(&checks));
    one(
        &checks,
        "cluster.brokers",
        "ok",
        &["broker 1", "plaintext Kafka"],
    );
}

#[test]
fn healthy_hand_written_java_librdkafka_and_mysql_files_pass_every_cluster_check() {
    let s = stack();
    let c = Cluster::new(s, "cl-ok");
    let java = c.write("client.properties", &c.java_ssl("localhost:19094"));
    let rdkafka = c.write(
        "kcat.conf",
        &format!(
            "bootstrap.servers=localhost:29094\nsecurity.protocol=ssl\nssl.ca.location={}\n\
             ssl.certificate.location={}\nssl.key.location={}\n",
            c.profile_file("ca.crt"),
            c.profile_file("client.crt"),
            c.profile_file("client.key"),
        ),
    );
    let name = c
        .profile
        .file_name()
        .and_then(|n| n.to_str())
        .expect("profile name")
        .to_owned();
    let cnf = c.write(
        "app.cnf",
        &format!(
            "[client]\nhost=127.0.0.1\nport=3306\nuser={name}\nssl-ca={}\nssl-cert={}\n\
             ssl-key={}\n",
            c.profile_file("ca.crt"),
            c.profile_file("client.crt"),
            c.profile_file("client.key"),
        ),
    );
    let (out, checks) = c.doctor(&["--config", &java, "--config", &rdkafka, "--config", &cnf]);
    assert_eq!(out.code, Some(0), "{}", dump(&checks));
    for id in ["cluster.bootstrap", "cluster.brokers", "cluster.mysql"] {
        let found = of(&checks, id);
        assert!(!found.is_empty(), "{id} ran:\n{}", dump(&checks));
        for f in found {
            assert_eq!(f["status"], "ok", "{id}:\n{}", dump(&checks));
        }
    }
    // Three brokers for each Kafka file, each with its certificate checked.
    let brokers = of(&checks, "cluster.brokers");
    assert_eq!(brokers.len(), 6, "{}", dump(&checks));
    assert!(
        brokers.iter().all(|b| b["found"]
            .as_str()
            .unwrap_or_default()
            .contains("certificate covers")),
        "{}",
        dump(&checks)
    );
    one(
        &checks,
        "cluster.mysql",
        "ok",
        &[&format!("`SELECT CURRENT_USER()` = `{name}@127.0.0.1`")],
    );
}
