//! The agent's account holds against its own users (issue 22): what an enrolled key can make
//! sshd and the agent do, tried the way its owner would, against the stack's sshd (Debian's
//! defaults plus the README's `Match User` block) and the agent's real config.

use std::time::Duration;

use crate::lifecycle::within;
use crate::stack::{Out, Stack, stack, unique_name};
use crate::teams::bob_ssh;

/// Bob's key asking for `forward` and then for the agent's version: with
/// `ExitOnForwardFailure`, a refused forward ends ssh with an error before anything runs; an
/// accepted one lets the request run and ssh succeed.
fn bob_forward(s: &Stack, forward: &[&str]) -> Out {
    let mut extra = vec!["-o", "ExitOnForwardFailure=yes"];
    extra.extend_from_slice(forward);
    bob_ssh(s, &extra, &["shiqi-ca-agent", "--version"])
}

#[test]
fn a_user_key_can_neither_listen_on_the_server_nor_reach_its_other_loopback_ports() {
    let s = stack();
    // -R to a TCP port: sshd refuses the listener.
    let out = bob_forward(s, &["-R", "127.0.0.1:43307:127.0.0.1:9"]);
    assert!(!out.success(), "sshd listened for bob:\n{}", out.all());
    assert!(
        out.stderr.contains("remote port forwarding failed"),
        "{}",
        out.all()
    );
    let listening = s
        .server(None, &["ss", "-Hltn", "sport = :43307"], None)
        .ok();
    assert!(listening.stdout.trim().is_empty(), "{}", listening.stdout);

    // -R to a Unix socket inside the CA's state directory.
    let planted = format!("{}/planted.sock", s.info("agent_state_dir"));
    let forward = format!("{planted}:127.0.0.1:9");
    let out = bob_forward(s, &["-R", &forward]);
    assert!(!out.success(), "sshd made a socket for bob:\n{}", out.all());
    assert!(
        out.stderr.contains("remote port forwarding failed"),
        "{}",
        out.all()
    );
    let exists = s.server(None, &["test", "-e", &planted], None);
    assert!(!exists.success(), "{planted} exists");

    // -W (a direct-tcpip channel, as the tunnel opens) to a loopback port that is neither a
    // broker nor MySQL: node 1's controller listener.
    let out = bob_ssh(s, &["-W", "127.0.0.1:19093"], &[]);
    assert!(
        out.stderr.contains("administratively prohibited"),
        "bob reached the controller listener:\n{}",
        out.all()
    );
    let out = bob_ssh(s, &["-W", "localhost:19092"], &[]);
    assert!(
        out.stderr.contains("administratively prohibited"),
        "bob reached the PLAINTEXT listener:\n{}",
        out.all()
    );
    // The same channel to MySQL is allowed: its greeting comes back.
    let out = bob_ssh(s, &["-W", "127.0.0.1:3306"], &[]);
    assert!(
        out.stdout.contains("mysql_native_password") || out.stdout.contains("MariaDB"),
        "no MySQL greeting through the permitted forward:\n{}",
        out.all()
    );

    // The agent itself refuses to install a key line while sshd would allow listeners.
    let config = format!("{}/server/ssh/sshd_config", s.info("stack_dir"));
    let copy = s.scratch();
    let stock = copy.path().join("sshd_config");
    let text = std::fs::read_to_string(&config).expect("read sshd_config");
    // Without the Match blocks and without the drop-in folder `install` put the block in.
    let without_block: String = text
        .split("\nMatch User")
        .next()
        .expect("text before the block")
        .lines()
        .filter(|l| !l.starts_with("Include"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&stock, without_block).expect("write");
    let agent_cfg = copy.path().join("agent.toml");
    let mut cfg = std::fs::read_to_string(s.info("agent_config")).expect("agent.toml");
    cfg = cfg.replace(&config, &stock.display().to_string());
    std::fs::write(&agent_cfg, cfg).expect("write");
    let before = s
        .server(None, &["cat", &authorized_keys(s)], None)
        .ok()
        .stdout;
    let refused = s
        .agent(
            &[
                "--config",
                &agent_cfg.display().to_string(),
                "enroll",
                "--sync",
            ],
            None,
        )
        .failed();
    assert!(
        refused.stderr.contains("AllowTcpForwarding yes, not local")
            && refused.stderr.contains("PermitListen any, not none")
            && refused.stderr.contains("Match User shiqi-ca"),
        "{}",
        refused.all()
    );
    let after = s
        .server(None, &["cat", &authorized_keys(s)], None)
        .ok()
        .stdout;
    assert_eq!(before, after, "a refused enroll changed authorized_keys");
}

fn authorized_keys(s: &Stack) -> String {
    // install made the account with its state directory as home.
    format!("{}/.ssh/authorized_keys", s.info("agent_state_dir"))
}

/// Stops MariaDB and puts a fake MySQL server on its TCP port, which greets like MariaDB, asks
/// for `mysql_native_password` and records whatever a client sends. Restores MariaDB on drop.
struct FakeMysql<'a> {
    s: &'a Stack,
    pid: String,
    log: String,
}

impl<'a> FakeMysql<'a> {
    fn start(s: &'a Stack, dir: &std::path::Path) -> Self {
        let pidfile = format!("{}/server/mysql/run/mysqld.pid", s.info("stack_dir"));
        s.server(
            None,
            &[
                "bash",
                "-c",
                &format!(
                    "kill $(cat {pidfile}); for i in $(seq 50); do [ -e {pidfile} ] || exit 0; \
                     sleep 0.2; done; exit 1"
                ),
            ],
            None,
        )
        .ok();
        let script = dir.join("fake_mysql.py");
        let log = dir.join("fake_mysql.log").display().to_string();
        std::fs::write(&script, FAKE_MYSQL).expect("write");
        let out = s
            .server(
                None,
                &[
                    "bash",
                    "-c",
                    &format!(
                        "setsid nohup python3 {} {log} >/dev/null 2>&1 </dev/null & echo $!",
                        script.display()
                    ),
                ],
                None,
            )
            .ok();
        let fake = Self {
            s,
            pid: out.stdout.trim().to_owned(),
            log,
        };
        let up = within(Duration::from_secs(10), || {
            std::fs::read_to_string(&fake.log).is_ok_and(|l| l.contains("listening"))
        });
        assert!(up.is_some(), "the fake MySQL did not start");
        fake
    }

    fn received(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for FakeMysql<'_> {
    fn drop(&mut self) {
        let _ = self.s.server(None, &["kill", &self.pid], None);
        std::thread::sleep(Duration::from_millis(300));
        let out = std::process::Command::new(self.s.script())
            .arg("up")
            .output();
        assert!(
            out.is_ok_and(|o| o.status.success()),
            "scripts/stack up did not bring MariaDB back"
        );
    }
}

/// A MySQL server that greets (protocol 10, `mysql_native_password`, no TLS) and logs each
/// connection and every byte it receives, hex-encoded, one line per read.
const FAKE_MYSQL: &str = r#"
import os, socket, sys, threading
log = open(sys.argv[1], "a", buffering=1)
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 3306))
srv.listen(16)
log.write("listening\n")
def greeting():
    caps = 0x1 | 0x8 | 0x200 | 0x8000 | 0x80000
    body = b"\x0a" + b"5.5.5-10.11.6-MariaDB-fake\x00" + (7).to_bytes(4, "little")
    body += b"abcdefgh\x00" + (caps & 0xffff).to_bytes(2, "little") + b"\x21"
    body += (2).to_bytes(2, "little") + (caps >> 16).to_bytes(2, "little") + b"\x15"
    body += b"\x00" * 10 + b"ijklmnopqrst\x00" + b"mysql_native_password\x00"
    return len(body).to_bytes(3, "little") + b"\x00" + body
def serve(conn):
    log.write("connection\n")
    try:
        conn.sendall(greeting())
        conn.settimeout(5)
        while True:
            data = conn.recv(65536)
            if not data:
                break
            log.write("data " + data.hex() + "\n")
    except Exception as e:
        log.write("error %s\n" % e)
    finally:
        conn.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

#[test]
fn a_fake_mysql_on_its_port_never_sees_the_admin_login() {
    let s = stack();
    let dir = s.scratch();
    let name = unique_name("fake");
    // A certificate to revoke later, made while MariaDB still runs.
    let setup = crate::setup::Home::new(s, "fakemysql");
    setup.setup(s, &name, &[]).ok();
    // install's admin logs in over the socket as the agent's account: it has no password, and
    // its name must not reach a TCP port either.
    let admin = s.info("mysql_admin_user");
    let fake = FakeMysql::start(s, dir.path());

    // Everything that logs in as the MySQL admin: a provision (through setup), a sign, a
    // revoke and a CRL reload. Each fails (MariaDB is down) — none may have tried TCP.
    let other = unique_name("fake");
    let out = setup.setup(s, &other, &[]);
    assert!(
        !out.success(),
        "setup worked with MariaDB down:\n{}",
        out.all()
    );
    let revoke = s.agent(&["revoke", "--name", &name], None);
    assert!(
        revoke.stderr.contains("MySQL") && revoke.stderr.contains("unix:"),
        "the revoke says MySQL at its socket was not told:\n{}",
        revoke.all()
    );
    s.agent(&["crl"], None);

    let received = fake.received();
    let hex = |t: &str| t.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    assert!(
        !received.contains(&hex(admin)),
        "the fake MySQL got the admin's login:\n{received}"
    );
    assert!(
        !received.contains("connection"),
        "the agent connected to the fake MySQL's TCP port:\n{received}"
    );
    drop(fake);
    s.agent(&["unblock", &name], None).ok();
}

/// ACLs of `User:NAME` that the brokers list (`kafka-acls --list`).
fn acls_of(s: &Stack, name: &str) -> String {
    let principal = format!("User:{name}");
    s.kafka_tool(
        "org.apache.kafka.tools.AclCommand",
        &[
            "--bootstrap-server",
            s.info("kafka_bootstrap"),
            "--command-config",
            s.info("kafka_admin_properties"),
            "--list",
            "--principal",
            &principal,
        ],
    )
    .ok()
    .stdout
}

#[test]
fn grants_racing_a_revoke_leave_no_acl_behind() {
    let s = stack();
    let name = unique_name("race");
    let home = crate::setup::Home::new(s, "race");
    home.setup(s, &name, &[]).ok();
    let held = format!("principal=User:{name},");
    assert!(acls_of(s, &name).contains(&held), "setup made no ACLs");
    // 20 loops granting the name's ACLs again and again, as the agent's account.
    let loops = format!(
        "for i in $(seq 20); do (while :; do {} kafka-user {name} >/dev/null 2>&1; done) & done; \
         wait",
        s.info("agent_bin")
    );
    let script = format!("setsid nohup bash -c '{loops}' >/dev/null 2>&1 </dev/null & echo $!");
    let pgid = s
        .server(Some(s.info("server_user")), &["bash", "-c", &script], None)
        .ok()
        .stdout
        .trim()
        .to_owned();
    std::thread::sleep(Duration::from_secs(3));
    let revoke = s.agent(&["revoke", "--name", &name], None);
    std::thread::sleep(Duration::from_secs(5));
    s.server(None, &["kill", "--", &format!("-{pgid}")], None);
    assert!(revoke.success(), "{}", revoke.all());
    std::thread::sleep(Duration::from_secs(30));
    let left = acls_of(s, &name);
    assert!(
        !left.contains(&held),
        "ACLs of a revoked name survive:\n{left}"
    );
    s.agent(&["unblock", &name], None).ok();
}

#[test]
fn a_huge_request_grows_the_audit_log_by_less_than_a_kilobyte() {
    let s = stack();
    let log = format!("{}/audit.log", s.info("agent_state_dir"));
    let size = || -> u64 {
        s.server(None, &["stat", "-c", "%s", &log], None)
            .ok()
            .stdout
            .trim()
            .parse()
            .expect("a size")
    };
    let before = size();
    let name = format!("\u{1b}]0;x{}", "b".repeat(120 * 1024));
    let out = bob_ssh(s, &[], &["shiqi-ca-agent", "sign", "--name", &name]);
    assert!(!out.success(), "{}", out.stderr);
    let grown = size() - before;
    assert!(grown < 1024, "the audit log grew by {grown} bytes");
    assert!(grown > 0, "the refusal was not audited");
}

#[test]
fn a_user_key_gets_no_more_certificates_for_its_name_than_the_cap() {
    let s = stack();
    // A colleague of our own, enrolled as a `user` (the cap is for user keys), so the count
    // starts at zero and no other test's name fills up.
    let name = unique_name("cap");
    let home = crate::setup::Home::new(s, "cap");
    let key = home.dir.join("id_ed25519");
    let key_text = key.display().to_string();
    s.laptop(
        &[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &key_text,
        ],
        &[],
        None,
    )
    .ok();
    let public = std::fs::read(format!("{key_text}.pub")).expect("public key");
    s.agent(
        &["enroll", &name, "--ssh-key", "-", "--role", "user"],
        Some(&public),
    )
    .ok();
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .arg("-keyout")
        .arg(home.dir.join("k.pem"))
        .arg("-out")
        .arg(home.dir.join("k.csr"))
        .args(["-subj", &format!("/CN={name}")])
        .output()
        .expect("openssl runs");
    assert!(made.status.success(), "{made:?}");
    let csr = std::fs::read(home.dir.join("k.csr")).expect("csr");
    let request = ["shiqi-ca-agent", "sign", "--name", &name, "--no-kafka"];
    let sign = || crate::teams::ssh_with_key(s, &key_text, &[], &request, Some(&csr));
    // The stack's agent runs with the default cap.
    const CAP: usize = 20;
    for i in 0..CAP {
        let out = sign();
        assert!(out.success(), "sign {} of {CAP}: {}", i + 1, out.all());
    }
    let out = sign();
    assert!(
        !out.success()
            && out
                .stderr
                .contains(&format!("`{name}` already has {CAP} live certificates"))
            && out.stderr.contains("certificates_per_name"),
        "{}",
        out.all()
    );
    let refusals = crate::lifecycle::audit(s, &name);
    assert!(
        refusals
            .iter()
            .any(|l| l["outcome"] == "refused" && l["action"] == "sign"),
        "the refusal is not in the audit log"
    );
    // Only live certificates count (issue 42): one revoked makes room for one more, though it
    // stays in the CRL until it expires.
    let list = s.agent(&["list", "--json", "--name", &name], None).ok();
    let list: serde_json::Value = serde_json::from_str(&list.stdout).expect("list JSON");
    let serial = list[0]["serial"].as_str().expect("serial").to_owned();
    s.agent(&["revoke", &serial], None).ok();
    let out = sign();
    assert!(out.success(), "sign after a revocation: {}", out.all());
    assert!(!sign().success(), "the cap holds again");
    s.agent(&["revoke", "--name", &name], None);
    s.agent(&["unblock", &name], None);
    let fingerprint = s
        .laptop(
            &["ssh-keygen", "-lf", &format!("{key_text}.pub")],
            &[],
            None,
        )
        .ok()
        .stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    s.agent(&["enroll", "--remove", &fingerprint], None).ok();
}

/// On the laptop's loopback: a MySQL server whose greeting, and an SSH server whose banner,
/// try to retitle the terminal, clear it and forge a line of doctor's.
const HOSTILE_SERVERS: &str = r#"
import socket, sys, threading
HOSTILE = b"\x1b]0;pwned\x07\x1b[2J\rok    files  all good\nfail"
def mysql_greeting():
    body = b"\x0a" + b"8.0.0-x" + HOSTILE + b"\x00" + b"\x01\x00\x00\x00" + b"abcdefgh\x00" + b"\xff\xf7"
    return len(body).to_bytes(3, "little") + b"\x00" + body
def serve(port, first):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(8)
    while True:
        c, _ = srv.accept()
        try:
            c.sendall(first)
            c.settimeout(2)
            c.recv(4096)
        except Exception:
            pass
        c.close()
threading.Thread(target=serve, args=(int(sys.argv[1]), mysql_greeting()), daemon=True).start()
serve(int(sys.argv[2]), b"SSH-2.0-x" + HOSTILE + b"\r\n")
"#;

/// Whether `text` holds a control character other than the newline between lines.
fn raw_controls(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n')
}

#[test]
fn a_hostile_mysql_greeting_and_ssh_banner_reach_the_terminal_escaped() {
    let s = stack();
    let home = crate::setup::Home::new(s, "hostile-banner");
    let script = home.dir.join("hostile_servers.py");
    s.laptop(
        &["bash", "-c", &format!("cat > {}", script.display())],
        &[],
        Some(HOSTILE_SERVERS.as_bytes()),
    )
    .ok();
    let (mysql_port, ssh_port) = ("47306", "47022");
    let servers = crate::lifecycle::Background::start(
        s,
        home.dir.join("hostile_servers.log"),
        &format!("python3 {} {mysql_port} {ssh_port}", script.display()),
    );
    let up = within(Duration::from_secs(10), || {
        s.laptop(
            &[
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/127.0.0.1/{ssh_port}"),
            ],
            &[],
            None,
        )
        .success()
    });
    assert!(
        up.is_some(),
        "the fake servers did not start: {}",
        servers.log()
    );

    // doctor --config on a my.cnf naming the fake MySQL: text, then --json.
    let cnf = home.dir.join("hostile.cnf");
    let cnf_text = format!("[client]\nhost=127.0.0.1\nport={mysql_port}\n");
    s.laptop(
        &["bash", "-c", &format!("cat > {}", cnf.display())],
        &[],
        Some(cnf_text.as_bytes()),
    )
    .ok();
    let cnf = cnf.display().to_string();
    for json in [false, true] {
        let mut args = vec!["doctor", "--config", &cnf];
        if json {
            args.push("--json");
        }
        let out = home.connect(s, &args);
        assert!(
            !raw_controls(&out.stdout),
            "raw controls:\n{:?}",
            out.stdout
        );
        assert!(
            out.stdout.contains("]0;pwned") && out.stdout.contains("u{1b}"),
            "the greeting is not shown escaped:\n{}",
            out.all()
        );
    }

    // doctor NAME on a profile whose tunnel config points at the fake SSH server.
    let name = unique_name("banner");
    home.setup(s, &name, &[]).ok();
    let config = home.profile(&name).join("ssh_config");
    let edit = format!(
        "sed -i -e 's/^\\( *\\)HostName .*/\\1HostName 127.0.0.1/' -e 's/^\\( *\\)Port .*/\\1Port \
         {ssh_port}/' {}",
        config.display()
    );
    s.laptop(&["bash", "-c", &edit], &[], None).ok();
    let out = home.connect(s, &["doctor", &name]);
    assert!(
        !raw_controls(&out.stdout),
        "raw controls:\n{:?}",
        out.stdout
    );
    assert!(
        out.stdout.contains("SSH-2.0-x\\u{1b}]0;pwned"),
        "the banner is not shown escaped:\n{}",
        out.all()
    );
}
