//! `shiqi-connect doctor` on the real stack: on a healthy profile every check passes, and each
//! fault made on purpose (tunnel down, one broker's forward missing, an advertised name that
//! resolves elsewhere, a typo'd key, PLAINTEXT against the TLS port, an expired certificate, a
//! wrong keystore password, a key that is not the certificate's) is the one check that fails,
//! with its fix named.

use std::path::{Path, PathBuf};

use serde_json::Value;
use shiqi_ca::issue::{Ca, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};
use shiqi_ca::keystore::{self, P12Format};
use shiqi_ca::{ProfileName, Secret};
use time::{Duration, OffsetDateTime};

use crate::setup::{Home, OpenSshTunnel, laptop_kafka_tool};
use crate::stack::{Out, Stack, stack, unique_name};

/// A fresh profile in its own SHIQI_HOME.
struct Fixture {
    home: Home,
    name: String,
}

impl Fixture {
    fn new(s: &Stack, label: &str) -> Self {
        let home = Home::new(s, label);
        let name = unique_name(label);
        home.setup(s, &name, &[]).ok();
        Self { home, name }
    }

    fn dir(&self) -> PathBuf {
        self.home.profile(&self.name)
    }

    fn file(&self, f: &str) -> PathBuf {
        self.dir().join(f)
    }

    /// `doctor NAME --json EXTRA…`: the exit code and the checks.
    fn doctor(&self, s: &Stack, extra: &[&str]) -> (Out, Vec<Value>) {
        let mut args = vec!["--json", "doctor", self.name.as_str()];
        args.extend_from_slice(extra);
        let out = self.home.connect(s, &args);
        let report: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}):\n{}", out.all()));
        let checks = report["checks"].as_array().cloned().unwrap_or_default();
        (out, checks)
    }

    /// Rewrites a profile file in place (its owner and mode stay the laptop user's 0600).
    fn edit(&self, f: &str, change: impl FnOnce(String) -> String) {
        let path = self.file(f);
        let text = std::fs::read_to_string(&path).expect("read profile file");
        std::fs::write(&path, change(text)).expect("write profile file");
    }

    fn write(&self, f: &str, bytes: &[u8]) {
        std::fs::write(self.file(f), bytes).expect("write profile file");
    }
}

fn id(c: &Value) -> &str {
    c["check"].as_str().unwrap_or_default()
}

fn status(c: &Value) -> &str {
    c["status"].as_str().unwrap_or_default()
}

fn dump(checks: &[Value]) -> String {
    checks
        .iter()
        .map(|c| {
            format!(
                "{:<5} {:<18} {}\n      fix: {}\n",
                status(c),
                id(c),
                c["found"].as_str().unwrap_or_default(),
                c["fix"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

/// Every check of a healthy profile on this stack, in order.
const ALL: &[&str] = &[
    "files",
    "tool.mysql",
    "tool.kcat",
    "tool.java",
    "ssh.reach",
    "ssh.host-key",
    "ssh.login",
    "ssh.config-key",
    "agent.version",
    "cert.valid",
    "cert.chain",
    "cert.key",
    "cert.keystores",
    "tunnel",
    "addresses.resolve",
    "addresses.names",
    "protocol",
    "lint",
    "lint",
    "lint",
    "login.kafka",
    "login.mysql",
];

/// Exactly one check fails, it is `which`, exit status 1, and its text and fix say `found` and
/// `fix`. Returns that check.
#[track_caller]
fn the_one_failure<'a>(
    out: &Out,
    checks: &'a [Value],
    which: &str,
    found: &[&str],
    fix: &[&str],
) -> &'a Value {
    let failed: Vec<&Value> = checks.iter().filter(|c| status(c) == "fail").collect();
    assert_eq!(
        failed.iter().map(|c| id(c)).collect::<Vec<_>>(),
        [which],
        "expected `{which}` to be the one failure:\n{}",
        dump(checks)
    );
    assert_eq!(out.code, Some(1), "a failed check exits 1:\n{}", out.stderr);
    let c = failed[0];
    let text = c["found"].as_str().unwrap_or_default();
    let fix_text = c["fix"].as_str().unwrap_or_default();
    for f in found {
        assert!(
            text.contains(f),
            "`{which}` should say {f:?}:\n{}",
            dump(checks)
        );
    }
    for f in fix {
        assert!(
            fix_text.contains(f),
            "`{which}`'s fix should name {f:?}:\n{}",
            dump(checks)
        );
    }
    c
}

// The issue's first "done when": a healthy profile passes every check, in human and JSON form.
#[test]
fn doctor_passes_every_check_on_a_healthy_profile() {
    let s = stack();
    let fx = Fixture::new(s, "dr-ok");
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    assert_eq!(out.code, Some(0), "{}", dump(&checks));
    let ids: Vec<&str> = checks.iter().map(id).collect();
    assert_eq!(ids, ALL, "{}", dump(&checks));
    assert!(
        checks.iter().all(|c| status(c) == "ok"),
        "every check passes:\n{}",
        dump(&checks)
    );
    let by = |i: &str| {
        checks
            .iter()
            .find(|c| id(c) == i)
            .and_then(|c| c["found"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(by("login.mysql").contains(&format!("`{}@127.0.0.1`", fx.name)));
    assert!(
        by("login.kafka").contains("brokers (1=localhost:19094, 2=localhost:29094"),
        "{}",
        by("login.kafka")
    );
    assert!(by("protocol").contains("19094 TLS"), "{}", by("protocol"));
    // The agent on the server, asked through the tunnel's login: this build's protocol.
    assert!(
        by("agent.version").contains("speaks protocol 1, as this shiqi-connect does"),
        "{}",
        by("agent.version")
    );

    // The human form: one line per check, a summary, exit 0.
    let human = fx.home.connect(s, &["doctor", &fx.name]).ok();
    assert_eq!(
        human
            .stdout
            .lines()
            .filter(|l| l.starts_with("ok  "))
            .count(),
        ALL.len(),
        "{}",
        human.stdout
    );
    assert!(
        human
            .stdout
            .contains(&format!("{} ok, 0 warn, 0 fail, 0 skipped", ALL.len())),
        "{}",
        human.stdout
    );
}

#[test]
fn doctor_names_the_tunnel_when_it_is_down() {
    let s = stack();
    let fx = Fixture::new(s, "dr-down");
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "tunnel",
        &["nothing listens on 127.0.0.1", "the tunnel is not running"],
        &["start the tunnel", "shiqi-tunnel"],
    );
    // What needs the tunnel is skipped with the reason, not failed again.
    for skipped in ["addresses.names", "protocol", "login.kafka", "login.mysql"] {
        let c = checks.iter().find(|c| id(c) == skipped).expect("check ran");
        assert_eq!(status(c), "skip", "{}", dump(&checks));
        assert!(
            c["found"].as_str().unwrap_or_default().contains("tunnel"),
            "{}",
            dump(&checks)
        );
    }
}

// Seed: kafka-day-journal — the one-port tunnel: the client reaches the cluster, then hangs on
// a broker whose advertised port is not forwarded.
#[test]
fn doctor_names_the_broker_whose_forward_is_missing() {
    let s = stack();
    let fx = Fixture::new(s, "dr-fwd");
    fx.edit("ssh_config", |t| {
        t.lines()
            .filter(|l| !l.contains("LocalForward 127.0.0.1:29094"))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "tunnel",
        &["no `LocalForward` for broker 2 (`localhost:29094`)"],
        &["LocalForward 127.0.0.1:29094 localhost:29094", "-O exit"],
    );
    let login = checks.iter().find(|c| id(c) == "login.kafka").expect("ran");
    assert_eq!(status(login), "skip", "{}", dump(&checks));
    // MySQL's forward is fine, so its login still runs.
    let mysql = checks.iter().find(|c| id(c) == "login.mysql").expect("ran");
    assert_eq!(status(mysql), "ok", "{}", dump(&checks));
}

/// Gives the laptop namespace its own `/etc/hosts` (`ip netns exec` bind-mounts
/// `/etc/netns/NAME/hosts`) with one more line, and takes it away again on drop.
struct LaptopHosts {
    dir: PathBuf,
    previous: Option<Vec<u8>>,
    made_dir: bool,
}

impl LaptopHosts {
    fn add(s: &Stack, line: &str) -> Self {
        let dir = Path::new("/etc/netns").join(s.info("laptop_netns"));
        let made_dir = !dir.exists();
        std::fs::create_dir_all(&dir).expect("mkdir /etc/netns/NAME");
        let file = dir.join("hosts");
        let previous = std::fs::read(&file).ok();
        let base = previous
            .clone()
            .unwrap_or_else(|| std::fs::read("/etc/hosts").unwrap_or_default());
        let mut text = String::from_utf8_lossy(&base).into_owned();
        if !text.ends_with('\n') && !text.is_empty() {
            text.push('\n');
        }
        text.push_str(line);
        text.push('\n');
        std::fs::write(&file, text).expect("write hosts");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        Self {
            dir,
            previous,
            made_dir,
        }
    }
}

impl Drop for LaptopHosts {
    fn drop(&mut self) {
        let file = self.dir.join("hosts");
        match &self.previous {
            Some(p) => {
                let _ = std::fs::write(&file, p);
            }
            None => {
                let _ = std::fs::remove_file(&file);
            }
        }
        if self.made_dir {
            let _ = std::fs::remove_dir(&self.dir);
            let _ = std::fs::remove_dir("/etc/netns");
        }
    }
}

// Seed: wasted-weekend-on-kafka — an advertised name that resolves to another address on the
// laptop sends the client around the tunnel.
#[test]
fn doctor_names_an_advertised_host_that_resolves_around_the_tunnel() {
    let s = stack();
    let fx = Fixture::new(s, "dr-dns");
    // Broker 2 advertises a name; on this laptop it resolves to the server's own address.
    let host = "broker-2.shiqi.test";
    let _hosts = LaptopHosts::add(s, &format!("{} {host}", s.info("server_ip")));
    fx.edit("profile.json", |t| {
        let mut p: Value = serde_json::from_str(&t).expect("profile.json");
        for b in p["brokers"].as_array_mut().expect("brokers") {
            if b["id"] == 2 {
                b["host"] = Value::from(host);
            }
        }
        serde_json::to_string_pretty(&p).expect("json")
    });
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    let c = the_one_failure(
        &out,
        &checks,
        "addresses.resolve",
        &[
            host,
            &format!("resolves to {}", s.info("server_ip")),
            "around the tunnel",
        ],
        &[
            &format!("`127.0.0.1 {host}`"),
            "advertise `localhost:29094`",
        ],
    );
    let notes = c["notes"].to_string();
    assert!(
        notes.contains("networkaddress.cache.ttl") && notes.contains("restarted"),
        "a name-resolution fix carries the JVM DNS cache note:\n{notes}"
    );
    let login = checks.iter().find(|c| id(c) == "login.kafka").expect("ran");
    assert_eq!(status(login), "skip", "{}", dump(&checks));
}

#[test]
fn doctor_names_a_typo_in_client_properties_with_the_real_key() {
    let s = stack();
    let fx = Fixture::new(s, "dr-typo");
    fx.edit("client.properties", |t| {
        t.replace("\nsecurity.protocol=SSL\n", "\necurity.protocol=SSL\n")
    });
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    let c = the_one_failure(
        &out,
        &checks,
        "lint",
        &["unknown key `ecurity.protocol` (did you mean `security.protocol`?)"],
        &["rename `ecurity.protocol` to `security.protocol`"],
    );
    assert_eq!(c["subject"], "client.properties");
    // Its consequence (the Java default PLAINTEXT against TLS) is pointed at, not failed twice.
    let p = checks.iter().find(|c| id(c) == "protocol").expect("ran");
    assert_eq!(status(p), "warn", "{}", dump(&checks));

    // The same file given with `--config` (its kind guessed from the contents) fails the same way.
    let copy = fx.home.dir.join("app.conf");
    std::fs::copy(fx.file("client.properties"), &copy).expect("copy");
    use std::os::unix::fs::MetadataExt as _;
    let owner = std::fs::metadata(fx.dir()).expect("profile");
    std::os::unix::fs::chown(&copy, Some(owner.uid()), Some(owner.gid())).expect("chown");
    let copy_s = copy.display().to_string();
    let (out, checks) = fx.doctor(s, &["--config", &copy_s]);
    let c = the_one_failure(
        &out,
        &checks,
        "lint",
        &["did you mean `security.protocol`"],
        &[],
    );
    assert_eq!(c["subject"], "app.conf");
    assert!(
        c["found"]
            .as_str()
            .unwrap_or_default()
            .contains("Java Kafka client"),
        "{}",
        dump(&checks)
    );
}

// KAFKA-4090: a Java client with PLAINTEXT against the TLS listener dies of OutOfMemoryError.
#[test]
fn doctor_names_plaintext_against_the_tls_port_as_the_out_of_memory_error() {
    let s = stack();
    let fx = Fixture::new(s, "dr-plain");
    fx.edit("client.properties", |t| {
        t.replace(
            "\nsecurity.protocol=SSL\n",
            "\nsecurity.protocol=PLAINTEXT\n",
        )
    });
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "protocol",
        &[
            "security.protocol=PLAINTEXT",
            "speaks TLS",
            "15 03 03 00",
            "java.lang.OutOfMemoryError",
            "KAFKA-4090",
        ],
        &["security.protocol=SSL"],
    );
    // The real Java client agrees with the diagnosis.
    let props = fx.file("client.properties").display().to_string();
    let java = laptop_kafka_tool(
        s,
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            "localhost:19094",
            "--command-config",
            &props,
            "--list",
        ],
        None,
    );
    assert!(
        java.all().contains("java.lang.OutOfMemoryError"),
        "the Java client should run out of memory:\n{}",
        java.all()
    );
}

/// A certificate that expired ten days ago, from a throwaway CA; replaces the profile's key,
/// certificate, CA and both keystores (same password), so only the validity is wrong.
fn expire(fx: &Fixture) {
    let now = OffsetDateTime::now_utc();
    let ca = Ca::create(
        KeyType::EcdsaP256,
        "throwaway test CA",
        Validity {
            not_before: now - Duration::days(60),
            not_after: now + Duration::days(365),
        },
    )
    .expect("CA");
    let key = PrivateKey::generate(KeyType::EcdsaP256).expect("key");
    let name: ProfileName = fx.name.parse().expect("name");
    let csr = shiqi_ca::csr::build(&key, &name).expect("csr");
    let checked = shiqi_ca::policy::check_csr(csr.as_bytes(), &name).expect("policy");
    let cert = ca
        .issue_client(
            &checked,
            &shiqi_ca::Serial::random(),
            Validity {
                not_before: now - Duration::days(40),
                not_after: now - Duration::days(10),
            },
        )
        .expect("issue");
    let chain = format!("{}{}", cert.pem(), ca.cert().pem());
    let pw = std::fs::read_to_string(fx.file("keystore.password")).expect("password");
    let pw = Secret::new(pw.trim_end().to_owned());
    fx.write("client.key", key.to_pkcs8_pem().expose().as_bytes());
    fx.write("client.crt", chain.as_bytes());
    fx.write("ca.crt", ca.cert().pem().as_bytes());
    fx.write(
        "keystore.p12",
        &keystore::keystore(&key, &chain, "client", &pw, P12Format::Modern).expect("keystore"),
    );
    fx.write(
        "truststore.p12",
        &keystore::truststore(&ca.cert().pem(), "shiqi-ca", &pw, P12Format::Modern)
            .expect("truststore"),
    );
}

#[test]
fn doctor_names_an_expired_certificate() {
    let s = stack();
    let fx = Fixture::new(s, "dr-exp");
    expire(&fx);
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "cert.valid",
        &["expired on", "(10 days ago)"],
        &["get a new certificate", fx.name.as_str()],
    );
    for c in [
        "cert.chain",
        "cert.key",
        "cert.keystores",
        "protocol",
        "lint",
    ] {
        let got = checks.iter().find(|x| id(x) == c).map(status);
        assert_eq!(got, Some("ok"), "{c}:\n{}", dump(&checks));
    }
    for c in ["login.kafka", "login.mysql"] {
        let got = checks.iter().find(|x| id(x) == c).expect("ran");
        assert_eq!(status(got), "skip", "{}", dump(&checks));
        assert!(
            got["found"]
                .as_str()
                .unwrap_or_default()
                .contains("cert.valid")
        );
    }
}

#[test]
fn doctor_names_a_wrong_keystore_password() {
    let s = stack();
    let fx = Fixture::new(s, "dr-pw");
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    // The password file is wrong: client.properties still holds the right one.
    let right = std::fs::read(fx.file("keystore.password")).expect("password");
    fx.write("keystore.password", b"not-the-password\n");
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "cert.keystores",
        &[
            "the password in `keystore.password` does not open `keystore.p12` or `truststore.p12`",
            "keystore password was incorrect",
        ],
        &["the password in `client.properties` is right"],
    );
    // And the other way round: what Java and DataGrip read is wrong.
    fx.write("keystore.password", &right);
    fx.edit("client.properties", |t| {
        t.lines()
            .map(|l| {
                if l.starts_with("ssl.keystore.password=") {
                    "ssl.keystore.password=not-the-password\n".to_owned()
                } else {
                    format!("{l}\n")
                }
            })
            .collect()
    });
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "cert.keystores",
        &["the password in `client.properties` does not open `keystore.p12`"],
        &["the password in `keystore.password` is right"],
    );
}

#[test]
fn doctor_names_a_key_that_is_not_the_certificates() {
    let s = stack();
    let fx = Fixture::new(s, "dr-key");
    let other = PrivateKey::generate(KeyType::EcdsaP256).expect("key");
    fx.write("client.key", other.to_pkcs8_pem().expose().as_bytes());
    let _tunnel = OpenSshTunnel::open(s, &fx.dir());
    let (out, checks) = fx.doctor(s, &[]);
    the_one_failure(
        &out,
        &checks,
        "cert.key",
        &["`client.key` (p256) is not the key of `client.crt`"],
        &["put back the `client.key`", fx.name.as_str()],
    );
    for c in ["login.kafka", "login.mysql"] {
        let got = checks.iter().find(|x| id(x) == c).expect("ran");
        assert_eq!(status(got), "skip", "{}", dump(&checks));
    }
}
