//! The local endpoint serves the account that runs the tunnel, and no other (issue 42): a
//! second account on the laptop (`shiqi-lap2`, `scripts/stack exec laptop --user shiqi-lap2`)
//! reaches the ports of `shiqi-lap`'s running endpoint and is refused on Kafka and on MySQL,
//! while the owner's kcat and mariadb work; the refusals are in `tunnel.log` with the other
//! account's uid and name, and counted by `tunnel status`. With the tunnel down, the other
//! account takes the bootstrap port (squats), and the owner's `doctor` names it.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::endpoint::local_with_tunnel;
use crate::setup::Home;
use crate::stack::{Out, Stack, stack};

/// Runs `args` on the laptop as its second account, in that account's home.
fn as_other_account(s: &Stack, args: &[&str]) -> Out {
    let out = Command::new(s.script())
        .args(["exec", "laptop", "--user", s.info("laptop_user2"), "--"])
        .args(args)
        .output()
        .expect("scripts/stack exec runs");
    Out::from(out)
}

/// The local port the profile's MySQL is served on.
fn mysql_port(profile: &Path) -> String {
    let text = std::fs::read_to_string(profile.join("profile.json")).expect("profile.json");
    let json: Value = serde_json::from_str(&text).expect("json");
    let mysql = json["mysql"]["port"].as_u64().expect("mysql port");
    json["forwards"]
        .as_array()
        .expect("forwards")
        .iter()
        .find(|f| f["remote_port"].as_u64() == Some(mysql))
        .and_then(|f| f["local_port"].as_u64())
        .expect("a MySQL forward")
        .to_string()
}

// Seed: issue 42, part 3 ("any local account is NAME on Kafka and on MySQL through an open
// endpoint").
#[test]
fn another_account_on_the_laptop_is_refused_by_the_endpoint_while_the_owner_is_served() {
    let s = stack();
    let home = Home::new(s, "peers");
    let (name, profile, tunnel) = local_with_tunnel(s, &home, "peer", "19500", &[]);
    let port = mysql_port(&profile);
    let sql = ["-N", "-e", "SELECT CURRENT_USER()"];

    // The owner: Kafka metadata through the bootstrap port, and a MySQL login as NAME.
    let conf = profile.join("librdkafka.conf").display().to_string();
    let owner = s
        .laptop(&["kcat", "-F", &conf, "-L", "-m", "10"], &[], None)
        .ok();
    assert!(
        owner.stdout.contains(" at 127.0.0.1:1950"),
        "{}",
        owner.stdout
    );
    let cnf = format!("--defaults-file={}", profile.join("my.cnf").display());
    let mut args = vec!["mariadb", cnf.as_str()];
    args.extend_from_slice(&sql);
    let owner = s.laptop(&args, &[], None).ok();
    assert_eq!(owner.stdout.trim(), format!("{name}@127.0.0.1"));

    // The other account, with clients that need nothing but the address: the bootstrap port,
    // a broker's port, and MySQL as NAME with no password.
    for broker in ["127.0.0.1:19500", "127.0.0.1:19501"] {
        let other = as_other_account(s, &["kcat", "-b", broker, "-L", "-m", "5"]).failed();
        assert!(
            !other.stdout.contains(" at 127.0.0.1:"),
            "another account got metadata through {broker}:\n{}",
            other.all()
        );
    }
    let mut args = vec!["mariadb", "-h", "127.0.0.1", "-P", &port, "-u", &name];
    args.extend_from_slice(&sql);
    let other = as_other_account(s, &args).failed();
    assert!(
        other
            .stderr
            .contains("serves only the account that runs the tunnel"),
        "{}",
        other.all()
    );
    assert!(!other.stdout.contains(&name), "{}", other.all());

    // The refusals are logged with the account, and counted.
    let log = std::fs::read_to_string(profile.join("tunnel.log")).expect("tunnel.log");
    let other_user = s.info("laptop_user2");
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("refused a connection from another account"))
        .collect();
    assert!(
        refusals
            .iter()
            .any(|l| l.contains(&format!("(`{other_user}`)")) && l.contains("on port 19500")),
        "{log}"
    );
    assert!(
        refusals
            .iter()
            .any(|l| l.contains(&format!("on port {port}"))),
        "{log}"
    );
    let (_, status) = tunnel.status();
    let count = status["tunnel"]["refused"]["count"].as_u64().unwrap_or(0);
    assert!(count >= 3, "{status:#}");
    let text = home.connect(s, &["tunnel", "status", &name]);
    assert!(
        text.stdout
            .contains("connection(s) from other accounts to the local endpoint"),
        "{}",
        text.all()
    );

    // And the owner is still served after all that.
    let owner = s
        .laptop(&["kcat", "-F", &conf, "-L", "-m", "10"], &[], None)
        .ok();
    assert!(
        owner.stdout.contains(" at 127.0.0.1:1950"),
        "{}",
        owner.stdout
    );
    drop(tunnel);

    // The tunnel is down: the other account listens on the bootstrap port, and would be the
    // endpoint to the owner's clients.
    let mut squatter = Command::new(s.script())
        .args([
            "exec", "laptop", "--user", other_user, "--", "python3", "-c",
        ])
        .arg(
            "import socket, time\n\
             s = socket.socket()\n\
             s.bind(('127.0.0.1', 19500))\n\
             s.listen()\n\
             time.sleep(60)\n",
        )
        .spawn()
        .expect("python3 runs");
    let probe = ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/19500"];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !s.laptop(&probe, &[], None).success() {
        assert!(
            std::time::Instant::now() < deadline,
            "the squatter never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let doctor = home.connect(s, &["doctor", &name]);
    let _ = squatter.kill();
    let _ = squatter.wait();
    assert!(
        doctor.stdout.contains(&format!(
            "another account holds the local endpoint's port 19500 (a process of user \
             `{other_user}`)"
        )),
        "{}",
        doctor.all()
    );
}
