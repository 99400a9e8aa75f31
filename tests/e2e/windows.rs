//! `shiqi-connect.exe` (x86_64-pc-windows-gnu, built by `scripts/check-targets --windows`) under
//! Wine in the laptop namespace: setup, the tunnel, Kafka and MySQL through it with the Linux
//! `kcat` and `mariadb`, doctor, tunnel down. scripts/test runs it with `SHIQI_WINDOWS_EXE` (the
//! .exe) and `SHIQI_WINE_SHIM` (the bcryptprimitives.dll Wine 8 lacks) set, so it is ignored in
//! the main run.

use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};
use crate::tunnel::mariadb_current_user;

/// The laptop user's Wine prefix, with the shim and `~/.ssh` where Windows' OpenSSH looks
/// (`%USERPROFILE%\.ssh`).
struct Wine<'a> {
    s: &'a Stack,
    exe: String,
    prefix: String,
}

impl<'a> Wine<'a> {
    fn new(s: &'a Stack) -> Self {
        let given = |var: &str| std::env::var(var).unwrap_or_else(|_| panic!("{var} is set"));
        let (exe, shim) = (given("SHIQI_WINDOWS_EXE"), given("SHIQI_WINE_SHIM"));
        let home = s.info("laptop_home");
        let prefix = format!("{home}/.wine-e2e");
        // wineboot as the laptop user (Wine refuses a prefix another user owns); then the shim
        // and the user's ~/.ssh as %USERPROFILE%\.ssh.
        let script = r#"set -e
export WINEPREFIX="$1" WINEDEBUG=-all
[ -d "$WINEPREFIX/drive_c/windows/system32" ] || wineboot --init >/dev/null 2>&1 </dev/null || true
cp "$2" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
profile="$WINEPREFIX/drive_c/users/$USER"
mkdir -p "$profile"
[ -e "$profile/.ssh" ] || ln -s "$HOME/.ssh" "$profile/.ssh"
# One wineserver for the whole test, its output nowhere: the background tunnel outlives each
# command, and a server holding the test's pipes would keep every command from returning.
wineserver -p 300 </dev/null >/dev/null 2>&1 || true  # 2: one already runs
"#;
        s.laptop(&["sh", "-c", script, "sh", &prefix, &shim], &[], None)
            .ok();
        Self { s, exe, prefix }
    }

    /// `shiqi-connect.exe ARGS` with `home`, its output through files (see `new`).
    fn connect(&self, home: &Home, args: &[&str]) -> Out {
        let out = home.dir.join("wine.out").display().to_string();
        let err = home.dir.join("wine.err").display().to_string();
        let mut full = vec![
            "sh",
            "-c",
            r#"o=$1 e=$2; shift 2; wine "$@" >"$o" 2>"$e" </dev/null; c=$?; cat "$o"; cat "$e" >&2; exit $c"#,
            "sh",
            &out,
            &err,
            &self.exe,
        ];
        full.extend_from_slice(args);
        self.s.laptop(
            &full,
            &[
                ("WINEPREFIX", &self.prefix),
                ("WINEDEBUG", "-all"),
                ("SHIQI_HOME", &home.env()),
            ],
            None,
        )
    }
}

impl Drop for Wine<'_> {
    /// Ends the test's wineserver (and any Windows process left in its prefix).
    fn drop(&mut self) {
        let _ = self
            .s
            .laptop(&["wineserver", "-k"], &[("WINEPREFIX", &self.prefix)], None);
    }
}

/// `tunnel down` when the test ends, passed or not.
struct Down<'a>(&'a Wine<'a>, &'a Home, &'a str);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = self.0.connect(self.1, &["tunnel", "down", self.2]);
    }
}

#[test]
#[ignore = "scripts/test runs it after scripts/check-targets --windows built the .exe"]
fn the_windows_binary_runs_the_journey_under_wine() {
    let s = stack();
    let wine = Wine::new(s);
    let version = wine
        .connect(&Home::new(s, "wine-version"), &["--version"])
        .ok();
    assert!(
        version.stdout.contains("x86_64-pc-windows-gnu"),
        "{}",
        version.all()
    );

    let home = Home::new(s, "wine");
    let name = unique_name("wine");
    let server = s.info("ssh_destination");
    let setup = wine.connect(&home, &["setup", &name, "--server", server, "--yes"]);
    assert_eq!(setup.code, Some(0), "{}", setup.all());
    let profile = home.profile(&name);
    let ssh_config = std::fs::read_to_string(profile.join("ssh_config")).expect("ssh_config");
    assert!(
        !ssh_config.contains("ControlMaster") && ssh_config.contains("ssh -N -F"),
        "Windows' OpenSSH has no control socket:\n{ssh_config}"
    );

    // The files name Windows paths (`Z:/…` is Wine's drive for `/`), with `/` between
    // components, as Java, librdkafka and MySQL on Windows read them. The Linux clients below
    // read a copy with the drive letter taken off.
    for file in ["client.properties", "librdkafka.conf", "my.cnf"] {
        let path = profile.join(file);
        let text = std::fs::read_to_string(&path).expect(file);
        if text.contains("ca.crt") || text.contains(".p12") {
            assert!(
                text.contains("Z:/var/") && !text.contains('\\'),
                "{file}:\n{text}"
            );
        }
        std::fs::write(&path, text.replace("Z:/", "/")).expect(file);
    }

    let up = wine.connect(&home, &["tunnel", "up", &name]);
    let _down = Down(&wine, &home, &name);
    assert_eq!(up.code, Some(0), "{}", up.all());
    crate::kafka::assert_round_trip_through_every_broker(s, &profile, &name);
    let who = mariadb_current_user(s, &home, &name).ok();
    assert_eq!(who.stdout.trim(), format!("{name}@127.0.0.1"));

    // The live figures through the control pipe (duplex): the tunnel's forwards counted the
    // bytes of the Kafka round trip and the MariaDB login above.
    let watch = wine.connect(
        &home,
        &[
            "--json", "tunnel", "status", &name, "--watch", "--count", "2",
        ],
    );
    assert_eq!(watch.code, Some(0), "{}", watch.all());
    let looks: Vec<serde_json::Value> = watch
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(looks.len(), 2, "{}", watch.all());
    let live = &looks[1]["live"];
    assert_eq!(looks[1]["running"], true, "{}", watch.all());
    let moved: u64 = live["ports"]
        .as_array()
        .map(|ports| ports.iter().filter_map(|p| p["down"].as_u64()).sum())
        .unwrap_or_default();
    assert!(moved > 0, "no bytes counted:\n{}", watch.all());

    let doctor = wine.connect(&home, &["doctor", &name]);
    println!("doctor under Wine:\n{}", doctor.all());
    // Everything but the clients a Windows PATH lacks here (mysql, kcat, java: warnings).
    for check in [
        "files",
        "ssh.login",
        "agent.version",
        "cert.keystores",
        "tunnel",
        "protocol",
        "login.kafka",
        "login.mysql",
    ] {
        assert!(
            doctor
                .stdout
                .lines()
                .any(|l| l.starts_with("ok ") && l.split_whitespace().nth(1) == Some(check)),
            "{check} is not ok:\n{}",
            doctor.all()
        );
    }
    assert!(doctor.stdout.contains(" 0 fail"), "{}", doctor.all());
    assert_eq!(doctor.code, Some(0), "{}", doctor.all());

    let down = wine.connect(&home, &["tunnel", "down", &name]);
    assert_eq!(down.code, Some(0), "{}", down.all());
    // Stopped through its named pipe (it logs its own stop), not ended by TerminateProcess.
    let log = std::fs::read_to_string(profile.join("tunnel.log")).expect("tunnel.log");
    assert!(
        log.lines().any(|l| l.ends_with("stopped")),
        "no graceful stop in tunnel.log:\n{log}"
    );
    let status = wine.connect(&home, &["tunnel", "status", &name]);
    assert!(
        status.all().contains("not running") && status.all().contains("nothing listens"),
        "{}",
        status.all()
    );
}
