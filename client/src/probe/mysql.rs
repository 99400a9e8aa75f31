//! A real MySQL/MariaDB login with the profile's certificate: `mysql_async` (TLS after the
//! server greeting, as the MySQL protocol does it) as the certificate-only user, then
//! `SELECT CURRENT_USER()`.

use std::path::Path;
use std::time::Duration;

use mysql_async::prelude::Queryable as _;
use mysql_async::{ClientIdentity, Conn, OptsBuilder, SslOpts};

use crate::probe::Outcome;
use crate::profile::files;

/// Logs in through `127.0.0.1:port` as `user` with the certificate in `dir`, checking the server
/// certificate as `server_name` (where the server says MySQL listens: the certificate names the
/// server as it sees itself, not the tunnel's 127.0.0.1). Returns `CURRENT_USER()`.
///
/// # Errors
/// The driver's or server's words (`Access denied …` when there is no account for the
/// certificate), or that nothing answered within `timeout`.
pub async fn current_user(
    port: u16,
    server_name: &str,
    user: &str,
    dir: &Path,
    timeout: Duration,
) -> Result<String, String> {
    let files = Files {
        ca: &dir.join(files::CA_CRT),
        cert: &dir.join(files::CLIENT_CRT),
        key: &dir.join(files::CLIENT_KEY),
    };
    current_user_at("127.0.0.1", port, server_name, user, &files, timeout).await
}

/// The PEM files of a certificate login.
pub struct Files<'a> {
    /// The CA that signed the server's certificate.
    pub ca: &'a Path,
    /// The client certificate.
    pub cert: &'a Path,
    /// Its key.
    pub key: &'a Path,
}

/// As [`current_user`], at `host:port` with the PEM files an option file names.
///
/// # Errors
/// As [`current_user`].
pub async fn current_user_at(
    host: &str,
    port: u16,
    server_name: &str,
    user: &str,
    files: &Files<'_>,
    timeout: Duration,
) -> Result<String, String> {
    let ssl = SslOpts::default()
        .with_root_certs(vec![files.ca.to_path_buf().into()])
        .with_disable_built_in_roots(true)
        .with_client_identity(Some(ClientIdentity::new(
            files.cert.to_path_buf().into(),
            files.key.to_path_buf().into(),
        )))
        .with_danger_tls_hostname_override(Some(server_name.to_owned()));
    let opts = OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(user))
        // The certificate is the credential.
        .pass(None::<String>)
        // Never switch to a local unix socket the server names: that would bypass the tunnel.
        .prefer_socket(false)
        .ssl_opts(ssl);
    let login = async {
        let mut conn = Conn::new(opts)
            .await
            .map_err(|e| format!("login failed: {e}"))?;
        let who: Option<String> = conn
            .query_first("SELECT CURRENT_USER()")
            .await
            .map_err(|e| format!("logged in, but `SELECT CURRENT_USER()` failed: {e}"))?;
        let _ = conn.disconnect().await;
        Ok(who.unwrap_or_default())
    };
    tokio::time::timeout(timeout, login)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer within {}s (the tunnel may be reconnecting)",
                timeout.as_secs()
            ))
        })
}

/// [`current_user`] as a report line.
pub async fn login(
    port: u16,
    server_name: &str,
    user: &str,
    dir: &Path,
    timeout: Duration,
) -> Outcome {
    Outcome::from_result(
        current_user(port, server_name, user, dir, timeout)
            .await
            .map(|who| {
                format!(
                    "TLS login with the profile's certificate; `SELECT CURRENT_USER()` = `{who}`"
                )
            }),
    )
}
