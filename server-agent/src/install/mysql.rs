//! MariaDB/MySQL: its server certificate (from the CA, as the account), a `[mysqld]` drop-in
//! with TLS, `ssl_crl`, `bind-address = 127.0.0.1` and `skip-name-resolve`, and the agent's
//! admin account over the Unix socket (unix_socket / auth_socket: no password file at all). A
//! restart only when the drop-in changed.

use std::path::Path;
use std::process::Command;

use mysql_async::prelude::Queryable as _;

use super::{Install, Outcome, run};
use crate::error::AgentError;

/// The drop-in's name: after Debian's `50-server.cnf`, so its `bind-address` wins.
pub(super) const DROP_IN: &str = "60-shiqi-ca.cnf";
/// The server certificate's name in the inventory.
const CERT_NAME: &str = "mariadb";

pub(super) fn ensure(i: &mut Install) -> Result<(), AgentError> {
    if i.args.no_mysql {
        i.report(Outcome::Already, "mysql", "skipped (--no-mysql)");
        return Ok(());
    }
    let tls = i.args.mysql_tls_dir.clone();
    let owner = super::account::ids(&i.args.mysql_owner).ok_or_else(|| AgentError::Request {
        why: format!(
            "no account `{}` for MariaDB's files: install mariadb-server first, or name its \
             account with --mysql-owner",
            i.args.mysql_owner
        ),
    })?;
    let issued = certificate(i, &tls, owner)?;
    let path = i.args.mysql_conf_dir.join(DROP_IN);
    // Built from the paths install knows, never copied from a file another account can write.
    let text = format!(
        "# Written by `shiqi-ca-agent install`: TLS with the CA's server certificate, the CA's\n\
         # CRL, and no listener beyond loopback (users come through the SSH tunnel).\n\
         [mysqld]\nssl_ca = {}\nssl_cert = {}\nssl_key = {}\nssl_crl = {}\n\
         bind-address = 127.0.0.1\nskip-name-resolve\n",
        tls.join("ca.crt").display(),
        tls.join("server.crt").display(),
        tls.join("server.key").display(),
        i.args.publish_dir.join(crate::crl::CRL_PEM).display(),
    );
    let changed = i.file(&path, &text, 0o644, Some((0, 0)))?;
    i.report(
        if changed {
            Outcome::Done
        } else {
            Outcome::Already
        },
        "mysql.config",
        format!(
            "{} (TLS, ssl_crl, bind-address = 127.0.0.1)",
            path.display()
        ),
    );
    admin_account(i)?;
    // A new certificate is read at start too.
    let changed = changed || issued;
    if changed && !i.dry_run() {
        restart(i)?;
    } else if changed {
        i.report(Outcome::Done, "mysql.restart", "restart MariaDB to read it");
    }
    Ok(())
}

/// The server certificate, issued when missing or older than the CA, handed to MariaDB's
/// account.
fn certificate(i: &mut Install, tls: &Path, owner: (u32, u32)) -> Result<bool, AgentError> {
    if i.issued_since_ca(&tls.join("mysqld.cnf")) {
        i.report(
            Outcome::Already,
            "mysql.cert",
            format!("{} holds MariaDB's certificate", tls.display()),
        );
        return Ok(false);
    }
    if !i.dry_run() {
        let sans = ["localhost".to_owned(), "127.0.0.1".to_owned()];
        i.server_cert(CERT_NAME, "mysql", &sans, tls, Some(owner))?;
    }
    i.report(
        Outcome::Done,
        "mysql.cert",
        format!(
            "issued MariaDB's certificate (localhost, 127.0.0.1) into {}",
            tls.display()
        ),
    );
    Ok(true)
}

/// `'ACCOUNT'@'localhost'`, authenticated by the socket's peer credentials, with every
/// privilege (it creates users and grants).
fn admin_account(i: &mut Install) -> Result<(), AgentError> {
    let account = i.account().to_owned();
    // A system account name; checked again here because it goes into SQL text.
    if !account
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(AgentError::Request {
            why: format!("`{account}` is not a plain account name"),
        });
    }
    let socket = i.args.mysql_socket.clone();
    let opts = mysql_async::OptsBuilder::default()
        .user(Some("root"))
        .socket(Some(socket.display().to_string()))
        .prefer_socket(true);
    let dry = i.dry_run();
    let work = async {
        let mut conn = mysql_async::Conn::new(opts).await?;
        let exists: Option<u64> = conn
            .exec_first(
                "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = 'localhost'",
                (account.as_str(),),
            )
            .await?;
        if exists.unwrap_or(0) > 0 {
            let _ = conn.disconnect().await;
            return Ok::<_, mysql_async::Error>(false);
        }
        if !dry {
            let version: Option<String> = conn.query_first("SELECT VERSION()").await?;
            let via = if version.is_some_and(|v| v.contains("MariaDB")) {
                "IDENTIFIED VIA unix_socket"
            } else {
                "IDENTIFIED WITH auth_socket"
            };
            let who = format!("{}@'localhost'", crate::sql::quote(&account));
            conn.query_drop(format!("CREATE USER {who} {via}")).await?;
            conn.query_drop(format!(
                "GRANT ALL PRIVILEGES ON *.* TO {who} WITH GRANT OPTION"
            ))
            .await?;
        }
        let _ = conn.disconnect().await;
        Ok(true)
    };
    let result = runtime()?
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(10), work).await });
    match result {
        Ok(Ok(true)) => i.report(
            Outcome::Done,
            "mysql.admin",
            format!("created '{account}'@'localhost' (socket login, all privileges)"),
        ),
        Ok(Ok(false)) => i.report(
            Outcome::Already,
            "mysql.admin",
            format!("'{account}'@'localhost' exists"),
        ),
        Ok(Err(e)) => i.report(
            Outcome::NeedsYou,
            "mysql.admin",
            format!(
                "cannot log in as root over {} ({e}): start MariaDB and run install again",
                socket.display()
            ),
        ),
        Err(_) => i.report(
            Outcome::NeedsYou,
            "mysql.admin",
            format!(
                "no answer on {} within 10 s: start MariaDB and run install again",
                socket.display()
            ),
        ),
    }
    Ok(())
}

/// Restarts MariaDB under systemd; elsewhere says so.
fn restart(i: &mut Install) -> Result<(), AgentError> {
    if !super::systemd() {
        i.report(
            Outcome::NeedsYou,
            "mysql.restart",
            "its settings changed and no systemd runs here: restart mariadbd",
        );
        return Ok(());
    }
    let mut cmd = Command::new("systemctl");
    cmd.args(["restart", "mariadb"]);
    run(cmd, None, "systemctl restart mariadb")?;
    i.report(
        Outcome::Done,
        "mysql.restart",
        "restarted mariadb (its TLS settings changed)",
    );
    Ok(())
}

/// The process's one runtime, for the admin login.
#[expect(clippy::disallowed_methods, reason = "install's one runtime")]
fn runtime() -> Result<tokio::runtime::Runtime, AgentError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AgentError::Runtime)
}
