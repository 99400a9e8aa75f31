//! Crash safety: `setup`, `rotate` and the agent's `sign` are killed with SIGKILL at random
//! points, 20 times each. After every kill the inventory passes `PRAGMA integrity_check`, no
//! serial repeats, the profile is the old complete one or the new complete one, and the next
//! run succeeds, leaving no staging folder and exactly one valid certificate for the name (the
//! profile's). A certificate issued for a setup that failed is revoked at once.
//!
//! The kill points are random delays within the command's normal duration (measured first), so
//! over 20 trials they land before, during and after the agent's answer and the profile swap.
//! The seed is printed; `SHIQI_CRASH_SEED=N` replays a run.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::setup::Home;
use crate::stack::{Stack, stack, unique_name};

const TRIALS: usize = 20;

/// A small deterministic generator (xorshift64*): the seed alone replays a run.
struct Rng(u64);

impl Rng {
    fn new(label: &str) -> Self {
        let seed = std::env::var("SHIQI_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            })
            | 1;
        eprintln!("{label}: SHIQI_CRASH_SEED={seed}");
        Self(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// `scripts/stack exec …` execs down to the command itself, so the child's pid is the
/// command's, and killing it is a real SIGKILL of `shiqi-connect` or the agent.
fn spawn(s: &Stack, args: &[&str], stdin: Option<&[u8]>) -> Child {
    let mut cmd = Command::new(s.script());
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(bytes) = stdin {
        use std::io::Write as _;
        let _ = child.stdin.take().expect("piped").write_all(bytes);
    }
    child
}

fn kill_after(mut child: Child, delay: Duration) {
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

fn laptop_args<'a>(home: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut full = vec!["exec", "laptop", "--env"];
    full.push(home);
    full.extend(["--", "shiqi-connect"]);
    full.extend_from_slice(args);
    full
}

/// The inventory opens and SQLite finds it sound; serials are unique.
fn inventory_sound(s: &Stack, case: &str) -> Vec<Value> {
    let db = format!("{}/inventory.sqlite", s.info("agent_state_dir"));
    let check = s
        // An agent the killed laptop started may still be finishing on the server: wait for
        // its transaction rather than fail on the lock.
        .server(
            None,
            &[
                "sqlite3",
                "-cmd",
                ".timeout 20000",
                &db,
                "PRAGMA integrity_check;",
            ],
            None,
        )
        .ok();
    assert_eq!(check.stdout.trim(), "ok", "{case}: integrity_check");
    let list: Vec<Value> =
        serde_json::from_str(&s.agent(&["list", "--json"], None).ok().stdout).expect("list");
    let mut serials: Vec<&str> = list.iter().filter_map(|r| r["serial"].as_str()).collect();
    let all = serials.len();
    serials.sort_unstable();
    serials.dedup();
    assert_eq!(serials.len(), all, "{case}: a serial repeats");
    list
}

/// The valid client serials of `name`.
fn valid_of(list: &[Value], name: &str) -> Vec<String> {
    list.iter()
        .filter(|r| r["name"] == name && r["kind"] == "client" && r["status"] == "valid")
        .filter_map(|r| r["serial"].as_str().map(str::to_owned))
        .collect()
}

/// The profile is absent or whole: every file there, the certificate matches the key, and
/// `profile.json` names that certificate. Returns its serial.
fn profile_whole(dir: &Path, files: &[String], case: &str) -> Option<String> {
    if !dir.exists() {
        return None;
    }
    for f in files {
        assert!(
            dir.join(f).exists(),
            "{case}: half a profile, `{f}` is missing"
        );
    }
    let cert = shiqi_ca::cert::Cert::from_pem(
        &std::fs::read_to_string(dir.join("client.crt")).expect("client.crt"),
    )
    .expect("client.crt parses");
    let key = shiqi_ca::key::PrivateKey::from_pem(
        &std::fs::read_to_string(dir.join("client.key")).expect("client.key"),
    )
    .expect("client.key parses");
    assert!(
        cert.matches_key(&key),
        "{case}: key and certificate from two runs"
    );
    let profile: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("profile.json")).expect("json"))
            .expect("profile.json parses");
    let serial = cert.serial().to_hex();
    assert_eq!(
        profile["certificate"]["serial"].as_str(),
        Some(serial.as_str()),
        "{case}: profile.json and client.crt disagree"
    );
    Some(serial)
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("profile")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("tunnel"))
        .collect();
    names.sort();
    names
}

fn no_staging(home: &Home, name: &str, case: &str) {
    let staging: Vec<String> = home
        .leftovers(name)
        .into_iter()
        .filter(|f| f.starts_with('.'))
        .collect();
    assert!(staging.is_empty(), "{case}: staging left: {staging:?}");
    assert!(
        !home
            .dir
            .join(".locks")
            .join(format!("{name}.keys"))
            .exists(),
        "{case}: keys still journaled after a successful run"
    );
}

/// `TRIALS` times: start `args` on the laptop, SIGKILL it after a random share of `normal`,
/// check what it left, then run it again to the end and check that it made everything good.
fn kill_and_rerun(
    s: &Stack,
    home: &Home,
    name: &str,
    args: &[&str],
    normal: Duration,
    label: &str,
) {
    let env = format!("SHIQI_HOME={}", home.env());
    let dir = home.profile(name);
    let files = file_names(&dir);
    let mut rng = Rng::new(label);
    for trial in 0..TRIALS {
        let case = format!("{label} trial {trial}");
        let delay = Duration::from_millis(rng.below(normal.as_millis() as u64 * 11 / 10));
        kill_after(spawn(s, &laptop_args(&env, args), None), delay);
        inventory_sound(s, &case);
        // The old profile or the new one, whole: the swap is a single rename.
        profile_whole(&dir, &files, &case).expect("a profile");

        home.connect(s, args).ok();
        let serial = profile_whole(&dir, &files, &case).expect("a profile");
        no_staging(home, name, &case);
        let list = inventory_sound(s, &case);
        assert_eq!(
            valid_of(&list, name),
            [serial],
            "{case} (killed after {delay:?}): exactly the profile's certificate is valid"
        );
    }
}

#[test]
fn setup_killed_anywhere_is_made_good_by_the_next_run() {
    let s = stack();
    let home = Home::new(s, "crash-setup");
    let name = unique_name("cs");
    let dest = s.info("ssh_destination").to_owned();
    let started = Instant::now();
    home.setup(s, &name, &[]).ok();
    let normal = started.elapsed();
    let args = ["setup", &name, "--server", &dest, "--yes", "--force"];
    kill_and_rerun(s, &home, &name, &args, normal, "setup");
}

#[test]
fn rotate_killed_anywhere_is_made_good_by_the_next_run() {
    let s = stack();
    let home = Home::new(s, "crash-rotate");
    let name = unique_name("cr");
    home.setup(s, &name, &[]).ok();
    let args = ["rotate", &name];
    let started = Instant::now();
    home.connect(s, &args).ok();
    let normal = started.elapsed();
    kill_and_rerun(s, &home, &name, &args, normal, "rotate");
}

#[test]
fn the_agents_sign_killed_anywhere_leaves_a_sound_inventory() {
    let s = stack();
    let dir = s.scratch();
    let name = unique_name("ck");
    let key = shiqi_ca::key::PrivateKey::generate(shiqi_ca::key::KeyType::EcdsaP256).expect("key");
    let csr = shiqi_ca::csr::build(&key, &name.parse().expect("name")).expect("csr");
    let agent = s.info("agent_bin").to_owned();
    let user = s.info("server_user").to_owned();
    let args = [
        "exec", "server", "--user", &user, "--", &agent, "sign", "--name", &name,
    ];
    let started = Instant::now();
    s.agent(&["sign", "--name", &name], Some(csr.as_bytes()))
        .ok();
    let normal = started.elapsed();
    let before = inventory_sound(s, "before").len();
    let mut rng = Rng::new("agent sign");
    for trial in 0..TRIALS {
        let case = format!("sign trial {trial}");
        let delay = Duration::from_millis(rng.below(normal.as_millis() as u64 * 11 / 10));
        kill_after(spawn(s, &args, Some(csr.as_bytes())), delay);
        inventory_sound(s, &case);
        s.agent(&["sign", "--name", &name], Some(csr.as_bytes()))
            .ok();
    }
    let after = inventory_sound(s, "after").len();
    assert!(after >= before + TRIALS, "every rerun issued a certificate");
    drop(dir);
}

/// MySQL down during setup: the certificate issued a moment before is revoked at once.
#[test]
fn a_setup_that_fails_after_signing_revokes_its_certificate() {
    let s = stack();
    let home = Home::new(s, "crash-db");
    let name = unique_name("cd");
    struct Restart<'a>(&'a Stack);
    impl Drop for Restart<'_> {
        fn drop(&mut self) {
            let ok = Command::new(self.0.script())
                .arg("up")
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(ok, "scripts/stack up did not bring MariaDB back");
        }
    }
    let pidfile = format!("{}/server/mysql/run/mysqld.pid", s.info("stack_dir"));
    let _restart = Restart(s);
    s.server(
        None,
        &[
            "bash",
            "-c",
            &format!(
                "kill $(cat {pidfile}); for i in $(seq 50); do [ -e {pidfile} ] || exit 0; sleep 0.2; done; exit 1"
            ),
        ],
        None,
    )
    .ok();
    let out = home.setup(s, &name, &[]).failed();
    assert!(out.stderr.contains("MySQL"), "{}", out.stderr);
    // One `provision` request: the agent said it had issued a certificate before failing.
    assert!(out.stderr.contains("issued certificate"), "{}", out.stderr);
    let list = inventory_sound(s, "mysql down");
    let issued: Vec<&Value> = list
        .iter()
        .filter(|r| r["name"] == name.as_str() && r["kind"] == "client")
        .collect();
    assert_eq!(issued.len(), 1, "setup got one certificate");
    assert_eq!(issued[0]["status"], "revoked", "{:?}", issued[0]);
    assert_eq!(issued[0]["reason"], "superseded", "{:?}", issued[0]);
    assert!(home.leftovers(&name).is_empty());
}
