//! Issue 44: certificates that live minutes, for real. No date is rewritten here: a 5-minute
//! certificate is renewed by the running tunnel on its own schedule, across a server that is down
//! at the due time, and then really expires while the endpoint's clients keep working; the agent
//! signs what `[lifetime]` and the caller's role allow; and a CRL after 200 superseded short
//! certificates lists only the revoked ones that have not expired.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::endpoint_mysql::PYMYSQL_LOGIN;
use crate::lifecycle::{crl_serials, serial_of, within};
use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};
use crate::teams::{BOB, bob, bob_setup};
use crate::tunnel::Tunnel;

fn time_of(v: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(v.as_str().unwrap_or_default(), &Rfc3339)
        .unwrap_or_else(|e| panic!("{v} is not a time: {e}"))
}

/// `scripts/stack sshd ACTION` (`down`, `up`).
fn sshd(s: &Stack, action: &str) {
    let out = Command::new(s.script())
        .args(["sshd", action])
        .output()
        .expect("scripts/stack runs");
    assert!(
        out.status.success(),
        "sshd {action}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The server's sshd back up whatever the test did (a failed assertion included).
struct SshdBack<'a>(&'a Stack);

impl Drop for SshdBack<'_> {
    fn drop(&mut self) {
        sshd(self.0, "up");
    }
}

/// A PyMySQL login through the endpoint's MySQL port: `CURRENT_USER()` or the error.
fn endpoint_login(s: &Stack, port: &str, name: &str) -> Out {
    s.laptop(
        &[s.info("python"), "-c", PYMYSQL_LOGIN, port, name],
        &[],
        None,
    )
}

/// The client certificates the agent's inventory has for `name`, by serial.
fn certificates(s: &Stack, name: &str) -> Vec<Value> {
    let out = s.agent(&["list", "--json", "--name", name], None).ok();
    serde_json::from_str::<Value>(&out.stdout)
        .expect("list JSON")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn status_of(s: &Stack, name: &str, serial: &str) -> String {
    certificates(s, name)
        .iter()
        .find(|c| c["serial"].as_str() == Some(serial))
        .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// A CSR for `name` made here (the agent's local `sign` reads it on stdin).
fn csr(name: &str) -> String {
    let key = shiqi_ca::key::PrivateKey::generate(shiqi_ca::key::KeyType::EcdsaP256).expect("key");
    shiqi_ca::csr::build(&key, &name.parse().expect("name")).expect("csr")
}

/// `sign --name NAME EXTRA` on the server as the agent's account: the reply.
fn sign_locally(s: &Stack, name: &str, extra: &[&str]) -> Value {
    let mut args = vec!["sign", "--name", name, "--no-kafka"];
    args.extend_from_slice(extra);
    let out = s.agent(&args, Some(csr(name).as_bytes())).ok();
    serde_json::from_str(&out.stdout).expect("sign JSON")
}

/// What the signed window says a certificate lives: its validity less the agent's backdating.
fn lifetime(reply: &Value) -> time::Duration {
    time_of(&reply["not_after"]) - time_of(&reply["not_before"]) - shiqi_ca::issue::BACKDATE
}

// Seed: issue 44. The renewal e2e made renewal due by rewriting dates; nothing had seen a
// certificate expire while the tunnel's clients kept working.
#[test]
fn a_five_minute_certificate_is_renewed_across_a_server_outage_and_then_expires_unnoticed() {
    let s = stack();
    let started = Instant::now();
    // Superseded short certificates of another name, left to expire alongside (the CRL part).
    let crl_name = unique_name("crl");
    let short: Vec<String> = (0..200)
        .map(|_| {
            let reply = sign_locally(s, &crl_name, &["--lifetime", "5m"]);
            assert_eq!(lifetime(&reply), time::Duration::minutes(5), "{reply}");
            reply["serial"].as_str().expect("serial").to_owned()
        })
        .collect();
    s.agent(
        &["revoke", "--name", &crl_name, "--reason", "superseded"],
        None,
    )
    .ok();
    let long_name = unique_name("crl");
    let long = sign_locally(s, &long_name, &["--lifetime", "1h"]);
    let long = long["serial"].as_str().expect("serial").to_owned();
    s.agent(&["revoke", &long, "--reason", "superseded"], None)
        .ok();
    let listed = crl_serials(s);
    assert!(
        short.iter().all(|serial| listed.contains(serial)) && listed.contains(&long),
        "every revoked certificate is listed while it is valid"
    );

    // A profile whose clients use the local endpoint, with 5-minute certificates.
    let home = Home::new(s, "lifetime");
    let name = unique_name("lt");
    let out = home
        .setup(
            s,
            &name,
            &[
                "--endpoint",
                "local",
                "--endpoint-port",
                "19950",
                "--lifetime",
                "5m",
            ],
        )
        .ok();
    assert!(out.stderr.contains("(5m)"), "{}", out.all());
    let profile = home.profile(&name);
    let first = serial_of(&profile);
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let mysql_port = "3306";
    let me = format!("current_user={name}@127.0.0.1");
    let login = endpoint_login(s, mysql_port, &name);
    assert!(login.stdout.contains(&me), "{}", login.all());
    // The tunnel looks at the certificate within 20 s of starting.
    let mut st = Value::Null;
    within(Duration::from_secs(40), || {
        st = tunnel.status().1;
        st["tunnel"]["renewal"]["due"].is_string()
    });
    let due = time_of(&st["tunnel"]["renewal"]["due"]);
    let not_after = time_of(&st["tunnel"]["renewal"]["not_after"]);
    let until_due = due - OffsetDateTime::now_utc();
    assert!(
        until_due > time::Duration::seconds(150) && due <= not_after - time::Duration::seconds(90),
        "a 5-minute certificate is due at two thirds (plus at most 10 s of jitter): {st:#}"
    );

    // The server goes away before the due time and comes back after it.
    let _back = SshdBack(s);
    std::thread::sleep(Duration::try_from(until_due).unwrap_or_default() - Duration::from_secs(20));
    sshd(s, "down");
    assert_eq!(serial_of(&profile), first, "nothing renewed early");
    std::thread::sleep(Duration::from_secs(45));
    assert_eq!(serial_of(&profile), first, "no renewal without the server");
    let (_, st) = tunnel.status();
    assert!(OffsetDateTime::now_utc() > due, "{st:#}");
    sshd(s, "up");
    let renewed = within(Duration::from_secs(60), || serial_of(&profile) != first);
    assert!(
        renewed.is_some(),
        "the tunnel renewed once the server was back:\n{:#}\n{}",
        tunnel.status().1,
        std::fs::read_to_string(profile.join("tunnel.log")).unwrap_or_default()
    );
    let second = serial_of(&profile);
    assert!(
        within(Duration::from_secs(30), || status_of(s, &name, &first)
            == "revoked")
        .is_some(),
        "the superseded certificate is revoked: {:#?}",
        certificates(s, &name)
    );

    // The first certificate expires; the endpoint's clients never held it.
    let wait = not_after - OffsetDateTime::now_utc() + time::Duration::seconds(5);
    std::thread::sleep(Duration::try_from(wait).unwrap_or_default());
    let login = endpoint_login(s, mysql_port, &name);
    assert!(
        login.stdout.contains(&me),
        "after the expiry: {}",
        login.all()
    );
    let (_, st) = tunnel.status();
    let second_ends = certificates(s, &name)
        .iter()
        .find(|c| c["serial"].as_str() == Some(second.as_str()))
        .map(|c| time_of(&c["not_after"]))
        .expect("the second certificate is in the inventory");
    assert_eq!(
        time_of(&st["tunnel"]["renewal"]["not_after"]),
        second_ends,
        "the tunnel follows the second certificate: {st:#}"
    );
    drop(tunnel);

    // The 200 short certificates expired too: the next CRL lists only the live revoked ones.
    let wait = Duration::from_secs(5 * 60 + 10).saturating_sub(started.elapsed());
    std::thread::sleep(wait);
    sign_locally(s, &long_name, &["--lifetime", "5m"]);
    let listed = crl_serials(s);
    assert!(
        short.iter().all(|serial| !listed.contains(serial)),
        "expired certificates leave the CRL"
    );
    assert!(
        listed.contains(&long),
        "a revoked certificate that has not expired stays"
    );
    assert!(
        !listed.contains(&first),
        "the expired first certificate left too"
    );
}

/// `[lifetime]` in agent.toml for the length of a test, then the file as it was.
struct AgentLifetime<'a> {
    s: &'a Stack,
    path: String,
    before: String,
}

impl<'a> AgentLifetime<'a> {
    fn set(s: &'a Stack, section: &str) -> Self {
        let path = format!("{}/agent.toml", s.info("agent_state_dir"));
        let before = s.server(None, &["cat", &path], None).ok().stdout;
        let user = s.info("server_user");
        s.server(
            Some(user),
            &["tee", "-a", &path],
            Some(format!("\n{section}").as_bytes()),
        )
        .ok();
        Self { s, path, before }
    }
}

impl Drop for AgentLifetime<'_> {
    fn drop(&mut self) {
        let user = self.s.info("server_user");
        let _ = self.s.server(
            Some(user),
            &["tee", &self.path],
            Some(self.before.as_bytes()),
        );
    }
}

// Seed: issue 44. Lifetimes were whole days (`client_days`, at least 1), and nothing capped
// what a laptop could ask for.
#[test]
fn the_agent_signs_its_default_lifetime_and_at_most_the_roles_maximum() {
    let s = stack();
    let _config = AgentLifetime::set(
        s,
        "[lifetime]\nclient = \"10m\"\n[lifetime.client_max]\nuser = \"1h\"\n",
    );
    let home = Home::new(s, "lifetime-cap");
    let minutes = |dir: &std::path::Path| {
        let p: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("profile.json")).expect("read"))
                .expect("profile");
        (time_of(&p["certificate"]["not_after"])
            - time_of(&p["certificate"]["not_before"])
            - shiqi_ca::issue::BACKDATE)
            .whole_minutes()
    };

    // A direct profile asks for nothing: the agent's `client`.
    let plain = unique_name("lc");
    home.setup(s, &plain, &["--endpoint", "direct"]).ok();
    assert_eq!(minutes(&home.profile(&plain)), 10);

    // More than the user role's maximum (bob's key is a `user`): signed at the maximum, and the
    // laptop says so; saige's `admin` key gets what it asks.
    s.agent(&["unblock", BOB], None);
    let out = bob_setup(
        s,
        &home,
        BOB,
        &["--endpoint", "direct", "--lifetime", "30d", "--force"],
    )
    .ok();
    assert_eq!(minutes(&home.profile(BOB)), 60);
    assert!(
        out.stderr
            .contains("the server signs at most 1h for your key"),
        "{}",
        out.all()
    );
    let greedy = unique_name("lc");
    home.setup(s, &greedy, &["--endpoint", "direct", "--lifetime", "30d"])
        .ok();
    assert_eq!(minutes(&home.profile(&greedy)), 30 * 24 * 60);
    // Kept in the profile, so renewals ask again (and are capped again).
    let p: Value = serde_json::from_str(
        &std::fs::read_to_string(home.profile(BOB).join("profile.json")).expect("read"),
    )
    .expect("profile");
    assert_eq!(p["lifetime"], "30d");
    // `rotate --lifetime` changes it, from this certificate on.
    let out = bob(s, &home, &["rotate", BOB, "--lifetime", "20m"]).ok();
    assert!(out.stderr.contains("(20m)"), "{}", out.all());
    assert_eq!(minutes(&home.profile(BOB)), 20);
    let p: Value = serde_json::from_str(
        &std::fs::read_to_string(home.profile(BOB).join("profile.json")).expect("read"),
    )
    .expect("profile");
    assert_eq!(p["lifetime"], "20m");

    // Below the floor: refused on the laptop before anything is signed, and by the agent.
    let tiny = unique_name("lc");
    let out = home.setup(s, &tiny, &["--lifetime", "4m"]).failed();
    assert!(
        out.stderr
            .contains("a client certificate may live 5m to 398d, not 4m"),
        "{}",
        out.all()
    );
    assert!(certificates(s, &tiny).is_empty());
    let out = s
        .agent(
            &["sign", "--name", &tiny, "--no-kafka", "--lifetime", "4m"],
            Some(csr(&tiny).as_bytes()),
        )
        .failed();
    assert!(out.stderr.contains("may live 5m to 398d"), "{}", out.all());

    // On the server itself (the CA's operator): the admin maximum, 398 days by default.
    let reply = sign_locally(s, &tiny, &["--lifetime", "90d"]);
    assert_eq!(lifetime(&reply), time::Duration::days(90));
    s.agent(&["revoke", "--name", &tiny], None).ok();
    for n in [&plain, &greedy] {
        home.connect(s, &["revoke", n]).ok();
    }
    // bob's certificates one by one (a revocation by name would block the name for the team
    // tests).
    for c in certificates(s, BOB) {
        if c["status"] == "valid"
            && let Some(serial) = c["serial"].as_str()
        {
            s.agent(&["revoke", serial], None).ok();
        }
    }
}
