//! Issue 48, part 1 on Linux: `tunnel up NAME --at-login` writes a systemd user unit that
//! systemd accepts, enabled the way `systemctl --user enable` does; the command it runs is the
//! profile's tunnel (started here by hand, since the stack's laptop has no user manager), which
//! SIGTERM stops cleanly (exit 0: `Restart=on-failure` leaves it stopped); `status` shows it, and
//! `tunnel down NAME --at-login` removes it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::lifecycle::{Background, within};
use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};
use crate::systemd_host::{info, sysd};

/// The `ExecStart=` line's words (each written in double quotes).
fn exec_start(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    line.split("\" \"")
        .map(|w| w.trim_matches('"').to_owned())
        .collect()
}

#[test]
fn a_tunnel_at_login_is_a_user_unit_systemd_accepts_and_runs_the_profiles_tunnel() {
    let s = stack();
    let home = Home::new(s, "at-login");
    let name = unique_name("al");
    home.setup(s, &name, &[]).ok();
    let out = home.connect(s, &["tunnel", "up", &name, "--at-login"]).ok();
    let unit_path = Path::new(s.info("laptop_home"))
        .join(".config/systemd/user")
        .join(format!("shiqi-tunnel-{name}.service"));
    assert!(
        out.stderr.contains(&format!("shiqi-tunnel-{name}.service")),
        "{}",
        out.all()
    );
    // No user manager runs in the stack's laptop: the unit waits for the next login.
    assert!(out.stderr.contains("from your next login"), "{}", out.all());
    let unit = std::fs::read_to_string(&unit_path).expect("the unit is written");
    let wants = unit_path
        .with_file_name("default.target.wants")
        .join(format!("shiqi-tunnel-{name}.service"));
    assert_eq!(
        std::fs::read_link(&wants).expect("enabled"),
        unit_path,
        "enabled for default.target"
    );

    // systemd's own reading of it, as the laptop's user.
    let path = unit_path.display().to_string();
    let scratch = home.dir.display().to_string();
    let verify = s.laptop(
        &["systemd-analyze", "verify", "--user", &path],
        &[("XDG_RUNTIME_DIR", &scratch)],
        None,
    );
    assert!(verify.success(), "{}", verify.all());

    // `status` names it.
    let status = home.connect(s, &["--json", "status"]).ok();
    let rows: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == name.as_str()))
        .cloned()
        .unwrap_or_default();
    assert!(
        row["at_login"]
            .as_str()
            .is_some_and(|a| a.contains("systemd user unit")),
        "{row:#}"
    );

    // What the manager would run is this profile's tunnel: down the one `up` started, then the
    // unit's command line by hand.
    home.connect(s, &["tunnel", "down", &name]).ok();
    let words = exec_start(&unit);
    let command = words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let run = Background::start(s, home.dir.join("unit-run.log"), &command);
    let up = within(Duration::from_secs(30), || {
        let st = home.connect(s, &["--json", "tunnel", "status", &name]);
        serde_json::from_str::<Value>(&st.stdout)
            .is_ok_and(|v| v["tunnel"]["kind"] == "shiqi-connect" && v["tunnel"]["phase"] == "up")
    });
    assert!(
        up.is_some(),
        "the unit's command runs the tunnel:\n{}",
        run.log()
    );
    // `tunnel down` stops it with SIGTERM; it exits 0, which `Restart=on-failure` leaves alone.
    home.connect(s, &["tunnel", "down", &name]).ok();
    assert!(
        within(Duration::from_secs(10), || !run.alive()).is_some(),
        "the tunnel exits on SIGTERM"
    );

    let out = home
        .connect(s, &["tunnel", "down", &name, "--at-login"])
        .ok();
    assert!(out.stderr.contains("removed"), "{}", out.all());
    assert!(!unit_path.exists() && std::fs::symlink_metadata(&wants).is_err());
    let out = home
        .connect(s, &["tunnel", "down", &name, "--at-login"])
        .ok();
    assert!(
        out.stderr.contains("nothing starts the tunnel"),
        "{}",
        out.all()
    );
    home.connect(s, &["revoke", &name]).ok();
}

/// A laptop that boots systemd (`scripts/systemd-host laptop`), with the stack laptop's user,
/// its SSH files and the static `shiqi-connect`.
struct BootedLaptop<'a> {
    s: &'a Stack,
    user: String,
    uid: u32,
}

impl<'a> BootedLaptop<'a> {
    fn boot(s: &'a Stack) -> Self {
        sysd(s, &["laptop", "down", "--purge"]);
        sysd(s, &["laptop", "up"]);
        let root = std::path::PathBuf::from(info(s, "systemd_laptop_root"));
        let user = s.info("laptop_user").to_owned();
        let home = Path::new(s.info("laptop_home"));
        let uid = std::fs::metadata(home).expect("the laptop's home").uid();
        let m = Self { s, user, uid };
        m.root(&[
            "useradd",
            "-m",
            "-u",
            &uid.to_string(),
            "-s",
            "/bin/sh",
            &m.user,
        ]);
        // The binary under test must run on Debian 12's libc: scripts/test gives dist/'s static one.
        let bin = std::env::var_os("SHIQI_CONNECT_BIN").expect("SHIQI_CONNECT_BIN");
        let placed = root.join("usr/local/bin/shiqi-connect");
        std::fs::copy(&bin, &placed).expect("copy shiqi-connect into the machine");
        let ssh = root.join(format!("home/{}/.ssh", m.user));
        std::fs::create_dir_all(&ssh).unwrap();
        for entry in std::fs::read_dir(home.join(".ssh")).expect("the laptop's ~/.ssh") {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), ssh.join(entry.file_name())).unwrap();
            }
        }
        let dot_ssh = format!("/home/{}/.ssh", m.user);
        m.root(&["chown", "-R", &format!("{0}:{0}", m.user), &dot_ssh]);
        m.root(&["chmod", "-R", "go-rwx", &dot_ssh]);
        let version = m.as_user(&["shiqi-connect", "--version"]);
        assert!(
            version.success(),
            "shiqi-connect does not run on the machine (a static build is needed: scripts/dist): {}",
            version.all()
        );
        m
    }

    /// ARGS as root; must succeed.
    #[track_caller]
    fn root(&self, args: &[&str]) -> Out {
        self.s.systemd_laptop(args, None).ok()
    }

    /// ARGS as the user, with what a login session has (HOME, the user manager's runtime dir).
    fn as_user(&self, args: &[&str]) -> Out {
        let home = format!("HOME=/home/{}", self.user);
        let runtime = format!("XDG_RUNTIME_DIR=/run/user/{}", self.uid);
        let mut full = vec!["runuser", "-u", &self.user, "--", "env", &home, &runtime];
        full.extend_from_slice(args);
        self.s.systemd_laptop(&full, None)
    }

    /// The unit's main process as the user manager sees it (0: none), once it is active.
    fn active_pid(&self, unit: &str) -> Option<u32> {
        let active = self.as_user(&["systemctl", "--user", "is-active", unit]);
        if active.stdout.trim() != "active" {
            return None;
        }
        let pid = self.as_user(&[
            "systemctl",
            "--user",
            "show",
            "-p",
            "MainPID",
            "--value",
            unit,
        ]);
        pid.stdout.trim().parse().ok().filter(|p| *p != 0)
    }

    /// The profile's tunnel is up (its own status says so) under process `pid`.
    fn tunnel_up(&self, name: &str, pid: u32) -> bool {
        let st = self.as_user(&["shiqi-connect", "--json", "tunnel", "status", name]);
        serde_json::from_str::<Value>(&st.stdout).is_ok_and(|v| {
            v["tunnel"]["phase"] == "up" && v["tunnel"]["pid"].as_u64() == Some(u64::from(pid))
        })
    }

    /// Waits for the unit to run the tunnel with a main process other than `not`.
    fn wait_up(&self, name: &str, unit: &str, not: Option<u32>, what: &str) -> u32 {
        let mut seen = None;
        let took = within(Duration::from_secs(90), || {
            seen = self.active_pid(unit).filter(|p| Some(*p) != not);
            seen.is_some_and(|p| self.tunnel_up(name, p))
        });
        if took.is_none() {
            let journal = self.root(&["journalctl", "--no-pager", "-n", "40"]);
            let status = self.as_user(&["systemctl", "--user", "status", unit]);
            panic!(
                "{what}: the unit did not run the tunnel in 90 s (main pid {seen:?})\n{}\n{}",
                status.all(),
                journal.stdout
            );
        }
        seen.unwrap()
    }
}

/// Issue 48's done-when on a machine with a real user manager: the unit `--at-login` wrote is
/// started when the user's manager starts (a lingering user's manager starts at boot, as a
/// login starts it), restarted by systemd after the tunnel is killed, and started again after
/// the machine reboots.
#[test]
#[ignore = "boots scripts/systemd-host's laptop and needs the static binary from dist/: scripts/test runs it"]
fn a_user_manager_starts_the_tunnel_at_login_and_again_after_a_kill_and_a_reboot() {
    let s = stack();
    let m = BootedLaptop::boot(s);
    let name = unique_name("sl");
    let unit = format!("shiqi-tunnel-{name}.service");
    m.as_user(&[
        "shiqi-connect",
        "setup",
        &name,
        "--server",
        s.info("ssh_destination"),
        "--yes",
    ])
    .ok();
    // Written and enabled with no manager running yet (nobody is logged in): from the next login.
    let out = m
        .as_user(&["shiqi-connect", "tunnel", "up", &name, "--at-login"])
        .ok();
    assert!(out.stderr.contains(&unit), "{}", out.all());
    // The tunnel `up` started itself goes: the manager's is the one under test.
    m.as_user(&["shiqi-connect", "tunnel", "down", &name]).ok();

    // The user's manager starts (what a login does; linger does it now and at every boot).
    m.root(&["loginctl", "enable-linger", &m.user]);
    let first = m.wait_up(&name, &unit, None, "at login");
    let listed = m.as_user(&["shiqi-connect", "--json", "status"]).ok();
    assert!(
        listed.stdout.contains("systemd user unit"),
        "{}",
        listed.all()
    );

    // Killed: systemd starts it again (Restart=on-failure, RestartSec=10).
    m.root(&["kill", "-KILL", &first.to_string()]);
    let second = m.wait_up(&name, &unit, Some(first), "after a kill");

    // A reboot: the manager starts at boot and the tunnel with it.
    sysd(s, &["laptop", "reboot"]);
    m.wait_up(&name, &unit, Some(second), "after a reboot");

    // Removed: stopped by `tunnel down`, and nothing starts it at the next boot.
    m.as_user(&["shiqi-connect", "tunnel", "down", &name]).ok();
    let out = m
        .as_user(&["shiqi-connect", "tunnel", "down", &name, "--at-login"])
        .ok();
    assert!(out.stderr.contains("removed"), "{}", out.all());
    m.as_user(&["shiqi-connect", "revoke", &name]).ok();
    sysd(s, &["laptop", "down", "--purge"]);
}
