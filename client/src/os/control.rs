//! The background tunnel's controls: starting it detached from the terminal, asking it to stop
//! or to reload, and, inside it, hearing those requests.
//!
//! Unix: its own process group; SIGTERM (or SIGINT) stops it, SIGHUP reloads, SIGKILL is the
//! last resort. Windows: `DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP`; the console's Ctrl-C,
//! Ctrl-Break and close stop it; there is no reload request yet and a stop from another process
//! ends it with `TerminateProcess` (docs/design.md, other operating systems).

use std::process::Command;

/// What one process asks of the background tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Close the connection and exit.
    Stop,
    /// Read the profile again and follow it.
    Reload,
}

/// Makes `cmd` start in a process group of its own, so a Ctrl-C or hang-up aimed at this
/// terminal does not reach it.
pub fn detach(cmd: &mut Command) -> &mut Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        cmd.process_group(0)
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt as _;
        const DETACHED_PROCESS: u32 = 0x0000_0008;
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        cmd.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP)
    }
}

/// Sends `request` to `pid`.
///
/// # Errors
/// When it cannot be sent: gone, not ours, or (Windows) a reload, which has no channel yet.
#[cfg(unix)]
pub fn send(pid: u32, request: Request) -> std::io::Result<()> {
    use rustix::process::Signal;
    signal(
        pid,
        match request {
            Request::Stop => Signal::TERM,
            Request::Reload => Signal::HUP,
        },
    )
}

/// Sends `request` to `pid`: a stop ends it (`TerminateProcess`); a reload is not available.
///
/// # Errors
/// When it cannot be ended, or for a reload.
#[cfg(not(unix))]
pub fn send(pid: u32, request: Request) -> std::io::Result<()> {
    match request {
        Request::Stop => kill(pid),
        Request::Reload => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "a running tunnel cannot be told to reload on this OS: stop it and start it again",
        )),
    }
}

/// Ends `pid` at once (SIGKILL; `TerminateProcess` on Windows).
///
/// # Errors
/// When it cannot be ended.
#[cfg(unix)]
pub fn kill(pid: u32) -> std::io::Result<()> {
    signal(pid, rustix::process::Signal::KILL)
}

/// Ends `pid` at once (SIGKILL; `TerminateProcess` on Windows).
///
/// # Errors
/// When it cannot be ended.
#[cfg(not(unix))]
pub fn kill(pid: u32) -> std::io::Result<()> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let mut sys = System::new().map_err(std::io::Error::other)?;
    let target = Pid::from_u32(pid);
    sys.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[target]),
        true,
        ProcessRefreshKind::nothing(),
    );
    match sys.process(target) {
        Some(p) if p.kill() => Ok(()),
        Some(_) => Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
        None => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
    }
}

#[cfg(unix)]
fn signal(pid: u32, signal: rustix::process::Signal) -> std::io::Result<()> {
    let target = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    rustix::process::kill_process(target, signal).map_err(Into::into)
}

/// Inside the background tunnel: the requests other processes send it.
pub struct Listener {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
    #[cfg(windows)]
    ctrl_break: tokio::signal::windows::CtrlBreak,
    #[cfg(windows)]
    ctrl_close: tokio::signal::windows::CtrlClose,
}

impl Listener {
    /// Starts listening; from here on, these requests no longer end the process by default.
    ///
    /// # Errors
    /// When the handlers cannot be installed.
    pub fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
                hup: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows;
            Ok(Self {
                ctrl_c: windows::ctrl_c()?,
                ctrl_break: windows::ctrl_break()?,
                ctrl_close: windows::ctrl_close()?,
            })
        }
    }

    /// The next request.
    pub async fn next(&mut self) -> Request {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => Request::Stop,
                _ = self.int.recv() => Request::Stop,
                _ = self.hup.recv() => Request::Reload,
            }
        }
        #[cfg(windows)]
        {
            self.stopped().await;
            Request::Stop
        }
    }

    /// Resolves at the next stop request, leaving reloads queued for [`Listener::next`].
    pub async fn stopped(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(windows)]
        tokio::select! {
            _ = self.ctrl_c.recv() => {}
            _ = self.ctrl_break.recv() => {}
            _ = self.ctrl_close.recv() => {}
        }
    }
}
