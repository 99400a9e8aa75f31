//! A real MySQL/MariaDB login with the profile's certificate: `mysql_async` (TLS after the
//! server greeting, as the MySQL protocol does it) as the certificate-only user, then
//! `SELECT CURRENT_USER()`.

use std::path::Path;
use std::time::Duration;

use mysql_async::prelude::Queryable as _;
use mysql_async::{ClientIdentity, Conn, OptsBuilder, SslOpts};

use crate::probe::{Identity, Outcome};
use crate::text::quote;

/// Logs in through `127.0.0.1:port` as `user` with the certificate of `id`, checking the server
/// certificate as `server_name` (where the server says MySQL listens: the certificate names the
/// server as it sees itself, not the tunnel's 127.0.0.1). Returns `CURRENT_USER()`, escaped and
/// cut like the errors ([`quote`]).
///
/// # Errors
/// The driver's or server's words (`Access denied …` when there is no account for the
/// certificate), or that nothing answered within `timeout`.
pub(crate) async fn current_user(
    port: u16,
    server_name: &str,
    user: &str,
    id: &Identity,
    timeout: Duration,
) -> Result<String, String> {
    let files = Files {
        ca: &id.ca,
        cert: &id.cert,
        key: &id.key,
    };
    current_user_at("127.0.0.1", port, server_name, user, &files, timeout).await
}

/// The PEM files of a certificate login.
pub(crate) struct Files<'a> {
    /// The CA that signed the server's certificate.
    pub(crate) ca: &'a Path,
    /// The client certificate.
    pub(crate) cert: &'a Path,
    /// Its key.
    pub(crate) key: &'a Path,
}

/// As [`current_user`], at `host:port` with the PEM files an option file names.
///
/// # Errors
/// As [`current_user`].
pub(crate) async fn current_user_at(
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
    select_current_user(host, port, user, Some(ssl), timeout).await
}

/// As [`current_user`], through the tunnel's local endpoint on `127.0.0.1:port`: plaintext, no
/// password, as a client with no SSL settings logs in (the endpoint does TLS with the
/// certificate).
///
/// # Errors
/// As [`current_user`]; the endpoint's own refusals start with `shiqi-connect tunnel:`.
pub(crate) async fn current_user_plain(
    port: u16,
    user: &str,
    timeout: Duration,
) -> Result<String, String> {
    select_current_user("127.0.0.1", port, user, None, timeout).await
}

async fn select_current_user(
    host: &str,
    port: u16,
    user: &str,
    ssl: Option<SslOpts>,
    timeout: Duration,
) -> Result<String, String> {
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
        // The errors and the answer are the server's words: quoted, not trusted.
        let mut conn = Conn::new(opts)
            .await
            .map_err(|e| format!("login failed: {}", quote(&e.to_string())))?;
        let who: Option<String> = conn
            .query_first("SELECT CURRENT_USER()")
            .await
            .map_err(|e| {
                format!(
                    "logged in, but `SELECT CURRENT_USER()` failed: {}",
                    quote(&e.to_string())
                )
            })?;
        let _ = conn.disconnect().await;
        Ok(quote(&who.unwrap_or_default()))
    };
    // Boxed: mysql_async's futures are deep, and callers nest them in their own.
    tokio::time::timeout(timeout, Box::pin(login))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer within {}s (the tunnel may be reconnecting)",
                timeout.as_secs()
            ))
        })
}

/// [`current_user`] as a report line.
pub(crate) async fn login(
    port: u16,
    server_name: &str,
    user: &str,
    id: &Identity,
    timeout: Duration,
) -> Outcome {
    reported(current_user(port, server_name, user, id, timeout).await)
}

/// [`current_user_plain`] as a report line.
pub(crate) async fn login_plain(port: u16, user: &str, timeout: Duration) -> Outcome {
    Outcome::from_result(current_user_plain(port, user, timeout).await.map(|who| {
        format!(
            "plaintext login through the local endpoint (TLS with the certificate beyond it); \
             `SELECT CURRENT_USER()` = `{who}`"
        )
    }))
}

/// A login's result as a report line.
fn reported(login: Result<String, String>) -> Outcome {
    Outcome::from_result(login.map(|who| {
        format!("TLS login with the profile's certificate; `SELECT CURRENT_USER()` = `{who}`")
    }))
}

/// A MySQL `ERR` packet in place of the greeting (what a server sends a host it refuses), with
/// `message` as its text, for tests.
#[cfg(test)]
pub(crate) fn err_packet(message: &str) -> Vec<u8> {
    // Before the handshake there is no SQL state: 0xff, the error code, the text.
    let mut payload = vec![0xff];
    payload.extend_from_slice(&1130u16.to_le_bytes());
    payload.extend_from_slice(message.as_bytes());
    let len = u32::try_from(payload.len()).expect("small").to_le_bytes();
    let mut out = vec![len[0], len[1], len[2], 0];
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;
    use crate::text::{HOSTILE, HOSTILE_SHOWN, has_raw_controls};

    #[tokio::test]
    async fn a_server_error_and_current_user_are_escaped_and_cut() {
        let port = crate::probe::fake_server(err_packet(HOSTILE), 1);
        let dir = tempfile::tempdir().expect("tempdir");
        let o = login(
            port,
            "localhost",
            "saige",
            &crate::profile::files::identity(dir.path()),
            Duration::from_secs(5),
        )
        .await;
        assert!(!o.ok);
        assert!(o.detail.contains(HOSTILE_SHOWN), "{}", o.detail);
        assert!(!has_raw_controls(&o.detail) && !o.detail.contains('\n'));

        let long = "a".repeat(1 << 20);
        let port = crate::probe::fake_server(err_packet(&long), 1);
        let o = login(
            port,
            "localhost",
            "saige",
            &crate::profile::files::identity(dir.path()),
            Duration::from_secs(5),
        )
        .await;
        assert!(o.detail.len() < 400, "{}", o.detail.len());

        let o = reported(Ok(quote(HOSTILE)));
        assert!(o.ok && o.detail.contains(HOSTILE_SHOWN), "{}", o.detail);
    }
}
