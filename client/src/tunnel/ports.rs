//! Local ports: binding `127.0.0.1:P` (loopback only), and whether (and by whom) a port is
//! already taken ([`crate::os::port_owner`] knows how on each OS).

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpSocket};

use crate::error::Error;
use crate::os::port_owner;

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Listens on `127.0.0.1:port` only. `SO_REUSEADDR` (Unix only: [`crate::os::LISTEN_REUSEADDR`])
/// lets a restarted tunnel bind while old connections linger in TIME_WAIT; Linux still refuses
/// it while anything listens there.
///
/// # Errors
/// [`Error::PortInUse`] naming the holder when it can; [`Error::Listen`] otherwise.
pub fn bind(port: u16) -> Result<TcpListener, Error> {
    let listen = |socket: TcpSocket| {
        socket.set_reuseaddr(crate::os::LISTEN_REUSEADDR)?;
        socket.bind(loopback(port))?;
        socket.listen(1024)
    };
    match TcpSocket::new_v4().and_then(listen) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(Error::PortInUse {
            port,
            owner: owner_of(port),
        }),
        Err(source) => Err(Error::Listen { port, source }),
    }
}

/// [`bind`] without naming the holder on failure (which scans every process): for trying
/// port after port.
///
/// # Errors
/// The bind's own error.
pub fn try_bind(port: u16) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(crate::os::LISTEN_REUSEADDR)?;
    socket.bind(loopback(port))?;
    socket.listen(1024)
}

/// Whether something listens where `127.0.0.1:port` would.
pub fn is_taken(port: u16) -> bool {
    port_owner::is_taken(port)
}

/// Names whoever listens on `port`: `` `socat` (pid 4242) ``, or ``a process of user `bob` ``
/// when it belongs to another user; `None` when this OS does not say.
pub fn owner_of(port: u16) -> Option<String> {
    port_owner::owner(port)
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_port_is_refused_and_its_owner_named() {
        let first = bind(0).expect("any free port");
        let port = first.local_addr().expect("addr").port();
        assert!(is_taken(port));
        let e = bind(port).expect_err("taken");
        let Error::PortInUse { port: p, owner } = &e else {
            panic!("{e}");
        };
        assert_eq!(*p, port);
        // This very test process holds it (named where the OS says; Linux and macOS do).
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        let _ = owner;
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        assert!(
            owner
                .as_deref()
                .is_some_and(|o| o.ends_with(&format!("(pid {})", std::process::id()))),
            "{owner:?}"
        );
        drop(first);
        assert!(!is_taken(port));
    }
}
