//! The background process from the outside: its command line, the pid file it writes, whether
//! a pid is still it (a pid file can outlive its process, and pids are reused), and stopping it.
//! A pid counts as ours only when its command line is `… --home ROOT tunnel run NAME`.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use shiqi_ca::ProfileName;

use crate::error::{Error, TunnelError};
use crate::fsutil;
use crate::os::control::{self, Request};

/// The hidden subcommand the background process runs (`shiqi-connect … tunnel run NAME`).
pub(crate) const RUN: [&str; 2] = ["tunnel", "run"];

/// The arguments after the program name that start the background process for `name`.
pub(crate) fn daemon_args(root: &Path, name: &ProfileName, verbose: u8) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--home".into(), root.as_os_str().to_owned()];
    if verbose > 0 {
        args.push(format!("-{}", "v".repeat(usize::from(verbose.min(2)))).into());
    }
    args.extend(RUN.iter().map(OsString::from));
    args.push(name.as_str().into());
    args
}

/// Whether a command line ([`cmdline`]) is the background process of `name`
/// under `root`.
pub(crate) fn is_daemon_cmdline(args: &[String], root: &Path, name: &ProfileName) -> bool {
    let root = root.to_string_lossy();
    // macOS's `ps` gives the line as one word (os/process/ps.rs): then the words in order.
    let joined = format!(" {} ", args.join(" "));
    let has = |seq: &[&str]| {
        args.windows(seq.len()).any(|w| w.iter().eq(seq.iter()))
            || (args.len() == 1 && joined.contains(&format!(" {} ", seq.join(" "))))
    };
    has(&["--home", &root]) && has(&[RUN[0], RUN[1], name.as_str()])
}

pub(crate) use crate::os::process::{alive, cmdline};

/// The pid in a pid file, if it holds one.
pub(crate) fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Writes this process's pid (0600).
///
/// # Errors
/// [`Error::Io`] when the profile folder is not writable.
pub(crate) fn write_pid(path: &Path) -> Result<(), Error> {
    fsutil::write_private(path, format!("{}\n", std::process::id()).as_bytes())
}

/// The running background process of `name`, from its pid file; `None` when there is none or
/// the file is stale.
pub(crate) fn running(pid_file: &Path, root: &Path, name: &ProfileName) -> Option<u32> {
    let pid = read_pid(pid_file)?;
    let ours = alive(pid) && cmdline(pid).is_some_and(|a| is_daemon_cmdline(&a, root, name));
    ours.then_some(pid)
}

/// Sends `request` to `pid` ([`crate::os::control::send`]: a signal on Unix).
///
/// # Errors
/// [`TunnelError::Signal`] when it cannot be sent (gone, or not ours to signal).
pub(crate) fn send(pid: u32, request: Request) -> Result<(), Error> {
    control::send(pid, request).map_err(|source| Error::Tunnel(TunnelError::Signal { pid, source }))
}

/// Waits until `pid` is gone; `false` when it is still there after `timeout`.
pub(crate) async fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// Stops the background process: SIGTERM, up to `grace` for it to close the connection and
/// exit, then SIGKILL. Returns whether it had to be killed.
///
/// # Errors
/// [`TunnelError::Signal`] when it cannot be signalled; [`TunnelError::Stuck`] when even SIGKILL does
/// not end it.
pub(crate) async fn stop(pid: u32, grace: Duration) -> Result<bool, Error> {
    send(pid, Request::Stop)?;
    if wait_gone(pid, grace).await {
        return Ok(false);
    }
    tracing::warn!(
        pid,
        "the tunnel process ignored the request to stop; killing it"
    );
    control::kill(pid).map_err(|source| Error::Tunnel(TunnelError::Signal { pid, source }))?;
    if wait_gone(pid, Duration::from_secs(5)).await {
        return Ok(true);
    }
    Err(Error::Tunnel(TunnelError::Stuck {
        pid,
        secs: grace.as_secs() + 5,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_its_own_command_line_only() {
        let root = Path::new("/home/saige/.shiqi");
        let name: ProfileName = "saige".parse().expect("name");
        let args: Vec<String> = std::iter::once(OsString::from("/usr/bin/shiqi-connect"))
            .chain(daemon_args(root, &name, 1))
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args.join(" "),
            "/usr/bin/shiqi-connect --home /home/saige/.shiqi -v tunnel run saige"
        );
        assert!(is_daemon_cmdline(&args, root, &name));
        let other: ProfileName = "bob".parse().expect("name");
        assert!(!is_daemon_cmdline(&args, root, &other));
        assert!(!is_daemon_cmdline(&args, Path::new("/tmp/other"), &name));
        let editor = ["vim", "tunnel", "run", "saige"].map(String::from);
        assert!(!is_daemon_cmdline(&editor, root, &name));
        // macOS's `ps` line, one word: the same words in order, and no more lenient.
        let line = |s: &str| vec![s.to_owned()];
        let root_line = format!("{}", root.display());
        assert!(is_daemon_cmdline(
            &line(&format!(
                "/usr/local/bin/shiqi-connect --home {root_line} tunnel run saige"
            )),
            root,
            &name
        ));
        assert!(!is_daemon_cmdline(
            &line(&format!(
                "shiqi-connect --home {root_line} tunnel run saige2"
            )),
            root,
            &name
        ));
        assert!(!is_daemon_cmdline(
            &line("vim tunnel run saige"),
            root,
            &name
        ));
    }

    #[test]
    fn knows_live_and_missing_processes() {
        let me = std::process::id();
        assert!(alive(me));
        let args = cmdline(me).expect("own cmdline");
        assert!(!args.is_empty());
        // Pids are at most 2^22 on Linux.
        assert!(!alive(u32::MAX - 1));
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("tunnel.pid");
        assert_eq!(read_pid(&f), None);
        write_pid(&f).expect("write");
        assert_eq!(read_pid(&f), Some(me));
        let name: ProfileName = "saige".parse().expect("name");
        // Alive, but not a tunnel: the pid file is stale.
        assert_eq!(running(&f, dir.path(), &name), None);
    }
}
