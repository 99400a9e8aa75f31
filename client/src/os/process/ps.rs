//! Through `ps -p PID` (POSIX options only, so BSD's and procps' `ps` read them alike).
// Tested on every Unix; only macOS re-exports it.
#![cfg_attr(not(target_os = "macos"), allow(unreachable_pub))]

use std::process::{Command, Stdio};

/// One `ps` column for `pid`, or `None` when the process is gone or `ps` fails.
fn column(pid: u32, column: &str) -> Option<String> {
    let out = Command::new("ps")
        .args(["-ww", "-o", column, "-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The command line of `pid` as one word: `ps` joins the arguments with spaces and cannot
/// split them back, so callers match against the joined line (see
/// `tunnel::process::is_daemon_cmdline`).
pub(crate) fn cmdline(pid: u32) -> Option<Vec<String>> {
    column(pid, "command=").map(|line| vec![line])
}

/// Whether `pid` exists and is not a zombie (`Z` in its state).
pub(crate) fn alive(pid: u32) -> bool {
    column(pid, "state=").is_some_and(|state| !state.starts_with('Z'))
}

#[cfg(test)]
mod tests {
    use super::{alive, cmdline};

    #[test]
    fn sees_itself_and_not_an_exited_child() {
        let me = std::process::id();
        assert!(alive(me));
        let line = cmdline(me).expect("own command line");
        assert_eq!(line.len(), 1);
        assert!(line[0].contains("shiqi_connect"), "{line:?}");
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        // Exited, not yet reaped: a zombie.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!alive(pid));
        child.wait().expect("reaped");
        assert!(!alive(pid));
    }
}
