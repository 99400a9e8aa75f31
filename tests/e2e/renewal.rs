//! Issue 42, parts 4 and 5: a renewal that keeps failing never locks the user out, and every
//! writer of a profile goes through the one lock, so a rotation run by hand while the tunnel
//! renews leaves exactly one live certificate. The tunnel runs with `SHIQI_RENEW_RETRY_SECS`
//! (docs/design.md): it checks and retries every few seconds instead of backing off to an hour.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::lifecycle::{mysql_root, serial_of, within};
use crate::setup::Home;
use crate::stack::{Stack, stack, unique_name};

/// The daemon's renewal checks and retries, in seconds, for these tests.
const RETRY_SECS: &str = "2";

/// `tunnel up NAME` with the fast renewal knob (the daemon inherits the environment).
struct FastTunnel<'a> {
    s: &'a Stack,
    home: &'a Home,
    name: String,
}

impl<'a> FastTunnel<'a> {
    fn up(s: &'a Stack, home: &'a Home, name: &str, every: &str) -> Self {
        s.laptop(
            &["shiqi-connect", "tunnel", "up", name],
            &[
                ("SHIQI_HOME", &home.env()),
                ("SHIQI_RENEW_RETRY_SECS", every),
            ],
            None,
        )
        .ok();
        Self {
            s,
            home,
            name: name.to_owned(),
        }
    }

    /// `tunnel status --json`'s `renewal` object (null before the first check).
    fn renewal(&self) -> Value {
        let out = self
            .home
            .connect(self.s, &["--json", "tunnel", "status", &self.name]);
        let json: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        json["tunnel"]["renewal"].clone()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.profile(&self.name).join("tunnel.log"))
            .unwrap_or_default()
    }
}

impl Drop for FastTunnel<'_> {
    fn drop(&mut self) {
        let _ = self.home.connect(self.s, &["tunnel", "down", &self.name]);
    }
}

/// Makes the profile's certificate due for renewal (29 of 30 days gone), as the other renewal
/// e2e do: the daemon reads `profile.json` at each check.
fn make_due(profile: &Path) {
    let path = profile.join("profile.json");
    let mut p: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let now = time::OffsetDateTime::now_utc();
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .expect("format")
    };
    p["certificate"]["not_before"] = rfc(now - time::Duration::days(29)).into();
    p["certificate"]["not_after"] = rfc(now + time::Duration::days(1)).into();
    std::fs::write(&path, serde_json::to_string_pretty(&p).expect("json")).expect("write");
}

/// Every client certificate the agent's inventory has for `name`.
fn certificates(s: &Stack, name: &str) -> Vec<Value> {
    let out = s.agent(&["list", "--json", "--name", name], None).ok();
    let list: Value = serde_json::from_str(&out.stdout).expect("list JSON");
    list.as_array().cloned().unwrap_or_default()
}

/// The serials of `name`'s live certificates: not revoked, not expired.
fn live(s: &Stack, name: &str) -> Vec<String> {
    let now = time::OffsetDateTime::now_utc();
    certificates(s, name)
        .iter()
        .filter(|r| r["status"] == "valid")
        .filter(|r| {
            r["not_after"].as_str().is_some_and(|t| {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .is_ok_and(|t| t > now)
            })
        })
        .filter_map(|r| r["serial"].as_str().map(str::to_lowercase))
        .collect()
}

/// `ACCOUNT LOCK` (or `UNLOCK`) on every MariaDB account of `name`: MariaDB then refuses every
/// certificate of the name, the current one too, as a server with a broken account would.
fn mysql_lock(s: &Stack, name: &str, lock: bool) {
    let accounts = mysql_root(
        s,
        &format!(
            "SELECT CONCAT(\"'\", User, \"'@'\", Host, \"'\") FROM mysql.user WHERE User = '{name}'"
        ),
    );
    assert!(!accounts.trim().is_empty(), "no MariaDB account `{name}`");
    let what = if lock { "LOCK" } else { "UNLOCK" };
    for account in accounts.lines().filter(|l| !l.trim().is_empty()) {
        mysql_root(s, &format!("ALTER USER {account} ACCOUNT {what}"));
    }
}

// Seed: issue 42 part 4. Every failed attempt signed a certificate and revoked it again, forever:
// after ~19 attempts `certificates_per_name` refused renew, rotate and setup for a month.
#[test]
fn a_failing_renewal_signs_at_most_two_certificates_and_recovers() {
    let s = stack();
    let home = Home::new(s, "renewal");
    let name = unique_name("rf");
    home.setup(s, &name, &[]).ok();
    let profile = home.profile(&name);
    let tunnel = FastTunnel::up(s, &home, &name, RETRY_SECS);
    let issued_before = certificates(s, &name).len();
    let old_serial = serial_of(&profile);

    mysql_lock(s, &name, true);
    make_due(&profile);
    let failed = within(Duration::from_secs(150), || {
        tunnel.renewal()["attempts"].as_u64().unwrap_or_default() >= 10
    });
    assert!(
        failed.is_some(),
        "the tunnel did not fail 10 renewals:\n{:#}\n{}",
        tunnel.renewal(),
        tunnel.log()
    );
    let renewal = tunnel.renewal();
    let issued = certificates(s, &name).len() - issued_before;
    assert!(
        issued <= 2,
        "{issued} certificates were signed for 10 failed renewals:\n{renewal:#}"
    );
    // Nothing was signed: the servers refuse the current certificate too, and say so.
    let error = renewal["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("refuses the current certificate too"),
        "{renewal:#}"
    );
    assert_eq!(serial_of(&profile), old_serial);
    let status = home.connect(s, &["tunnel", "status", &name]);
    assert!(
        status.stdout.contains("renewal failing") && status.stdout.contains("hint: "),
        "{}",
        status.all()
    );
    let doctor = home.connect(s, &["doctor", &name]);
    assert!(
        doctor.all().contains("renewing this certificate fails"),
        "{}",
        doctor.all()
    );
    // Nothing to revoke or to count against the name: the current certificate is its only one.
    assert_eq!(live(s, &name), [old_serial.to_lowercase()]);

    // The server is back: the next attempt renews, and only the new certificate is live.
    mysql_lock(s, &name, false);
    let renewed = within(Duration::from_secs(60), || {
        serial_of(&profile) != old_serial
    });
    assert!(
        renewed.is_some(),
        "no renewal once MariaDB took the certificate again:\n{:#}\n{}",
        tunnel.renewal(),
        tunnel.log()
    );
    let done = within(Duration::from_secs(30), || {
        tunnel.renewal()["last"].as_str().is_some()
    });
    assert!(done.is_some(), "{:#}", tunnel.renewal());
    assert_eq!(live(s, &name), [serial_of(&profile).to_lowercase()]);
    assert!(
        certificates(s, &name).len() - issued_before <= 2,
        "{:#?}",
        certificates(s, &name)
    );
}

/// Starts `shiqi-connect rotate NAME EXTRA` in the background and stops it (SIGSTOP) as soon as
/// it has a TCP connection (`ss -p`, polled): it has read `profile.json` by then (it reads it to
/// know where to log in) and has not finished logging in, let alone taken the profile's lock.
/// (Not its first socket of any kind: looking up the account may open one before that.) Its
/// pid, and where its output goes.
fn rotate_stopped_before_login(s: &Stack, home: &Home, name: &str, extra: &str) -> (u32, String) {
    let log = home.dir.join(format!("rotate-{}.log", unique_name("r")));
    let script = format!(
        r#"( exec setsid nohup env SHIQI_HOME={home} shiqi-connect rotate {name} {extra} ) >{log} 2>&1 </dev/null &
pid=$!
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ]; do
    if ss -Htnp 2>/dev/null | grep -q "pid=$pid,"; then kill -STOP $pid; echo $pid; exit 0; fi
    kill -0 $pid 2>/dev/null || break
done
echo "rotate (pid $pid) opened no TCP connection" >&2
exit 1"#,
        home = home.env(),
        log = log.display(),
    );
    let out = s.laptop(&["bash", "-c", &script], &[], None).ok();
    let pid = out.stdout.trim().parse().expect("pid");
    (pid, log.display().to_string())
}

/// Lets a stopped process go on and waits for it to end.
fn resume_and_wait(s: &Stack, pid: u32) {
    s.laptop(&["kill", "-CONT", &pid.to_string()], &[], None)
        .ok();
    let ended = within(Duration::from_secs(120), || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
    assert!(ended.is_some(), "rotate (pid {pid}) did not end");
}

// Seed: issue 42 part 5. `rotate` read `profile.json` before the lock; when the tunnel renewed
// in between, it replaced the serial the renewal had already revoked (the agent took that), and
// the renewal's certificate stayed valid and nobody's; `--compromised` revoked the wrong one.
#[test]
fn rotate_racing_the_tunnels_renewal_leaves_one_live_certificate() {
    let s = stack();
    let home = Home::new(s, "renewal");
    let name = unique_name("rr");
    home.setup(s, &name, &[]).ok();
    let profile = home.profile(&name);
    let tunnel = FastTunnel::up(s, &home, &name, "1");

    for extra in ["", "--compromised"] {
        let before = serial_of(&profile);
        // The rotation has read the profile; the tunnel renews it now, all the way through.
        let (pid, log) = rotate_stopped_before_login(s, &home, &name, extra);
        make_due(&profile);
        let renewed = within(Duration::from_secs(60), || {
            tunnel.renewal()["last"]
                .as_str()
                .is_some_and(|l| l.contains(&format!("serial {before} → ")))
        });
        assert!(
            renewed.is_some(),
            "the tunnel did not renew while `rotate {extra}` waited:\n{:#}\n{}",
            tunnel.renewal(),
            tunnel.log()
        );
        let by_tunnel = serial_of(&profile);
        assert_ne!(by_tunnel, before);
        resume_and_wait(s, pid);
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!out.contains("error:"), "`rotate {extra}` failed:\n{out}");
        let rotated = serial_of(&profile);
        assert_ne!(
            rotated, by_tunnel,
            "`rotate {extra}` changed nothing:\n{out}"
        );
        assert_eq!(
            live(s, &name),
            [rotated.to_lowercase()],
            "after `rotate {extra}` raced the renewal:\n{out}\n{:#?}",
            certificates(s, &name)
        );
        if extra == "--compromised" {
            // The certificate the profile held when the rotation ran is the one revoked as
            // compromised: the tunnel's, not the one the rotation had read.
            let revoked = certificates(s, &name).into_iter().find(|r| {
                r["serial"].as_str().map(str::to_lowercase) == Some(by_tunnel.to_lowercase())
            });
            let reason = revoked
                .as_ref()
                .and_then(|r| r["reason"].as_str())
                .unwrap_or_default()
                .to_owned();
            assert_eq!(reason, "key-compromise", "{revoked:#?}");
        }
    }
}
