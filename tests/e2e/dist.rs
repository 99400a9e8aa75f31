//! The release archives (`scripts/dist`), placed by `install.sh`: the static `shiqi-connect` on
//! the laptop and the static agent on the server run setup, the tunnel, Kafka and MySQL through
//! it, and doctor. scripts/test runs this after `scripts/dist --target x86_64-unknown-linux-musl`
//! and a `scripts/stack up` with both binaries from the archives (SHIQI_CONNECT_BIN and
//! SHIQI_AGENT_BIN pointing at install.sh's copies), so it is ignored in the main run.

use crate::setup::Home;
use crate::stack::{Stack, stack, unique_name};
use crate::tunnel::{Tunnel, mariadb_current_user};

/// `ldd`'s and `file`'s word for a binary that needs no loader and no shared library.
fn assert_static(path: &str) {
    let ldd = std::process::Command::new("ldd")
        .arg(path)
        .output()
        .expect("ldd runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    assert!(
        said.contains("not a dynamic executable"),
        "ldd {path}: {said}"
    );
    let file = std::process::Command::new("file")
        .args(["-b", path])
        .output()
        .expect("file runs");
    let file = String::from_utf8_lossy(&file.stdout);
    assert!(
        file.contains("statically linked") && file.contains("x86-64"),
        "{path}: {file}"
    );
}

fn sha256(path: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    assert!(out.status.success(), "sha256sum {path}: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
#[ignore = "scripts/test runs it with the binaries from dist/ (after scripts/dist)"]
fn the_static_release_binaries_run_the_journey() {
    let s = stack();
    // What the stack runs is what install.sh placed from dist/, byte for byte, and static.
    let given = |var: &str| std::env::var(var).unwrap_or_else(|_| panic!("{var} is set"));
    let (connect, agent) = (given("SHIQI_CONNECT_BIN"), given("SHIQI_AGENT_BIN"));
    for bin in [&connect, &agent] {
        assert!(
            !bin.contains("/target/"),
            "{bin} is a build output, not the archive's copy"
        );
        assert_static(bin);
    }
    let on_laptop = s
        .laptop(&["sh", "-c", "command -v shiqi-connect"], &[], None)
        .ok();
    let on_laptop = on_laptop.stdout.trim();
    assert_eq!(
        sha256(on_laptop),
        sha256(&connect),
        "the laptop's shiqi-connect"
    );
    assert_eq!(
        sha256(s.info("agent_bin")),
        sha256(&agent),
        "the server's agent"
    );
    // Built from this commit, or (kept by `scripts/dist --reuse`) from one whose inputs are
    // this commit's (`scripts/dist --inputs`): a stale archive in dist/ would name another.
    let head = git(s, &["rev-parse", "HEAD"]);
    let buildinfo = std::fs::read_to_string(s.repo.join("dist/BUILDINFO")).expect("dist/BUILDINFO");
    let built = buildinfo
        .lines()
        .find_map(|l| l.split_once(", commit ").map(|(_, c)| c.trim().to_owned()))
        .unwrap_or_else(|| panic!("no commit in dist/BUILDINFO: {buildinfo}"));
    if built != head {
        let inputs = std::process::Command::new(s.repo.join("scripts/dist"))
            .arg("--inputs")
            .output()
            .expect("scripts/dist --inputs");
        let inputs = String::from_utf8_lossy(&inputs.stdout).into_owned();
        let mut diff = vec!["diff", "--stat", built.as_str(), "HEAD", "--"];
        diff.extend(inputs.lines());
        assert_eq!(
            git(s, &diff),
            "",
            "the kept archives were built at {built}, whose inputs differ from HEAD's"
        );
    }
    let version = s.laptop(&["shiqi-connect", "--version"], &[], None).ok();
    assert!(
        version.stdout.contains(&format!("({}", &built[..12]))
            && version.stdout.contains("x86_64-unknown-linux-musl"),
        "{} (built at {built}, HEAD {head})",
        version.stdout
    );

    let home = Home::new(s, "dist");
    let name = unique_name("dist");
    home.setup(s, &name, &[]).ok();
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    crate::kafka::assert_round_trip_through_every_broker(s, &home.profile(&name), &name);
    let who = mariadb_current_user(s, &home, &name).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));
    let doctor = home.connect(s, &["doctor", &name]);
    assert_eq!(doctor.code, Some(0), "{}", doctor.all());
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.contains("agent.version") && l.contains("x86_64-unknown-linux-musl")),
        "{}",
        doctor.stdout
    );
    tunnel.down().ok();
}

/// `install.sh` places the archive's binary only when its SHA-256 is the one `SHA256SUMS` lists.
#[test]
#[ignore = "scripts/test runs it after scripts/dist"]
fn install_sh_checks_the_archive_before_placing_the_binary() {
    let s = stack();
    let dist = s.repo.join("dist");
    let scratch = tempfile::tempdir().expect("tempdir");
    let run = |from: &std::path::Path, prefix: &std::path::Path| {
        std::process::Command::new("sh")
            .arg(s.repo.join("install.sh"))
            .arg("--from")
            .arg(from)
            .arg("--prefix")
            .arg(prefix)
            .output()
            .expect("install.sh runs")
    };
    let good = scratch.path().join("good");
    let out = run(&dist, &good);
    assert!(out.status.success(), "{out:?}");
    let placed = good.join("bin/shiqi-connect");
    assert_static(placed.to_str().expect("utf-8"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("x86_64-unknown-linux-musl"));

    // One byte changed in a copy of the folder, in the archive SHA256SUMS names for this
    // machine: refused, and the binary already installed is left as it was.
    let copy = scratch.path().join("copy");
    std::fs::create_dir(&copy).expect("mkdir");
    for entry in std::fs::read_dir(&dist).expect("dist/") {
        let entry = entry.expect("entry");
        if entry.path().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).expect("copy");
        }
    }
    let sums = std::fs::read_to_string(copy.join("SHA256SUMS")).expect("SHA256SUMS");
    let named = sums
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .find(|n| {
            n.starts_with("shiqi-connect-") && n.ends_with("-x86_64-unknown-linux-musl.tar.gz")
        })
        .expect("SHA256SUMS names the x86_64 archive");
    let archive = copy.join(named);
    let mut bytes = std::fs::read(&archive).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&archive, bytes).expect("write");
    let before = sha256(placed.to_str().expect("utf-8"));
    let out = run(&copy, &good);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("but SHA256SUMS says") && stderr.contains("not installed"),
        "{stderr}"
    );
    assert_eq!(
        sha256(placed.to_str().expect("utf-8")),
        before,
        "the installed binary changed"
    );
    let leftovers: Vec<_> = std::fs::read_dir(good.join("bin"))
        .expect("bin")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers, ["shiqi-connect"], "nothing else in bin/");
}

/// `git ARGS` in the repository, its trimmed output (a failure fails the test).
fn git(s: &Stack, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
