//! `shiqi-connect tunnel up|down|status` on the real stack: the built-in tunnel carries the
//! Kafka console tools (to every broker) and the mysql client with the files setup wrote, comes
//! back by itself when its SSH connection is cut, forwards a broker added to the running
//! cluster after the next `up`, refuses a taken port naming its holder, and `down` frees every
//! port.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};

/// The laptop ports the stack's profile forwards (the advertised broker ports and MySQL).
const PORTS: [u16; 4] = [19094, 29094, 39094, 3306];
/// The requirement: a cut connection is back by itself within this.
const BACK_WITHIN: Duration = Duration::from_secs(10);

/// Runs `tunnel down NAME` when dropped, so a failing test leaves no tunnel (and no bound
/// port) behind for the next one.
pub(crate) struct Tunnel<'a> {
    s: &'a Stack,
    home: &'a Home,
    name: String,
}

impl<'a> Tunnel<'a> {
    pub(crate) fn up(s: &'a Stack, home: &'a Home, name: &str, extra: &[&str]) -> (Self, Out) {
        let mut args = vec!["tunnel", "up", name];
        args.extend_from_slice(extra);
        let out = home.connect(s, &args);
        let t = Self {
            s,
            home,
            name: name.to_owned(),
        };
        (t, out)
    }

    pub(crate) fn status(&self) -> (Out, Value) {
        let out = self
            .home
            .connect(self.s, &["--json", "tunnel", "status", &self.name]);
        let json = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("status --json is JSON ({e}):\n{}", out.all()));
        (out, json)
    }

    pub(crate) fn down(&self) -> Out {
        self.home.connect(self.s, &["tunnel", "down", &self.name])
    }
}

impl Drop for Tunnel<'_> {
    fn drop(&mut self) {
        let _ = self.down();
    }
}

/// The laptop's listening TCP ports (`ss -Hltn` in its namespace).
fn laptop_listening(s: &Stack) -> Vec<u16> {
    let out = s.laptop(&["ss", "-Hltn"], &[], None).ok();
    out.stdout
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(3)?
                .rsplit_once(':')?
                .1
                .parse()
                .ok()
        })
        .collect()
}

fn forwards(status: &Value) -> &Vec<Value> {
    status["forwards"].as_array().expect("forwards")
}

#[track_caller]
pub(crate) fn assert_all_ok(status: &Value, ports: &[u16]) {
    assert_eq!(status["ok"], true, "{status:#}");
    let listed: Vec<u64> = forwards(status)
        .iter()
        .map(|f| f["local_port"].as_u64().expect("port"))
        .collect();
    for p in ports {
        assert!(
            listed.contains(&u64::from(*p)),
            "no forward {p}: {status:#}"
        );
    }
    for f in forwards(status) {
        assert_eq!(f["listening"], true, "{f:#}");
        assert_eq!(f["handshake"]["ok"], true, "{f:#}");
        let detail = f["handshake"]["detail"].as_str().expect("detail");
        match f["kind"].as_str() {
            Some("kafka") => assert!(detail.contains("answered ApiVersions"), "{detail}"),
            Some("mysql") => assert!(detail.contains("CURRENT_USER()"), "{detail}"),
            other => panic!("unexpected kind {other:?}"),
        }
    }
}

pub(crate) fn mariadb_current_user(s: &Stack, home: &Home, name: &str) -> Out {
    let my_cnf = format!(
        "--defaults-extra-file={}",
        home.profile(name).join("my.cnf").display()
    );
    s.laptop(
        &[
            "mariadb",
            &my_cnf,
            "--batch",
            "--skip-column-names",
            "-e",
            "SELECT CURRENT_USER()",
        ],
        &[],
        None,
    )
}

#[test]
fn tunnel_up_carries_the_console_tools_and_mysql_then_down_frees_every_port() {
    let s = stack();
    let home = Home::new(s, "tunnel");
    let name = unique_name("tun");
    home.setup(s, &name, &[]).ok();
    let profile = home.profile(&name);

    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    let up = up.ok();
    for line in [
        "127.0.0.1:19094 -> localhost:19094",
        "127.0.0.1:29094 -> localhost:29094",
        "127.0.0.1:39094 -> localhost:39094",
        "127.0.0.1:3306 -> 127.0.0.1:3306",
    ] {
        assert!(up.stdout.contains(line), "`up` lists {line}:\n{}", up.all());
    }
    assert!(up.stderr.contains("3 brokers, unchanged"), "{}", up.stderr);
    let (status, json) = tunnel.status();
    assert_eq!(status.code, Some(0), "{}", status.all());
    assert_all_ok(&json, &PORTS);
    assert_eq!(json["tunnel"]["kind"], "shiqi-connect");
    assert_eq!(json["tunnel"]["phase"], "up");

    // A second `up` finds it running and leaves it alone.
    let again = home.connect(s, &["tunnel", "up", &name]).ok();
    assert!(again.stderr.contains("already running"), "{}", again.stderr);

    // Loopback only: nothing is bound on the laptop's external address.
    let ss = s.laptop(&["ss", "-Hltn"], &[], None).ok();
    for port in PORTS {
        for l in ss
            .stdout
            .lines()
            .filter(|l| l.contains(&format!(":{port} ")))
        {
            assert!(l.contains(&format!("127.0.0.1:{port}")), "{l}");
        }
    }

    // The console tools with setup's client.properties reach every broker through it.
    crate::kafka::assert_round_trip_through_every_broker(s, &profile, &name);

    // The mysql client with setup's my.cnf logs in with the certificate alone.
    let who = mariadb_current_user(s, &home, &name).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));

    // The pid file is private, and the log names connects but never a secret.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(profile.join("tunnel.pid"))
        .expect("pid file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let log = std::fs::read_to_string(profile.join("tunnel.log")).expect("log");
    assert!(
        log.contains("connected") && log.contains("tunnel up"),
        "{log}"
    );
    let password = std::fs::read_to_string(profile.join("keystore.password")).expect("pw");
    assert!(
        !log.contains(password.trim()),
        "the keystore password is in the log"
    );
    assert!(!log.contains("PRIVATE KEY"), "{log}");

    // `down` stops it and frees every port; `status` then reports each forward as failing.
    let down = tunnel.down().ok();
    assert!(
        down.stdout.contains("stopped shiqi-connect tunnel"),
        "{}",
        down.all()
    );
    let listening = laptop_listening(s);
    for port in PORTS {
        assert!(
            !listening.contains(&port),
            "port {port} still bound after down"
        );
    }
    assert!(!profile.join("tunnel.pid").exists());
    let (status, json) = tunnel.status();
    assert_eq!(status.code, Some(1), "{}", status.all());
    assert_eq!(json["ok"], false);
    assert!(json["tunnel"].is_null(), "{json:#}");
    for f in forwards(&json) {
        assert_eq!(f["listening"], false, "{f:#}");
        assert_eq!(f["handshake"]["ok"], false, "{f:#}");
    }
    let text = home.connect(s, &["tunnel", "status", &name]);
    assert_eq!(text.code, Some(1));
    assert!(text.stdout.contains("not running"), "{}", text.stdout);
    assert!(
        text.stdout
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .count()
            == 4,
        "{}",
        text.stdout
    );

    let twice = tunnel.down().ok();
    assert!(twice.stderr.contains("is not running"), "{}", twice.all());
}

#[test]
fn the_tunnel_comes_back_by_itself_when_its_ssh_connection_is_cut() {
    let s = stack();
    let home = Home::new(s, "tunnel-cut");
    let name = unique_name("cut");
    home.setup(s, &name, &[]).ok();
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let (_, json) = tunnel.status();
    assert_all_ok(&json, &PORTS);

    // The sshd processes serving the tunnel (privileged monitor and the user's session).
    let before = s
        .server(
            None,
            &["pgrep", "-f", &format!("sshd: {}", s.info("server_user"))],
            None,
        )
        .ok();
    let pids: Vec<&str> = before.stdout.split_whitespace().collect();
    assert!(!pids.is_empty(), "no sshd session for the tunnel");
    let mut kill = vec!["kill", "-KILL"];
    kill.extend(pids.iter().copied());
    s.server(None, &kill, None).ok();
    let cut = Instant::now();

    // Poll a real handshake through every forward until all work again.
    let mut last = Value::Null;
    let back = loop {
        let (_, json) = tunnel.status();
        if json["ok"] == true {
            break true;
        }
        last = json;
        if cut.elapsed() >= BACK_WITHIN {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = std::fs::read_to_string(home.profile(&name).join("tunnel.log")).unwrap_or_default();
    assert!(
        back,
        "the tunnel was not back within {}s:\n{last:#}\n--- tunnel.log\n{log}",
        BACK_WITHIN.as_secs()
    );
    assert!(log.contains("connection lost"), "{log}");
    assert!(log.contains("reconnected"), "{log}");
    let after = s
        .server(
            None,
            &["pgrep", "-f", &format!("sshd: {}", s.info("server_user"))],
            None,
        )
        .ok();
    assert!(
        after.stdout.split_whitespace().all(|p| !pids.contains(&p)),
        "a new SSH session serves the tunnel"
    );
    // And a real client works through the new connection.
    let who = mariadb_current_user(s, &home, &name).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
}

#[test]
fn a_broker_added_to_the_running_cluster_is_forwarded_after_the_next_up() {
    let s = stack();
    let home = Home::new(s, "tunnel-b4");
    let name = unique_name("four");
    home.setup(s, &name, &[]).ok();
    let profile = home.profile(&name);
    let ssh_config = profile.join("ssh_config");
    let before = std::fs::read_to_string(&ssh_config).expect("ssh_config");
    assert!(!before.contains("49094"), "{before}");

    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let _broker = crate::stack::ExtraBroker::start(s, 4, &[]);

    // `up` on the running tunnel asks the server again, rewrites the files and adds the forward.
    let again = home.connect(s, &["tunnel", "up", &name]).ok();
    assert!(
        again
            .stderr
            .contains("4 brokers; new forward 127.0.0.1:49094"),
        "{}",
        again.all()
    );
    assert!(again.stderr.contains("already running"), "{}", again.stderr);
    assert!(
        again.stdout.contains("127.0.0.1:49094 -> localhost:49094"),
        "{}",
        again.stdout
    );
    let after = std::fs::read_to_string(&ssh_config).expect("ssh_config");
    assert!(
        after
            .lines()
            .any(|l| l == "    LocalForward 127.0.0.1:49094 localhost:49094"),
        "{after}"
    );
    let g = s
        .laptop(
            &[
                "ssh",
                "-G",
                "-F",
                &ssh_config.display().to_string(),
                "shiqi-tunnel",
            ],
            &[],
            None,
        )
        .ok();
    assert!(
        g.stdout
            .contains("localforward [127.0.0.1]:49094 [localhost]:49094"),
        "{}",
        g.stdout
    );
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(profile.join("profile.json")).expect("profile.json"),
    )
    .expect("json");
    let ids: Vec<u64> = json["brokers"]
        .as_array()
        .expect("brokers")
        .iter()
        .filter_map(|b| b["id"].as_u64())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    let (status, json) = tunnel.status();
    assert_eq!(status.code, Some(0), "{}", status.all());
    assert_all_ok(&json, &[19094, 29094, 39094, 49094, 3306]);

    // A fresh start forwards it too, and finds nothing new to write.
    tunnel.down().ok();
    let fresh = home.connect(s, &["tunnel", "up", &name]).ok();
    assert!(
        fresh.stderr.contains("4 brokers, unchanged"),
        "{}",
        fresh.stderr
    );
    assert!(
        fresh.stdout.contains("127.0.0.1:49094 -> localhost:49094"),
        "{}",
        fresh.stdout
    );
    let (_, json) = tunnel.status();
    assert_all_ok(&json, &[19094, 29094, 39094, 49094, 3306]);
}

#[test]
fn up_refuses_a_taken_port_and_names_the_process_holding_it() {
    let s = stack();
    let home = Home::new(s, "tunnel-busy");
    let name = unique_name("busy");
    home.setup(s, &name, &[]).ok();
    let holder = s
        .laptop(
            &[
                "bash",
                "-c",
                "socat TCP-LISTEN:39094,bind=127.0.0.1,reuseaddr,fork OPEN:/dev/null \
                 </dev/null >/dev/null 2>&1 & echo $!",
            ],
            &[],
            None,
        )
        .ok();
    let pid = holder.stdout.trim().to_owned();
    struct Kill<'a>(&'a Stack, String);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.laptop(&["kill", &self.1], &[], None);
        }
    }
    let _kill = Kill(s, pid.clone());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !laptop_listening(s).contains(&39094) {
        assert!(Instant::now() < deadline, "socat did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }

    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    let up = up.failed();
    assert_eq!(up.code, Some(2), "{}", up.stderr);
    assert!(
        up.stderr.contains(&format!(
            "port `127.0.0.1:39094` is already in use by `socat` (pid {pid})"
        )),
        "{}",
        up.stderr
    );
    assert!(
        up.stderr.contains(&format!("hint: stop it (`kill {pid}`")),
        "{}",
        up.stderr
    );
    // Nothing half-started: no process, no other port bound.
    assert!(!home.profile(&name).join("tunnel.pid").exists());
    let listening = laptop_listening(s);
    for port in [19094, 29094, 3306] {
        assert!(
            !listening.contains(&port),
            "port {port} bound by a refused start"
        );
    }
    drop(tunnel);
}

/// What a tunnel restarted on a busy laptop can meet: a forward's port (39094, in Linux's
/// ephemeral range) lent by the system to an outgoing connection as its source port. Nothing
/// listens there (`ss -ltn` is empty), yet it cannot be bound; `up` names the connection and
/// how to keep outgoing connections off the port. The stack reserves 39094 in the laptop's
/// namespace, so the connection here picks it explicitly, as the system would have.
#[test]
fn up_names_an_outgoing_connection_that_was_lent_a_forward_port() {
    let s = stack();
    let home = Home::new(s, "tunnel-lent");
    let name = unique_name("lent");
    home.setup(s, &name, &[]).ok();
    // An earlier test's tunnel may have left 39094 in TIME_WAIT (its forward closed first), which
    // keeps a socket without SO_REUSEADDR (as the system's own are) off the port for up to 60 s.
    let script = "import socket, time\n\
                  l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
                  end = time.time() + 90\n\
                  while True:\n\
                  \x20   c = socket.socket()\n\
                  \x20   try: c.bind(('127.0.0.1', 39094)); break\n\
                  \x20   except OSError:\n\
                  \x20       c.close()\n\
                  \x20       if time.time() > end: raise\n\
                  \x20       time.sleep(0.5)\n\
                  c.connect(l.getsockname())\n\
                  print(l.getsockname()[1], flush=True)\n\
                  time.sleep(120)\n";
    let holder = s
        .laptop(
            &[
                "bash",
                "-c",
                "python3 -c \"$1\" > \"$2\" 2>&1 </dev/null & echo $!",
                "lent",
                script,
                &home.dir.join("lent.out").display().to_string(),
            ],
            &[],
            None,
        )
        .ok();
    let pid = holder.stdout.trim().to_owned();
    struct Kill<'a>(&'a Stack, String);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.laptop(&["kill", &self.1], &[], None);
        }
    }
    let _kill = Kill(s, pid.clone());
    let deadline = Instant::now() + Duration::from_secs(100);
    let peer = loop {
        let out = std::fs::read_to_string(home.dir.join("lent.out")).unwrap_or_default();
        if let Ok(port) = out.trim().parse::<u16>() {
            break port;
        }
        assert!(Instant::now() < deadline, "no connection from 39094: {out}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!laptop_listening(s).contains(&39094));

    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    let up = up.failed();
    assert_eq!(up.code, Some(2), "{}", up.stderr);
    assert!(
        up.stderr.contains(&format!(
            "port `127.0.0.1:39094` is already in use by a connection of `python3` (pid {pid}) \
             to 127.0.0.1:{peer}, which the system gave this port as its source port"
        )),
        "{}",
        up.stderr
    );
    assert!(
        up.stderr
            .contains("hint: run `tunnel up` again once that connection has closed (or stop pid")
            && up
                .stderr
                .contains("add 39094 to the sysctl `net.ipv4.ip_local_reserved_ports`"),
        "{}",
        up.stderr
    );
    assert!(!home.profile(&name).join("tunnel.pid").exists());
    drop(tunnel);
}

#[test]
fn up_openssh_runs_ssh_with_the_written_config_and_down_stops_it() {
    let s = stack();
    let home = Home::new(s, "tunnel-ossh");
    let name = unique_name("ossh");
    home.setup(s, &name, &[]).ok();

    // Bad input first: an unknown profile is one line with the fix, exit 2.
    let missing = home.connect(s, &["tunnel", "up", "nosuch"]).failed();
    assert_eq!(missing.code, Some(2));
    assert!(
        missing.stderr.starts_with("error: no profile `nosuch` at "),
        "{}",
        missing.stderr
    );
    assert!(
        missing
            .stderr
            .contains("hint: create it with `shiqi-connect setup nosuch"),
        "{}",
        missing.stderr
    );

    let (tunnel, up) = Tunnel::up(s, &home, &name, &["--openssh"]);
    let up = up.ok();
    assert!(
        up.stdout.contains("127.0.0.1:19094 -> localhost:19094"),
        "{}",
        up.all()
    );
    let (status, json) = tunnel.status();
    assert_eq!(status.code, Some(0), "{}", status.all());
    assert_eq!(json["tunnel"]["kind"], "openssh");
    assert_all_ok(&json, &PORTS);
    let again = home.connect(s, &["tunnel", "up", &name]).ok();
    assert!(again.stderr.contains("OpenSSH tunnel"), "{}", again.stderr);

    let down = tunnel.down().ok();
    assert!(
        down.stdout.contains("stopped OpenSSH tunnel"),
        "{}",
        down.all()
    );
    let listening = laptop_listening(s);
    for port in PORTS {
        assert!(
            !listening.contains(&port),
            "port {port} still bound after down"
        );
    }
}

/// `scripts/stack kafka-node down|up N`; `Stopped` starts the node again when dropped.
fn kafka_node(s: &Stack, action: &str, n: &str) {
    let out = std::process::Command::new(s.script())
        .args(["kafka-node", action, n])
        .output()
        .expect("scripts/stack runs");
    assert!(
        out.status.success(),
        "kafka-node {action} {n} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Stopped<'a>(&'a Stack, &'static str);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        kafka_node(self.0, "up", self.1);
    }
}

/// Waits (up to 90 s, the bound) until `tunnel status` lists a forward on `port`.
fn forwarded_within_90s(tunnel: &Tunnel<'_>, port: u64) -> Value {
    let mut last = Value::Null;
    let found = crate::lifecycle::within(Duration::from_secs(90), || {
        last = tunnel.status().1;
        forwards(&last)
            .iter()
            .any(|f| f["local_port"].as_u64() == Some(port) && f["handshake"]["ok"] == true)
    });
    assert!(found.is_some(), "no forward {port} after 90 s: {last:#}");
    last
}

#[test]
fn a_broker_that_returns_or_joins_gets_its_forward_with_no_command_typed() {
    let s = stack();
    let home = Home::new(s, "follow");
    let name = unique_name("follow");

    // A rolling restart caught half-way: broker 2 is down while the profile is made.
    kafka_node(s, "down", "2");
    let stopped = Stopped(s, "2");
    let setup = home.setup(s, &name, &[]).ok();
    assert!(
        setup
            .stderr
            .contains("broker 2 (localhost:29094) is registered but not serving now"),
        "setup says nothing of broker 2:\n{}",
        setup.stderr
    );
    let ssh_config = std::fs::read_to_string(home.profile(&name).join("ssh_config")).unwrap();
    assert!(!ssh_config.contains("29094"), "{ssh_config}");

    let (tunnel, up) = Tunnel::up(s, &home, &name, &["--check-every", "20"]);
    let up = up.ok();
    assert!(
        up.stderr
            .contains("broker 2 (localhost:29094) is registered"),
        "{}",
        up.stderr
    );
    let (_, before) = tunnel.status();
    let noted = before["tunnel"]["brokers"]["not_serving"].to_string();
    assert!(noted.contains("broker 2"), "{before:#}");
    let doctor = home.connect(s, &["doctor", &name]);
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.starts_with("warn") && l.contains("login.kafka") && l.contains("broker 2")),
        "doctor says nothing of broker 2:\n{}",
        doctor.all()
    );

    // Broker 2 comes back; nobody types anything.
    drop(stopped);
    let status = forwarded_within_90s(&tunnel, 29094);
    let change = status["tunnel"]["brokers"]["last_change"]
        .as_str()
        .unwrap_or_default();
    assert!(
        change.contains("new forward 127.0.0.1:29094"),
        "status does not show the change: {status:#}"
    );
    let after = std::fs::read_to_string(home.profile(&name).join("ssh_config")).unwrap();
    assert!(
        after.contains("LocalForward 127.0.0.1:29094 localhost:29094"),
        "{after}"
    );

    // A partition led by broker 2, written and read back through the tunnel.
    let topic = format!("app.{name}");
    crate::kafka::create_topic_on(s, &topic, "2");
    let profile = home.profile(&name);
    crate::kafka::produce(s, &profile, &topic, "led-by-two\n").ok();
    let props = profile.join("client.properties").display().to_string();
    let group = format!("app.{name}");
    let read = crate::setup::laptop_kafka_tool(
        s,
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            "localhost:19094",
            "--consumer.config",
            &props,
            "--topic",
            &topic,
            "--group",
            &group,
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout-ms",
            "30000",
        ],
        None,
    );
    assert!(read.stdout.contains("led-by-two"), "{}", read.all());

    // A broker that joins the running cluster is followed the same way.
    let _four = crate::stack::ExtraBroker::start(s, 4, &[]);
    let status = forwarded_within_90s(&tunnel, 49094);
    assert!(
        status["tunnel"]["brokers"]["last_change"]
            .as_str()
            .is_some_and(|c| c.contains("new forward 127.0.0.1:49094")),
        "{status:#}"
    );
    let log = std::fs::read_to_string(profile.join("tunnel.log")).unwrap_or_default();
    assert!(
        log.contains("the cluster's brokers changed"),
        "the change is not logged:\n{log}"
    );
}
