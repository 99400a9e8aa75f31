//! Starting a profile's tunnel when its user logs in, the way each system does it for a user's
//! own programs: a systemd user unit on Linux (restarted when it fails), a launchd LaunchAgent on
//! macOS (kept alive), a per-user Run entry in the registry on Windows (run once at logon).
//!
//! Each runs the same command line the background tunnel runs (`--home ROOT tunnel run NAME`),
//! so `tunnel status`, `tunnel down` and doctor know it as the profile's tunnel; Windows runs
//! `tunnel up`, which starts it detached. The text of each item is made by a pure function, so
//! the tests read the one for every system on any system.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What the item starts.
pub(crate) struct Launch<'a> {
    /// This program.
    pub(crate) exe: &'a Path,
    /// The profile.
    pub(crate) name: &'a str,
    /// The tunnel's log, where the system's manager appends what the tunnel prints.
    pub(crate) log: &'a Path,
    /// The arguments after the program: `--home ROOT tunnel run NAME`.
    pub(crate) args: Vec<OsString>,
}

/// An installed item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    /// Where it is: a file, or the registry value.
    pub(crate) location: String,
    /// What it is, for people: `systemd user unit`, `launchd agent`, `Run entry`.
    pub(crate) kind: &'static str,
    /// Why the system's manager does not know it yet, when it does not (no user manager runs
    /// in this session: it takes the item at the next login).
    pub(crate) pending: Option<String>,
    /// Why the manager says it failed, when it does.
    pub(crate) failing: Option<String>,
}

/// The label every system knows the item by: `shiqi-tunnel-NAME`.
pub(crate) fn label(name: &str) -> String {
    format!("shiqi-tunnel-{name}")
}

/// The value systemd reads as one word: in double quotes, `\` and `"` escaped, `%` doubled
/// (systemd's specifiers).
fn systemd_word(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '%' => out.push_str("%%"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `~/.config/systemd/user/shiqi-tunnel-NAME.service`. Paths with characters systemd cannot
/// take in `StandardOutput=append:` (whitespace, controls) are refused by [`check_path`] first.
pub(crate) fn systemd_unit(l: &Launch<'_>) -> String {
    let exec = std::iter::once(l.exe.as_os_str())
        .chain(l.args.iter().map(OsString::as_os_str))
        .map(|w| systemd_word(&w.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let log = l.log.to_string_lossy().replace('%', "%%");
    format!(
        "# Written by `shiqi-connect tunnel up {name} --at-login`; removed by `tunnel down {name} --at-login`.\n\
         [Unit]\n\
         Description=shiqi-connect tunnel of profile {name}\n\
         # The tunnel retries its SSH connection itself; systemd restarts it if it exits failing.\n\
         StartLimitIntervalSec=0\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={exec}\n\
         Environment=NO_COLOR=1 \"RUST_LOG=warn,shiqi_connect=info\"\n\
         StandardOutput=append:{log}\n\
         StandardError=append:{log}\n\
         Restart=on-failure\n\
         RestartSec=10\n\
         # SIGTERM, as `tunnel down` sends: the tunnel closes its connection and exits 0.\n\
         KillMode=mixed\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        name = l.name,
    )
}

/// Text for an XML document.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `~/Library/LaunchAgents/dev.shiqi.tunnel.NAME.plist`.
pub(crate) fn launchd_plist(l: &Launch<'_>) -> String {
    let args: String = std::iter::once(l.exe.as_os_str())
        .chain(l.args.iter().map(OsString::as_os_str))
        .map(|w| format!("    <string>{}</string>\n", xml(&w.to_string_lossy())))
        .collect();
    let log = xml(&l.log.to_string_lossy());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n\
         \x20 <string>{label}</string>\n\
         \x20 <key>ProgramArguments</key>\n\
         \x20 <array>\n\
         {args}\
         \x20 </array>\n\
         \x20 <key>EnvironmentVariables</key>\n\
         \x20 <dict>\n\
         \x20   <key>NO_COLOR</key>\n\
         \x20   <string>1</string>\n\
         \x20   <key>RUST_LOG</key>\n\
         \x20   <string>warn,shiqi_connect=info</string>\n\
         \x20 </dict>\n\
         \x20 <key>RunAtLoad</key>\n\
         \x20 <true/>\n\
         \x20 <key>KeepAlive</key>\n\
         \x20 <dict>\n\
         \x20   <key>SuccessfulExit</key>\n\
         \x20   <false/>\n\
         \x20 </dict>\n\
         \x20 <key>ThrottleInterval</key>\n\
         \x20 <integer>10</integer>\n\
         \x20 <key>StandardOutPath</key>\n\
         \x20 <string>{log}</string>\n\
         \x20 <key>StandardErrorPath</key>\n\
         \x20 <string>{log}</string>\n\
         </dict>\n\
         </plist>\n",
        label = xml(&format!("dev.shiqi.tunnel.{}", l.name)),
    )
}

#[cfg(any(windows, test))]
/// The Run entry's command line: `"EXE" --home "ROOT" tunnel up NAME` (each word quoted as
/// Windows' own argument parsing reads it back; the words are paths and a checked name).
pub(crate) fn run_value(l: &Launch<'_>, up_args: &[OsString]) -> String {
    std::iter::once(l.exe.as_os_str())
        .chain(up_args.iter().map(OsString::as_os_str))
        .map(|w| {
            let w = w.to_string_lossy();
            if w.is_empty() || w.contains([' ', '\t', '"']) {
                format!("\"{}\"", w.replace('"', "\\\""))
            } else {
                w.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `path` can be written into the item: no control characters anywhere, and on Linux no
/// whitespace (systemd's `append:` takes the rest of the line as the path, unquoted).
///
/// # Errors
/// The rule it breaks.
pub(crate) fn check_path(path: &Path) -> Result<(), &'static str> {
    let text = path.to_string_lossy();
    if text.chars().any(char::is_control) {
        return Err("it has control characters");
    }
    if cfg!(target_os = "linux") && text.chars().any(char::is_whitespace) {
        return Err("systemd cannot append a log to a path with spaces");
    }
    Ok(())
}

/// The file the item for `name` is on this system, `None` where it is a registry value
/// (Windows). The caller writes [`text`] there (0644) before [`enable`], and removes it after
/// [`disable`].
pub(crate) fn file(home: &Path, name: &str) -> Option<PathBuf> {
    if cfg!(windows) {
        None
    } else if cfg!(target_os = "macos") {
        Some(
            home.join("Library/LaunchAgents")
                .join(format!("dev.shiqi.tunnel.{name}.plist")),
        )
    } else {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        Some(
            config
                .join("systemd/user")
                .join(format!("{}.service", label(name))),
        )
    }
}

/// The text of [`file`] on this system.
pub(crate) fn text(l: &Launch<'_>) -> Option<String> {
    if cfg!(windows) {
        None
    } else if cfg!(target_os = "macos") {
        Some(launchd_plist(l))
    } else {
        Some(systemd_unit(l))
    }
}

/// Tells the system's manager about the item (its [`file`] written already): systemd's
/// `default.target.wants` link, `launchctl bootstrap`, or the Run value.
///
/// # Errors
/// When the link or the registry value cannot be made.
pub(crate) fn enable(l: &Launch<'_>, home: &Path) -> std::io::Result<Item> {
    imp::enable(l, home)
}

/// Takes the item for `name` back from the manager: the location it had, or `None` when there
/// was none. The caller then removes [`file`].
///
/// # Errors
/// When it is there and cannot be removed.
pub(crate) fn disable(name: &str, home: &Path) -> std::io::Result<Option<String>> {
    imp::disable(name, home)
}

/// The item for `name`, when one is installed, with what the manager says of it.
pub(crate) fn installed(name: &str, home: &Path) -> Option<Item> {
    imp::installed(name, home)
}

#[cfg(unix)]
mod imp {
    use std::path::Path;
    use std::process::Command;

    use super::{Item, Launch, file, label};

    const KIND: &str = if cfg!(target_os = "macos") {
        "launchd agent"
    } else {
        "systemd user unit"
    };

    /// Runs the manager's command; its stdout, or why it could not answer.
    fn manager(program: &str, args: &[&str]) -> Result<String, String> {
        match Command::new(program).args(args).output() {
            Ok(out) if out.status.success() => {
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            }
            Ok(out) => Err(
                crate::text::Escaped::new(String::from_utf8_lossy(&out.stderr).trim()).to_string(),
            ),
            Err(e) => Err(format!("cannot run {program}: {e}")),
        }
    }

    pub(super) fn enable(l: &Launch<'_>, home: &Path) -> std::io::Result<Item> {
        let file = file(home, l.name).ok_or(std::io::ErrorKind::Unsupported)?;
        let pending = if cfg!(target_os = "macos") {
            let uid = rustix::process::getuid().as_raw();
            let domain = format!("gui/{uid}");
            let path = file.to_string_lossy().into_owned();
            // Replaced: the old definition out first (an error when there was none).
            let _ = manager("launchctl", &["bootout", &domain, &path]);
            manager("launchctl", &["bootstrap", &domain, &path]).err()
        } else {
            // What `systemctl --user enable` does for `WantedBy=default.target`, done here so
            // that it holds without a user manager in this session (SSH, containers).
            let wants = file
                .parent()
                .map(|d| d.join("default.target.wants"))
                .unwrap_or_default();
            std::fs::create_dir_all(&wants)?;
            let link = wants.join(format!("{}.service", label(l.name)));
            match std::fs::remove_file(&link) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            std::os::unix::fs::symlink(&file, &link)?;
            manager("systemctl", &["--user", "daemon-reload"]).err()
        };
        Ok(Item {
            location: file.display().to_string(),
            kind: KIND,
            pending,
            failing: None,
        })
    }

    pub(super) fn disable(name: &str, home: &Path) -> std::io::Result<Option<String>> {
        let Some(file) = file(home, name).filter(|f| f.exists()) else {
            return Ok(None);
        };
        if cfg!(target_os = "macos") {
            let uid = rustix::process::getuid().as_raw();
            let _ = manager(
                "launchctl",
                &["bootout", &format!("gui/{uid}"), &file.to_string_lossy()],
            );
        } else if let Some(dir) = file.parent() {
            let link = dir
                .join("default.target.wants")
                .join(format!("{}.service", label(name)));
            match std::fs::remove_file(&link) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let _ = manager("systemctl", &["--user", "daemon-reload"]);
        }
        Ok(Some(file.display().to_string()))
    }

    pub(super) fn installed(name: &str, home: &Path) -> Option<Item> {
        let file = file(home, name).filter(|f| f.exists())?;
        let unit = format!("{}.service", label(name));
        let failing = if cfg!(target_os = "macos") {
            None
        } else {
            // `is-failed` answers "failed" (exit 0) only for a unit that failed; anything else,
            // a manager that does not run included, is no news.
            manager("systemctl", &["--user", "is-failed", &unit])
                .ok()
                .filter(|s| s == "failed")
                .map(|_| {
                    manager(
                        "systemctl",
                        &["--user", "show", "-p", "Result", "--value", &unit],
                    )
                    .map_or_else(|e| e, |r| format!("systemd says it failed ({r})"))
                })
        };
        Some(Item {
            location: file.display().to_string(),
            kind: KIND,
            pending: None,
            failing,
        })
    }
}

#[cfg(windows)]
mod imp {
    use std::path::Path;

    use super::{Item, Launch, label, run_value};

    const RUN: &str = r"Software\Microsoft\Windows\CurrentVersion\Run";
    const KIND: &str = "Run entry";

    fn location(name: &str) -> String {
        format!(r"HKCU\{RUN}\{}", label(name))
    }

    fn io(e: impl std::fmt::Display) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }

    pub(super) fn enable(l: &Launch<'_>, _home: &Path) -> std::io::Result<Item> {
        // `tunnel up`: Run entries start once at logon and do not restart a program; `up`
        // starts the tunnel detached and returns, so no console window stays open.
        let mut up = l.args.clone();
        if let Some(run) = up.iter_mut().rev().nth(1) {
            *run = "up".into();
        }
        let key = windows_registry::CURRENT_USER.create(RUN).map_err(io)?;
        key.set_string(label(l.name), run_value(l, &up))
            .map_err(io)?;
        Ok(Item {
            location: location(l.name),
            kind: KIND,
            pending: None,
            failing: None,
        })
    }

    pub(super) fn disable(name: &str, _home: &Path) -> std::io::Result<Option<String>> {
        let key = windows_registry::CURRENT_USER.create(RUN).map_err(io)?;
        if key.get_string(label(name)).is_err() {
            return Ok(None);
        }
        key.remove_value(label(name)).map_err(io)?;
        Ok(Some(location(name)))
    }

    pub(super) fn installed(name: &str, _home: &Path) -> Option<Item> {
        let key = windows_registry::CURRENT_USER.open(RUN).ok()?;
        key.get_string(label(name)).ok()?;
        Some(Item {
            location: location(name),
            kind: KIND,
            pending: None,
            failing: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch<'a>(exe: &'a Path, root: &'a Path, log: &'a Path) -> Launch<'a> {
        Launch {
            exe,
            name: "saige",
            log,
            args: ["--home", &root.to_string_lossy(), "tunnel", "run", "saige"]
                .iter()
                .map(OsString::from)
                .collect(),
        }
    }

    /// systemd's own reading of the unit (`systemd-analyze verify --user`), where it is installed.
    #[cfg(target_os = "linux")]
    #[test]
    fn systemd_accepts_the_unit_and_refuses_a_broken_one() -> std::io::Result<()> {
        let analyze = Path::new("/usr/bin/systemd-analyze");
        if !analyze.exists() {
            eprintln!("skipped: no {}", analyze.display());
            return Ok(());
        }
        let dir = tempfile::tempdir()?;
        let exe = std::env::current_exe()?;
        let root = dir.path().join("shi%qi");
        let log = root.join("saige/tunnel.log");
        let unit = systemd_unit(&launch(&exe, &root, &log));
        assert!(unit.contains("%%"), "{unit}");
        let verify = |text: &str| -> std::io::Result<std::process::Output> {
            let path = dir.path().join("shiqi-tunnel-saige.service");
            crate::fsutil::write_shared(&path, text.as_bytes()).map_err(std::io::Error::other)?;
            std::process::Command::new(analyze)
                .args(["verify", "--user"])
                .arg(&path)
                .env("XDG_RUNTIME_DIR", dir.path())
                .output()
        };
        let out = verify(&unit)?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // And it notices a unit that could not start the tunnel.
        let gone = exe.with_file_name("no-such-shiqi-connect");
        let out = verify(&unit.replace(&*exe.to_string_lossy(), &gone.to_string_lossy()))?;
        assert!(!out.status.success(), "a unit naming no program is refused");
        Ok(())
    }

    /// The plist as Python's plistlib reads it: the label, the daemon's command line, the log.
    /// (Not under Wine, which has no python3.)
    #[cfg(unix)]
    #[test]
    fn the_launchd_agent_parses_and_names_the_daemon_command() -> std::io::Result<()> {
        let exe = Path::new("/Applications/shiqi <&> connect/shiqi-connect");
        let root = Path::new("/Users/saige/.shiqi");
        let log = Path::new("/Users/saige/.shiqi/saige/tunnel.log");
        let plist = launchd_plist(&launch(exe, root, log));
        let script = "import plistlib, sys, json\n\
                      p = plistlib.loads(sys.stdin.buffer.read())\n\
                      print(json.dumps([p['Label'], p['ProgramArguments'], p['StandardErrorPath'], p['KeepAlive'], p['RunAtLoad']]))";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        std::io::Write::write_all(
            child.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?,
            plist.as_bytes(),
        )?;
        let out = child.wait_with_output()?;
        assert!(out.status.success(), "plistlib refused:\n{plist}");
        let read: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        assert_eq!(
            read,
            serde_json::json!([
                "dev.shiqi.tunnel.saige",
                [
                    exe.to_string_lossy(),
                    "--home",
                    "/Users/saige/.shiqi",
                    "tunnel",
                    "run",
                    "saige"
                ],
                "/Users/saige/.shiqi/saige/tunnel.log",
                {"SuccessfulExit": false},
                true
            ])
        );
        Ok(())
    }

    #[test]
    fn the_run_entry_quotes_what_windows_would_split() {
        let exe = Path::new(r"C:\Program Files\shiqi\shiqi-connect.exe");
        let root = Path::new(r"C:\Users\saige\.shiqi");
        let l = launch(exe, root, root);
        let up: Vec<OsString> = ["--home", r"C:\Users\saige\.shiqi", "tunnel", "up", "saige"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            run_value(&l, &up),
            r#""C:\Program Files\shiqi\shiqi-connect.exe" --home C:\Users\saige\.shiqi tunnel up saige"#
        );
    }

    /// The registry entry made, read back and removed (under Wine in `scripts/check-targets`).
    #[cfg(windows)]
    #[test]
    fn a_run_entry_is_created_and_removed() -> std::io::Result<()> {
        let name = format!("test{}", std::process::id());
        let exe = std::env::current_exe()?;
        let root = std::env::temp_dir();
        let mut l = launch(&exe, &root, &root);
        l.name = &name;
        let home = Path::new("");
        let item = enable(&l, home)?;
        assert!(item.location.ends_with(&label(&name)), "{item:?}");
        assert_eq!(installed(&name, home), Some(item.clone()));
        assert_eq!(disable(&name, home)?, Some(item.location));
        assert_eq!(installed(&name, home), None);
        assert_eq!(disable(&name, home)?, None);
        Ok(())
    }
}
