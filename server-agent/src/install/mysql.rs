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
    let owner = super::account::ids(&i.args.mysql_owner).ok_or_else(|| AgentError::Local {
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
    let changed = i.file(
        &path,
        &text,
        0o644,
        Some((0, 0)),
        &super::folder::Trust::root(),
    )?;
    i.report(
        Outcome::of(changed),
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
        let service = i.args.mysql_owner.clone();
        i.server_cert(CERT_NAME, "mysql", &sans, tls, Some((&service, owner)))?;
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

/// The privileges the agent uses, and no more: it creates, alters, locks and drops users
/// (CREATE USER), re-reads TLS files (RELOAD for MariaDB's `FLUSH SSL`), finds and ends a revoked
/// user's sessions (PROCESS, and CONNECTION ADMIN or SUPER to KILL them), and reads the
/// certificates' issuers from `mysql.user`. Not `ALL`: FILE would read any file mysqld can,
/// SHUTDOWN stop the server, SUPER change its settings.
fn admin_privileges(mariadb: bool, kill: &str) -> Vec<String> {
    let mut out = vec![
        "CREATE USER ON *.*".to_owned(),
        "PROCESS ON *.*".to_owned(),
        format!("{kill} ON *.*"),
        "SELECT ON mysql.user".to_owned(),
    ];
    // MySQL's ALTER INSTANCE RELOAD TLS needs CONNECTION_ADMIN, granted above.
    if mariadb {
        out.push("RELOAD ON *.*".to_owned());
    }
    out
}

/// Privileges an agent admin must not hold: `GRANT ALL` from an older install, or by hand.
fn too_broad(grants: &[String]) -> bool {
    grants.iter().any(|g| {
        let upper = g.to_ascii_uppercase();
        let privileges = upper.split(" ON ").next().unwrap_or_default();
        privileges.contains("ALL PRIVILEGES")
            || privileges
                .split(',')
                .map(|p| p.trim().trim_start_matches("GRANT "))
                .any(|p| matches!(p, "FILE" | "SHUTDOWN" | "SUPER"))
    })
}

/// `'ACCOUNT'@'localhost'`, authenticated by the socket's peer credentials, with
/// [`admin_privileges`] and the grants it hands out (`[mysql] grants`) WITH GRANT OPTION. An
/// older admin with `ALL PRIVILEGES` is narrowed to these.
fn admin_account(i: &mut Install) -> Result<(), AgentError> {
    let account = i.account().to_owned();
    // A system account name; checked again here because it goes into SQL text.
    if !account
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(AgentError::Local {
            why: format!("`{account}` is not a plain account name"),
        });
    }
    // The grants it hands out, as the agent will read them (checked there before any use).
    let handed_out = match crate::config::Config::load(&i.state_dir.join("agent.toml"), false) {
        Ok(c) => c.mysql.grants,
        Err(_) if i.dry_run() => crate::config::Config::default().mysql.grants,
        Err(e) => return Err(e),
    };
    for grant in &handed_out {
        crate::sql::check_grant(grant).map_err(|why| AgentError::Local {
            why: format!("[mysql] grants: `{grant}`: {why}"),
        })?;
    }
    let socket = i.args.mysql_socket.clone();
    let opts = mysql_async::OptsBuilder::default()
        .user(Some("root"))
        .socket(Some(socket.display().to_string()))
        .prefer_socket(true);
    let dry = i.dry_run();
    let work = async {
        let mut conn = mysql_async::Conn::new(opts).await?;
        let who = format!("{}@'localhost'", crate::sql::quote(&account));
        let exists: Option<u64> = conn
            .exec_first(
                "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = 'localhost'",
                (account.as_str(),),
            )
            .await?;
        let exists = exists.unwrap_or(0) > 0;
        let broad = exists
            && too_broad(
                &conn
                    .query::<String, _>(format!("SHOW GRANTS FOR {who}"))
                    .await?,
            );
        if exists && !broad {
            let _ = conn.disconnect().await;
            return Ok::<_, mysql_async::Error>(Admin::Kept);
        }
        if !dry {
            grant_admin(&mut conn, &who, exists, &handed_out).await?;
        }
        let _ = conn.disconnect().await;
        Ok(if exists {
            Admin::Narrowed
        } else {
            Admin::Created
        })
    };
    let result = runtime()?
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(10), work).await });
    match result {
        Ok(Ok(Admin::Created)) => i.report(
            Outcome::Done,
            "mysql.admin",
            format!(
                "created '{account}'@'localhost' (socket login; CREATE USER, PROCESS, KILL, \
                 RELOAD, and the grants it hands out)"
            ),
        ),
        Ok(Ok(Admin::Narrowed)) => i.report(
            Outcome::Done,
            "mysql.admin",
            format!(
                "narrowed '{account}'@'localhost' from ALL/FILE/SUPER/SHUTDOWN to the privileges \
                 the agent uses"
            ),
        ),
        Ok(Ok(Admin::Kept)) => i.report(
            Outcome::Already,
            "mysql.admin",
            format!("'{account}'@'localhost' exists"),
        ),
        Ok(Err(e)) => i.report(
            Outcome::NeedsYou,
            "mysql.admin",
            format!(
                "cannot set up '{account}'@'localhost' as root over {} ({e}): start MariaDB \
                 and run install again",
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

/// Creates the agent's admin account (or takes a broader one's privileges back) and grants
/// what the agent uses and hands out.
async fn grant_admin(
    conn: &mut mysql_async::Conn,
    who: &str,
    exists: bool,
    handed_out: &[String],
) -> Result<(), mysql_async::Error> {
    let version: Option<String> = conn.query_first("SELECT VERSION()").await?;
    let mariadb = version.as_deref().is_some_and(|v| v.contains("MariaDB"));
    if exists {
        conn.query_drop(format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {who}"))
            .await?;
    } else {
        let via = if mariadb {
            "IDENTIFIED VIA unix_socket"
        } else {
            "IDENTIFIED WITH auth_socket"
        };
        conn.query_drop(format!("CREATE USER {who} {via}")).await?;
    }
    // MariaDB before 10.5.2 has no CONNECTION ADMIN; KILL then needs SUPER.
    let kill = if !mariadb {
        "CONNECTION_ADMIN"
    } else if conn
        .query_drop(format!("GRANT CONNECTION ADMIN ON *.* TO {who}"))
        .await
        .is_ok()
    {
        "CONNECTION ADMIN"
    } else {
        "SUPER"
    };
    for grant in admin_privileges(mariadb, kill) {
        let (privileges, target) = grant.split_once(" ON ").unwrap_or((&grant, "*.*"));
        conn.query_drop(format!("GRANT {privileges} ON {target} TO {who}"))
            .await?;
    }
    for grant in handed_out {
        let (privileges, target) = grant.split_once(" ON ").unwrap_or((grant, ""));
        conn.query_drop(format!(
            "GRANT {privileges} ON {target} TO {who} WITH GRANT OPTION"
        ))
        .await?;
    }
    Ok(())
}

/// What [`admin_account`] did.
enum Admin {
    Created,
    Narrowed,
    Kept,
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

#[cfg(test)]
mod tests {
    use super::{admin_privileges, too_broad};

    #[test]
    fn all_file_super_and_shutdown_are_too_broad_and_the_admins_own_are_not() {
        let g = |s: &str| vec![s.to_owned()];
        assert!(too_broad(&g(
            "GRANT ALL PRIVILEGES ON *.* TO `shiqi-ca`@`localhost` WITH GRANT OPTION"
        )));
        assert!(too_broad(&g(
            "GRANT FILE, RELOAD ON *.* TO `a`@`localhost`"
        )));
        assert!(too_broad(&g("GRANT SUPER ON *.* TO `a`@`localhost`")));
        assert!(!too_broad(&g(
            "GRANT RELOAD, PROCESS, CREATE USER, CONNECTION ADMIN ON *.* TO `a`@`localhost`"
        )));
        assert!(!too_broad(&g(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON `app`.* TO `a`@`localhost` \
             WITH GRANT OPTION"
        )));
        for p in admin_privileges(true, "CONNECTION ADMIN") {
            assert!(
                !too_broad(&[format!("GRANT {p} TO `a`@`localhost`")]),
                "{p}"
            );
        }
    }
}
