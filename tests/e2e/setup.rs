//! `shiqi-connect setup` from the laptop namespace against the real server: the files it writes
//! are taken as they are by OpenSSH, the Kafka console tools, kcat, the mysql client and
//! keytool, and every failure leaves no profile behind.

use std::path::{Path, PathBuf};

use crate::stack::{Out, Stack, stack, unique_name};

/// A profile home for one test, owned by the laptop user and removed afterwards.
pub(crate) struct Home {
    pub(crate) dir: PathBuf,
}

impl Home {
    pub(crate) fn new(s: &Stack, label: &str) -> Self {
        let dir = Path::new(s.info("laptop_home"))
            .join("e2e")
            .join(unique_name(label));
        let d = dir.display().to_string();
        s.laptop(&["mkdir", "-p", &d], &[], None).ok();
        Self { dir }
    }

    pub(crate) fn env(&self) -> String {
        self.dir.display().to_string()
    }

    pub(crate) fn profile(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Runs `shiqi-connect ARGS` on the laptop with this home.
    pub(crate) fn connect(&self, s: &Stack, args: &[&str]) -> Out {
        let mut full = vec!["shiqi-connect"];
        full.extend_from_slice(args);
        s.laptop(&full, &[("SHIQI_HOME", &self.env())], None)
    }

    pub(crate) fn setup(&self, s: &Stack, name: &str, extra: &[&str]) -> Out {
        self.setup_at(s, s.info("ssh_destination"), name, extra)
    }

    /// `setup` against another SSH destination (the operator's shell account, for tests that
    /// wrap the agent).
    pub(crate) fn setup_at(&self, s: &Stack, server: &str, name: &str, extra: &[&str]) -> Out {
        let mut args = vec!["setup", name, "--server", server, "--yes"];
        args.extend_from_slice(extra);
        self.connect(s, &args)
    }

    /// Whether anything of profile `name` (or its staging folder) is on disk.
    pub(crate) fn leftovers(&self, name: &str) -> Vec<String> {
        std::fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|f| f.contains(name))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An OpenSSH tunnel from a profile's ssh_config, closed on drop.
pub(crate) struct OpenSshTunnel<'a> {
    s: &'a Stack,
    config: String,
}

impl<'a> OpenSshTunnel<'a> {
    pub(crate) fn open(s: &'a Stack, profile: &Path) -> Self {
        let config = profile.join("ssh_config").display().to_string();
        // stderr to a file: a ProxyJump hop (`ssh -W`) keeps it open after `-f` returns, and
        // the test would wait for its end forever.
        let log = profile.join("openssh.log").display().to_string();
        let out = s.laptop(
            &[
                "sh",
                "-c",
                "exec ssh -fN -F \"$0\" shiqi-tunnel 2>\"$1\" </dev/null",
                &config,
                &log,
            ],
            &[],
            None,
        );
        assert!(
            out.success(),
            "ssh -fN failed: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Self { s, config }
    }
}

impl Drop for OpenSshTunnel<'_> {
    fn drop(&mut self) {
        let _ = self.s.laptop(
            &["ssh", "-F", &self.config, "-O", "exit", "shiqi-tunnel"],
            &[],
            None,
        );
    }
}

/// A Kafka tool from the fetched jars, run on the laptop (so through the tunnel).
pub(crate) fn laptop_kafka_tool(
    s: &Stack,
    class: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Out {
    let full = s.java_command(class, args);
    let full: Vec<&str> = full.iter().map(String::as_str).collect();
    s.laptop(&full, &[], stdin)
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0)
}

// Seed: kafka-day-journal — the one-port tunnel hung on broker 2; every advertised broker must
// be forwarded, and a topic with a leader on each broker proves the client reached all three.
#[test]
fn setup_then_openssh_tunnel_carries_kafka_to_every_broker_and_mysql() {
    let s = stack();
    let home = Home::new(s, "setup");
    let name = unique_name("saige");
    let out = home.setup(s, &name, &[]).ok();
    assert!(
        out.stderr
            .contains(&format!("shiqi-connect tunnel up {name}"))
            && out.stderr.contains("ssh -fN -F"),
        "the next step is printed:\n{}",
        out.stderr
    );
    let profile = home.profile(&name);
    let p = |f: &str| profile.join(f).display().to_string();

    // Modes: secrets 0600 in a 0700 folder.
    assert_eq!(mode(&profile), 0o700);
    for f in [
        "client.key",
        "keystore.p12",
        "truststore.p12",
        "keystore.password",
    ] {
        assert_eq!(mode(&profile.join(f)), 0o600, "{f}");
    }

    // OpenSSH reads the ssh_config and shows a forward for every broker and MySQL.
    let g = s
        .laptop(
            &["ssh", "-G", "-F", &p("ssh_config"), "shiqi-tunnel"],
            &[],
            None,
        )
        .ok();
    for fwd in [
        "19094 localhost:19094",
        "29094 localhost:29094",
        "39094 localhost:39094",
        "3306 127.0.0.1:3306",
    ] {
        let (local, remote) = fwd.split_once(' ').expect("pair");
        let (rhost, rport) = remote.split_once(':').expect("host:port");
        let line = format!("localforward [127.0.0.1]:{local} [{rhost}]:{rport}");
        assert!(g.stdout.contains(&line), "missing {fwd}:\n{}", g.stdout);
    }
    assert!(
        g.stdout.contains("exitonforwardfailure yes"),
        "{}",
        g.stdout
    );

    // One partition led by each broker: the console tools must reach all three.
    let _tunnel = OpenSshTunnel::open(s, &profile);
    crate::kafka::assert_round_trip_through_every_broker(s, &profile, &name);
    let topic = format!("app.{name}");

    // kcat through the same tunnel lists the cluster.
    let kcat = s
        .laptop(&["kcat", "-F", &p("librdkafka.conf"), "-L"], &[], None)
        .ok();
    assert!(kcat.stdout.contains("3 brokers"), "{}", kcat.stdout);
    assert!(kcat.stdout.contains(&topic), "{}", kcat.stdout);

    // shiqi.env: an app's environment, read by the real clients with nothing else given (the
    // mysql client takes MYSQL_HOST and MYSQL_TCP_PORT from it by itself).
    let script = r#"set -a; . "$1"; set +a
kcat -b "$KAFKA_BOOTSTRAP_SERVERS" -X security.protocol="$KAFKA_SECURITY_PROTOCOL" \
  -X ssl.ca.location="$KAFKA_SSL_CA_LOCATION" -X ssl.certificate.location="$KAFKA_SSL_CERTIFICATE_LOCATION" \
  -X ssl.key.location="$KAFKA_SSL_KEY_LOCATION" -L | grep -c '^  broker '
mariadb --no-defaults --user="$MYSQL_USER" --ssl-ca="$KAFKA_SSL_CA_LOCATION" \
  --ssl-cert="$KAFKA_SSL_CERTIFICATE_LOCATION" --ssl-key="$KAFKA_SSL_KEY_LOCATION" \
  --batch --skip-column-names -e 'SELECT CURRENT_USER()'"#;
    let env = s
        .laptop(&["bash", "-c", script, "sh", &p("shiqi.env")], &[], None)
        .ok();
    assert_eq!(
        env.stdout.lines().collect::<Vec<_>>(),
        ["3", &format!("{name}@127.0.0.1")],
        "{}",
        env.all()
    );

    // The mysql client with my.cnf logs in with the certificate alone.
    let who = s
        .laptop(
            &[
                "mariadb",
                &format!("--defaults-extra-file={}", p("my.cnf")),
                "--batch",
                "--skip-column-names",
                "-e",
                "SELECT CURRENT_USER()",
            ],
            &[],
            None,
        )
        .ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));

    // keytool reads what DataGrip and Java clients will import.
    let pw = std::fs::read_to_string(profile.join("keystore.password")).expect("password");
    for (f, entry) in [
        ("keystore.p12", "PrivateKeyEntry"),
        ("truststore.p12", "trustedCertEntry"),
    ] {
        let out = s
            .laptop(
                &[
                    "keytool",
                    "-list",
                    "-storetype",
                    "PKCS12",
                    "-keystore",
                    &p(f),
                    "-storepass",
                    pw.trim(),
                ],
                &[],
                None,
            )
            .ok();
        assert!(out.stdout.contains(entry), "{f}: {}", out.stdout);
    }
}

#[test]
fn the_tunnel_is_what_carries_the_traffic() {
    let s = stack();
    let home = Home::new(s, "notunnel");
    let name = unique_name("nt");
    home.setup(s, &name, &[]).ok();
    let my_cnf = format!(
        "--defaults-extra-file={}",
        home.profile(&name).join("my.cnf").display()
    );
    // No tunnel: nothing listens on the laptop and the server's ports are not reachable directly.
    let direct = s.laptop(
        &["bash", "-c", "exec 3<>/dev/tcp/10.231.0.1/3306"],
        &[],
        None,
    );
    assert!(
        !direct.success(),
        "MySQL must not be reachable from the laptop without SSH"
    );
    let no_tunnel = s
        .laptop(&["mariadb", &my_cnf, "-e", "SELECT 1"], &[], None)
        .failed();
    assert!(
        no_tunnel.stderr.contains("Can't connect"),
        "{}",
        no_tunnel.stderr
    );
}

#[test]
fn the_agent_never_receives_the_private_key() {
    let s = stack();
    let home = Home::new(s, "nokey");
    let name = unique_name("nk");
    // A recording wrapper on the server: it keeps every argument and byte of stdin the agent gets.
    let dir = s.scratch();
    let log = dir.path().join("received");
    let wrapper = dir.path().join("record-agent");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"ARGS: $*\" >> {log}\ntee -a {log} | {agent} \"$@\"\n",
            log = log.display(),
            agent = s.info("agent_via_sudo")
        ),
    )
    .expect("wrapper");
    std::fs::write(&log, b"").expect("log");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).expect("chmod");

    home.setup_at(
        s,
        s.info("shell_destination"),
        &name,
        &["--agent-command", &wrapper.display().to_string()],
    )
    .ok();
    let received = std::fs::read_to_string(&log).expect("log");
    assert!(
        received.contains("BEGIN CERTIFICATE REQUEST"),
        "the CSR went through the wrapper:\n{received}"
    );
    assert!(
        received.contains(&format!("ARGS: provision --name {name}")),
        "{received}"
    );
    assert!(
        !received.contains("PRIVATE KEY"),
        "a private key reached the server:\n{received}"
    );
    let key = std::fs::read_to_string(home.profile(&name).join("client.key")).expect("key");
    let body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(
        !received.replace('\n', "").contains(&body),
        "the key's bytes reached the server"
    );
}

/// Runs setup with `extra` and checks the one-line error, exit 2 and that nothing is left.
fn refused(
    s: &Stack,
    home: &Home,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    expect: &str,
) -> Out {
    let mut args = vec![
        "shiqi-connect",
        "setup",
        name,
        "--server",
        s.info("ssh_destination"),
        "--yes",
    ];
    args.extend_from_slice(extra);
    let mut all_env = vec![("SHIQI_HOME", home.env())];
    all_env.extend(env.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let env_refs: Vec<(&str, &str)> = all_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = s.laptop(&args, &env_refs, None).failed();
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let first = out
        .stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default()
        .to_owned();
    assert!(
        first.contains(expect) || out.stderr.contains(expect),
        "expected `{expect}`:\n{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hint: "),
        "every failure names the fix:\n{}",
        out.stderr
    );
    assert!(
        home.leftovers(name).is_empty(),
        "left behind: {:?}",
        home.leftovers(name)
    );
    out
}

#[test]
fn each_failure_is_one_clear_error_and_leaves_no_profile() {
    let s = stack();
    let home = Home::new(s, "fail");
    let laptop_home = s.info("laptop_home").to_owned();
    let scratch = home.dir.join("scratch");
    let sc = scratch.display().to_string();
    s.laptop(&["mkdir", "-p", &format!("{sc}/.ssh")], &[], None)
        .ok();

    // Unknown host key under --yes: an empty known_hosts.
    let empty_kh = format!("{sc}/empty_known_hosts");
    s.laptop(&["touch", &empty_kh], &[], None).ok();
    let out = refused(
        s,
        &home,
        &unique_name("f1"),
        &["--known-hosts", &empty_kh],
        &[],
        "host key",
    );
    assert!(
        out.stderr.contains("SHA256:"),
        "the fingerprint is shown:\n{}",
        out.stderr
    );

    // Changed host key: known_hosts claims another key for the server.
    let changed_kh = format!("{sc}/changed_known_hosts");
    s.laptop(&["bash", "-c", &format!("ssh-keygen -q -t ed25519 -N '' -f {sc}/fake_host && echo \"10.231.0.1 $(cut -d' ' -f1,2 {sc}/fake_host.pub)\" > {changed_kh}")], &[], None).ok();
    refused(
        s,
        &home,
        &unique_name("f2"),
        &["--known-hosts", &changed_kh],
        &[],
        "CHANGED",
    );

    // An SSH key the server refuses: another HOME whose only key is not authorized.
    s.laptop(&["bash", "-c", &format!("ssh-keygen -q -t ed25519 -N '' -f {sc}/.ssh/id_ed25519 && cp {laptop_home}/.ssh/known_hosts {sc}/.ssh/")], &[], None).ok();
    refused(
        s,
        &home,
        &unique_name("f3"),
        &[],
        &[("HOME", &sc), ("SSH_AUTH_SOCK", "")],
        "",
    );

    // An unreachable server: nothing listens on that port.
    let mut args_unreach = vec![
        "shiqi-connect",
        "setup",
        "f4x",
        "--server",
        "ssh://shiqi-dev@10.231.0.1:2",
        "--yes",
    ];
    let env = [("SHIQI_HOME", home.env())];
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = s.laptop(&args_unreach, &env_refs, None).failed();
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.lines().any(|l| l.starts_with("error: ")) && out.stderr.contains("hint: "),
        "{}",
        out.stderr
    );
    assert!(home.leftovers("f4x").is_empty());
    args_unreach.clear();

    // An agent that refuses the CSR: a reserved name.
    let out = refused(s, &home, "shiqi-admin", &[], &[], "refused");
    assert!(out.stderr.contains("reserved"), "{}", out.stderr);
}

#[test]
fn mysql_down_fails_setup_with_no_profile_left() {
    let s = stack();
    let home = Home::new(s, "dbdown");
    struct Restart<'a>(&'a Stack);
    impl Drop for Restart<'_> {
        fn drop(&mut self) {
            let out = std::process::Command::new(self.0.script())
                .arg("up")
                .output();
            assert!(
                out.is_ok_and(|o| o.status.success()),
                "scripts/stack up did not bring MariaDB back"
            );
        }
    }
    let pidfile = format!("{}/server/mysql/run/mysqld.pid", s.info("stack_dir"));
    let _restart = Restart(s);
    s.server(None, &["bash", "-c", &format!("kill $(cat {pidfile}); for i in $(seq 50); do [ -e {pidfile} ] || exit 0; sleep 0.2; done; exit 1")], None).ok();
    let name = unique_name("f5");
    let out = refused(s, &home, &name, &[], &[], "MySQL");
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}
