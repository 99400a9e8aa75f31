//! MySQL/MariaDB: its TLS settings as the server reports them (over the agent's admin login),
//! then a TLS login with the throwaway certificate, which must get as far as "access denied"
//! (the server spoke SQL to it) until it is revoked, and no further after.

use mysql_async::prelude::Queryable as _;
use mysql_async::{ClientIdentity, Conn, Opts, OptsBuilder, SslOpts};
use shiqi_ca::issue::Ca;

use super::Finding;
use super::throwaway::Throwaway;
use crate::state::Context;

/// How long one login attempt may take.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

const TLS_FIX: &str = "set ssl_ca, ssl_cert and ssl_key in a [mysqld] drop-in (the files of \
                       `shiqi-ca-agent server-cert NAME --kind mysql`), then restart it";

/// MySQL accepted the throwaway's TLS: what the revocation check tries again.
pub(super) struct Accepting {
    opts: Opts,
}

impl Accepting {
    /// `Some(why)` once MySQL refuses the (revoked) throwaway's TLS.
    pub(super) fn refuses(&self, ctx: &Context) -> Option<String> {
        match ctx.block_on(login(self.opts.clone())) {
            Login::Refused(why) => Some(why),
            _ => None,
        }
    }
}

enum Login {
    /// Logged in with the certificate alone.
    Accepted,
    /// TLS was accepted, the login refused (the account's REQUIRE did not match).
    Denied(String),
    /// The server has no TLS.
    NoTls,
    /// The TLS handshake or the connection after it failed.
    Refused(String),
    /// Nothing to talk to.
    Unreachable(String),
}

async fn login(opts: Opts) -> Login {
    let result = tokio::time::timeout(PROBE_TIMEOUT, Conn::new(opts)).await;
    match result {
        Err(_) => Login::Unreachable(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
        Ok(Ok(conn)) => {
            let _ = conn.disconnect().await;
            Login::Accepted
        }
        // The server spoke SQL after TLS but refused the login.
        Ok(Err(mysql_async::Error::Server(e))) => Login::Denied(e.to_string()),
        Ok(Err(mysql_async::Error::Driver(
            mysql_async::DriverError::NoClientSslFlagFromServer,
        ))) => Login::NoTls,
        Ok(Err(mysql_async::Error::Io(mysql_async::IoError::Io(e))))
            if e.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            Login::Unreachable(e.to_string())
        }
        Ok(Err(e)) => Login::Refused(e.to_string()),
    }
}

/// Runs the MySQL checks; returns the server when it accepted the throwaway.
pub(super) fn check(
    ctx: &Context,
    ca: &Ca,
    probe: &Throwaway,
    findings: &mut Vec<Finding>,
) -> Option<Accepting> {
    let m = &ctx.config.mysql;
    if m.host.is_empty() {
        findings.push(Finding::skip(
            "mysql",
            "MySQL is not configured ([mysql] host is empty)",
        ));
        return None;
    }
    settings(ctx, findings);
    if let Err(e) = account(ctx, probe) {
        findings.push(Finding::fail(
            "mysql.accepts",
            format!("cannot make the throwaway's certificate-only account: {e}"),
            e.hint().unwrap_or_else(|| "see the error".to_owned()),
        ));
        return None;
    }
    let opts: Opts = OptsBuilder::default()
        .ip_or_hostname(m.host.clone())
        .tcp_port(m.port)
        .user(Some(probe.name.clone()))
        .prefer_socket(false)
        .ssl_opts(Some(
            SslOpts::default()
                .with_root_certs(vec![ca.cert().pem().into_bytes().into()])
                .with_disable_built_in_roots(true)
                .with_client_identity(Some(ClientIdentity::new(
                    probe.cert.pem().into_bytes().into(),
                    probe
                        .key
                        .to_pkcs8_pem()
                        .expose()
                        .clone()
                        .into_bytes()
                        .into(),
                ))),
        ))
        .into();
    let at = format!("MySQL at {}:{}", m.host, m.port);
    match ctx.block_on(login(opts.clone())) {
        Login::Accepted => {
            findings.push(Finding::ok(
                "mysql.accepts",
                format!(
                    "{at} (verified as {}) logs a certificate-only account in with a certificate \
                     from this CA, no password",
                    m.host
                ),
            ));
            Some(Accepting { opts })
        }
        Login::Denied(why) => {
            findings.push(Finding::fail(
                "mysql.accepts",
                format!("{at} accepts TLS but refuses the certificate-only login: {why}"),
                "the account's REQUIRE SUBJECT/ISSUER must match the certificates this CA \
                 issues (see `shiqi-ca-agent mysql-user`)",
            ));
            None
        }
        Login::NoTls => {
            findings.push(Finding::fail(
                "mysql.accepts",
                format!("{at} does not offer TLS"),
                TLS_FIX,
            ));
            None
        }
        Login::Refused(why) => {
            findings.push(Finding::fail(
                "mysql.accepts",
                format!("{at} refuses TLS with a certificate from this CA: {why}"),
                format!(
                    "its ssl_ca must be this CA's ca.crt and its certificate must name `{}` \
                     (server-cert --san {})",
                    m.host, m.host
                ),
            ));
            None
        }
        Login::Unreachable(why) => {
            findings.push(Finding::fail(
                "mysql.accepts",
                format!("{at}: {why}"),
                "start mysqld, or fix [mysql] host and port in agent.toml",
            ));
            None
        }
    }
}

/// `'shiqi-check-…'@'[mysql] user_host'`, required to log in with the throwaway's subject and
/// issuer, as `mysql-user` makes a person's (no grants: it only logs in).
fn account(ctx: &Context, probe: &Throwaway) -> Result<(), crate::AgentError> {
    let name: shiqi_ca::ProfileName = probe.name.parse()?;
    let address = crate::mysql::address(ctx);
    ctx.block_on(async {
        let mut conn = crate::mysql::connect(ctx).await?;
        let made = crate::mysql::ensure_user(
            &mut conn,
            &address,
            &name,
            &ctx.config.mysql.user_host,
            probe.cert.subject_oneline(),
            probe.cert.issuer_oneline(),
            &[],
        )
        .await;
        let _ = conn.disconnect().await;
        made.map(drop)
    })
}

/// Drops the throwaway's account (every host), made by [`account`].
pub(super) fn cleanup(ctx: &Context, probe: &Throwaway) -> Option<Finding> {
    let sql_error = |e: mysql_async::Error| crate::AgentError::Mysql {
        address: crate::mysql::address(ctx),
        why: e.to_string(),
    };
    let dropped = ctx.block_on(async {
        let mut conn = crate::mysql::connect(ctx).await?;
        let hosts: Vec<String> = conn
            .exec(
                "SELECT Host FROM mysql.user WHERE User = ?",
                (probe.name.as_str(),),
            )
            .await
            .map_err(sql_error)?;
        for host in hosts {
            // Our own name and a host the server listed: quoted, never from a caller.
            conn.query_drop(format!(
                "DROP USER {}@{}",
                crate::sql::quote(&probe.name),
                crate::sql::quote(&host)
            ))
            .await
            .map_err(sql_error)?;
        }
        let _ = conn.disconnect().await;
        Ok::<_, crate::AgentError>(())
    });
    dropped.err().map(|e| {
        Finding::warn(
            "mysql.cleanup",
            format!("cannot drop the throwaway's account: {e}"),
            format!("DROP USER '{}'@'%' by hand", probe.name),
        )
    })
}

/// TLS, `ssl_crl` and `bind_address`, as the running server reports them.
fn settings(ctx: &Context, findings: &mut Vec<Finding>) {
    let vars = ctx.block_on(async {
        let mut conn = crate::mysql::connect(ctx).await?;
        let rows: Vec<(String, String)> = conn
            .query(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
                 ('have_ssl', 'ssl_crl', 'bind_address')",
            )
            .await
            .map_err(|e| crate::AgentError::Mysql {
                address: crate::mysql::address(ctx),
                why: e.to_string(),
            })?;
        let _ = conn.disconnect().await;
        Ok::<_, crate::AgentError>(rows)
    });
    let vars = match vars {
        Ok(v) => v,
        Err(e) => {
            findings.push(Finding::fail(
                "mysql.admin",
                format!("cannot log in as the agent's admin: {e}"),
                e.hint().unwrap_or_else(|| "see the error".to_owned()),
            ));
            return;
        }
    };
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
    };
    match var("have_ssl").as_deref() {
        Some("YES") | None => {}
        Some(other) => findings.push(Finding::fail(
            "mysql.tls",
            format!("TLS is off (have_ssl = {other})"),
            TLS_FIX,
        )),
    }
    let published = ctx
        .config
        .crl
        .publish_dir
        .as_ref()
        .map(|d| d.join(crate::crl::CRL_PEM));
    match (var("ssl_crl").filter(|v| !v.is_empty()), published) {
        (None, published) => findings.push(Finding::fail(
            "mysql.crl",
            "no ssl_crl: MySQL never learns of a revocation",
            format!(
                "set `ssl_crl = {}` in the [mysqld] drop-in, then restart it",
                published.map_or_else(
                    || "<[crl] publish_dir>/crl.pem".to_owned(),
                    |p| p.display().to_string()
                )
            ),
        )),
        (Some(crl), Some(published)) if std::path::Path::new(&crl) == published => {
            findings.push(Finding::ok(
                "mysql.crl",
                format!("ssl_crl is the CRL the agent publishes ({crl})"),
            ));
        }
        (Some(crl), Some(published)) => findings.push(Finding::warn(
            "mysql.crl",
            format!(
                "ssl_crl is {crl}, not the CRL the agent publishes ({})",
                published.display()
            ),
            format!("set `ssl_crl = {}`, then restart it", published.display()),
        )),
        (Some(crl), None) => findings.push(Finding::warn(
            "mysql.crl",
            format!("ssl_crl is {crl}, but the agent publishes no CRL ([crl] publish_dir unset)"),
            "set [crl] publish_dir in agent.toml to a folder mysqld can read and point ssl_crl \
             at its crl.pem",
        )),
    }
    let host = &ctx.config.mysql.host;
    let local = ["127.0.0.1", "localhost", "::1"].contains(&host.as_str());
    match var("bind_address") {
        _ if !local => findings.push(Finding::skip(
            "mysql.bind",
            format!("MySQL runs on {host}, not here: its bind address is its host's business"),
        )),
        Some(b) if !b.is_empty() && b.split(',').all(|a| is_loopback(a.trim())) => {
            findings.push(Finding::ok(
                "mysql.bind",
                format!("listens on loopback only (bind_address = {b})"),
            ))
        }
        b => findings.push(Finding::fail(
            "mysql.bind",
            format!(
                "listens beyond loopback (bind_address = {})",
                b.filter(|b| !b.is_empty())
                    .unwrap_or_else(|| "unset: every address".to_owned())
            ),
            "set `bind-address = 127.0.0.1` in a [mysqld] drop-in (users come through the \
             tunnel), then restart it",
        )),
    }
}

fn is_loopback(address: &str) -> bool {
    address == "localhost"
        || address
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The finding for MySQL refusing the revoked throwaway after `took`.
pub(super) fn revoked(took: std::time::Duration, why: &str) -> Finding {
    let secs = took.as_secs_f64();
    Finding::ok(
        "mysql.revocation",
        format!(
            "MySQL refused the revoked certificate after {secs:.1} s ({})",
            shiqi_ca::text::one_line(why, 120)
        ),
    )
    .with_seconds(secs)
}

/// The finding for MySQL still accepting the revoked throwaway.
pub(super) fn not_revoked() -> Finding {
    Finding::fail(
        "mysql.revocation",
        format!(
            "MySQL still accepts the revoked certificate after {} s",
            super::REVOCATION_WAIT.as_secs()
        ),
        "set ssl_crl to the published crl.pem and check that `shiqi-ca-agent crl` can make \
         MySQL re-read it (FLUSH SSL)",
    )
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn only_loopback_addresses_are_loopback() {
        for a in ["127.0.0.1", "::1", "localhost", "127.0.1.5"] {
            assert!(is_loopback(a), "{a}");
        }
        for a in ["0.0.0.0", "::", "*", "10.0.0.1", ""] {
            assert!(!is_loopback(a), "{a}");
        }
    }
}
