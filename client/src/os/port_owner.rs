//! Who holds a local TCP port, asked of the OS without connecting to it.
//!
//! - Linux: `/proc` (no external tool), see `procfs`;
//! - macOS and the BSDs: `lsof -nP -iTCP:PORT -sTCP:LISTEN` (shipped with macOS);
//! - elsewhere (Windows): the owner is not named, and "taken" is learnt by connecting.

/// Whether something listens where `127.0.0.1:port` would.
pub fn is_taken(port: u16) -> bool {
    #[cfg(target_os = "linux")]
    {
        procfs::listeners()
            .iter()
            .any(|l| l.port == port && l.blocks_loopback())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
        std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(500)).is_ok()
    }
}

/// Names whoever listens on `port`: `` `socat` (pid 4242) ``, or ``a process of user `bob` ``
/// when only its user can be known.
pub fn owner(port: u16) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let mut on_port: Vec<procfs::Listener> = procfs::listeners()
            .into_iter()
            .filter(|l| l.port == port)
            .collect();
        on_port.sort_by_key(|l| !l.blocks_loopback());
        let first = on_port.first()?;
        for l in &on_port {
            if let Some((pid, comm)) = procfs::process_of(l.inode) {
                return Some(format!("`{comm}` (pid {pid})"));
            }
        }
        Some(by_user(first.uid))
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let out = std::process::Command::new("lsof")
            .args(["-nP", &format!("-iTCP:{port}"), "-sTCP:LISTEN", "-Fpcu"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let (pid, comm, uid) = parse_lsof(&String::from_utf8_lossy(&out.stdout))?;
        Some(match (pid, comm) {
            (Some(pid), Some(comm)) => format!("`{comm}` (pid {pid})"),
            _ => by_user(uid?),
        })
    }
    #[cfg(not(unix))]
    {
        let _ = port;
        None
    }
}

#[cfg(unix)]
fn by_user(uid: u32) -> String {
    match crate::os::account::name_of(uid) {
        Some(user) => format!("a process of user `{user}`"),
        None => format!("a process of uid {uid}"),
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

/// Linux: the way `ss -ltnp` does it. The LISTEN socket's inode in `/proc/net/tcp{,6}`, then the
/// process whose `/proc/PID/fd` links to `socket:[inode]`. Other users' processes cannot be
/// looked into, so their owner is named by user only.
#[cfg(target_os = "linux")]
mod procfs {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    /// A LISTEN socket from `/proc/net/tcp` or `/proc/net/tcp6`.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(super) struct Listener {
        /// The address it is bound to.
        pub(super) addr: IpAddr,
        /// Its port.
        pub(super) port: u16,
        /// The uid that owns it.
        pub(super) uid: u32,
        /// The socket inode (`socket:[inode]` in `/proc/PID/fd`).
        pub(super) inode: u64,
    }

    impl Listener {
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

    /// Every LISTEN TCP socket of this network namespace.
    pub(super) fn listeners() -> Vec<Listener> {
        let mut out = Vec::new();
        for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
            if let Ok(text) = std::fs::read_to_string(file) {
                out.extend(parse_listeners(&text, v6));
            }
        }
        out
    }

    /// Reads `/proc/net/tcp` (or `tcp6`) text: LISTEN (`0A`) lines only.
    pub(super) fn parse_listeners(text: &str, v6: bool) -> Vec<Listener> {
        text.lines()
            .skip(1)
            .filter_map(|line| {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.get(3) != Some(&"0A") {
                    return None;
                }
                let (addr, port) = f.get(1)?.split_once(':')?;
                Some(Listener {
                    addr: parse_addr(addr, v6)?,
                    port: u16::from_str_radix(port, 16).ok()?,
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

        #[test]
        fn reads_listen_sockets_from_proc_net_tcp() {
            let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
            let text = format!(
                "{header}\
                     0: {}:4A66 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 81234 1 0000000000000000 100 0 0 10 0\n\
                     1: {}:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 100 0 0 10 0\n\
                     2: {}:4A66 {}:D431 01 00000000:00000000 00:00000000 00000000  1002        0 0 1 0000000000000000 20 4 30 10 -1\n",
                v4([127, 0, 0, 1]),
                v4([0, 0, 0, 0]),
                v4([127, 0, 0, 1]),
                v4([127, 0, 0, 1]),
            );
            let l = parse_listeners(&text, false);
            assert_eq!(
                l,
                [
                    Listener {
                        addr: IpAddr::from([127, 0, 0, 1]),
                        port: 19046,
                        uid: 1002,
                        inode: 81234
                    },
                    Listener {
                        addr: IpAddr::from([0, 0, 0, 0]),
                        port: 3306,
                        uid: 0,
                        inode: 555
                    },
                ]
            );
            assert!(l.iter().all(Listener::blocks_loopback));
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
            let l = parse_listeners(&text, true);
            assert_eq!(l.len(), 3);
            assert_eq!(l[1].addr, IpAddr::V6(Ipv6Addr::LOCALHOST));
            let blocks: Vec<bool> = l.iter().map(Listener::blocks_loopback).collect();
            // `[::1]:P` does not stop 127.0.0.1:P from being bound.
            assert_eq!(blocks, [true, false, true]);
            assert!(parse_listeners("header\n   0: zz:0CEA x 0A\n", true).is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
