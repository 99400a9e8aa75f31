//! Two people, one CA: saige's key is enrolled as an admin, bob's as a user (`scripts/stack`
//! does both with `shiqi-ca-agent enroll`). Both reach the agent's account `shiqi-ca` only
//! through the forced command; bob gets his own name and nothing else, and a revocation holds
//! until an admin lifts it.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::kafka::produce;
use crate::lifecycle::{
    Background, audit, console_consumer, create_topic, mysql_login, serial_of, sessions_of, within,
};
use crate::setup::{Home, OpenSshTunnel};
use crate::stack::{Out, Stack, stack, unique_name};

/// The name bob's key is enrolled as.
pub(crate) const BOB: &str = "bob";

fn bob_home(s: &Stack) -> PathBuf {
    PathBuf::from(s.info("bob_home"))
}

fn bob_key(s: &Stack) -> String {
    bob_home(s).join(".ssh/id_ed25519").display().to_string()
}

/// `shiqi-connect ARGS` on bob's laptop home (his ~/.ssh, profiles under `home`).
pub(crate) fn bob(s: &Stack, home: &Home, args: &[&str]) -> Out {
    let mut full = vec!["shiqi-connect"];
    full.extend_from_slice(args);
    let bob_home = bob_home(s).display().to_string();
    s.laptop(
        &full,
        &[("SHIQI_HOME", &home.env()), ("HOME", &bob_home)],
        None,
    )
}

/// `shiqi-connect setup NAME` from bob's laptop home against the agent's account.
pub(crate) fn bob_setup(s: &Stack, home: &Home, name: &str, extra: &[&str]) -> Out {
    let mut args = vec![
        "setup",
        name,
        "--server",
        s.info("ssh_destination"),
        "--yes",
    ];
    args.extend_from_slice(extra);
    bob(s, home, &args)
}

/// `ssh shiqi-ca@server REQUEST` with bob's key only, as a person would try it by hand.
pub(crate) fn bob_ssh(s: &Stack, extra: &[&str], request: &[&str]) -> Out {
    ssh_with_key(s, &bob_key(s), extra, request, None)
}

/// `ssh shiqi-ca@server REQUEST` with `key` only, from the laptop.
pub(crate) fn ssh_with_key(
    s: &Stack,
    key: &str,
    extra: &[&str],
    request: &[&str],
    stdin: Option<&[u8]>,
) -> Out {
    let mut full = vec![
        "ssh",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        key,
    ];
    full.extend_from_slice(extra);
    full.push(s.info("ssh_destination"));
    full.extend_from_slice(request);
    s.laptop(&full, &[], stdin)
}

/// `ssh shiqi-ca@server REQUEST` with saige's (the laptop user's default) key.
fn saige_ssh(s: &Stack, request: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut full = vec![
        "ssh",
        "-T",
        "-o",
        "BatchMode=yes",
        s.info("ssh_destination"),
    ];
    full.extend_from_slice(request);
    s.laptop(&full, &[], stdin)
}

fn fingerprint(s: &Stack, public_key: &str) -> String {
    let out = s.laptop(&["ssh-keygen", "-lf", public_key], &[], None).ok();
    out.stdout
        .split_whitespace()
        .nth(1)
        .expect("ssh-keygen -l prints a fingerprint")
        .to_owned()
}

/// Every certificate the inventory has, as the local admin sees it.
fn inventory(s: &Stack) -> Vec<Value> {
    let out = s.agent(&["list", "--json"], None).ok();
    serde_json::from_str(&out.stdout).expect("list --json")
}

/// Starts from an unblocked `bob` (an earlier run may have stopped halfway).
fn unblock_bob(s: &Stack) {
    s.agent(&["unblock", BOB], None).ok();
}

#[test]
fn a_user_key_gets_its_own_name_and_nothing_else() {
    let s = stack();
    unblock_bob(s);
    let saige = Home::new(s, "teams-saige");
    let home = Home::new(s, "teams-bob");
    let theirs = unique_name("sg");
    saige.setup(s, &theirs, &[]).ok();
    let their_serial = serial_of(&saige.profile(&theirs));

    // A certificate for someone else's name: refused, nothing issued, nothing left behind.
    let before = inventory(s).len();
    let refused = bob_setup(s, &home, &theirs, &[]).failed();
    assert!(
        refused
            .stderr
            .contains(&format!("may not ask for a certificate for `{theirs}`")),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("role user"), "{}", refused.stderr);
    assert!(
        !refused.stderr.contains("could not revoke"),
        "{}",
        refused.stderr
    );
    assert_eq!(inventory(s).len(), before, "the inventory changed");
    assert!(
        home.leftovers(&theirs).is_empty(),
        "{:?}",
        home.leftovers(&theirs)
    );

    // His own name works end to end (Kafka ACLs, MySQL user, profile).
    bob_setup(s, &home, BOB, &["--force"]).ok();
    let mine = home.profile(BOB);
    {
        let _tunnel = OpenSshTunnel::open(s, &mine);
        let who = mysql_login(s, &mine).ok();
        assert_eq!(who.stdout.trim(), format!("{BOB}@127.0.0.1"));
    }

    // Everything else, tried by hand with his key, is refused with the reason.
    let state = s.info("agent_state_dir");
    let ca_key = format!("{state}/ca.key");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["shiqi-ca-agent", "revoke", "--name", &theirs],
            "may not ask for revoking",
        ),
        (
            vec!["shiqi-ca-agent", "revoke", &their_serial],
            "may not ask for revoking serial",
        ),
        (
            vec![
                "shiqi-ca-agent",
                "server-cert",
                "x",
                "--kind",
                "kafka",
                "--san",
                "localhost",
                "--out",
                "/tmp/x",
            ],
            "may not ask for `server-cert x`",
        ),
        (vec!["shiqi-ca-agent", "list"], "may not ask for `list`"),
        (
            vec!["shiqi-ca-agent", "enroll", "--list"],
            "may not ask for `enroll`",
        ),
        (
            vec!["shiqi-ca-agent", "unblock", BOB],
            "may not ask for `unblock bob`",
        ),
        (
            vec!["shiqi-ca-agent", "kafka-user", BOB, "--revoke"],
            "deleting the Kafka ACLs",
        ),
        (
            vec!["shiqi-ca-agent", "mysql-user", &theirs],
            "may not ask for the MySQL user",
        ),
        (vec!["cat", &ca_key], "must run `shiqi-ca-agent`, not `cat`"),
        (vec![], "gives no shell"),
        (
            vec!["USER=saige", "shiqi-ca-agent", "sign", "--name", &theirs],
            "not `USER=saige`",
        ),
        (
            vec!["shiqi-ca-agent", "--state-dir", "/tmp", "list"],
            "unexpected argument '--state-dir'",
        ),
        (
            vec!["shiqi-ca-agent", "serve", "--key", "SHA256:x"],
            "`serve` inside a request",
        ),
    ];
    for (request, why) in &cases {
        let out = bob_ssh(s, &[], request).failed();
        assert!(out.stderr.contains(why), "{request:?}: {}", out.stderr);
    }
    // `--agent-command` tricks from the laptop change nothing either.
    let out = bob(
        s,
        &home,
        &[
            "setup",
            &theirs,
            "--server",
            s.info("ssh_destination"),
            "--yes",
            "--force",
            "--agent-command",
            "USER=saige LOGNAME=saige shiqi-ca-agent",
        ],
    )
    .failed();
    assert!(out.stderr.contains("not `USER=saige`"), "{}", out.stderr);

    // Forwards only to the services, and no pty.
    let out = bob_ssh(s, &["-W", "127.0.0.1:22"], &[]).failed();
    assert!(out.stderr.contains("prohibited"), "{}", out.stderr);

    // saige's certificate is untouched, and every line of bob's carries his key and role.
    let theirs_now = inventory(s)
        .into_iter()
        .find(|c| c["serial"] == their_serial.as_str())
        .expect("saige's certificate");
    assert_eq!(theirs_now["status"], "valid");
    let bob_fp = fingerprint(s, &format!("{}.pub", bob_key(s)));
    let lines = audit(s, BOB);
    assert!(
        lines.iter().any(|l| l["action"] == "sign"
            && l["outcome"] == "ok"
            && l["key"] == bob_fp.as_str()
            && l["role"] == "user"),
        "{lines:#?}"
    );
    // Whatever acted as `bob` through a key did so with his key (others' lines name theirs).
    for l in lines.iter().filter(|l| l["key_name"] == BOB) {
        assert_eq!(l["key"], bob_fp.as_str(), "{l}");
    }
    let refusals = audit(s, &theirs);
    assert!(
        // setup sends one `provision` request; its refusal is audited under that name.
        refusals.iter().any(|l| l["action"] == "provision"
            && l["outcome"] == "refused"
            && l["key"] == bob_fp.as_str()),
        "{refusals:#?}"
    );
}

#[test]
fn an_admin_revokes_bob_whose_consumer_then_reads_nothing_and_who_stays_blocked() {
    let s = stack();
    unblock_bob(s);
    let saige = Home::new(s, "teams-admin");
    let home = Home::new(s, "teams-revoked");
    bob_setup(s, &home, BOB, &["--force"]).ok();
    let profile = home.profile(BOB);
    let topic = format!("app.{}", unique_name("team"));
    create_topic(s, &topic);
    let tunnel = OpenSshTunnel::open(s, &profile);
    produce(s, &profile, &topic, "before\n").ok();
    let props = profile.join("client.properties").display().to_string();
    let group = format!("app.{}", unique_name("bobs"));
    let consumer = console_consumer(s, home.dir.join("consumer.log"), &props, &topic, &group);
    assert!(
        within(Duration::from_secs(60), || consumer
            .log()
            .contains("before"))
        .is_some(),
        "the consumer never read the first record:\n{}",
        consumer.log()
    );

    // The admin revokes bob from her laptop; the moment it returns, someone else produces.
    let revoked = saige
        .connect(
            s,
            &[
                "--json",
                "revoke",
                BOB,
                "--server",
                s.info("ssh_destination"),
            ],
        )
        .ok();
    let answer: Value = serde_json::from_str(&revoked.stdout).expect("revoke --json");
    assert!(
        answer["warnings"].to_string().contains("is blocked"),
        "{answer:#}"
    );
    s.kafka_tool_stdin(
        "org.apache.kafka.tools.ConsoleProducer",
        &[
            "--bootstrap-server",
            s.info("kafka_bootstrap"),
            "--producer.config",
            s.info("kafka_admin_properties"),
            "--topic",
            &topic,
            "--sync",
            crate::kafka::SEND_AT_ONCE[0],
            crate::kafka::SEND_AT_ONCE[1],
        ],
        b"after-revoke\n",
    )
    .ok();
    // Long enough for a consumer polling every few hundred ms to have fetched it many times.
    std::thread::sleep(Duration::from_secs(15));
    let log = consumer.log();
    assert!(
        !log.contains("after-revoke"),
        "the revoked consumer read on:\n{log}"
    );
    drop(consumer);
    drop(tunnel);

    // Blocked: bob cannot get a new certificate, however he asks.
    let again = bob_setup(s, &home, BOB, &["--force"]).failed();
    assert!(
        again.stderr.contains("`bob` is blocked"),
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("shiqi-ca-agent unblock bob"),
        "{}",
        again.stderr
    );
    // Until the admin lifts it, through her own key.
    let lifted = saige_ssh(s, &["shiqi-ca-agent", "unblock", BOB], None).ok();
    assert!(
        lifted.stdout.contains("unblocked `bob`"),
        "{}",
        lifted.all()
    );
    bob_setup(s, &home, BOB, &["--force"]).ok();
}

#[test]
fn an_admin_enrolls_and_removes_a_colleague_whose_key_is_then_refused_with_the_enroll_line() {
    let s = stack();
    let home = Home::new(s, "teams-carol");
    let carol_home = home.dir.join("carol-home");
    let ssh_dir = carol_home.join(".ssh");
    let key = ssh_dir.join("id_ed25519");
    let key_text = key.display().to_string();
    s.laptop(&["mkdir", "-p", &ssh_dir.display().to_string()], &[], None)
        .ok();
    s.laptop(
        &[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "carol@laptop",
            "-f",
            &key_text,
        ],
        &[],
        None,
    )
    .ok();
    let known = format!("{}/.ssh/known_hosts", s.info("laptop_home"));
    s.laptop(&["cp", &known, &ssh_dir.display().to_string()], &[], None)
        .ok();
    let name = unique_name("carol");
    let carol = |args: &[&str]| {
        let mut full = vec!["shiqi-connect"];
        full.extend_from_slice(args);
        let h = carol_home.display().to_string();
        s.laptop(&full, &[("SHIQI_HOME", &home.env()), ("HOME", &h)], None)
    };
    let setup = [
        "setup",
        name.as_str(),
        "--server",
        s.info("ssh_destination"),
        "--yes",
        "--force",
    ];

    // Not enrolled: the error names the key and the exact line for the admin.
    let refused = carol(&setup).failed();
    let fp = fingerprint(s, &format!("{key_text}.pub"));
    assert!(refused.stderr.contains(&fp), "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "shiqi-ca-agent enroll {name} --ssh-key id_ed25519.pub --role user"
        )),
        "{}",
        refused.stderr
    );

    // saige enrolls her from her own laptop, the public key on stdin.
    let public = std::fs::read(format!("{key_text}.pub")).expect("carol's public key");
    let enrolled = saige_ssh(
        s,
        &[
            "shiqi-ca-agent",
            "enroll",
            &name,
            "--ssh-key",
            "-",
            "--role",
            "user",
        ],
        Some(&public),
    )
    .ok();
    assert!(enrolled.stdout.contains(&fp), "{}", enrolled.all());
    let listed = saige_ssh(s, &["shiqi-ca-agent", "enroll", "--list", "--json"], None).ok();
    let keys: Vec<Value> = serde_json::from_str(&listed.stdout).expect("enroll --list --json");
    assert!(
        keys.iter().any(|k| k["name"] == name.as_str()
            && k["role"] == "user"
            && k["fingerprint"] == fp.as_str()),
        "{keys:#?}"
    );
    carol(&setup).ok();

    // Removed: her key no longer logs in; her certificate stays until revoked.
    saige_ssh(s, &["shiqi-ca-agent", "enroll", "--remove", &fp], None).ok();
    let gone = carol(&setup).failed();
    assert!(
        gone.stderr.contains("accepted none of the SSH keys"),
        "{}",
        gone.stderr
    );
    saige_ssh(s, &["shiqi-ca-agent", "revoke", "--name", &name], None).ok();
}

#[test]
fn rotate_compromised_revokes_the_old_key_at_once_and_ends_its_mysql_sessions() {
    let s = stack();
    let home = Home::new(s, "teams-compromised");
    let name = unique_name("cmp");
    home.setup(s, &name, &[]).ok();
    let dir = home.profile(&name);
    let old = serial_of(&dir);
    let _tunnel = OpenSshTunnel::open(s, &dir);
    let cnf = format!("--defaults-extra-file={}", dir.join("my.cnf").display());
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
    let out = home.connect(s, &["rotate", &name, "--compromised"]).ok();
    assert!(
        out.stderr.contains("revoked (key-compromise)"),
        "{}",
        out.stderr
    );
    assert!(
        within(Duration::from_secs(10), || sessions_of(s, &name) == 0).is_some(),
        "the session of the stolen key was not ended"
    );
    let record = inventory(s)
        .into_iter()
        .find(|c| c["serial"] == old.as_str())
        .expect("the old certificate");
    assert_eq!(record["status"], "revoked");
    assert_eq!(record["reason"], "key-compromise");
    // The new files log in.
    let who = mysql_login(s, &dir).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
}
