//! Local ports: binding `127.0.0.1:P` (loopback only), and whether (and by whom) a port is
//! already taken ([`crate::os::port_owner`] knows how on each OS).

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpSocket};

use crate::error::{Error, PortHolder, TunnelError};
use crate::os::port_owner::{self, Holder};

/// `127.0.0.1:port`.
pub(crate) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Listens on `127.0.0.1:port` only. `SO_REUSEADDR` (Unix only: [`crate::os::LISTEN_REUSEADDR`])
/// lets a restarted tunnel bind while old connections linger in TIME_WAIT; Linux still refuses
/// it while anything listens there.
///
/// # Errors
/// [`TunnelError::PortInUse`] naming the holder when it can; [`TunnelError::Listen`] otherwise.
pub(crate) fn bind(port: u16) -> Result<TcpListener, Error> {
    let listen = |socket: TcpSocket| {
        socket.set_reuseaddr(crate::os::LISTEN_REUSEADDR)?;
        socket.bind(loopback(port))?;
        socket.listen(1024)
    };
    match TcpSocket::new_v4().and_then(listen) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Err(Error::Tunnel(TunnelError::PortInUse {
                port,
                owner: holder_of(port),
            }))
        }
        Err(source) => Err(Error::Tunnel(TunnelError::Listen { port, source })),
    }
}

/// [`bind`] without naming the holder on failure (which scans every process): for trying
/// port after port.
///
/// # Errors
/// The bind's own error.
pub(crate) fn try_bind(port: u16) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(crate::os::LISTEN_REUSEADDR)?;
    socket.bind(loopback(port))?;
    socket.listen(1024)
}

/// Whether something listens where `127.0.0.1:port` would.
pub(crate) fn is_taken(port: u16) -> bool {
    port_owner::is_taken(port)
}

/// Whether `127.0.0.1:port` can be listened on now: nothing listens there (which on Windows
/// includes the wildcard, which would still let us bind) and a trial bind succeeds (which
/// catches a port lent to an outgoing connection, where nothing listens).
///
/// # Errors
/// [`TunnelError::PortInUse`] naming the holder when it can.
pub(crate) fn check_free(port: u16) -> Result<(), Error> {
    let lent = || matches!(try_bind(port), Err(e) if e.kind() == std::io::ErrorKind::AddrInUse);
    if is_taken(port) || lent() {
        return Err(Error::Tunnel(TunnelError::PortInUse {
            port,
            owner: holder_of(port),
        }));
    }
    Ok(())
}

/// Who keeps `127.0.0.1:port` from being bound (displayed as `` `socat` (pid 4242) ``, ``a
/// process of user `bob` ``, or a connection whose source port it is); `None` when this OS does
/// not say.
pub(crate) fn owner_of(port: u16) -> Option<Holder> {
    port_owner::owner(port)
}

/// [`owner_of`] as an error carries it.
fn holder_of(port: u16) -> Option<PortHolder> {
    owner_of(port).map(|h| PortHolder {
        shown: h.to_string(),
        pid: h.pid(),
        outgoing: matches!(h, Holder::Outgoing { .. }),
    })
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
        let Error::Tunnel(TunnelError::PortInUse { port: p, owner }) = &e else {
            panic!("{e}");
        };
        assert_eq!(*p, port);
        // This very test process holds it (named where the OS says; Linux and macOS do).
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        let _ = owner;
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        assert!(
            matches!(owner, Some(h) if h.pid == Some(std::process::id()) && !h.outgoing),
            "{owner:?}"
        );
        drop(first);
        assert!(!is_taken(port));
    }

    /// A port the system lent to an outgoing connection as its source port cannot be listened
    /// on while that connection is open, nor for a minute after it closed (TIME_WAIT), whatever
    /// `SO_REUSEADDR`; `ss -ltn` shows nothing there, so the error names the connection.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_port_lent_to_an_outgoing_connection_is_named_open_and_closed() {
        use std::time::{Duration, Instant};

        let server = std::net::TcpListener::bind(loopback(0)).expect("listen");
        let client =
            std::net::TcpStream::connect(server.local_addr().expect("addr")).expect("connect");
        let (accepted, _) = server.accept().expect("accept");
        let port = client.local_addr().expect("addr").port();
        assert!(!is_taken(port), "nothing listens there");

        let e = bind(port).expect_err("lent to the connection");
        let Error::Tunnel(TunnelError::PortInUse { owner, .. }) = &e else {
            panic!("{e}");
        };
        match owner {
            Some(h) if h.outgoing => {
                assert_eq!(h.pid, Some(std::process::id()));
                let peer = server.local_addr().expect("addr").to_string();
                assert!(h.shown.contains(&peer), "{h:?}");
            }
            other => panic!("{other:?}"),
        }
        assert!(e.hint().is_some_and(|h| h.contains(&format!(
            "add {port} to the sysctl `net.ipv4.ip_local_reserved_ports`"
        ))));

        // The client closes first, so its end waits in TIME_WAIT, held by no process.
        drop(client);
        drop(accepted);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let owner = owner_of(port);
            if let Some(Holder::Outgoing { who: None, .. }) = owner {
                break;
            }
            assert!(Instant::now() < deadline, "no TIME_WAIT: {owner:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let e = bind(port).expect_err("kept in TIME_WAIT");
        assert!(e.to_string().contains("TIME_WAIT"), "{e}");
        assert!(e.hint().is_some_and(|h| h.contains("in a minute")), "{e}");
    }
}
