//! `shiqi-ca-agent install`: the stack's server is built by it (`scripts/stack up` runs it), so
//! every other test runs on an installed server. Here: a second run and a dry run change
//! nothing, and a second CA installed from nothing (its own account, state, sshd drop-in,
//! MariaDB admin and broker settings) is what its lines say.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::stack::{Stack, stack};

/// SHA-256 of each file under `dirs` (recursively), by path; a dry run must leave them as they
/// were.
fn checksums(s: &Stack, dirs: &[&str]) -> BTreeMap<String, String> {
    let mut args = vec!["find"];
    args.extend_from_slice(dirs);
    args.extend(["-type", "f", "-exec", "sha256sum", "{}", "+"]);
    let out = s.server(None, &args, None);
    out.stdout
        .lines()
        .filter_map(|l| {
            let (sum, path) = l.split_once("  ")?;
            Some((path.to_owned(), sum.to_owned()))
        })
        .collect()
}

fn stack_install(s: &Stack, extra: &[&str]) -> crate::stack::Out {
    let out = Command::new(s.script())
        .arg("install")
        .args(extra)
        .output()
        .expect("scripts/stack runs");
    crate::stack::Out::from(out)
}

#[test]
fn installing_the_stack_again_changes_nothing_and_a_dry_run_touches_no_file() {
    let s = stack();
    let root = s.info("stack_dir").to_owned();
    let watched = [
        format!("{root}/server/ssh/sshd_config.d"),
        format!("{root}/server/mysql/conf.d"),
        format!("{root}/server/tls"),
        s.info("agent_state_dir").to_owned(),
    ];
    let watched: Vec<&str> = watched.iter().map(String::as_str).collect();
    let before = checksums(s, &watched);
    assert!(
        before
            .keys()
            .any(|p| p.ends_with("sshd_config.d/shiqi-ca.conf"))
            && before.keys().any(|p| p.ends_with("conf.d/60-shiqi-ca.cnf"))
            && before.keys().any(|p| p.ends_with("shiqi.properties")),
        "install's files are where the stack reads them: {before:#?}"
    );

    let dry = stack_install(s, &["--dry-run"]).ok();
    assert!(
        !dry.stdout.lines().any(|l| l.starts_with("would")),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("nothing to change"), "{}", dry.stdout);
    let again = stack_install(s, &[]).ok();
    assert!(
        again.stdout.contains("nothing to change"),
        "{}",
        again.stdout
    );
    for line in again.stdout.lines().filter(|l| !l.starts_with("nothing")) {
        assert!(
            line.starts_with("already") || line.starts_with("needs you"),
            "{line}\n{}",
            again.stdout
        );
    }
    // What install leaves to a person here: the daily CRL refresh (no systemd) and the broker
    // restart it never does. The first admin (saige) it enrolled itself.
    assert_eq!(
        lines_with(&again.stdout, "already", "admin").len(),
        1,
        "{}",
        again.stdout
    );
    for step in ["crl.timer", "kafka.brokers"] {
        assert!(
            again
                .stdout
                .lines()
                .any(|l| l.starts_with("needs you") && l.split_whitespace().nth(2) == Some(step)),
            "{step}:\n{}",
            again.stdout
        );
    }
    // The audit log and inventory are the agent's to change; install's files are not.
    let after = checksums(s, &watched);
    let changed: Vec<_> = before
        .iter()
        .filter(|(p, sum)| {
            after.get(*p) != Some(*sum) && !p.ends_with("audit.log") && !p.contains("inventory")
        })
        .map(|(p, _)| p)
        .collect();
    assert!(changed.is_empty(), "changed: {changed:?}");
}

/// A second CA on the stack's server, installed from nothing, removed when dropped: its account,
/// state, published CRL, sshd drop-in (sshd reloaded), MariaDB admin account.
pub(crate) struct SecondCa<'a> {
    pub(crate) s: &'a Stack,
    pub(crate) account: String,
    pub(crate) state: PathBuf,
    pub(crate) publish: PathBuf,
    pub(crate) drop_in: PathBuf,
}

impl Drop for SecondCa<'_> {
    fn drop(&mut self) {
        let sql = format!("DROP USER IF EXISTS '{}'@'localhost'", self.account);
        let _ = self.s.server(
            None,
            &[
                "mariadb",
                "--no-defaults",
                &format!("--socket={}", self.s.info("mysql_socket")),
                "-u",
                "root",
                "-e",
                &sql,
            ],
            None,
        );
        let _ = self.s.server(None, &["userdel", &self.account], None);
        let _ = std::fs::remove_dir_all(&self.state);
        let _ = std::fs::remove_dir_all(&self.publish);
        let _ = std::fs::remove_file(&self.drop_in);
        let pid = format!("{}/server/ssh/sshd.pid", self.s.info("stack_dir"));
        let _ = self.s.server(
            None,
            &["sh", "-c", &format!("kill -HUP $(cat {pid})")],
            None,
        );
    }
}

impl SecondCa<'_> {
    /// `install` of this CA as root against the stack's sshd, brokers and MariaDB: its account,
    /// state and publish folder (`publish` instead when given), the brokers' TLS folder
    /// `kafka_tls` (else `SCRATCH/kafka`), MariaDB's `SCRATCH/conf.d` and `SCRATCH/mysql-tls`,
    /// no timer, the laptop's key as its first admin, then `extra`.
    pub(crate) fn install(
        &self,
        scratch: &Path,
        kafka_tls: Option<&str>,
        publish: Option<&str>,
        extra: &[&str],
    ) -> crate::stack::Out {
        let s = self.s;
        let dir = |name: &str| scratch.join(name).display().to_string();
        let (state, own_publish) = (
            self.state.display().to_string(),
            self.publish.display().to_string(),
        );
        let key = format!("{}.pub", s.info("laptop_ssh_key"));
        let admin = format!("{}-admin", self.account);
        let (default_tls, conf_d, mysql_tls) = (dir("kafka"), dir("conf.d"), dir("mysql-tls"));
        let mut args = vec![
            s.info("agent_bin"),
            "--state-dir",
            &state,
            "install",
            "--account",
            &self.account,
            "--publish-dir",
            publish.unwrap_or(&own_publish),
            "--sshd-config",
            s.info("sshd_config"),
            "--kafka-bootstrap",
            s.info("kafka_bootstrap"),
            "--mysql-socket",
            s.info("mysql_socket"),
            "--timer",
            "none",
            "--admin",
            &admin,
            "--ssh-key",
            &key,
            "--kafka-tls-dir",
            kafka_tls.unwrap_or(&default_tls),
            "--mysql-conf-dir",
            &conf_d,
            "--mysql-tls-dir",
            &mysql_tls,
        ];
        args.extend_from_slice(extra);
        s.server(None, &args, None)
    }
}

/// The steps install's first run on a server it never touched reports `done`.
const FIRST_RUN: [&str; 11] = [
    "account",
    "directories",
    "agent.toml",
    "ca",
    "crl",
    "sshd",
    "mysql.cert",
    "mysql.config",
    "mysql.admin",
    "kafka.cert",
    "kafka.config",
];

pub(crate) fn lines_with<'a>(out: &'a str, mark: &str, step: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.starts_with(mark) && l[mark.len()..].split_whitespace().next() == Some(step))
        .collect()
}

#[test]
fn install_sets_up_a_second_ca_from_nothing_and_a_dry_run_of_it_changes_nothing() {
    let s = stack();
    let root = s.info("stack_dir").to_owned();
    let account = "shiqi-ca-e2e".to_owned();
    let scratch = s.scratch();
    let ca = SecondCa {
        s,
        account: account.clone(),
        state: PathBuf::from(format!("{root}/server/ca-e2e")),
        publish: PathBuf::from(format!("{root}/server/crl-e2e")),
        drop_in: PathBuf::from(format!("{root}/server/ssh/sshd_config.d/{account}.conf")),
    };
    // One broker's real config, for --kafka-properties.
    let node = format!("{root}/server/kafka/node1/node.properties");
    let properties = scratch.path().join("server.properties");
    std::fs::copy(&node, &properties).expect("copy node.properties");
    let state = ca.state.display().to_string();
    let publish = ca.publish.display().to_string();
    let sshd_config = s.info("sshd_config").to_owned();
    let props = properties.to_str().expect("utf-8").to_owned();
    let install_to = |publish: &str, extra: &[&str]| {
        let mut all = vec!["--kafka-properties", props.as_str()];
        all.extend_from_slice(extra);
        ca.install(scratch.path(), None, Some(publish), &all)
    };
    let install = |extra: &[&str]| install_to(&publish, extra);

    // Refused before anything changes: a SAN that is not a host name.
    let bad = install(&["--kafka-san", "not a host"]);
    assert_eq!(bad.code, Some(2), "{}", bad.all());
    assert!(bad.stderr.contains("--kafka-san"), "{}", bad.all());
    assert!(!ca.state.exists());

    let before = checksums(s, &[scratch.path().to_str().expect("utf-8")]);
    let dry = install(&["--dry-run"]).ok();
    assert!(dry.stdout.contains("dry run:"), "{}", dry.stdout);
    for step in [
        "account",
        "agent.toml",
        "ca",
        "sshd",
        "mysql.config",
        "admin",
    ] {
        assert_eq!(
            lines_with(&dry.stdout, "would", step).len(),
            1,
            "{step}:\n{}",
            dry.stdout
        );
    }
    assert!(!ca.state.exists() && !ca.drop_in.exists(), "{}", dry.stdout);
    let who = s.server(None, &["id", &account], None);
    assert!(!who.success(), "a dry run made the account");
    assert_eq!(
        before,
        checksums(s, &[scratch.path().to_str().expect("utf-8")])
    );

    let first = install(&[]).ok();
    for step in FIRST_RUN {
        assert_eq!(
            lines_with(&first.stdout, "done", step).len(),
            1,
            "{step}:\n{}",
            first.stdout
        );
    }
    // No systemd here: the restart and the daily refresh are a person's, and the broker
    // whose file it changed is named. The first admin waits for brokers that trust this CA
    // (enroll allows forwards to what they advertise); these never will.
    for step in ["mysql.restart", "crl.timer", "kafka.brokers", "admin"] {
        assert_eq!(
            lines_with(&first.stdout, "needs you", step).len(),
            1,
            "{step}:\n{}",
            first.stdout
        );
    }

    // What the lines say is so. sshd gives the new account local forwards only.
    let effective = s
        .server(
            None,
            &[
                "/usr/sbin/sshd",
                "-T",
                "-f",
                &sshd_config,
                "-C",
                &format!("user={account},host=laptop,addr=192.0.2.1"),
            ],
            None,
        )
        .ok();
    for want in [
        "allowtcpforwarding local",
        "permitlisten none",
        "allowstreamlocalforwarding no",
        "permittty no",
    ] {
        assert!(effective.stdout.lines().any(|l| l == want), "{want}");
    }
    // The agent's admin logs in to MariaDB over the socket as its account, no password.
    let me = s
        .server(
            Some(&account),
            &[
                "mariadb",
                "--no-defaults",
                &format!("--socket={}", s.info("mysql_socket")),
                "-N",
                "-B",
                "-e",
                "SELECT CURRENT_USER()",
            ],
            None,
        )
        .ok();
    assert_eq!(me.stdout.trim(), format!("{account}@localhost"));
    let admin = lines_with(&first.stdout, "needs you", "admin").join("");
    assert!(admin.contains("restart them"), "{admin}");
    // The CA and its CRL are the account's.
    let agent = s.info("agent_bin");
    let listed = s
        .server(
            Some(&account),
            &[agent, "--state-dir", &state, "list"],
            None,
        )
        .ok();
    assert!(listed.stdout.contains("kafka-broker"), "{}", listed.stdout);
    assert!(ca.publish.join("crl.pem").exists());
    // The broker's file has every setting, its original kept beside it.
    let applied = std::fs::read_to_string(&properties).expect("read");
    for want in [
        "ssl.client.auth=required",
        "ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        "super.users=User:kafka-broker;User:shiqi-admin",
    ] {
        assert!(applied.lines().any(|l| l == want), "{want}\n{applied}");
    }
    assert!(Path::new(&format!("{}.shiqi-backup", properties.display())).exists());
    // The images' service lines, read by a YAML parser: the stores mounted where both images'
    // `configure` scripts look, their passwords from the mounted file, none in the environment.
    let env_file = scratch.path().join("kafka/kafka-environment.yml");
    let service = std::process::Command::new("python3")
        .args([
            "-c",
            "import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(&env_file)
        .output()
        .expect("python3");
    assert!(service.status.success(), "{service:?}");
    let service: serde_json::Value = serde_json::from_slice(&service.stdout).expect("json");
    let env = &service["environment"];
    assert_eq!(env["KAFKA_SSL_CLIENT_AUTH"], "required", "{service}");
    assert_eq!(env["KAFKA_SSL_KEYSTORE_FILENAME"], "server.keystore.p12");
    assert_eq!(env["KAFKA_SSL_TRUSTSTORE_CREDENTIALS"], "server.password");
    assert!(
        env["KAFKA_OPTS"]
            .as_str()
            .is_some_and(|o| o.contains("-Dcom.sun.net.ssl.checkRevocation=true"))
    );
    let mount = format!(
        "{}:/etc/kafka/secrets:ro",
        scratch.path().join("kafka").display()
    );
    assert_eq!(service["volumes"][0], mount.as_str(), "{service}");
    let password = std::fs::read_to_string(scratch.path().join("kafka/server.password"))
        .expect("the stores' password");
    let text = std::fs::read_to_string(&env_file).expect("read");
    assert!(
        !text.contains(password.trim()),
        "a password in the environment"
    );

    // A second run changes nothing.
    let second = install(&[]).ok();
    assert!(
        second.stdout.contains("nothing to change"),
        "{}",
        second.stdout
    );
    // Another --publish-dir than the kept agent.toml's: refused before any change (it would
    // publish one CRL and point MariaDB and the brokers at another).
    let elsewhere = format!("{publish}-elsewhere");
    let moved = install_to(&elsewhere, &[]);
    assert!(!moved.success(), "{}", moved.all());
    assert!(
        moved.stderr.contains(&format!(
            "publishes the CRL to {publish}; pass --publish-dir {publish}"
        )),
        "{}",
        moved.all()
    );
    assert!(!Path::new(&elsewhere).exists(), "{elsewhere} was made");
    drop(ca);
}

/// `key=value` lines.
fn facts(text: &str) -> BTreeMap<&str, &str> {
    text.lines().filter_map(|l| l.split_once('=')).collect()
}

/// The server every test runs on started bare (scripts/test purges the stack first): `up` wrote
/// down what it found before install's first run — no account, no state, sshd at Debian's
/// defaults, MariaDB with its own accounts and no TLS — and that run made every part. Then the
/// journey works on it.
#[test]
fn the_stack_server_was_built_by_install_from_a_bare_server() {
    let s = stack();
    let hint = "the stack was not built from a bare server: scripts/stack down --purge && scripts/stack up";
    let text = std::fs::read_to_string(s.info("bare_server_facts")).expect(hint);
    let bare = facts(&text);
    let account = s.info("server_user");
    for (key, want) in [
        ("account", "absent"),
        ("state_dir", "absent"),
        ("kafka_tls", "absent"),
        ("sshd_drop_ins", ""),
        ("mysql_drop_ins", ""),
        ("mysql_have_ssl", "DISABLED"),
    ] {
        assert_eq!(bare.get(key).map(|v| v.trim()), Some(want), "{key}: {text}");
    }
    // Debian's sshd lets every account listen and forward sockets.
    let sshd = bare.get("sshd_forwarding").copied().unwrap_or_default();
    for want in [
        "allowtcpforwarding yes",
        "permitlisten any",
        "allowstreamlocalforwarding yes",
    ] {
        assert!(sshd.contains(want), "{want}: {text}");
    }
    let mysql = bare.get("mysql_accounts").copied().unwrap_or_default();
    assert!(
        mysql.contains("root@localhost") && !mysql.contains(account),
        "{text}"
    );

    let log = std::fs::read_to_string(s.info("install_log")).expect("install's log");
    let runs: Vec<&str> = log.split("== install ").filter(|r| !r.is_empty()).collect();
    let first = runs.first().copied().unwrap_or_default();
    for step in FIRST_RUN {
        assert_eq!(lines_with(first, "done", step).len(), 1, "{step}:\n{first}");
    }
    // Before the brokers run with its settings, the first admin waits (enroll needs their
    // answer); the stack restarts MariaDB and starts them, and the next run enrolls saige.
    assert_eq!(lines_with(first, "needs you", "admin").len(), 1, "{first}");
    assert_eq!(
        lines_with(first, "needs you", "mysql.restart").len(),
        1,
        "{first}"
    );
    assert!(
        runs.iter()
            .skip(1)
            .any(|r| lines_with(r, "done", "admin").len() == 1),
        "no later run enrolled the first admin:\n{log}"
    );

    // The laptop's journey on that server: setup, the tunnel, Kafka through every broker, MySQL.
    let home = crate::setup::Home::new(s, "bare");
    let name = crate::stack::unique_name("bare");
    home.setup(s, &name, &[]).ok();
    let (tunnel, up) = crate::tunnel::Tunnel::up(s, &home, &name, &[]);
    up.ok();
    crate::kafka::assert_round_trip_through_every_broker(s, &home.profile(&name), &name);
    let who = crate::tunnel::mariadb_current_user(s, &home, &name).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
    tunnel.down().ok();
}
