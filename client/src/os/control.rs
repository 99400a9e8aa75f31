//! The background tunnel's controls: starting it detached from the terminal, asking it to stop
//! or to reload, and, inside it, hearing those requests.
//!
//! Unix: its own process group; SIGTERM (or SIGINT) stops it, SIGHUP reloads, SIGKILL is the
//! last resort. Windows has no signals to send another process: `DETACHED_PROCESS |
//! CREATE_NEW_PROCESS_GROUP`, and the tunnel listens on a named pipe of its own for one line,
//! `stop` or `reload`; the console's Ctrl-C, Ctrl-Break and close stop it too, and
//! `TerminateProcess` is the last resort. The pipe (issue 42, part 6):
//! - its name is `\\.\pipe\shiqi-connect-tunnel-PID-` and 128 random bits, so another account
//!   cannot create it before the tunnel does (a squatter would hear the requests, and the
//!   tunnel's own create would fail); the name is written to `%LOCALAPPDATA%\shiqi-connect\`
//!   (`tunnel-PID.pipe`), which only the account (SYSTEM, administrators) can read;
//! - it is created first-instance, inbound only, refusing remote clients, with an owner-only
//!   ACL: a protected DACL whose one entry gives the tunnel's account (its user SID) all
//!   rights, so no other account (administrators included, short of taking ownership) may open
//!   it or add instances. `interprocess` builds the security descriptor from that SDDL and
//!   creates the pipe with it (tokio's own way takes a raw pointer, through `unsafe`, which
//!   this crate forbids). Should this account's SID be unreadable, the pipe gets the default
//!   ACL (the owner, SYSTEM and administrators write; others may only open it for reading),
//!   logged. A client that connects and sends nothing is dropped after `PIPE_READ_TIMEOUT`,
//!   so one cannot hold the pipe.

use std::process::Command;

/// What one process asks of the background tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Close the connection and exit.
    Stop,
    /// Read the profile again and follow it.
    Reload,
}

/// Makes `cmd` start in a process group of its own, so a Ctrl-C or hang-up aimed at this
/// terminal does not reach it.
pub(crate) fn detach(cmd: &mut Command) -> &mut Command {
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
pub(crate) fn send(pid: u32, request: Request) -> std::io::Result<()> {
    use rustix::process::Signal;
    signal(
        pid,
        match request {
            Request::Stop => Signal::TERM,
            Request::Reload => Signal::HUP,
        },
    )
}

/// Sends `request` to `pid` through its control pipe; a stop that finds no pipe ends the
/// process (`TerminateProcess`).
///
/// # Errors
/// When it cannot be sent (a reload to a process with no pipe) or ended.
#[cfg(windows)]
pub(crate) fn send(pid: u32, request: Request) -> std::io::Result<()> {
    use std::io::Write as _;
    let line: &[u8] = match request {
        Request::Stop => b"stop\n",
        Request::Reload => b"reload\n",
    };
    let mut last = None;
    // A pipe between two clients is busy for a moment (ERROR_PIPE_BUSY): try again briefly.
    for _ in 0..40 {
        let opened =
            pipe_name(pid).and_then(|name| std::fs::OpenOptions::new().write(true).open(name));
        match opened {
            Ok(mut pipe) => return pipe.write_all(line),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                last = Some(e);
                break;
            }
            Err(e) => {
                last = Some(e);
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    match request {
        Request::Stop => kill(pid),
        Request::Reload => Err(last.unwrap_or_else(|| std::io::ErrorKind::NotFound.into())),
    }
}

/// How long a client of the control pipe may take to send its line.
#[cfg(windows)]
const PIPE_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The control pipe's name for `pid`, as its tunnel recorded it; `NotFound` when it did not.
#[cfg(windows)]
fn pipe_name(pid: u32) -> std::io::Result<String> {
    let text = std::fs::read_to_string(pipe_record(pid)?)?;
    let name = text.trim();
    let random = name
        .strip_prefix(&pipe_prefix(pid))
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
    if random.len() != 32 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    Ok(name.to_owned())
}

#[cfg(windows)]
fn pipe_prefix(pid: u32) -> String {
    format!(r"\\.\pipe\shiqi-connect-tunnel-{pid}-")
}

/// Where the tunnel `pid` records its pipe's name: the account's own `%LOCALAPPDATA%`.
#[cfg(windows)]
fn pipe_record(pid: u32) -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::var_os("LOCALAPPDATA").ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "LOCALAPPDATA is not set")
    })?;
    Ok(std::path::PathBuf::from(dir)
        .join("shiqi-connect")
        .join(format!("tunnel-{pid}.pipe")))
}

/// A fresh pipe name for this process (128 bits from the OS's randomness: std seeds each
/// `RandomState` from it), recorded for [`send`].
#[cfg(windows)]
fn new_pipe_name() -> std::io::Result<String> {
    use std::hash::{BuildHasher, Hasher};
    let random = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    let pid = std::process::id();
    let name = format!("{}{:016x}{:016x}", pipe_prefix(pid), random(), random());
    let record = pipe_record(pid)?;
    let dir = record.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Whole or not at all, as `fsutil` writes (which sits above the OS seam): a tempfile in the
    // same folder (private, like every tempfile), renamed over the record.
    let mut tmp = tempfile::Builder::new()
        .prefix(".shiqi-tmp-")
        .tempfile_in(dir)?;
    std::io::Write::write_all(&mut tmp, name.as_bytes())?;
    tmp.persist(&record).map_err(|e| e.error)?;
    Ok(name)
}

/// The control pipe's DACL in SDDL: protected (nothing inherited), one entry allowing `sid`
/// everything.
#[cfg(windows)]
fn owner_only_sddl(sid: &str) -> String {
    format!("D:P(A;;GA;;;{sid})")
}

/// The security descriptor the control pipe is created with: owner-only (see the module's
/// notes), or `None` (the default ACL) when this account's SID cannot be read.
#[cfg(windows)]
fn pipe_security()
-> std::io::Result<Option<interprocess::os::windows::security_descriptor::SecurityDescriptor>> {
    use interprocess::os::windows::ToWtf16 as _;
    use interprocess::os::windows::security_descriptor::SecurityDescriptor;
    let Some(sid) = crate::os::account::own_sid() else {
        tracing::warn!(
            "cannot read this account's SID: the control pipe keeps Windows' default ACL \
             (others may open it for reading)"
        );
        return Ok(None);
    };
    let sddl = owner_only_sddl(&sid)
        .to_wtf_16()
        .map_err(std::io::Error::other)?;
    SecurityDescriptor::deserialize(&sddl).map(Some)
}

/// The tunnel's side of its control pipe: a task that reads one line per client and passes
/// the request on.
#[cfg(windows)]
fn serve_pipe() -> std::io::Result<tokio::sync::mpsc::UnboundedReceiver<Request>> {
    use interprocess::os::windows::named_pipe::{PipeListenerOptions, pipe_mode};
    use tokio::io::AsyncReadExt as _;
    let name = new_pipe_name()?;
    // The first instance is created first-instance; `accept` adds the next ones, the same.
    let server = PipeListenerOptions::new()
        .path(name.as_str())
        .accept_remote(false)
        .security_descriptor(pipe_security()?)
        .create_tokio_recv_only::<pipe_mode::Bytes>()?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok(mut client) = server.accept().await else {
                return;
            };
            let mut line = [0_u8; 16];
            let mut n = 0;
            // One short line, soon; anything longer, later or unknown is ignored.
            let read = async {
                while n < line.len() {
                    match client.read(&mut line[n..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k,
                    }
                    if line[..n].contains(&b'\n') {
                        break;
                    }
                }
            };
            if tokio::time::timeout(PIPE_READ_TIMEOUT, read).await.is_err() {
                continue;
            }
            let request = match line[..n].strip_suffix(b"\n") {
                Some(b"stop") => Request::Stop,
                Some(b"reload") => Request::Reload,
                _ => continue,
            };
            if tx.send(request).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Ends `pid` at once (SIGKILL; `TerminateProcess` on Windows).
///
/// # Errors
/// When it cannot be ended.
#[cfg(unix)]
pub(crate) fn kill(pid: u32) -> std::io::Result<()> {
    signal(pid, rustix::process::Signal::KILL)
}

/// Ends `pid` at once (SIGKILL; `TerminateProcess` on Windows).
///
/// # Errors
/// When it cannot be ended.
#[cfg(not(unix))]
pub(crate) fn kill(pid: u32) -> std::io::Result<()> {
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

/// The console's stop requests: Ctrl-C, Ctrl-Break, the window closed.
#[cfg(windows)]
struct Console {
    ctrl_c: tokio::signal::windows::CtrlC,
    ctrl_break: tokio::signal::windows::CtrlBreak,
    ctrl_close: tokio::signal::windows::CtrlClose,
}

#[cfg(windows)]
impl Console {
    async fn stop(&mut self) {
        tokio::select! {
            _ = self.ctrl_c.recv() => {}
            _ = self.ctrl_break.recv() => {}
            _ = self.ctrl_close.recv() => {}
        }
    }
}

/// Inside the background tunnel: the requests other processes send it.
pub(crate) struct Listener {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
    #[cfg(windows)]
    console: Console,
    #[cfg(windows)]
    pipe: tokio::sync::mpsc::UnboundedReceiver<Request>,
    /// Reloads that arrived while waiting for a stop, for [`Listener::next`].
    #[cfg(windows)]
    reloads: usize,
}

impl Listener {
    /// Starts listening; from here on, these requests no longer end the process by default.
    ///
    /// # Errors
    /// When the handlers cannot be installed.
    pub(crate) fn new() -> std::io::Result<Self> {
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
                console: Console {
                    ctrl_c: windows::ctrl_c()?,
                    ctrl_break: windows::ctrl_break()?,
                    ctrl_close: windows::ctrl_close()?,
                },
                pipe: serve_pipe()?,
                reloads: 0,
            })
        }
    }

    /// The next request.
    pub(crate) async fn next(&mut self) -> Request {
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
            if self.reloads > 0 {
                self.reloads -= 1;
                return Request::Reload;
            }
            tokio::select! {
                () = self.console.stop() => Request::Stop,
                Some(request) = self.pipe.recv() => request,
            }
        }
    }

    /// Resolves at the next stop request, leaving reloads queued for [`Listener::next`].
    pub(crate) async fn stopped(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(windows)]
        loop {
            tokio::select! {
                () = self.console.stop() => return,
                Some(request) = self.pipe.recv() => match request {
                    Request::Stop => return,
                    Request::Reload => self.reloads += 1,
                },
            }
        }
    }
}

/// The pipe's record goes with the tunnel (a crash leaves it; the next tunnel with that pid
/// writes its own).
#[cfg(windows)]
impl Drop for Listener {
    fn drop(&mut self) {
        if let Ok(record) = pipe_record(std::process::id()) {
            let _ = std::fs::remove_file(record);
        }
    }
}

/// Tests: a listener at OpenSSH's control-socket path, where OpenSSH has control sockets (Unix
/// sockets; none on Windows, where [`ControlSocket::bind`] gives `None`).
#[cfg(test)]
pub(crate) struct ControlSocket(#[cfg(unix)] std::os::unix::net::UnixListener);

#[cfg(test)]
impl ControlSocket {
    /// Listens at `path`.
    pub(crate) fn bind(path: &std::path::Path) -> Option<Self> {
        #[cfg(unix)]
        return Some(Self(
            std::os::unix::net::UnixListener::bind(path).expect("bind"),
        ));
        #[cfg(not(unix))]
        {
            let _ = path;
            None
        }
    }

    /// Whether a client connecting at `path` reaches this listener.
    pub(crate) fn reached_at(&self, path: &std::path::Path) -> bool {
        #[cfg(unix)]
        return std::os::unix::net::UnixStream::connect(path).is_ok() && self.0.accept().is_ok();
        #[cfg(not(unix))]
        {
            let _ = path;
            false
        }
    }
}

#[cfg(all(test, windows))]
mod tests {
    use super::*;

    /// This process's pipe record, which both tests write.
    static RECORD: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Writes `line` to this process's control pipe as [`send`] does, trying again while the
    /// pipe is busy (its next instance not created yet), but not ending the test process when
    /// it cannot.
    fn write_line(line: &'static [u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        let name = pipe_name(std::process::id())?;
        let mut last = None;
        for _ in 0..40 {
            match std::fs::OpenOptions::new().write(true).open(&name) {
                Ok(mut pipe) => return pipe.write_all(line),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(last.unwrap_or_else(|| std::io::ErrorKind::NotFound.into()))
    }

    #[test]
    fn the_pipe_is_owner_only_and_this_account_can_send() {
        let _record = RECORD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let sid = crate::os::account::own_sid().expect("this process's SID");
        assert!(sid.starts_with("S-1-"), "{sid}");
        assert_eq!(owner_only_sddl(&sid), format!("D:P(A;;GA;;;{sid})"));
        assert!(pipe_security().expect("descriptor").is_some());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let mut listener = Listener::new().expect("listen");
            for (line, request) in [
                (&b"reload\n"[..], Request::Reload),
                (b"stop\n", Request::Stop),
            ] {
                // Opening the pipe blocks: on another thread, while the pipe's task runs here.
                let sent = tokio::task::spawn_blocking(move || write_line(line));
                let heard =
                    tokio::time::timeout(std::time::Duration::from_secs(10), listener.next())
                        .await
                        .ok();
                sent.await.expect("join").expect("sent through the pipe");
                assert_eq!(heard, Some(request));
            }
        });
    }

    #[test]
    fn the_pipe_name_is_random_and_read_back_only_when_it_is_ours() {
        let _record = RECORD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let a = new_pipe_name().expect("recorded");
        let pid = std::process::id();
        assert_eq!(pipe_name(pid).expect("read back"), a);
        assert!(a.starts_with(&pipe_prefix(pid)), "{a}");
        let b = new_pipe_name().expect("recorded");
        assert_ne!(a, b, "two names alike");
        // A record that names another pipe (or is garbled) is not followed.
        let record = pipe_record(pid).expect("record");
        crate::fsutil::write_private(&record, br"\\.\pipe\elsewhere").expect("write");
        assert!(pipe_name(pid).is_err());
        let _ = std::fs::remove_file(record);
        assert_eq!(
            pipe_name(pid).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );
    }
}
