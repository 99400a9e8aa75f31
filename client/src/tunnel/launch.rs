//! Starting, finding and stopping the tunnel's processes: the built-in one (`shiqi-connect
//! tunnel run NAME`, detached into its own process group, waited on through its state file) and
//! OpenSSH (`ssh -fN -F ssh_config HOST`, found and stopped through its control socket). Both
//! write to `tunnel.log`. Nothing here prints.

use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shiqi_ca::ProfileName;

use crate::error::{Error, TunnelError};
use crate::tunnel::state::{self, Phase, State};
use crate::tunnel::{Paths, process};

/// How long `up` waits for the background process to log in and listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// `tunnel.log` is moved to `tunnel.log.1` at start when it grew past this.
const LOG_ROTATE_BYTES: u64 = 1024 * 1024;

/// Starts `shiqi-connect tunnel run NAME` detached, and waits until it listens or fails.
///
/// # Errors
/// [`TunnelError::Failed`] with the background process's own one-line error and hint (a taken
/// port, a refused login), or [`Error::Io`] when it cannot be started.
pub(crate) async fn start_daemon(
    paths: &Paths,
    root: &Path,
    name: &ProfileName,
    verbose: u8,
    check_every: u64,
) -> Result<State, Error> {
    state::remove(&paths.state);
    let log = open_log(&paths.log)?;
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        action: "find this program's own path in",
        path: std::env::args_os()
            .next()
            .map(PathBuf::from)
            .unwrap_or_default(),
        source,
    })?;
    let mut cmd = Command::new(&exe);
    cmd.args(process::daemon_args(root, name, verbose))
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|source| Error::Io {
            action: "open",
            path: paths.log.clone(),
            source,
        })?)
        .stderr(log)
        .current_dir("/")
        // The log is a file, not a terminal.
        .env("NO_COLOR", "1")
        .env("SHIQI_TUNNEL_CHECK_EVERY", check_every.to_string());
    if verbose == 0 && std::env::var_os("RUST_LOG").is_none() {
        // Connects, disconnects and errors; `-v` asks for more.
        cmd.env("RUST_LOG", "warn,shiqi_connect=info");
    }
    // Out of the terminal's reach: a Ctrl-C or hang-up aimed at it does not reach the tunnel.
    crate::os::control::detach(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| Error::Io {
        action: "start",
        path: exe.clone(),
        source,
    })?;
    let pid = child.id();
    let failed = |why: String, hint: Option<String>| {
        Error::Tunnel(TunnelError::Failed {
            why,
            hint,
            log: paths.log.clone(),
        })
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let st = State::read(&paths.state).filter(|st| st.pid == pid);
        match st {
            Some(st) if st.phase == Phase::Up => return Ok(st),
            Some(st) if st.phase == Phase::Failed => {
                let _ = child.wait();
                let why = st.error.unwrap_or_else(|| "it failed".to_owned());
                return Err(failed(why, st.hint));
            }
            _ => {}
        }
        if let Ok(Some(exit)) = child.try_wait() {
            let (why, hint) = last_error(&paths.log).unwrap_or_else(|| {
                (
                    format!("the tunnel process exited ({exit}) before it listened"),
                    None,
                )
            });
            return Err(failed(why, hint));
        }
        if Instant::now() >= deadline {
            let _ = process::stop(pid, Duration::from_secs(2)).await;
            let _ = child.try_wait();
            return Err(failed(
                format!(
                    "it did not report ready within {}s",
                    START_TIMEOUT.as_secs()
                ),
                None,
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Opens `tunnel.log` for appending (private), after moving a large one to `tunnel.log.1`.
fn open_log(path: &Path) -> Result<File, Error> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        let _ = std::fs::rename(path, PathBuf::from(old));
    }
    crate::os::files::open_private_append(path).map_err(|source| Error::Io {
        action: "open",
        path: path.to_path_buf(),
        source,
    })
}

/// The last `error: …` line of the log and the `hint: …` after it (what `commands::report`
/// printed when the background process failed before it could write its state).
fn last_error(log: &Path) -> Option<(String, Option<String>)> {
    let text = std::fs::read_to_string(log).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().rposition(|l| l.starts_with("error: "))?;
    let mut why = lines[at]["error: ".len()..].to_owned();
    let mut hint = None;
    for l in &lines[at + 1..] {
        if let Some(c) = l.trim_start().strip_prefix("caused by: ") {
            why.push_str(": ");
            why.push_str(c);
        } else if let Some(h) = l.strip_prefix("hint: ") {
            hint = Some(h.to_owned());
        }
    }
    Some((why, hint))
}

/// `ssh -fN -F ssh_config HOST`: OpenSSH forks into the background once every forward is bound
/// (`ExitOnForwardFailure yes` in the file).
///
/// # Errors
/// [`TunnelError::OpenSsh`] with the last line ssh logged.
pub(crate) fn start_openssh(paths: &Paths, tunnel_host: &str) -> Result<(), Error> {
    let log = open_log(&paths.log)?;
    let mut args: Vec<String> = vec!["-fN".into()];
    if !std::io::stdin().is_terminal() {
        // No one to type a passphrase or answer a host-key question.
        args.extend(["-o".into(), "BatchMode=yes".into()]);
    }
    args.extend([
        "-F".into(),
        paths.ssh_config.display().to_string(),
        tunnel_host.to_owned(),
    ]);
    let command = format!("ssh {}", args.join(" "));
    let status = Command::new("ssh")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(log)
        .status()
        .map_err(|e| {
            Error::Tunnel(TunnelError::OpenSsh {
                command: command.clone(),
                why: e.to_string(),
            })
        })?;
    if !status.success() {
        let why = last_line(&paths.log).unwrap_or_else(|| format!("it exited with {status}"));
        return Err(Error::Tunnel(TunnelError::OpenSsh { command, why }));
    }
    Ok(())
}

fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(ToOwned::to_owned)
}

/// Whether an OpenSSH master for this profile answers on its control socket. A socket nobody
/// answers on is removed (OpenSSH would refuse to start a new master next to it).
pub(crate) fn openssh_alive(paths: &Paths, tunnel_host: &str) -> bool {
    if paths.control_socket.symlink_metadata().is_err() {
        return false;
    }
    let ok = Command::new("ssh")
        .arg("-F")
        .arg(&paths.ssh_config)
        .args(["-O", "check", tunnel_host])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if !ok {
        state::remove(&paths.control_socket);
    }
    ok
}

/// `ssh -F ssh_config -O exit HOST`: tells the OpenSSH master to close its forwards and exit.
///
/// # Errors
/// [`TunnelError::OpenSsh`] with what ssh said.
pub(crate) fn stop_openssh(paths: &Paths, tunnel_host: &str) -> Result<(), Error> {
    let command = format!(
        "ssh -F {} -O exit {tunnel_host}",
        paths.ssh_config.display()
    );
    let out = Command::new("ssh")
        .arg("-F")
        .arg(&paths.ssh_config)
        .args(["-O", "exit", tunnel_host])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            Error::Tunnel(TunnelError::OpenSsh {
                command: command.clone(),
                why: e.to_string(),
            })
        })?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(Error::Tunnel(TunnelError::OpenSsh { command, why }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_error_a_failed_start_left_in_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("tunnel.log");
        crate::fsutil::write_private(
            &log,
            b"2026-01-01T00:00:00Z  INFO shiqi_connect: starting\n\
              error: the tunnel of `saige` cannot start\n  caused by: port busy\n\n\
              hint: stop it\n",
        )
        .expect("write");
        assert_eq!(
            last_error(&log),
            Some((
                "the tunnel of `saige` cannot start: port busy".to_owned(),
                Some("stop it".to_owned())
            ))
        );
    }
}
