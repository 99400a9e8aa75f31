//! The agent as admins run it (issue 47): its Debian package installed with dpkg on a Debian 12
//! server that boots systemd (`scripts/systemd-host`: systemd-nspawn, Debian's MariaDB and
//! OpenSSH services), `install` taking its systemd paths there (the packaged CRL timer enabled
//! and run by systemd, `systemctl restart mariadb`), a reboot, and a laptop's `setup` and
//! `tunnel up` against what came back. `scripts/test` runs it after `scripts/dist` made the .deb.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::lifecycle::within;
use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};
use crate::tunnel::{Tunnel, mariadb_current_user};

fn host(s: &Stack, args: &[&str]) -> Out {
    s.systemd_host(args, None)
}

/// What `shiqi-ca-crl.service` wrote to the journal, each run's lines.
fn refresh_journal(s: &Stack) -> String {
    let args = [
        "journalctl",
        "-u",
        "shiqi-ca-crl.service",
        "--no-pager",
        "-o",
        "cat",
    ];
    host(s, &args).ok().stdout
}

/// When the timer last started its service (`n/a` before it ever did).
fn last_trigger(s: &Stack) -> String {
    systemctl(
        s,
        &[
            "show",
            "shiqi-ca-crl.timer",
            "-p",
            "LastTriggerUSec",
            "--value",
        ],
    )
}

fn systemctl(s: &Stack, args: &[&str]) -> String {
    let mut full = vec!["systemctl"];
    full.extend_from_slice(args);
    host(s, &full).stdout.trim().to_owned()
}

/// The .deb scripts/dist made for this machine (or `SHIQI_DEB`).
fn deb(s: &Stack) -> std::path::PathBuf {
    if let Some(deb) = std::env::var_os("SHIQI_DEB") {
        return deb.into();
    }
    let dist = s.repo.join("dist");
    let mut debs: Vec<_> = std::fs::read_dir(&dist)
        .expect("dist/ (scripts/dist)")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("_amd64.deb"))
        })
        .collect();
    assert_eq!(debs.len(), 1, "one amd64 .deb in dist/: {debs:?}");
    debs.remove(0)
}

/// `scripts/systemd-host ARGS`, which must succeed.
pub(crate) fn sysd(s: &Stack, args: &[&str]) {
    let out = std::process::Command::new(s.repo.join("scripts/systemd-host"))
        .args(args)
        .output()
        .expect("scripts/systemd-host runs");
    assert!(
        out.status.success(),
        "scripts/systemd-host {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bare server: a fresh copy of its disk (new host keys, or `host_keys`' files), booted.
fn fresh(s: &Stack, host_keys: Option<&Path>) {
    sysd(s, &["down", "--purge"]);
    match host_keys {
        Some(dir) => sysd(s, &["up", "--host-keys", &dir.display().to_string()]),
        None => sysd(s, &["up"]),
    }
}

/// The .deb installed with dpkg.
fn install_deb(s: &Stack, root: &Path) {
    std::fs::copy(deb(s), root.join("root/shiqi-ca-agent.deb")).expect("copy the .deb");
    host(s, &["dpkg", "-i", "/root/shiqi-ca-agent.deb"]).ok();
}

/// `shiqi-ca-agent install` with saige (the laptop's key) as the first admin, and `extra`.
fn install(s: &Stack, root: &Path, extra: &[&str]) -> Out {
    let key = std::fs::read_to_string(format!("{}.pub", s.info("laptop_ssh_key"))).unwrap();
    std::fs::write(root.join("root/saige.pub"), key).unwrap();
    let mut args = vec![
        "shiqi-ca-agent",
        "install",
        "--admin",
        "saige",
        "--ssh-key",
        "/root/saige.pub",
    ];
    args.extend_from_slice(extra);
    host(s, &args).ok()
}

/// `shiqi-ca-agent ARGS` as the agent's account on the host.
fn agent(s: &Stack, args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut full = vec!["runuser", "-u", "shiqi-ca", "--", "shiqi-ca-agent"];
    full.extend_from_slice(args);
    s.systemd_host(&full, stdin)
}

pub(crate) fn info(s: &Stack, key: &str) -> String {
    let out = std::process::Command::new(s.repo.join("scripts/systemd-host"))
        .arg("info")
        .output()
        .expect("scripts/systemd-host info");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
        .unwrap_or_else(|| panic!("scripts/systemd-host info has no {key}"))
}

#[test]
#[ignore = "needs the .deb from scripts/dist and boots scripts/systemd-host: scripts/test runs it"]
fn the_deb_on_a_systemd_server_installs_runs_its_timer_and_serves_a_laptop_after_a_reboot() {
    let s = stack();
    fresh(s, None);
    let root = Path::new(&info(s, "systemd_host_root")).to_owned();
    let ip = info(s, "systemd_host_ip");

    // The package: dpkg installs it; it enables nothing and makes no account.
    install_deb(s, &root);
    let listed = host(s, &["dpkg", "-L", "shiqi-ca-agent"]).ok().stdout;
    for want in [
        "/usr/bin/shiqi-ca-agent",
        "/usr/share/man/man1/shiqi-ca-agent-install.1.gz",
        "/usr/share/bash-completion/completions/shiqi-ca-agent",
        "/usr/lib/systemd/system/shiqi-ca-crl.timer",
    ] {
        assert!(listed.lines().any(|l| l == want), "{want} in:\n{listed}");
    }
    assert_eq!(
        systemctl(s, &["is-enabled", "shiqi-ca-crl.timer"]),
        "disabled"
    );
    host(s, &["getent", "passwd", "shiqi-ca"]).failed();
    let page = host(
        s,
        &["zcat", "/usr/share/man/man1/shiqi-ca-agent-install.1.gz"],
    )
    .ok();
    assert!(
        page.stdout.contains(".TH shiqi-ca-agent-install 1"),
        "{}",
        page.all()
    );

    // install from the package, on Debian's services.
    let installed = install(s, &root, &[]);
    let said = installed.all();
    for step in ["crl.timer", "mysql.restart", "sshd"] {
        assert!(
            said.lines()
                .any(|l| l.split_whitespace().any(|w| w == step) && l.contains("done")),
            "{step} done:\n{said}"
        );
    }
    assert!(said.contains("restarted mariadb"), "{said}");
    // The package's units are the ones enabled: no copy in /etc.
    assert!(
        !root.join("etc/systemd/system/shiqi-ca-crl.timer").exists(),
        "{said}"
    );
    assert_eq!(
        systemctl(s, &["is-enabled", "shiqi-ca-crl.timer"]),
        "enabled"
    );
    assert_eq!(systemctl(s, &["is-active", "shiqi-ca-crl.timer"]), "active");
    // What the timer starts, started by systemd, in the journal as the agent's account.
    host(s, &["systemctl", "start", "shiqi-ca-crl.service"]).ok();
    let journal = refresh_journal(s);
    assert!(
        journal.contains("CRL #") && (journal.contains("fresh") || journal.contains("wrote")),
        "{journal}"
    );
    let next = systemctl(
        s,
        &[
            "show",
            "shiqi-ca-crl.timer",
            "-p",
            "NextElapseUSecRealtime",
            "--value",
        ],
    );
    assert!(
        !next.is_empty() && next != "n/a",
        "the timer has its next run: {next:?}"
    );
    // The timer itself fires the service: for this test only, a drop-in moves its next run to
    // two seconds after it starts (the clock is the machine's, so it cannot be moved instead).
    let never = last_trigger(s);
    let dropin = root.join("etc/systemd/system/shiqi-ca-crl.timer.d");
    std::fs::create_dir_all(&dropin).unwrap();
    std::fs::write(
        dropin.join("e2e.conf"),
        "[Timer]\nOnCalendar=\nOnActiveSec=2s\nAccuracySec=1s\nRandomizedDelaySec=0\n",
    )
    .unwrap();
    host(s, &["systemctl", "daemon-reload"]).ok();
    host(s, &["systemctl", "restart", "shiqi-ca-crl.timer"]).ok();
    let mut fired = String::new();
    within(Duration::from_secs(30), || {
        fired = last_trigger(s);
        fired != never && fired != "n/a"
    });
    assert!(
        fired != never && fired != "n/a",
        "the timer fired: {never:?} -> {fired:?}"
    );
    // Its run's lines reach the journal once the service has run (the trigger comes first).
    let mut runs = String::new();
    within(Duration::from_secs(30), || {
        runs = refresh_journal(s);
        runs.matches("CRL #").count() >= 2
    });
    assert!(
        runs.matches("CRL #").count() >= 2,
        "the manual run and the timer's are in the journal:\n{runs}"
    );
    std::fs::remove_dir_all(&dropin).unwrap();
    host(s, &["systemctl", "daemon-reload"]).ok();
    host(s, &["systemctl", "restart", "shiqi-ca-crl.timer"]).ok();
    // A second install changes nothing.
    let again = install(s, &root, &[]);
    assert!(
        again.stdout.contains("nothing to change"),
        "{}",
        again.all()
    );

    // A reboot: sshd, MariaDB and the timer come back by themselves.
    sysd(s, &["reboot"]);
    for unit in ["ssh.service", "mariadb.service", "shiqi-ca-crl.timer"] {
        assert_eq!(
            systemctl(s, &["is-active", unit]),
            "active",
            "{unit} after the reboot"
        );
    }

    // A laptop sets up against it and reaches MariaDB through the tunnel.
    let home = Home::new(s, "sysd");
    let name = unique_name("sysd");
    let out = home.setup_at(s, &format!("shiqi-ca@{ip}"), &name, &[]).ok();
    assert!(
        out.all().contains("no Kafka brokers known"),
        "{}",
        out.all()
    );
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let who = mariadb_current_user(s, &home, &name).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
    drop(tunnel);
}

#[test]
#[ignore = "needs the .deb from scripts/dist and boots scripts/systemd-host: scripts/test runs it"]
fn a_backup_restored_on_a_new_server_keeps_every_laptop_working_and_every_revocation() {
    let s = stack();
    fresh(s, None);
    let root = Path::new(&info(s, "systemd_host_root")).to_owned();
    let server = format!("shiqi-ca@{}", info(s, "systemd_host_ip"));
    install_deb(s, &root);
    install(s, &root, &[]);

    // Two profiles on the laptop; one is revoked before the backup.
    let home = Home::new(s, "restore");
    let (kept, gone) = (unique_name("kept"), unique_name("gone"));
    home.setup_at(s, &server, &kept, &[]).ok();
    home.setup_at(s, &server, &gone, &[]).ok();
    home.connect(s, &["revoke", &gone, "--server", &server, "--yes"])
        .ok();
    let listed = |s: &Stack| -> Vec<Value> {
        serde_json::from_str(&agent(s, &["list", "--json"], None).ok().stdout).expect("list --json")
    };
    let serials = |rows: &[Value], name: &str, status: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["name"] == name && r["status"] == status)
            .filter_map(|r| r["serial"].as_str().map(str::to_owned))
            .collect()
    };
    let before = listed(s);
    let revoked = serials(&before, &gone, "revoked");
    assert_eq!(revoked.len(), 1, "{before:#?}");
    let crl_before = crl_number(&agent(s, &["crl"], None).ok().all());

    // The backup leaves the server; the server is lost. A new VM with the old one's host keys
    // (as an admin moving a server keeps them), nothing else.
    let pass = b"correct horse battery staple, twice over\n";
    agent(
        s,
        &[
            "backup",
            "--out",
            "/var/lib/shiqi-ca/ca.age",
            "--passphrase-file",
            "-",
        ],
        Some(pass),
    )
    .ok();
    let saved = tempfile::tempdir().unwrap();
    std::fs::copy(
        root.join("var/lib/shiqi-ca/ca.age"),
        saved.path().join("ca.age"),
    )
    .unwrap();
    let keys = saved.path().join("ssh");
    std::fs::create_dir(&keys).unwrap();
    for entry in std::fs::read_dir(root.join("etc/ssh"))
        .unwrap()
        .filter_map(Result::ok)
    {
        if entry.file_name().to_string_lossy().starts_with("ssh_host_") {
            std::fs::copy(entry.path(), keys.join(entry.file_name())).unwrap();
        }
    }
    fresh(s, Some(&keys));
    host(s, &["getent", "passwd", "shiqi-ca"]).failed();
    install_deb(s, &root);
    std::fs::copy(saved.path().join("ca.age"), root.join("root/ca.age")).unwrap();
    std::fs::write(root.join("root/pass"), pass).unwrap();
    let restored = install(
        s,
        &root,
        &[
            "--restore",
            "/root/ca.age",
            "--passphrase-file",
            "/root/pass",
        ],
    );
    assert!(restored.all().contains("restore"), "{}", restored.all());

    // The same CA, its certificates and revocations; CRL numbers go on past the old ones.
    let after = listed(s);
    for row in &before {
        assert!(
            after.contains(row),
            "{row:#} in the restored inventory:\n{after:#?}"
        );
    }
    let crl_after = crl_number(&agent(s, &["crl"], None).ok().all());
    assert!(
        crl_after > crl_before,
        "CRL #{crl_after} after #{crl_before}"
    );

    // The laptop's existing profile against the restored server: its tunnel, a rotation (which
    // makes its MySQL user on the new MariaDB), a login, then its revocation.
    let (tunnel, up) = Tunnel::up(s, &home, &kept, &[]);
    up.ok();
    home.connect(s, &["rotate", &kept, "--yes"]).ok();
    let who = mariadb_current_user(s, &home, &kept).ok();
    assert_eq!(who.stdout.trim(), format!("{kept}@127.0.0.1"));
    home.connect(s, &["revoke", &kept, "--server", &server, "--yes"])
        .ok();
    mariadb_current_user(s, &home, &kept).failed();
    drop(tunnel);
    let last = listed(s);
    assert!(serials(&last, &kept, "valid").is_empty(), "{last:#?}");
    assert_eq!(
        serials(&last, &gone, "revoked"),
        revoked,
        "the old revocation stays"
    );
    // No serial was signed twice across the move.
    let mut all: Vec<_> = last.iter().filter_map(|r| r["serial"].as_str()).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "{last:#?}");
}

/// The number in `CRL #N` of the agent's `crl` output.
fn crl_number(said: &str) -> u64 {
    said.split("CRL #")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no CRL number in: {said}"))
}
