//! MySQL/MariaDB administration through mysql_async: certificate-only users.
//!
//! `CREATE USER` cannot take placeholders for its `REQUIRE` clause, so every value that reaches
//! SQL text is either a validated `ProfileName`, a string built from our own certificates and
//! quoted here, or a config value checked at load time. Look-ups use placeholders.

use mysql_async::prelude::Queryable as _;
use mysql_async::{Conn, OptsBuilder, SslOpts};
use shiqi_ca::ProfileName;

use crate::error::AgentError;
use crate::sql::{check_grant, quote};
use crate::state::Context;

/// The server's address as a string, for messages.
pub(crate) fn address(ctx: &Context) -> String {
    let m = &ctx.config.mysql;
    match &m.admin_socket {
        Some(s) => format!("unix:{}", s.display()),
        None => format!("{}:{}", m.host, m.port),
    }
}

/// Connects as the agent's admin account: over mysqld's Unix socket, or over TCP inside TLS
/// verified against `[mysql] admin_tls_ca` alone (config loading refuses anything else, see
/// `MysqlConfig::check_admin_path`). Either way the password never crosses a TCP socket in clear.
pub(crate) async fn connect(ctx: &Context) -> Result<Conn, AgentError> {
    let m = &ctx.config.mysql;
    if m.host.is_empty() {
        return Err(AgentError::MysqlDisabled);
    }
    let pw_path = ctx.dir.join(&m.admin_password_file);
    let password = match std::fs::read_to_string(&pw_path) {
        Ok(p) => Some(shiqi_ca::Secret::new(
            p.trim_end_matches(['\n', '\r']).to_owned(),
        )),
        // No file: an account that logs in by its socket credentials (unix_socket).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(why) => return Err(AgentError::File { path: pw_path, why }),
    };
    let mut opts = OptsBuilder::default()
        .user(Some(m.admin_user.clone()))
        .pass(password.as_ref().map(|p| p.expose().clone()))
        // Never hop from TCP to a socket the server names: we connect where the config says.
        .prefer_socket(false);
    opts = match (&m.admin_socket, &m.admin_tls_ca) {
        (Some(socket), _) => opts.socket(Some(socket.to_string_lossy().into_owned())),
        (None, Some(ca)) => opts
            .ip_or_hostname(m.host.clone())
            .tcp_port(m.port)
            .ssl_opts(Some(
                SslOpts::default()
                    .with_root_certs(vec![ctx.dir.join(ca).into()])
                    .with_disable_built_in_roots(true),
            )),
        (None, None) => {
            return Err(AgentError::Mysql {
                address: address(ctx),
                why: "refusing a plain TCP login: set [mysql] admin_socket or admin_tls_ca"
                    .to_owned(),
            });
        }
    };
    let connect = Conn::new(opts);
    match tokio::time::timeout(std::time::Duration::from_secs(10), connect).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(AgentError::Mysql {
            address: address(ctx),
            why: e.to_string(),
        }),
        Err(_) => Err(AgentError::Mysql {
            address: address(ctx),
            why: "no answer within 10 s".to_owned(),
        }),
    }
}

/// The outcome of [`ensure_user`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ensured {
    /// The account was created.
    Created,
    /// The account existed (made by us) and its requirements and grants were refreshed.
    Updated,
}

/// Creates or updates `'name'@'host'` so that it logs in only with a certificate whose subject
/// and issuer are exactly `subject` and `issuer`, and grants it `grants`.
///
/// # Errors
/// [`AgentError::ForeignAccount`] when an account of that name exists that is not tied to our
/// CA (root, system accounts, anything made by hand).
pub(crate) async fn ensure_user(
    conn: &mut Conn,
    address: &str,
    name: &ProfileName,
    host: &str,
    subject: &str,
    issuer: &str,
    grants: &[String],
) -> Result<Ensured, AgentError> {
    let sql_error = |e: mysql_async::Error| AgentError::Mysql {
        address: address.to_owned(),
        why: e.to_string(),
    };
    let existing: Vec<(String, Vec<u8>)> = conn
        .exec(
            "SELECT Host, x509_issuer FROM mysql.user WHERE User = ?",
            (name.as_str(),),
        )
        .await
        .map_err(sql_error)?;
    for (_, their_issuer) in &existing {
        if their_issuer.as_slice() != issuer.as_bytes() {
            return Err(AgentError::ForeignAccount {
                user: name.to_string(),
            });
        }
    }
    let account = format!("{}@{}", quote(name.as_str()), quote(host));
    let require = format!(
        "REQUIRE SUBJECT {} AND ISSUER {}",
        quote(subject),
        quote(issuer)
    );
    let outcome = if existing.iter().any(|(h, _)| h == host) {
        // ACCOUNT UNLOCK: a name whose certificates were all revoked is locked by `revoke`; a
        // new certificate (this call follows a `sign`) opens it again.
        conn.query_drop(format!("ALTER USER {account} {require} ACCOUNT UNLOCK"))
            .await
            .map_err(sql_error)?;
        Ensured::Updated
    } else {
        conn.query_drop(format!("CREATE USER {account} {require}"))
            .await
            .map_err(sql_error)?;
        Ensured::Created
    };
    for grant in grants {
        check_grant(grant).map_err(|why| AgentError::Mysql {
            address: address.to_owned(),
            why,
        })?;
        let (privileges, target) = grant.split_once(" ON ").ok_or_else(|| AgentError::Mysql {
            address: address.to_owned(),
            why: format!("grant `{grant}` has no ` ON `"),
        })?;
        conn.query_drop(format!("GRANT {privileges} ON {target} TO {account}"))
            .await
            .map_err(sql_error)?;
    }
    Ok(outcome)
}

/// MariaDB's and MySQL's "no such statement" (ER_PARSE_ERROR).
const ER_PARSE_ERROR: u16 = 1064;
/// `KILL` of a connection that has ended meanwhile (ER_NO_SUCH_THREAD).
const ER_NO_SUCH_THREAD: u16 = 1094;

/// Makes the server re-read its TLS files, the CRL (`ssl_crl`) among them: `FLUSH SSL` on
/// MariaDB (10.4+), `ALTER INSTANCE RELOAD TLS` on MySQL 8. Returns the statement that worked.
/// Sessions already open keep their TLS state; [`kill_sessions`] ends them.
///
/// A failed reload leaves the old TLS context in place (MariaDB: "Failed to refresh SSL"), so
/// a missing or broken CRL file never takes TLS down with it.
///
/// # Errors
/// When neither statement is accepted.
pub(crate) async fn reload_tls(conn: &mut Conn, address: &str) -> Result<&'static str, AgentError> {
    let sql_error = |e: mysql_async::Error| AgentError::Mysql {
        address: address.to_owned(),
        why: e.to_string(),
    };
    match conn.query_drop("FLUSH SSL").await {
        Ok(()) => Ok("FLUSH SSL"),
        Err(mysql_async::Error::Server(e)) if e.code == ER_PARSE_ERROR => conn
            .query_drop("ALTER INSTANCE RELOAD TLS")
            .await
            .map(|()| "ALTER INSTANCE RELOAD TLS")
            .map_err(sql_error),
        Err(e) => Err(sql_error(e)),
    }
}

/// Ends every session of user `name` (any host) and returns their connection ids. A session
/// that ended meanwhile is not an error.
///
/// # Errors
/// When the process list cannot be read or a `KILL` is refused.
pub(crate) async fn kill_sessions(
    conn: &mut Conn,
    address: &str,
    name: &ProfileName,
) -> Result<Vec<u64>, AgentError> {
    let sql_error = |e: mysql_async::Error| AgentError::Mysql {
        address: address.to_owned(),
        why: e.to_string(),
    };
    let ids: Vec<u64> = conn
        .exec(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? ORDER BY ID",
            (name.as_str(),),
        )
        .await
        .map_err(sql_error)?;
    let mut killed = Vec::with_capacity(ids.len());
    for id in ids {
        // `id` is a number from the server: safe to format into the statement.
        match conn.query_drop(format!("KILL CONNECTION {id}")).await {
            Ok(()) => killed.push(id),
            Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_THREAD => {}
            Err(e) => return Err(sql_error(e)),
        }
    }
    Ok(killed)
}

/// Locks `'name'@'host'` (`ACCOUNT LOCK`: new logins are refused even with a valid
/// certificate) if the account exists and the agent made it (its `REQUIRE ISSUER` is our CA's).
/// Returns whether an account was locked.
///
/// # Errors
/// When the server refuses.
pub(crate) async fn lock_account(
    conn: &mut Conn,
    address: &str,
    name: &ProfileName,
    host: &str,
    issuer: &str,
) -> Result<bool, AgentError> {
    let sql_error = |e: mysql_async::Error| AgentError::Mysql {
        address: address.to_owned(),
        why: e.to_string(),
    };
    let ours: Option<Vec<u8>> = conn
        .exec_first(
            "SELECT x509_issuer FROM mysql.user WHERE User = ? AND Host = ?",
            (name.as_str(), host),
        )
        .await
        .map_err(sql_error)?;
    if ours.is_none_or(|i| i.as_slice() != issuer.as_bytes()) {
        return Ok(false);
    }
    let account = format!("{}@{}", quote(name.as_str()), quote(host));
    conn.query_drop(format!("ALTER USER {account} ACCOUNT LOCK"))
        .await
        .map_err(sql_error)?;
    Ok(true)
}
