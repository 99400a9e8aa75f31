//! Issue 48, part 1 on Linux: `tunnel up NAME --at-login` writes a systemd user unit that
//! systemd accepts, enabled the way `systemctl --user enable` does; the command it runs is the
//! profile's tunnel (started here by hand, since the stack's laptop has no user manager), which
//! SIGTERM stops cleanly (exit 0: `Restart=on-failure` leaves it stopped); `status` shows it, and
//! `tunnel down NAME --at-login` removes it.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::lifecycle::{Background, within};
use crate::setup::Home;
use crate::stack::{stack, unique_name};

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
