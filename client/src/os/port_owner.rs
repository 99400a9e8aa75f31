//! Who holds a local TCP port, asked of the OS without connecting to it, and which account is
//! at the other end of a loopback connection this process accepted ([`peer`]: the local
//! endpoint serves its profile owner's account only, issue 42).
//!
//! - Linux: `/proc` (no external tool), see `procfs`;
//! - macOS and the BSDs: `lsof -nP -iTCP:PORT -sTCP:LISTEN` (shipped with macOS);
//! - Windows: a port's owner is not named, and "taken" is learnt by connecting; which account
//!   connects is asked of `GetExtendedTcpTable` (the TCP table with each socket's owning pid,
//!   through `netstat2`) and that pid's token (its user SID, through `sysinfo`); where that
//!   fails, [`peer_check_unavailable`] says why.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Who keeps `127.0.0.1:port` from being bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// Something listens there.
    Listener(Who),
    /// A connection this machine opened has the port as its source port: the OS lends ports of
    /// its ephemeral range to outgoing connections (Linux: 32768-60999), and keeps one for a
    /// minute after the connection closed (TIME_WAIT, when `who` is `None`). Linux only.
    Outgoing {
        /// Whose connection it is; `None` once it has closed.
        who: Option<Who>,
        /// Where it goes.
        peer: SocketAddr,
    },
}

/// A process, as far as this user may know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    /// One of this user's processes (or any, for root).
    Process {
        /// Its pid.
        pid: u32,
        /// Its command name (`/proc/PID/comm`, `lsof`'s `c` field).
        comm: String,
    },
    /// Another user's process: only its uid (and that user's name, if known) can be seen.
    User {
        /// The uid.
        uid: u32,
        /// Its login name.
        name: Option<String>,
    },
}

impl Who {
    /// Whether it is another account's process than this one's (a uid the OS showed, not
    /// ours): one that holds a port of the local endpoint can pose as it.
    pub(crate) fn other_account(&self) -> bool {
        match self {
            Self::Process { .. } => false,
            #[cfg(unix)]
            Self::User { uid, .. } => *uid != rustix::process::geteuid().as_raw(),
            #[cfg(not(unix))]
            Self::User { .. } => true,
        }
    }
}

impl Holder {
    /// The account holding the port when it is another one's than this process's.
    pub(crate) fn other_account(&self) -> Option<&Who> {
        match self {
            Self::Listener(who) if who.other_account() => Some(who),
            _ => None,
        }
    }

    /// The pid of the process that holds the port, when it is known.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Self::Listener(Who::Process { pid, .. })
            | Self::Outgoing {
                who: Some(Who::Process { pid, .. }),
                ..
            } => Some(*pid),
            _ => None,
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Process { pid, comm } => write!(f, "`{comm}` (pid {pid})"),
            Self::User {
                name: Some(name), ..
            } => write!(f, "a process of user `{name}`"),
            Self::User { uid, name: None } => write!(f, "a process of uid {uid}"),
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Listener(who) => who.fmt(f),
            Self::Outgoing {
                who: Some(who),
                peer,
            } => write!(
                f,
                "a connection of {who} to {peer}, which the system gave this port as its source port"
            ),
            Self::Outgoing { who: None, peer } => write!(
                f,
                "a connection to {peer} that closed less than a minute ago (the system gave it \
                 this port as its source port and keeps it in TIME_WAIT)"
            ),
        }
    }
}

/// Whether something listens where `127.0.0.1:port` would.
pub(crate) fn is_taken(port: u16) -> bool {
    #[cfg(target_os = "linux")]
    {
        procfs::sockets()
            .iter()
            .any(|l| l.listens() && l.port == port && l.blocks_loopback())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(500)).is_ok()
    }
}

/// Who keeps `127.0.0.1:port` from being bound: a listener, or on Linux (where nothing listens)
/// a connection whose source port it is. `None` when this OS does not say.
pub(crate) fn owner(port: u16) -> Option<Holder> {
    #[cfg(target_os = "linux")]
    {
        procfs::holder(&procfs::sockets(), port, procfs::process_of)
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let out = std::process::Command::new("lsof")
            .args(["-nP", &format!("-iTCP:{port}"), "-sTCP:LISTEN", "-Fpcu"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let (pid, comm, uid) = parse_lsof(&String::from_utf8_lossy(&out.stdout))?;
        Some(Holder::Listener(match (pid, comm) {
            (Some(pid), Some(comm)) => Who::Process { pid, comm },
            _ => by_user(uid?),
        }))
    }
    #[cfg(not(unix))]
    {
        let _ = port;
        None
    }
}

/// What `setup` and `doctor` say when the OS does not tell which account opens a connection
/// (the endpoint then serves whoever connects); [`peer_check_unavailable`] adds why.
#[cfg_attr(
    all(unix, not(test)),
    expect(dead_code, reason = "Unix always tells; said on other systems")
)]
pub(crate) const PEER_CHECK_UNAVAILABLE: &str =
    "this system does not tell shiqi-connect which account opens a connection";

/// Why [`peer`] cannot say which account is at the other end of a loopback connection, when it
/// cannot. Unix: it always can (`/proc`, `lsof`). Windows: it asks, for a connection this
/// process opens to itself, and anything but "this account" is the reason.
pub(crate) fn peer_check_unavailable() -> Option<String> {
    #[cfg(unix)]
    {
        None
    }
    #[cfg(not(unix))]
    {
        match self_check() {
            Ok(Peer::Owner) => None,
            Ok(Peer::Unknown(why)) => Some(format!("{PEER_CHECK_UNAVAILABLE}: {why}")),
            Ok(other) => Some(format!(
                "{PEER_CHECK_UNAVAILABLE}: it took this process's own connection for {other}'s"
            )),
            Err(e) => Some(format!(
                "{PEER_CHECK_UNAVAILABLE}: cannot open a loopback connection to check: {e}"
            )),
        }
    }
}

/// [`peer`] on a loopback connection from this process to itself.
#[cfg_attr(unix, allow(dead_code, reason = "Windows' probe, tested everywhere"))]
fn self_check() -> std::io::Result<Peer> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let local = listener.local_addr()?;
    let _client = std::net::TcpStream::connect(local)?;
    let (_accepted, from) = listener.accept()?;
    Ok(peer(local, from))
}

/// Which account is at the other end of a loopback TCP connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// This process's own account.
    Owner,
    /// Another account (or a socket the OS shows none of this account's processes holding).
    Stranger {
        /// Its uid, when the OS names it (Linux).
        uid: Option<u32>,
        /// That uid's login name; on Windows, the account's SID (`S-1-5-21-…`).
        name: Option<String>,
    },
    /// The OS could not be asked (this OS has no way, or the way failed): the reason.
    Unknown(String),
    /// The client's end is held by no process any more (closed before it was looked up, as a
    /// probe's short connection is): nobody to serve, and nobody to refuse either.
    Gone,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Owner => f.write_str("this account"),
            Self::Stranger {
                uid: Some(uid),
                name: Some(name),
            } => write!(f, "uid {uid} (`{name}`)"),
            Self::Stranger {
                uid: Some(uid),
                name: None,
            } => write!(f, "uid {uid}"),
            Self::Stranger {
                uid: None,
                name: Some(sid),
            } => write!(f, "another account ({sid})"),
            Self::Stranger {
                uid: None,
                name: None,
            } => f.write_str("a process of another account (none of this account's holds it)"),
            Self::Unknown(why) => write!(f, "unknown ({why})"),
            Self::Gone => f.write_str("a client that already closed"),
        }
    }
}

/// Which account holds the client end (`peer`) of a connection accepted at `local`, both on
/// loopback. Blocking: it reads `/proc` (Linux), runs `lsof` (macOS), or reads the TCP table
/// and the holder's token (Windows).
pub(crate) fn peer(local: SocketAddr, peer: SocketAddr) -> Peer {
    #[cfg(target_os = "linux")]
    {
        let (sockets, read) = procfs::sockets_read();
        if !read {
            return Peer::Unknown("cannot read /proc/net/tcp".to_owned());
        }
        let me = rustix::process::geteuid().as_raw();
        procfs::peer(&sockets, local, peer, me)
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        // lsof shows other accounts' processes to root only: a peer it does not show is not
        // one of ours, which is all the check needs to know.
        let out = std::process::Command::new("lsof")
            .args([
                "-nP",
                "-w",
                &format!("-iTCP@{}:{}", bracketed(peer.ip()), peer.port()),
                "-Fpun",
            ])
            .stderr(std::process::Stdio::null())
            .output();
        match out {
            Ok(out) => {
                let me = rustix::process::geteuid().as_raw();
                lsof_peer(&String::from_utf8_lossy(&out.stdout), local, peer, me)
            }
            Err(e) => Peer::Unknown(format!("cannot run `lsof`: {e}")),
        }
    }
    #[cfg(windows)]
    {
        let Some(me) = crate::os::account::own_sid() else {
            return Peer::Unknown(
                "cannot read this process's account (its token's SID)".to_owned(),
            );
        };
        match windows::connections() {
            Ok(table) => sid_peer(
                client_socket(&table, local, peer),
                &me,
                crate::os::account::sid_of,
            ),
            Err(why) => Peer::Unknown(why),
        }
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (local, peer);
        Peer::Unknown(PEER_CHECK_UNAVAILABLE.to_owned())
    }
}

/// A TCP socket of Windows' table (`GetExtendedTcpTable`): its two ends and the pid that owns
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(windows),
    allow(dead_code, reason = "Windows' path, tested everywhere")
)]
struct Connection {
    local: SocketAddr,
    remote: SocketAddr,
    /// Whether it listens (or is closed: no peer) rather than being connected.
    listening: bool,
    /// Whether it is open both ways (`ESTABLISHED`), not closing or closed by its owner.
    established: bool,
    pid: u32,
}

/// The socket whose local end is `peer` and whose other end is `local`: the client's side of
/// a connection this process accepted. `None` when the table has none (the client already
/// closed, or it is not on this machine).
#[cfg_attr(
    not(windows),
    allow(dead_code, reason = "Windows' path, tested everywhere")
)]
fn client_socket(table: &[Connection], local: SocketAddr, peer: SocketAddr) -> Option<Connection> {
    let (local, peer) = (canonical(local), canonical(peer));
    table
        .iter()
        .find(|c| !c.listening && canonical(c.local) == peer && canonical(c.remote) == local)
        .copied()
}

/// The verdict on the client's socket, `me` being this process's user SID and `sid_of` a
/// pid's. No such socket, or a pid whose token cannot be read (Windows lets an account read
/// its own processes' tokens; another account's, or one gone since), is a stranger, as an
/// unreadable process is on Linux and macOS. Pid 0 names no process: for a socket its owner
/// closed (TIME_WAIT and the like, whose owner the system forgets) that is a stranger too (a
/// client that wrote a request and closed is not served); for an open one it means the table
/// names no owners at all (Wine 8.0 names pid 0 for every socket), which is no answer.
#[cfg_attr(
    not(windows),
    allow(dead_code, reason = "Windows' path, tested everywhere")
)]
fn sid_peer(
    socket: Option<Connection>,
    me: &str,
    sid_of: impl FnOnce(u32) -> Option<String>,
) -> Peer {
    match socket {
        Some(Connection {
            pid: 0,
            established: true,
            ..
        }) => Peer::Unknown(NO_OWNING_PID.to_owned()),
        socket => match socket.filter(|s| s.pid != 0).and_then(|s| sid_of(s.pid)) {
            Some(sid) if sid == me => Peer::Owner,
            sid => Peer::Stranger {
                uid: None,
                name: sid,
            },
        },
    }
}

/// Why an open connection whose row in the TCP table names pid 0 is not judged.
const NO_OWNING_PID: &str = "the system's TCP table names no process for the client's socket \
                             (owning pid 0)";

/// Windows' TCP table, through `netstat2` (its safe API over `GetExtendedTcpTable`).
#[cfg(windows)]
mod windows {
    use std::net::SocketAddr;

    use netstat2::{AddressFamilyFlags, ProtocolFlags, ProtocolSocketInfo, TcpState};

    use super::Connection;

    /// Every TCP socket (IPv4 and IPv6) with its owning pid, or why the table cannot be read.
    pub(super) fn connections() -> Result<Vec<Connection>, String> {
        let sockets = netstat2::iterate_sockets_info(
            AddressFamilyFlags::IPV4 | AddressFamilyFlags::IPV6,
            ProtocolFlags::TCP,
        )
        .map_err(|e| format!("cannot read the TCP table (GetExtendedTcpTable): {e}"))?;
        let mut out = Vec::new();
        for socket in sockets {
            let socket = socket
                .map_err(|e| format!("cannot read the TCP table (GetExtendedTcpTable): {e}"))?;
            let pid = socket.associated_pids.first().copied().unwrap_or(0);
            if let ProtocolSocketInfo::Tcp(tcp) = socket.protocol_socket_info {
                out.push(Connection {
                    local: SocketAddr::new(tcp.local_addr, tcp.local_port),
                    remote: SocketAddr::new(tcp.remote_addr, tcp.remote_port),
                    listening: matches!(tcp.state, TcpState::Listen | TcpState::Closed),
                    established: tcp.state == TcpState::Established,
                    pid,
                });
            }
        }
        Ok(out)
    }
}

/// `addr` as lsof's `-i` wants it: IPv6 in brackets.
#[cfg_attr(
    not(target_os = "macos"),
    allow(dead_code, reason = "macOS's path, tested on Linux")
)]
fn bracketed(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}

/// The same address whether an IPv4 socket or a dual-stack IPv6 one shows it
/// (`::ffff:127.0.0.1`).
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, a.port())),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// The account holding `peer`'s end of the connection to `local` in `lsof -F pun` output
/// (`n` is `LOCAL->REMOTE` for each connected socket of the process `p` of user `u` above it).
#[cfg_attr(
    not(target_os = "macos"),
    allow(dead_code, reason = "macOS's path, tested on Linux")
)]
fn lsof_peer(text: &str, local: SocketAddr, peer: SocketAddr, me: u32) -> Peer {
    let mut uid = None;
    for line in text.lines() {
        let Some((tag, value)) = line.split_at_checked(1) else {
            continue;
        };
        match tag {
            "p" => uid = None,
            "u" => uid = value.parse::<u32>().ok(),
            "n" => {
                let Some((from, to)) = value.split_once("->") else {
                    continue;
                };
                let (Ok(from), Ok(to)) = (from.parse::<SocketAddr>(), to.parse::<SocketAddr>())
                else {
                    continue;
                };
                if canonical(from) == canonical(peer) && canonical(to) == canonical(local) {
                    return match uid {
                        Some(u) if u == me => Peer::Owner,
                        Some(u) => Peer::Stranger {
                            uid: Some(u),
                            name: None,
                        },
                        None => Peer::Stranger {
                            uid: None,
                            name: None,
                        },
                    };
                }
            }
            _ => {}
        }
    }
    Peer::Stranger {
        uid: None,
        name: None,
    }
}

#[cfg(unix)]
fn by_user(uid: u32) -> Who {
    Who::User {
        uid,
        name: crate::os::account::name_of(uid),
    }
}

/// The first process in `lsof -F pcu` output: its pid, command and uid.
#[cfg_attr(
    not(target_os = "macos"),
    allow(dead_code, reason = "macOS's path, tested on Linux")
)]
fn parse_lsof(text: &str) -> Option<(Option<u32>, Option<String>, Option<u32>)> {
    let (mut pid, mut comm, mut uid) = (None, None, None);
    for line in text.lines() {
        let (tag, value) = line.split_at_checked(1)?;
        match tag {
            "p" if pid.is_some() => break,
            "p" => pid = value.parse().ok(),
            "c" => comm = Some(value.to_owned()),
            "u" => uid = value.parse().ok(),
            _ => {}
        }
    }
    (pid.is_some() || uid.is_some()).then_some((pid, comm, uid))
}

/// Linux: the way `ss -tnp` does it. The socket's inode in `/proc/net/tcp{,6}`, then the process
/// whose `/proc/PID/fd` links to `socket:[inode]`. Other users' processes cannot be looked
/// into, so their owner is named by user only.
#[cfg(target_os = "linux")]
mod procfs {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    use super::{Holder, Peer, Who, by_user, canonical};

    /// `st` of a LISTEN socket in `/proc/net/tcp`.
    const LISTEN: u8 = 0x0A;
    /// `st` of a closed connection kept in TIME_WAIT (its inode is 0: no process holds it).
    const TIME_WAIT: u8 = 0x06;
    /// `st` of an open connection.
    const ESTABLISHED: u8 = 0x01;

    /// A TCP socket from `/proc/net/tcp` or `/proc/net/tcp6`.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(super) struct Socket {
        /// The address it is bound to.
        pub(super) addr: IpAddr,
        /// Its port.
        pub(super) port: u16,
        /// The other end (unspecified for a listener).
        pub(super) peer: SocketAddr,
        /// The kernel's TCP state (`st`).
        pub(super) state: u8,
        /// The uid that owns it.
        pub(super) uid: u32,
        /// The socket inode (`socket:[inode]` in `/proc/PID/fd`).
        pub(super) inode: u64,
    }

    impl Socket {
        pub(super) fn listens(&self) -> bool {
            self.state == LISTEN
        }

        /// Whether it keeps `127.0.0.1:port` from being bound: the same address, the wildcard, or
        /// a dual-stack IPv6 wildcard.
        pub(super) fn blocks_loopback(&self) -> bool {
            match self.addr {
                IpAddr::V4(a) => a == Ipv4Addr::LOCALHOST || a.is_unspecified(),
                IpAddr::V6(a) => {
                    a.is_unspecified()
                        || a.to_ipv4_mapped()
                            .is_some_and(|m| m == Ipv4Addr::LOCALHOST || m.is_unspecified())
                }
            }
        }
    }

    /// Every TCP socket of this network namespace.
    pub(super) fn sockets() -> Vec<Socket> {
        sockets_read().0
    }

    /// Every TCP socket of this network namespace, and whether `/proc/net/tcp` could be read
    /// (`tcp6` is absent on a kernel without IPv6).
    pub(super) fn sockets_read() -> (Vec<Socket>, bool) {
        let mut out = Vec::new();
        let mut read = false;
        for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
            if let Ok(text) = std::fs::read_to_string(file) {
                read |= !v6;
                out.extend(parse_sockets(&text, v6));
            }
        }
        (out, read)
    }

    /// The account of the socket whose local end is `peer` and whose other end is `local`:
    /// the client's side of a connection this process accepted. The kernel lists it with the
    /// uid that created it (dual-stack sockets in `tcp6`, as `::ffff:127.0.0.1`). Not found
    /// (the client already closed, or it is not on this machine) counts as a stranger.
    pub(super) fn peer(sockets: &[Socket], local: SocketAddr, peer: SocketAddr, me: u32) -> Peer {
        let (local, peer) = (canonical(local), canonical(peer));
        let found = sockets.iter().find(|s| {
            !s.listens()
                && canonical(SocketAddr::new(s.addr, s.port)) == peer
                && canonical(s.peer) == local
        });
        match found {
            // An orphan (inode 0: no descriptor left, listed as uid 0) that is no longer open:
            // its client closed. Not served, and not another account's.
            Some(s) if s.inode == 0 && s.state != ESTABLISHED => Peer::Gone,
            Some(s) if s.uid == me => Peer::Owner,
            Some(s) => Peer::Stranger {
                uid: Some(s.uid),
                name: crate::os::account::name_of(s.uid),
            },
            None => Peer::Stranger {
                uid: None,
                name: None,
            },
        }
    }

    /// Who holds `port` among `sockets`: a listener first (named by its process, else its
    /// user); else the local end of a connection on it, an open one (named by `process_of` its
    /// inode) before one in TIME_WAIT. Only sockets on loopback or the wildcard count: others
    /// do not keep `127.0.0.1:port` from being bound.
    pub(super) fn holder(
        sockets: &[Socket],
        port: u16,
        process_of: impl Fn(u64) -> Option<(u32, String)>,
    ) -> Option<Holder> {
        let who = |s: &Socket| match process_of(s.inode) {
            Some((pid, comm)) => Who::Process { pid, comm },
            None => by_user(s.uid),
        };
        let mut listeners: Vec<&Socket> = sockets
            .iter()
            .filter(|s| s.listens() && s.port == port)
            .collect();
        listeners.sort_by_key(|s| !s.blocks_loopback());
        if let Some(first) = listeners.first() {
            let named = listeners.iter().find_map(|s| process_of(s.inode));
            return Some(Holder::Listener(match named {
                Some((pid, comm)) => Who::Process { pid, comm },
                None => by_user(first.uid),
            }));
        }
        let mut outgoing: Vec<&Socket> = sockets
            .iter()
            .filter(|s| s.port == port && s.blocks_loopback() && !s.listens())
            .collect();
        outgoing.sort_by_key(|s| s.state == TIME_WAIT);
        let first = outgoing.first()?;
        Some(Holder::Outgoing {
            who: (first.state != TIME_WAIT).then(|| who(first)),
            peer: first.peer,
        })
    }

    /// Reads `/proc/net/tcp` (or `tcp6`) text.
    pub(super) fn parse_sockets(text: &str, v6: bool) -> Vec<Socket> {
        text.lines()
            .skip(1)
            .filter_map(|line| {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
                let f: Vec<&str> = line.split_whitespace().collect();
                let endpoint = |field: &str| -> Option<(IpAddr, u16)> {
                    let (addr, port) = field.split_once(':')?;
                    Some((parse_addr(addr, v6)?, u16::from_str_radix(port, 16).ok()?))
                };
                let (addr, port) = endpoint(f.get(1)?)?;
                Some(Socket {
                    addr,
                    port,
                    peer: endpoint(f.get(2)?)?.into(),
                    state: u8::from_str_radix(f.get(3)?, 16).ok()?,
                    uid: f.get(7)?.parse().ok()?,
                    inode: f.get(9)?.parse().ok()?,
                })
            })
            .collect()
    }

    /// The kernel prints each 32-bit word of the address in the machine's byte order.
    fn parse_addr(hex: &str, v6: bool) -> Option<IpAddr> {
        let word = |h: &str| u32::from_str_radix(h, 16).ok().map(u32::to_ne_bytes);
        if !v6 {
            return (hex.len() == 8)
                .then(|| word(hex))
                .flatten()
                .map(IpAddr::from);
        }
        if hex.len() != 32 || !hex.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, chunk) in bytes.chunks_mut(4).enumerate() {
            chunk.copy_from_slice(&word(&hex[i * 8..i * 8 + 8])?);
        }
        Some(IpAddr::V6(Ipv6Addr::from(bytes)))
    }

    /// The process holding socket `inode`, with its `comm`, if we may look into it.
    pub(super) fn process_of(inode: u64) -> Option<(u32, String)> {
        let wanted = format!("socket:[{inode}]");
        let procs = std::fs::read_dir("/proc").ok()?;
        for entry in procs.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
                continue; // another user's process, or gone
            };
            let holds = fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str())
            });
            if holds {
                let comm = std::fs::read_to_string(entry.path().join("comm"))
                    .map(|c| c.trim().to_owned())
                    .unwrap_or_else(|_| "?".to_owned());
                return Some((pid, comm));
            }
        }
        None
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn v4(a: [u8; 4]) -> String {
            format!("{:08X}", u32::from_ne_bytes(a))
        }

        fn v6(a: Ipv6Addr) -> String {
            a.octets()
                .chunks(4)
                .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        }

        /// One `/proc/net/tcp` row: local address and port, remote ones, state, uid, inode.
        type Row = ([u8; 4], u16, [u8; 4], u16, u8, u32, u64);

        fn table(rows: &[Row]) -> String {
            let mut text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n".to_owned();
            for (i, (a, p, r, rp, st, uid, inode)) in rows.iter().enumerate() {
                text.push_str(&format!(
                    "   {i}: {}:{p:04X} {}:{rp:04X} {st:02X} 00000000:00000000 00:00000000 00000000 {uid:>5}        0 {inode} 1 0000000000000000 100 0 0 10 0\n",
                    v4(*a),
                    v4(*r)
                ));
            }
            text
        }

        const LO: [u8; 4] = [127, 0, 0, 1];
        const ANY: [u8; 4] = [0, 0, 0, 0];

        #[test]
        fn reads_sockets_from_proc_net_tcp() {
            let text = table(&[
                (LO, 19046, ANY, 0, LISTEN, 1002, 81234),
                (ANY, 3306, ANY, 0, LISTEN, 0, 555),
                (LO, 19046, LO, 54321, 0x01, 1002, 0),
            ]);
            let s = parse_sockets(&text, false);
            assert_eq!(s.len(), 3);
            assert_eq!(
                s[0],
                Socket {
                    addr: IpAddr::from(LO),
                    port: 19046,
                    peer: SocketAddr::from((ANY, 0)),
                    state: LISTEN,
                    uid: 1002,
                    inode: 81234
                }
            );
            assert_eq!(s[2].peer, SocketAddr::from((LO, 54321)));
            assert_eq!(s[2].state, 0x01);
            assert!(s.iter().all(Socket::blocks_loopback));
            assert_eq!(s.iter().filter(|s| s.listens()).count(), 2);
        }

        #[test]
        fn names_a_listener_first_then_an_open_connection_then_one_in_time_wait() {
            let procs = |inode: u64| (inode == 7).then(|| (4242, "java".to_owned()));
            let outgoing = (LO, 39094, LO, 19094, 0x01, 1000, 7);
            let closed = (LO, 39094, LO, 3306, TIME_WAIT, 0, 0);
            let elsewhere = ([10, 0, 0, 2], 39094, [10, 0, 0, 9], 22, 0x01, 1000, 7);
            let holder = |rows: &[_]| holder(&parse_sockets(&table(rows), false), 39094, procs);

            let java = Who::Process {
                pid: 4242,
                comm: "java".to_owned(),
            };
            assert_eq!(
                holder(&[closed, outgoing]),
                Some(Holder::Outgoing {
                    who: Some(java.clone()),
                    peer: SocketAddr::from((LO, 19094)),
                })
            );
            assert_eq!(
                holder(&[closed]),
                Some(Holder::Outgoing {
                    who: None,
                    peer: SocketAddr::from((LO, 3306)),
                })
            );
            let listener = (ANY, 39094, ANY, 0, LISTEN, 1000, 7);
            assert_eq!(
                holder(&[outgoing, listener]),
                Some(Holder::Listener(java.clone()))
            );
            // Not on loopback: it does not keep 127.0.0.1:39094 from being bound.
            assert_eq!(holder(&[elsewhere]), None);
            assert_eq!(holder(&[]), None);

            let h = holder(&[outgoing]).expect("held");
            assert_eq!(h.pid(), Some(4242));
            assert_eq!(
                h.to_string(),
                "a connection of `java` (pid 4242) to 127.0.0.1:19094, which the system gave \
                 this port as its source port"
            );
            assert!(
                holder(&[closed])
                    .expect("held")
                    .to_string()
                    .contains("TIME_WAIT"),
            );
        }

        #[test]
        fn the_peer_is_the_socket_whose_far_end_is_the_listener() {
            // The endpoint on 9092 accepted 127.0.0.1:40001 (uid 1000, the owner) and
            // 127.0.0.1:40002 (uid 1003); the accepted sockets (uid 1000) list the other way.
            let text = table(&[
                (LO, 9092, ANY, 0, LISTEN, 1000, 1),
                (LO, 9092, LO, 40001, 0x01, 1000, 2),
                (LO, 40001, LO, 9092, 0x01, 1000, 3),
                (LO, 9092, LO, 40002, 0x01, 1000, 4),
                (LO, 40002, LO, 9092, 0x01, 1003, 5),
                // A probe's connection that closed before the lookup: an orphan in TIME_WAIT,
                // listed as uid 0 with no inode; and an orphan still open, which is not gone.
                (LO, 40004, LO, 9092, TIME_WAIT, 0, 0),
                (LO, 40005, LO, 9092, 0x01, 0, 0),
            ]);
            let sockets = parse_sockets(&text, false);
            let at = |port| SocketAddr::from((LO, port));
            assert_eq!(peer(&sockets, at(9092), at(40001), 1000), Peer::Owner);
            match peer(&sockets, at(9092), at(40002), 1000) {
                Peer::Stranger { uid, .. } => assert_eq!(uid, Some(1003)),
                other => panic!("{other:?}"),
            }
            // Gone (the client closed first): not the owner's.
            assert_eq!(
                peer(&sockets, at(9092), at(40003), 1000),
                Peer::Stranger {
                    uid: None,
                    name: None
                }
            );
            // Closed before the lookup: gone, neither root's nor ours.
            assert_eq!(peer(&sockets, at(9092), at(40004), 1000), Peer::Gone);
            assert!(matches!(
                peer(&sockets, at(9092), at(40005), 1000),
                Peer::Stranger { uid: Some(0), .. }
            ));
            // The accepted side (local 9092) is never taken for the client's.
            assert_ne!(peer(&sockets, at(40001), at(9092), 1003), Peer::Owner);
        }

        /// Real sockets: a connection this process opens to a listener it holds is its own,
        /// over IPv4 and from a dual-stack IPv6 socket (listed in `tcp6` as
        /// `::ffff:127.0.0.1`).
        #[test]
        fn a_connection_from_this_process_is_the_owners() {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let local = listener.local_addr().expect("addr");
            let mapped = SocketAddr::from((Ipv4Addr::LOCALHOST.to_ipv6_mapped(), local.port()));
            for to in [local, mapped] {
                let Ok(client) = std::net::TcpStream::connect(to) else {
                    assert_eq!(to, mapped, "IPv4 loopback must connect");
                    continue; // no IPv6 in this kernel
                };
                let (_server, from) = listener.accept().expect("accept");
                assert_eq!(from, client.local_addr().map(canonical).expect("addr"));
                assert_eq!(super::super::peer(local, from), Peer::Owner, "via {to}");
                // And the listener's port as a "peer" is no client of ours.
                let me = rustix::process::geteuid().as_raw();
                let (sockets, read) = sockets_read();
                assert!(read);
                assert_ne!(peer(&sockets, from, local, me + 1), Peer::Owner);
            }
        }

        #[test]
        fn reads_ipv6_and_knows_which_addresses_block_loopback() {
            let header = "  sl  local_address                         remote_address                        st …\n";
            let row = |a: Ipv6Addr, inode: u32| {
                format!(
                    "   0: {}:0CEA 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   0  0 {inode} 1 0 100 0 0 10 0\n",
                    v6(a)
                )
            };
            let text = format!(
                "{header}{}{}{}",
                row(Ipv6Addr::UNSPECIFIED, 1),
                row(Ipv6Addr::LOCALHOST, 2),
                row(Ipv4Addr::LOCALHOST.to_ipv6_mapped(), 3)
            );
            let l = parse_sockets(&text, true);
            assert_eq!(l.len(), 3);
            assert_eq!(l[1].addr, IpAddr::V6(Ipv6Addr::LOCALHOST));
            assert!(l.iter().all(Socket::listens));
            let blocks: Vec<bool> = l.iter().map(Socket::blocks_loopback).collect();
            // `[::1]:P` does not stop 127.0.0.1:P from being bound.
            assert_eq!(blocks, [true, false, true]);
            assert!(parse_sockets("header\n   0: zz:0CEA x 0A\n", true).is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pid_of_the_far_end_in_the_tcp_table() {
        let at = |s: &str| s.parse::<SocketAddr>().expect("addr");
        let (local, peer) = (at("127.0.0.1:9092"), at("127.0.0.1:50123"));
        let row = |l: &str, r: &str, listening: bool, pid| Connection {
            local: at(l),
            remote: at(r),
            listening,
            established: !listening,
            pid,
        };
        let table = [
            row("127.0.0.1:9092", "0.0.0.0:0", true, 10),
            // The endpoint's own end of the connection: not the client's.
            row("127.0.0.1:9092", "127.0.0.1:50123", false, 10),
            // Another connection from the same port, elsewhere.
            row("127.0.0.1:50123", "127.0.0.1:3306", false, 11),
            row("127.0.0.1:50123", "127.0.0.1:9092", false, 42),
        ];
        let pid = |table: &[Connection], local| client_socket(table, local, peer).map(|c| c.pid);
        assert_eq!(pid(&table, local), Some(42));
        // A dual-stack client's row, and a listener's address given mapped.
        let v6 = [row(
            "[::ffff:127.0.0.1]:50123",
            "[::ffff:127.0.0.1]:9092",
            false,
            7,
        )];
        assert_eq!(pid(&v6, local), Some(7));
        assert_eq!(pid(&table, at("[::ffff:127.0.0.1]:9092")), Some(42));
        assert_eq!(pid(&table[..3], local), None);

        let me = "S-1-5-21-1-2-3-1001";
        let sid = |s: &'static str| move |_| Some(s.to_owned());
        let client = table[3];
        assert_eq!(sid_peer(Some(client), me, sid(me)), Peer::Owner);
        let other = sid_peer(Some(client), me, sid("S-1-5-21-1-2-3-1002"));
        assert_eq!(
            other,
            Peer::Stranger {
                uid: None,
                name: Some("S-1-5-21-1-2-3-1002".to_owned())
            }
        );
        assert_eq!(other.to_string(), "another account (S-1-5-21-1-2-3-1002)");
        let unreadable = Peer::Stranger {
            uid: None,
            name: None,
        };
        assert_eq!(sid_peer(Some(client), me, |_| None), unreadable);
        assert_eq!(sid_peer(None, me, sid(me)), unreadable);
        // Pid 0: an open socket's is no answer (a table without owners, as Wine's); a closing
        // one's (the client wrote and closed) is a stranger's.
        let nobody = Connection { pid: 0, ..client };
        assert_eq!(
            sid_peer(Some(nobody), me, sid(me)),
            Peer::Unknown(NO_OWNING_PID.to_owned())
        );
        let closed = Connection {
            established: false,
            ..nobody
        };
        assert_eq!(sid_peer(Some(closed), me, sid(me)), unreadable);
    }

    /// The whole lookup, on a connection this process opens to itself: on Windows (the unit
    /// tests run under Wine in `scripts/check-targets --windows`) it goes through the TCP table
    /// and the process's token. Wine 8.0's table names pid 0 as every socket's owner (its own
    /// listener's included): there the check has no answer, and says so.
    #[test]
    fn a_connection_from_this_process_is_this_accounts() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let local = listener.local_addr().expect("local");
        let _client = std::net::TcpStream::connect(local).expect("connect");
        let (_accepted, from) = listener.accept().expect("accept");
        let got = peer(local, from);
        #[cfg(windows)]
        let pids_named = windows::connections()
            .expect("the TCP table")
            .iter()
            .any(|c| c.listening && c.local == local && c.pid == std::process::id());
        #[cfg(not(windows))]
        let pids_named = true;
        if pids_named {
            assert_eq!(got, Peer::Owner);
            assert_eq!(peer_check_unavailable(), None);
            assert_eq!(self_check().expect("self check"), Peer::Owner);
        } else {
            assert_eq!(got, Peer::Unknown(NO_OWNING_PID.to_owned()));
            let why = peer_check_unavailable().expect("a reason");
            assert!(
                why.starts_with(PEER_CHECK_UNAVAILABLE) && why.ends_with(NO_OWNING_PID),
                "{why}"
            );
            eprintln!("the TCP table names no owning pids here (Wine): {why}");
        }
    }

    #[test]
    fn finds_the_peer_socket_in_lsof_field_output() {
        let local: SocketAddr = "127.0.0.1:9092".parse().expect("addr");
        let peer: SocketAddr = "127.0.0.1:50123".parse().expect("addr");
        // The tunnel's accepted socket is listed too (its remote end is the peer).
        let text = "p100\nu501\nf9\nn127.0.0.1:9092->127.0.0.1:50123\n\
                    p200\nu501\nf5\nn[::ffff:127.0.0.1]:50123->[::ffff:127.0.0.1]:9092\n";
        assert_eq!(lsof_peer(text, local, peer, 501), Peer::Owner);
        assert_eq!(
            lsof_peer(text, local, peer, 502),
            Peer::Stranger {
                uid: Some(501),
                name: None
            }
        );
        // Another account's process is not shown to us: only our accepted socket is.
        let text = "p100\nu501\nf9\nn127.0.0.1:9092->127.0.0.1:50123\n";
        assert_eq!(
            lsof_peer(text, local, peer, 501),
            Peer::Stranger {
                uid: None,
                name: None
            }
        );
        assert_eq!(bracketed("::1".parse().expect("ip")), "[::1]");
    }

    #[test]
    fn reads_the_first_process_of_lsof_field_output() {
        let text = "p4242\ncsocat\nu501\nf7\np77\ncother\n";
        assert_eq!(
            parse_lsof(text),
            Some((Some(4242), Some("socat".to_owned()), Some(501)))
        );
        assert_eq!(parse_lsof(""), None);
    }
}
