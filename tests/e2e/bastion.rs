//! Servers behind a jump host. The stack's server also answers at 10.233.0.1, which the laptop
//! reaches only through the bastion's sshd (10.232.0.1): setup, both tunnels, rotate and doctor
//! go through it with `--jump` or with `ProxyJump` in ~/.ssh/config, and the bastion's host key
//! is checked like the server's.

use serde_json::Value;

use crate::setup::{Home, OpenSshTunnel};
use crate::stack::{Stack, stack, unique_name};
use crate::tunnel::{Tunnel, assert_all_ok, mariadb_current_user};

const PORTS: [u16; 4] = [19094, 29094, 39094, 3306];

fn profile_json(home: &Home, name: &str) -> Value {
    let text = std::fs::read_to_string(home.profile(name).join("profile.json")).expect("json");
    serde_json::from_str(&text).expect("profile.json")
}

#[test]
fn setup_tunnels_rotate_and_doctor_go_through_the_bastion_with_jump() {
    let s = stack();
    let home = Home::new(s, "bastion");
    let name = unique_name("jump");
    let inner = s.info("inner_destination");
    let bastion = s.info("bastion_destination");

    // Without the jump host the server's inner address is not reachable from the laptop.
    let direct = home
        .connect(s, &["setup", &name, "--server", inner, "--yes"])
        .failed();
    assert!(direct.stderr.contains("10.233.0.1"), "{}", direct.all());
    assert!(home.leftovers(&name).is_empty());

    home.connect(
        s,
        &[
            "setup", &name, "--server", inner, "--jump", bastion, "--yes",
        ],
    )
    .ok();
    let p = profile_json(&home, &name);
    assert_eq!(p["server"]["jump"], bastion);
    assert_eq!(p["server"]["jumps"][0]["host"], "10.232.0.1");
    assert_eq!(p["server"]["jumps"][0]["user"], "shiqi-jump");
    let profile = home.profile(&name);
    let ssh_config = std::fs::read_to_string(profile.join("ssh_config")).expect("ssh_config");
    assert!(
        ssh_config.contains("ProxyJump shiqi-tunnel-jump1")
            && ssh_config.contains("Host shiqi-tunnel-jump1"),
        "{ssh_config}"
    );

    // The built-in tunnel goes through the bastion.
    {
        let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
        up.ok();
        let (status, json) = tunnel.status();
        assert_eq!(status.code, Some(0), "{}", status.all());
        assert_all_ok(&json, &PORTS);
        crate::kafka::assert_round_trip_through_every_broker(s, &profile, &name);
        let who = mariadb_current_user(s, &home, &name).ok();
        assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
        tunnel.down().ok();
    }

    // OpenSSH follows the written ssh_config: ProxyJump to the jump host's own Host block,
    // started by hand and by `tunnel up --openssh`.
    {
        let _tunnel = OpenSshTunnel::open(s, &profile);
        let who = mariadb_current_user(s, &home, &name).ok();
        assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
    }
    {
        let (tunnel, up) = Tunnel::up(s, &home, &name, &["--openssh"]);
        up.ok();
        let who = mariadb_current_user(s, &home, &name).ok();
        assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
        tunnel.down().ok();
    }

    // rotate logs in the same way; doctor's SSH checks reach the server through the bastion.
    let before = p["certificate"]["serial"].clone();
    home.connect(s, &["rotate", &name]).ok();
    assert_ne!(profile_json(&home, &name)["certificate"]["serial"], before);
    let doctor = home.connect(s, &["--json", "doctor", &name]);
    let checks: Value = serde_json::from_str(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor --json ({e}):\n{}", doctor.all()));
    for id in ["ssh.reach", "ssh.host-key", "ssh.login"] {
        let c = checks["checks"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["check"] == id))
            .unwrap_or_else(|| panic!("{id} ran:\n{}", doctor.all()));
        assert_eq!(c["status"], "ok", "{id}: {c}");
    }

    // renew and revoke find the server the way the profile reached it.
    home.connect(s, &["renew", &name]).ok();
    let revoked = home.connect(s, &["--json", "revoke", &name]).ok();
    assert!(revoked.stdout.contains(&name), "{}", revoked.all());
}

/// Adds a `Host` block to the laptop user's ~/.ssh/config and takes it out again on drop.
struct SshConfigEntry<'a> {
    s: &'a Stack,
    alias: String,
}

impl<'a> SshConfigEntry<'a> {
    fn add(s: &'a Stack, alias: &str, body: &str) -> Self {
        let path = format!("{}/.ssh/config", s.info("laptop_home"));
        let block = format!("\n# e2e {alias}\nHost {alias}\n{body}# end {alias}\n");
        s.laptop(
            &["sh", "-c", "cat >> \"$0\" && chmod 600 \"$0\"", &path],
            &[],
            Some(block.as_bytes()),
        )
        .ok();
        Self {
            s,
            alias: alias.to_owned(),
        }
    }
}

impl Drop for SshConfigEntry<'_> {
    fn drop(&mut self) {
        let path = format!("{}/.ssh/config", self.s.info("laptop_home"));
        let script = format!(
            "sed -i '/^# e2e {a}$/,/^# end {a}$/d' \"$0\"",
            a = self.alias
        );
        let _ = self.s.laptop(&["sh", "-c", &script, &path], &[], None);
    }
}

#[test]
fn proxy_jump_in_ssh_config_is_followed_and_an_unknown_bastion_key_is_refused() {
    let s = stack();
    let home = Home::new(s, "pjump");
    let name = unique_name("pjump");
    let alias = unique_name("homelab");
    let _entry = SshConfigEntry::add(
        s,
        &alias,
        &format!(
            "    HostName 10.233.0.1\n    User {}\n    ProxyJump {}\n",
            s.info("server_user"),
            s.info("bastion_destination")
        ),
    );

    // A known_hosts that vouches for the server but not for the bastion: refused at the
    // bastion, before anything reaches the server.
    let kh = home.dir.join("server-only.known_hosts");
    let server_key = std::fs::read_to_string(s.info("server_host_key")).expect("host key");
    let line = format!(
        "10.233.0.1 {}\n",
        server_key
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    );
    s.laptop(
        &["sh", "-c", "cat > \"$0\"", &kh.display().to_string()],
        &[],
        Some(line.as_bytes()),
    )
    .ok();
    let refused = home
        .connect(
            s,
            &[
                "setup",
                &name,
                "--server",
                &alias,
                "--known-hosts",
                &kh.display().to_string(),
                "--yes",
            ],
        )
        .failed();
    assert!(
        refused.stderr.contains("10.232.0.1"),
        "the unknown key is the bastion's:\n{}",
        refused.all()
    );
    assert!(home.leftovers(&name).is_empty());

    // With the laptop's own known_hosts (both keys known) the alias alone is enough.
    home.connect(s, &["setup", &name, "--server", &alias, "--yes"])
        .ok();
    let p = profile_json(&home, &name);
    assert!(p["server"]["jump"].is_null(), "{p}");
    assert_eq!(p["server"]["jumps"][0]["host"], "10.232.0.1");
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let (status, json) = tunnel.status();
    assert_eq!(status.code, Some(0), "{}", status.all());
    assert_all_ok(&json, &PORTS);
}
