//! Issue 5: rotation, renewal, status and revocation against the real stack. Revocation must
//! lock the door where it matters: the brokers (a consumer connected before gets authorization
//! errors; a new handshake with the revoked certificate is refused once the JVMs re-read the
//! CRL) and MariaDB (the revoked certificate fails at TLS; its open session is killed), while
//! every other user's access stays.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::kafka::produce;
use crate::setup::{Home, OpenSshTunnel};
use crate::stack::{Out, Stack, stack, unique_name};

/// The brokers re-read a changed CRL at most 30 s after they last read it
/// (`sun.security.provider.certpath.URICertStore`); MySQL at once (`FLUSH SSL`). The issue
/// allows 60 s.
const KAFKA_DEADLINE: Duration = Duration::from_secs(60);

/// Polls `f` every 2 s until it returns true or `limit` passes; returns how long it took.
pub(crate) fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// A copy of a profile folder with every path inside its configs pointing at the copy: the old
/// certificate, kept to try it after it was rotated away or revoked.
fn keep_copy(s: &Stack, profile: &Path, label: &str) -> PathBuf {
    let copy = profile.with_file_name(format!("{label}-copy"));
    let (from, to) = (profile.display().to_string(), copy.display().to_string());
    s.laptop(&["cp", "-a", &from, &to], &[], None).ok();
    for f in ["client.properties", "librdkafka.conf", "my.cnf"] {
        let file = copy.join(f).display().to_string();
        let expr = format!("s#{from}/#{to}/#g");
        s.laptop(&["sed", "-i", &expr, &file], &[], None).ok();
    }
    copy
}

/// `kcat -L` with a profile's librdkafka.conf, through the tunnel: a new Kafka connection.
fn kcat_metadata(s: &Stack, dir: &Path) -> Out {
    let conf = dir.join("librdkafka.conf").display().to_string();
    s.laptop(&["kcat", "-F", &conf, "-L", "-m", "8"], &[], None)
}

/// A new MySQL login with a profile's my.cnf, through the tunnel.
pub(crate) fn mysql_login(s: &Stack, dir: &Path) -> Out {
    let cnf = format!("--defaults-extra-file={}", dir.join("my.cnf").display());
    s.laptop(
        &[
            "mariadb",
            &cnf,
            "--batch",
            "--skip-column-names",
            "-e",
            "SELECT CURRENT_USER()",
        ],
        &[],
        None,
    )
}

/// SQL as MariaDB's root (unix socket on the server).
pub(crate) fn mysql_root(s: &Stack, sql: &str) -> String {
    let socket = format!("--socket={}", s.info("mysql_socket"));
    s.server(
        None,
        &[
            "mariadb",
            "--no-defaults",
            &socket,
            "-u",
            "root",
            "--batch",
            "--skip-column-names",
            "-e",
            sql,
        ],
        None,
    )
    .ok()
    .stdout
}

pub(crate) fn sessions_of(s: &Stack, user: &str) -> usize {
    mysql_root(
        s,
        &format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{user}'"),
    )
    .trim()
    .parse()
    .unwrap_or(usize::MAX)
}

pub(crate) fn serial_of(dir: &Path) -> String {
    let p: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("profile.json")).expect("profile.json"),
    )
    .expect("profile.json is JSON");
    p["certificate"]["serial"]
        .as_str()
        .expect("serial")
        .to_owned()
}

/// The serials `openssl crl -text` lists in the published CRL, lowercase hex.
pub(crate) fn crl_serials(s: &Stack) -> BTreeSet<String> {
    let crl = format!("{}/crl.pem", s.info("crl_dir"));
    let text = s
        .server(
            None,
            &["openssl", "crl", "-in", &crl, "-noout", "-text"],
            None,
        )
        .ok()
        .stdout;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Serial Number: "))
        .map(str::to_lowercase)
        .collect()
}

/// Every revoked serial in the agent's inventory whose certificate has not expired (the CRL
/// drops expired ones, as RFC 5280 allows).
fn inventory_revoked(s: &Stack) -> BTreeSet<String> {
    let out = s
        .agent(&["list", "--json", "--status", "revoked"], None)
        .ok();
    let list: Value = serde_json::from_str(&out.stdout).expect("list JSON");
    let now = time::OffsetDateTime::now_utc();
    let unexpired = |r: &Value| {
        r["not_after"].as_str().is_some_and(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .is_ok_and(|t| t > now)
        })
    };
    list.as_array()
        .expect("array")
        .iter()
        .filter(|r| r["status"] == "revoked" && unexpired(r))
        .map(|r| r["serial"].as_str().expect("serial").to_owned())
        .collect()
}

/// The agent's audit lines about `name`.
pub(crate) fn audit(s: &Stack, name: &str) -> Vec<Value> {
    let log = format!("{}/audit.log", s.info("agent_state_dir"));
    s.server(None, &["cat", &log], None)
        .ok()
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["name"] == name)
        .collect()
}

fn has_audit(lines: &[Value], action: &str, serial: Option<&str>, outcome: &str) -> bool {
    lines.iter().any(|l| {
        l["action"] == action
            && l["outcome"] == outcome
            // The enrolled key that asked, never an environment variable.
            && l["via"] == "key"
            && l["key_name"] == "saige"
            && l["role"] == "admin"
            && l["key"].as_str().is_some_and(|k| k.starts_with("SHA256:"))
            && l["time"].is_string()
            && serial.is_none_or(|s| l["serial"] == s)
    })
}

/// A process started in the background on the laptop, killed on drop.
pub(crate) struct Background<'a> {
    s: &'a Stack,
    pid: String,
    log: PathBuf,
}

impl<'a> Background<'a> {
    pub(crate) fn start(s: &'a Stack, log: PathBuf, command: &str) -> Self {
        let script = format!(
            "setsid nohup {command} >{} 2>&1 </dev/null & echo $!",
            log.display()
        );
        let out = s.laptop(&["bash", "-c", &script], &[], None).ok();
        Self {
            s,
            pid: out.stdout.trim().to_owned(),
            log,
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn alive(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

impl Drop for Background<'_> {
    fn drop(&mut self) {
        if self.pid.parse::<u32>().is_ok() {
            let _ = self.s.laptop(&["kill", &self.pid], &[], None);
        }
    }
}

/// The `java` command line of a Kafka tool as one shell string (for background runs); the
/// class path's `*` is quoted so the shell leaves it to java.
pub(crate) fn java_tool(s: &Stack, class: &str, args: &[&str]) -> String {
    s.java_command(class, args)
        .into_iter()
        .map(|w| if w.contains('*') { format!("'{w}'") } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A console consumer on the laptop (through the tunnel), from the beginning of `topic` in
/// `group`, running in the background until dropped.
pub(crate) fn console_consumer<'a>(
    s: &'a Stack,
    log: PathBuf,
    props: &str,
    topic: &str,
    group: &str,
) -> Background<'a> {
    let args = [
        "--bootstrap-server",
        "localhost:19094",
        "--consumer.config",
        props,
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
    ];
    let command = java_tool(s, "org.apache.kafka.tools.consumer.ConsoleConsumer", &args);
    Background::start(s, log, &command)
}

pub(crate) fn create_topic(s: &Stack, topic: &str) {
    s.kafka_tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            s.info("kafka_bootstrap"),
            "--command-config",
            s.info("kafka_admin_properties"),
            "--create",
            "--if-not-exists",
            "--topic",
            topic,
            "--partitions",
            "1",
        ],
    )
    .ok();
}

#[test]
fn rotate_then_the_new_certificate_logs_in_and_the_old_one_is_refused_by_both() {
    let s = stack();
    let home = Home::new(s, "rotate");
    let name = unique_name("rot");
    home.setup(s, &name, &[]).ok();
    let profile = home.profile(&name);
    let old_serial = serial_of(&profile);
    let old = keep_copy(s, &profile, &name);

    // A tunnel opened before the rotation: it must outlive it (it only uses the SSH key), and
    // its control socket in the profile folder must still answer afterwards.
    let tunnel = OpenSshTunnel::open(s, &profile);
    kcat_metadata(s, &profile).ok();

    let out = home.connect(s, &["rotate", &name]).ok();
    let new_serial = serial_of(&profile);
    assert_ne!(new_serial, old_serial);
    assert!(
        out.stderr
            .contains(&format!("old certificate {old_serial} revoked")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("ApiVersions") && out.stderr.contains("CURRENT_USER"),
        "the new certificate logged in to Kafka and MySQL before the old was revoked:\n{}",
        out.stderr
    );
    // Keystores are new and open with the same password as before.
    let pw = std::fs::read_to_string(profile.join("keystore.password")).expect("password");
    assert_eq!(
        pw,
        std::fs::read_to_string(old.join("keystore.password")).expect("old password")
    );
    assert_ne!(
        std::fs::read(profile.join("keystore.p12")).expect("keystore"),
        std::fs::read(old.join("keystore.p12")).expect("old keystore")
    );
    let control = profile.join("ssh_config").display().to_string();
    s.laptop(
        &["ssh", "-F", &control, "-O", "check", "shiqi-tunnel"],
        &[],
        None,
    )
    .ok();

    // The new certificate logs in to both, through the tunnel that was already open.
    let kcat = kcat_metadata(s, &profile).ok();
    assert!(kcat.stdout.contains("3 brokers"), "{}", kcat.stdout);
    let who = mysql_login(s, &profile).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
    let topic = format!("app.{name}");
    create_topic(s, &topic);
    produce(s, &profile, &topic, "after-rotation\n").ok();

    // The old one: MySQL refuses it at once (FLUSH SSL ran), the brokers once they re-read
    // the CRL.
    let refused = mysql_login(s, &old).failed();
    assert!(
        crate::stack::refused_at_tls(&refused.stderr),
        "{}",
        refused.stderr
    );
    let took = within(KAFKA_DEADLINE, || !kcat_metadata(s, &old).success());
    eprintln!("rotated-away certificate: Kafka refuses it after {took:?}");
    assert!(
        took.is_some(),
        "the brokers still accept the old certificate after {KAFKA_DEADLINE:?}:\n{}",
        kcat_metadata(s, &old).all()
    );
    // The Java client too: the broker's JSSE answers a revoked certificate with the alert
    // `certificate_unknown` (it does not say why on the wire).
    let java = produce(s, &old, &topic, "with-the-old-certificate\n").failed();
    assert!(
        java.all().contains("SslAuthenticationException"),
        "{}",
        java.all()
    );
    // The new one still works afterwards.
    kcat_metadata(s, &profile).ok();

    // The CRL lists the old serial; the audit log has the rotation and the revocation.
    assert!(crl_serials(s).contains(&old_serial));
    assert!(!crl_serials(s).contains(&new_serial));
    let lines = audit(s, &name);
    assert!(
        has_audit(&lines, "sign", Some(&old_serial), "ok"),
        "{lines:#?}"
    );
    assert!(
        has_audit(&lines, "sign", Some(&new_serial), "ok"),
        "{lines:#?}"
    );
    assert!(
        has_audit(&lines, "rotate", Some(&new_serial), "ok"),
        "{lines:#?}"
    );
    assert!(
        has_audit(&lines, "revoke", Some(&old_serial), "ok"),
        "{lines:#?}"
    );
    drop(tunnel);
}

#[test]
fn revoke_cuts_a_connected_consumer_and_a_mysql_session_and_spares_other_users() {
    let s = stack();
    let home = Home::new(s, "revoke");
    let name = unique_name("rev");
    let other = unique_name("oth");
    home.setup(s, &name, &[]).ok();
    home.setup(s, &other, &[]).ok();
    let (victim, bystander) = (home.profile(&name), home.profile(&other));
    let serial = serial_of(&victim);
    let topic = format!("app.{name}");
    create_topic(s, &topic);
    let tunnel = OpenSshTunnel::open(s, &victim);
    produce(s, &victim, &topic, "one\n").ok();

    // A consumer connected before the revocation, in its group under `app.`.
    let props = victim.join("client.properties").display().to_string();
    let group = format!("app.{name}");
    let consumer = console_consumer(s, home.dir.join("consumer.log"), &props, &topic, &group);
    assert!(
        within(Duration::from_secs(60), || consumer.log().contains("one")).is_some(),
        "the consumer never read the first record:\n{}",
        consumer.log()
    );
    produce(s, &victim, &topic, "two\n").ok();
    assert!(
        within(Duration::from_secs(30), || consumer.log().contains("two")).is_some(),
        "{}",
        consumer.log()
    );

    // A MySQL session open before the revocation.
    let cnf = format!("--defaults-extra-file={}", victim.join("my.cnf").display());
    let session = Background::start(
        s,
        home.dir.join("mysql.log"),
        &format!("mariadb '{cnf}' -e 'SELECT SLEEP(120)'"),
    );
    assert!(
        within(Duration::from_secs(20), || sessions_of(s, &name) == 1).is_some(),
        "the MySQL session did not start:\n{}",
        session.log()
    );

    // The admin revokes from the laptop.
    let out = home
        .connect(
            s,
            &[
                "--json",
                "revoke",
                &name,
                "--server",
                s.info("ssh_destination"),
                "--reason",
                "key-compromise",
            ],
        )
        .ok();
    let revoked_at = Instant::now();
    let answer: Value = serde_json::from_str(&out.stdout).expect("revoke --json");
    assert_eq!(answer["revoked"][0]["serial"], serial.as_str());
    assert_eq!(answer["mysql"]["locked"], true, "{answer:#}");
    assert_eq!(answer["mysql"]["reloaded_with"], "FLUSH SSL", "{answer:#}");
    assert!(
        !answer["kafka"]["deleted"]
            .as_array()
            .expect("deleted")
            .is_empty(),
        "{answer:#}"
    );

    // MySQL: the open session is gone, the account is locked, a new login is refused.
    assert!(
        within(Duration::from_secs(10), || sessions_of(s, &name) == 0).is_some(),
        "the session was not killed"
    );
    assert!(
        within(Duration::from_secs(10), || !session.alive()).is_some(),
        "{}",
        session.log()
    );
    let show = mysql_root(s, &format!("SHOW CREATE USER '{name}'@'127.0.0.1'"));
    assert!(show.contains("ACCOUNT LOCK"), "{show}");
    mysql_login(s, &victim).failed();

    // Kafka: the consumer connected before gets authorization errors within 60 s.
    let took = within(KAFKA_DEADLINE, || {
        let log = consumer.log();
        log.contains("AuthorizationException") || log.contains("Not authorized")
    });
    assert!(
        took.is_some(),
        "no authorization error within {KAFKA_DEADLINE:?}:\n{}",
        consumer.log()
    );
    eprintln!(
        "connected consumer: authorization error seen {:?} after the revocation: {}",
        revoked_at.elapsed(),
        consumer
            .log()
            .lines()
            .find(|l| l.contains("AuthorizationException") || l.contains("Not authorized"))
            .unwrap_or_default()
    );
    // A new connection with the revoked certificate is refused at the handshake.
    let took = within(KAFKA_DEADLINE, || !kcat_metadata(s, &victim).success());
    assert!(took.is_some(), "{}", kcat_metadata(s, &victim).all());
    eprintln!(
        "revoked certificate: new Kafka connections refused {:?} after the revocation",
        revoked_at.elapsed()
    );

    // The other user is untouched: Kafka (metadata and a write under `app.`) and MySQL.
    kcat_metadata(s, &bystander).ok();
    let theirs = format!("app.{other}");
    create_topic(s, &theirs);
    produce(s, &bystander, &theirs, "still here\n").ok();
    let who = mysql_login(s, &bystander).ok();
    assert_eq!(who.stdout.trim(), format!("{other}@127.0.0.1"));

    // The CRL lists exactly the revoked serials of the inventory.
    let listed = crl_serials(s);
    assert!(listed.contains(&serial));
    assert_eq!(listed, inventory_revoked(s));
    assert!(!listed.contains(&serial_of(&bystander)));

    // One audit line per action, with who, when, the serial and the outcome.
    let lines = audit(s, &name);
    assert!(has_audit(&lines, "sign", Some(&serial), "ok"), "{lines:#?}");
    assert!(has_audit(&lines, "mysql-user", None, "ok"), "{lines:#?}");
    assert!(has_audit(&lines, "kafka-user", None, "ok"), "{lines:#?}");
    assert!(
        has_audit(&lines, "revoke", Some(&serial), "ok"),
        "{lines:#?}"
    );

    // setup again: refused while the name is blocked; once an admin unblocks it, a new
    // certificate opens the account and the ACLs again.
    drop(tunnel);
    let blocked = home.setup(s, &name, &["--force"]).failed();
    assert!(blocked.stderr.contains("is blocked"), "{}", blocked.stderr);
    s.agent(&["unblock", &name], None).ok();
    home.setup(s, &name, &["--force"]).ok();
    let _tunnel = OpenSshTunnel::open(s, &victim);
    let who = mysql_login(s, &victim).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
}

#[test]
fn status_lists_profiles_and_renew_runs_only_when_due() {
    let s = stack();
    let home = Home::new(s, "renew");
    let name = unique_name("ren");
    home.setup(s, &name, &[]).ok();
    let profile = home.profile(&name);

    let out = home.connect(s, &["--json", "status"]).ok();
    let rows: Value = serde_json::from_str(&out.stdout).expect("status --json");
    assert_eq!(rows[0]["name"], name.as_str());
    assert_eq!(rows[0]["state"], "valid");
    assert_eq!(rows[0]["serial"], serial_of(&profile).as_str());
    assert_eq!(rows[0]["days_left"], 29);
    let table = home.connect(s, &["status"]).ok();
    assert!(table.stdout.starts_with("NAME"), "{}", table.stdout);

    // Nothing due: exit 0, says so, no SSH at all.
    let out = home.connect(s, &["renew", &name]).ok();
    assert!(out.stdout.contains("nothing due"), "{}", out.stdout);

    // Pretend 29 of 30 days have passed: renew rotates (and revokes the old certificate).
    let old_serial = serial_of(&profile);
    let path = profile.join("profile.json");
    let mut p: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("profile.json");
    let now = time::OffsetDateTime::now_utc();
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .expect("format")
    };
    p["certificate"]["not_before"] = rfc(now - time::Duration::days(29)).into();
    p["certificate"]["not_after"] = rfc(now + time::Duration::days(1)).into();
    std::fs::write(&path, serde_json::to_string_pretty(&p).expect("json")).expect("write");
    let due = home.connect(s, &["--json", "status"]).ok();
    let rows: Value = serde_json::from_str(&due.stdout).expect("status --json");
    assert_eq!(rows[0]["state"], "renew-due");

    let out = home.connect(s, &["renew", &name]).ok();
    assert!(out.stdout.contains("renewed"), "{}", out.all());
    let new_serial = serial_of(&profile);
    assert_ne!(new_serial, old_serial);
    assert!(crl_serials(s).contains(&old_serial));
    let again = home.connect(s, &["renew", &name]).ok();
    assert!(again.stdout.contains("nothing due"), "{}", again.stdout);

    // `tunnel up` renews over the connection it opens anyway.
    let before = serial_of(&profile);
    let mut p: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("profile.json");
    p["certificate"]["not_before"] = rfc(now - time::Duration::days(29)).into();
    p["certificate"]["not_after"] = rfc(now + time::Duration::days(1)).into();
    std::fs::write(&path, serde_json::to_string_pretty(&p).expect("json")).expect("write");
    let up = home.connect(s, &["tunnel", "up", &name]).ok();
    let down = home.connect(s, &["tunnel", "down", &name]);
    assert!(
        up.stderr.contains("renew the certificate"),
        "tunnel up did not renew:\n{}",
        up.stderr
    );
    let after = serial_of(&profile);
    assert_ne!(after, before);
    assert!(crl_serials(s).contains(&before));
    down.ok();

    // An expired profile makes `status` exit 1.
    let mut p: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("profile.json");
    p["certificate"]["not_after"] = rfc(now - time::Duration::hours(1)).into();
    std::fs::write(&path, serde_json::to_string_pretty(&p).expect("json")).expect("write");
    let expired = home.connect(s, &["status"]);
    assert_eq!(expired.code, Some(1), "{}", expired.all());
    assert!(expired.stdout.contains("expired"), "{}", expired.stdout);

    // The agent's CRL refresh is cron-friendly: fresh means "nothing to do", exit 0.
    let crl = s.agent(&["crl", "--refresh"], None).ok();
    assert!(crl.stdout.starts_with("nothing to do"), "{}", crl.stdout);
}
