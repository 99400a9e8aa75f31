//! The background tunnel's controls: starting it detached from the terminal, asking it to stop
//! or to reload, and, inside it, hearing those requests.
//!
//! Unix: its own process group; SIGTERM (or SIGINT) stops it, SIGHUP reloads, SIGKILL is the
//! last resort. Windows has no signals to send another process: `DETACHED_PROCESS |
//! CREATE_NEW_PROCESS_GROUP`, and the tunnel listens on a named pipe of its own for one line,
//! `stop` or `reload` (or `live`, answered on the same connection: see below); the console's Ctrl-C, Ctrl-Break and close stop it too, and
//! `TerminateProcess` is the last resort. The pipe (issue 42, part 6):
//! - its name is `\\.\pipe\shiqi-connect-tunnel-PID-` and 128 random bits, so another account
//!   cannot create it before the tunnel does (a squatter would hear the requests, and the
//!   tunnel's own create would fail); the name is written to `%LOCALAPPDATA%\shiqi-connect\`
//!   (`tunnel-PID.pipe`), which only the account (SYSTEM, administrators) can read;
//! - it is created first-instance, duplex (for `live`'s answer), refusing remote clients, with an owner-only
//!   ACL: a protected DACL whose one entry gives the tunnel's account (its user SID) all
//!   rights, so no other account (administrators included, short of taking ownership) may open
//!   it or add instances. `interprocess` builds the security descriptor from that SDDL and
//!   creates the pipe with it (tokio's own way takes a raw pointer, through `unsafe`, which
//!   this crate forbids). Should this account's SID be unreadable, the pipe gets the default
//!   ACL (the owner, SYSTEM and administrators write; others may only open it for reading),
//!   logged. A client that connects and sends nothing is dropped after `PIPE_READ_TIMEOUT`,
//!   so one cannot hold the pipe.
//!
//! One question is answered rather than obeyed: `live`, from `tunnel status --watch`, gets the
//! tunnel's figures (JSON) back on the same connection. Windows asks over the control pipe
//! (duplex for this); Unix, which has no line to the tunnel besides signals, over a Unix socket
//! in the profile folder (`tunnel.live`): the folder is the owner's alone (0700) as for every
//! file there, the socket is 0600, and a peer of another uid (`SO_PEERCRED`) is closed unheard.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// How the tunnel answers a `live` question: called once per question, the answer's bytes.
pub(crate) type Answer = Arc<dyn Fn() -> Vec<u8> + Send + Sync>;

/// The most bytes of an answer a watcher reads.
const MAX_ANSWER: u64 = 4 << 20;

/// How long a question, and then its answer, may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest line a client may send (`reload` and a newline fit).
const MAX_LINE: usize = 16;

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
/// the request on, or answers it (`live`).
#[cfg(windows)]
fn serve_pipe(answer: Answer) -> std::io::Result<tokio::sync::mpsc::UnboundedReceiver<Request>> {
    use interprocess::os::windows::named_pipe::{PipeListenerOptions, pipe_mode};
    let name = new_pipe_name()?;
    // The first instance is created first-instance; `accept` adds the next ones, the same.
    let server = PipeListenerOptions::new()
        .path(name.as_str())
        .accept_remote(false)
        .security_descriptor(pipe_security()?)
        .create_tokio_duplex::<pipe_mode::Bytes>()?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok(mut client) = server.accept().await else {
                return;
            };
            let request = match read_line(&mut client, PIPE_READ_TIMEOUT).await.as_deref() {
                Some(b"stop") => Request::Stop,
                Some(b"reload") => Request::Reload,
                Some(b"live") => {
                    // Its own task: a watcher that does not read holds up nobody else.
                    let answer = answer.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(ASK_TIMEOUT, async {
                            client.write_all(&answer()).await?;
                            client.flush().await
                        })
                        .await;
                    });
                    continue;
                }
                _ => continue,
            };
            if tx.send(request).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// One short line from `client` within `within`, without its newline; `None` when it is
/// longer, later or never ends.
async fn read_line<R: AsyncRead + Unpin>(client: &mut R, within: Duration) -> Option<Vec<u8>> {
    let mut line = [0_u8; MAX_LINE];
    let mut n = 0;
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
    tokio::time::timeout(within, read).await.ok()?;
    line[..n].strip_suffix(b"\n").map(<[u8]>::to_vec)
}

/// Asks `client` (a connection to a tunnel's control channel) for its live figures.
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(mut client: S) -> std::io::Result<Vec<u8>> {
    client.write_all(b"live\n").await?;
    client.flush().await?;
    let mut answer = Vec::new();
    (&mut client)
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .await?;
    Ok(answer)
}

/// Asks the tunnel `pid` for its live figures (the JSON its [`Answer`] gives): over `socket`
/// on Unix, over its control pipe on Windows.
///
/// # Errors
/// `NotFound` or `ConnectionRefused` when the tunnel has no channel (not running, or an older
/// build), `TimedOut` when it does not answer within a few seconds.
pub(crate) async fn ask_live(pid: u32, socket: &Path) -> std::io::Result<Vec<u8>> {
    let asked = async {
        #[cfg(unix)]
        {
            let _ = pid;
            ask(tokio::net::UnixStream::connect(socket).await?).await
        }
        #[cfg(windows)]
        {
            use interprocess::os::windows::named_pipe::pipe_mode;
            use interprocess::os::windows::named_pipe::tokio::DuplexPipeStream;
            let _ = socket;
            let name = pipe_name(pid)?;
            // Between two clients the pipe is busy for a moment: try again briefly, as `send`.
            let mut tries = 0;
            let pipe = loop {
                match DuplexPipeStream::<pipe_mode::Bytes>::connect_by_path(name.as_str()).await {
                    Ok(pipe) => break pipe,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound || tries == 40 => {
                        return Err(e);
                    }
                    Err(_) => {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            };
            ask(pipe).await
        }
    };
    tokio::time::timeout(ASK_TIMEOUT * 2, asked)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// The `live` socket's listener (Unix): dropped, it stops serving and removes its file.
#[cfg(unix)]
struct LiveSocket {
    path: std::path::PathBuf,
    /// The socket file's inode: only the file this tunnel made is removed.
    ino: u64,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[cfg(unix)]
impl Drop for LiveSocket {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt as _;
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Listens at `path` for `live` questions from this account's processes.
#[cfg(unix)]
fn serve_socket(path: &Path, answer: Answer) -> std::io::Result<LiveSocket> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
    match std::fs::symlink_metadata(path) {
        // Left by a tunnel that ended without removing it; no other is running (its pid file).
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)?,
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "something other than a socket is there",
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    let ino = std::fs::symlink_metadata(path)?.ino();
    // From here on a failure removes the file again (the guard's Drop).
    let mut socket = LiveSocket {
        path: path.to_owned(),
        ino,
        task: None,
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let me = rustix::process::getuid().as_raw();
    socket.task = Some(tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            if !matches!(client.peer_cred(), Ok(c) if c.uid() == me) {
                continue;
            }
            let answer = answer.clone();
            tokio::spawn(async move {
                if read_line(&mut client, ASK_TIMEOUT).await.as_deref() == Some(b"live") {
                    let _ = tokio::time::timeout(ASK_TIMEOUT, client.write_all(&answer())).await;
                }
            });
        }
    }));
    Ok(socket)
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
    /// The `live` socket; `None` when it could not be made (logged: only `--watch` misses it).
    #[cfg(unix)]
    live: Option<LiveSocket>,
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
    /// `live` questions get `answer`, asked at `socket` on Unix (through the pipe on Windows).
    ///
    /// # Errors
    /// When the handlers cannot be installed.
    pub(crate) fn new(socket: &Path, answer: Answer) -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (term, int, hup) = (
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
                signal(SignalKind::hangup())?,
            );
            let live = serve_socket(socket, answer)
                .inspect_err(|e| {
                    tracing::warn!(
                        socket = %socket.display(),
                        error = %e,
                        "no live figures for `tunnel status --watch`: cannot listen"
                    );
                })
                .ok();
            Ok(Self {
                term,
                int,
                hup,
                live,
            })
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows;
            let _ = socket;
            Ok(Self {
                console: Console {
                    ctrl_c: windows::ctrl_c()?,
                    ctrl_break: windows::ctrl_break()?,
                    ctrl_close: windows::ctrl_close()?,
                },
                pipe: serve_pipe(answer)?,
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

/// The pipe's record (Windows) and the `live` socket (Unix) go with the tunnel (a crash
/// leaves them; the next tunnel replaces them).
impl Drop for Listener {
    fn drop(&mut self) {
        #[cfg(windows)]
        if let Ok(record) = pipe_record(std::process::id()) {
            let _ = std::fs::remove_file(record);
        }
        #[cfg(unix)]
        drop(self.live.take());
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
            let answer: Answer = Arc::new(|| b"{\"figures\": 1}".to_vec());
            let mut listener = Listener::new(Path::new("unused"), answer).expect("listen");
            // A question is answered on the connection, and is not a request.
            let asked = ask_live(std::process::id(), Path::new("unused"))
                .await
                .expect("answered through the pipe");
            assert_eq!(asked, b"{\"figures\": 1}");
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

#[cfg(all(test, unix))]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use std::os::unix::fs::FileTypeExt as _;

    use super::*;

    #[tokio::test]
    async fn the_live_socket_answers_this_account_replaces_a_stale_one_and_goes_with_the_tunnel() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tunnel.live");
        // A socket a crashed tunnel left behind.
        drop(std::os::unix::net::UnixListener::bind(&path).expect("stale socket"));
        let answer: Answer = Arc::new(|| b"{\"connections\": 2}".to_vec());
        let listener = Listener::new(&path, answer).expect("listen");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).expect("socket").permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            ask_live(0, &path).await.expect("answered"),
            b"{\"connections\": 2}"
        );
        // Anything but the one question is closed unanswered.
        let mut other = tokio::net::UnixStream::connect(&path)
            .await
            .expect("connect");
        other.write_all(b"stop\n").await.expect("sent");
        let mut got = Vec::new();
        other.read_to_end(&mut got).await.expect("closed");
        assert!(got.is_empty());
        drop(listener);
        assert!(!path.exists(), "the socket outlived its tunnel");
        assert_eq!(
            ask_live(0, &path).await.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );
    }

    #[tokio::test]
    async fn a_file_where_the_socket_goes_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tunnel.live");
        std::io::Write::write_all(
            &mut std::fs::File::create(&path).expect("file"),
            b"not a socket",
        )
        .expect("written");
        let listener = Listener::new(&path, Arc::new(Vec::new)).expect("listen without it");
        drop(listener);
        let kept = std::fs::symlink_metadata(&path).expect("still there");
        assert!(!kept.file_type().is_socket());
        assert_eq!(std::fs::read(&path).expect("read"), b"not a socket");
    }
}
