//! Who is asking, and whether they may. The one home of the agent's roles.
//!
//! A request arrives in one of two ways. Someone with a shell as the agent's own account (root
//! through `sudo -u`, cron, the admin on the server) is [`Caller::Local`]: the CA's operator, who
//! could read `ca.key` anyway. A person's SSH key reaches the agent only through the forced
//! command `enroll` installs, `serve --key FINGERPRINT`; that is [`Caller::Key`], and it may do
//! what its enrolled role allows and nothing else. The identity comes from the forced command
//! (written by an admin) and the inventory, never from the request, its options or the
//! environment the caller could set.

use shiqi_ca::Serial;
use shiqi_ca::inventory::CertKind;
use shiqi_ca::inventory::access::Role;

pub use crate::caller::Caller;
use crate::cli::Command;
use crate::error::AgentError;
use crate::state::Context;

/// Whether `caller` may run `command`. Admins and local callers may run everything but a nested
/// `serve`; a `user` key only what concerns its own name.
///
/// # Errors
/// [`AgentError::Forbidden`] naming the key, the request and what the role allows.
pub fn authorize(ctx: &Context, caller: &Caller, command: &Command) -> Result<(), AgentError> {
    if matches!(command, Command::Serve(_)) {
        return Err(forbidden(caller, "`serve` inside a request"));
    }
    // The machine's own documentation; `man DIR` would write files as the agent's account.
    if matches!(command, Command::Completions(_) | Command::Man(_)) {
        return Err(forbidden(caller, &describe(command)));
    }
    // The CA key leaves the server only by the operator's hand: an admin key's owner may sign
    // and revoke any name, but never carry the key away or replace the CA.
    if matches!(command, Command::Backup(_) | Command::Restore(_))
        && !matches!(caller, Caller::Local { .. })
    {
        return Err(forbidden(caller, &describe(command)));
    }
    let key = match caller {
        Caller::Local { .. } => return Ok(()),
        Caller::Unenrolled { fingerprint } => {
            return Err(AgentError::NotEnrolled {
                key: fingerprint.clone(),
            });
        }
        Caller::Key(key) if key.role == Role::Admin => return Ok(()),
        Caller::Key(key) => key,
    };
    let own = |name: &str| name.trim() == key.name;
    let allowed = match command {
        Command::Brokers(_) | Command::Version(_) => true,
        Command::Sign(a) => own(&a.name),
        Command::MysqlUser(a) => own(&a.name),
        Command::Provision(a) => own(&a.name),
        Command::KafkaUser(a) => own(&a.name) && !a.revoke,
        Command::Revoke(a) => match (&a.serial, &a.name) {
            (_, Some(name)) => own(name),
            (Some(serial), None) => own_serial(ctx, &key.name, serial)?,
            (None, None) => false,
        },
        _ => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(forbidden(caller, &describe(command)))
    }
}

/// Whether `serial` is a client certificate of `name` (an unknown or malformed serial is not).
fn own_serial(ctx: &Context, name: &str, serial: &str) -> Result<bool, AgentError> {
    let Ok(serial) = serial.trim().parse::<Serial>() else {
        return Ok(false);
    };
    let record = ctx.inventory()?.by_serial(&serial)?;
    Ok(record.is_some_and(|r| r.kind == CertKind::Client && r.name == name))
}

fn forbidden(caller: &Caller, what: &str) -> AgentError {
    let (key, name, role) = match caller {
        Caller::Key(k) => (k.fingerprint.clone(), k.name.clone(), k.role),
        Caller::Unenrolled { fingerprint } => (fingerprint.clone(), String::new(), Role::User),
        Caller::Local { account, .. } => (account.clone(), account.clone(), Role::Admin),
    };
    AgentError::Forbidden {
        key,
        name,
        role,
        what: what.to_owned(),
    }
}

/// The subcommand and the name a request acts on, for the audit line of a refusal.
pub fn audit_target(command: &Command) -> (&'static str, String) {
    let name = |n: &str| n.trim().to_owned();
    match command {
        Command::Init(_) => ("init", String::new()),
        Command::ServerCert(a) => ("server-cert", name(&a.name)),
        Command::Sign(a) => ("sign", name(&a.name)),
        Command::MysqlUser(a) => ("mysql-user", name(&a.name)),
        Command::Provision(a) => ("provision", name(&a.name)),
        Command::KafkaUser(a) if a.revoke => ("kafka-user-revoke", name(&a.name)),
        Command::KafkaUser(a) => ("kafka-user", name(&a.name)),
        Command::Brokers(_) => ("brokers", String::new()),
        Command::Version(_) => ("version", String::new()),
        Command::List(_) => ("list", String::new()),
        Command::Revoke(a) => (
            "revoke",
            a.name
                .as_deref()
                .or(a.serial.as_deref())
                .map(name)
                .unwrap_or_default(),
        ),
        Command::Crl(_) => ("crl", String::new()),
        Command::Check(_) => ("check", String::new()),
        Command::Install(_) => ("install", String::new()),
        Command::Enroll(a) => ("enroll", a.name.as_deref().map(name).unwrap_or_default()),
        Command::Unblock(a) => ("unblock", name(&a.name)),
        Command::Backup(_) => ("backup", String::new()),
        Command::Restore(_) => ("restore", String::new()),
        Command::Serve(_) => ("serve", String::new()),
        Command::Completions(_) => ("completions", String::new()),
        Command::Man(_) => ("man", String::new()),
    }
}

/// The request in a few words, for the refusal.
fn describe(command: &Command) -> String {
    match command {
        Command::Init(_) => "`init`".to_owned(),
        Command::ServerCert(a) => format!("`server-cert {}`", a.name),
        Command::Sign(a) => format!("a certificate for `{}`", a.name),
        Command::MysqlUser(a) => format!("the MySQL user `{}`", a.name),
        Command::Provision(a) => format!("a certificate for `{}`", a.name),
        Command::KafkaUser(a) if a.revoke => format!("deleting the Kafka ACLs of `{}`", a.name),
        Command::KafkaUser(a) => format!("the Kafka ACLs of `{}`", a.name),
        Command::Brokers(_) => "`brokers`".to_owned(),
        Command::Version(_) => "`version`".to_owned(),
        Command::List(_) => "`list`".to_owned(),
        Command::Revoke(a) => match (&a.serial, &a.name) {
            (_, Some(name)) => format!("revoking `{name}`"),
            (Some(serial), None) => format!("revoking serial `{serial}`"),
            (None, None) => "`revoke`".to_owned(),
        },
        Command::Crl(_) => "`crl`".to_owned(),
        Command::Check(_) => "`check`".to_owned(),
        Command::Install(_) => "`install`".to_owned(),
        Command::Enroll(_) => "`enroll`".to_owned(),
        Command::Unblock(a) => format!("`unblock {}`", a.name),
        Command::Backup(_) => "`backup` (only on the server, as the agent's account)".to_owned(),
        Command::Restore(_) => "`restore` (only on the server, as the agent's account)".to_owned(),
        Command::Serve(_) => "`serve`".to_owned(),
        Command::Completions(_) => "`completions` (run it on the server itself)".to_owned(),
        Command::Man(_) => "`man` (run it on the server itself)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use shiqi_ca::inventory::access::Enrollment;
    use time::OffsetDateTime;

    use super::*;
    use crate::cli::Request;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn key(name: &str, role: Role) -> Caller {
        Caller::Key(Enrollment {
            fingerprint: format!("SHA256:{name}"),
            name: name.to_owned(),
            role,
            public_key: String::new(),
            enrolled_at: OffsetDateTime::UNIX_EPOCH,
            enrolled_by: "local root".to_owned(),
        })
    }

    fn request(line: &str) -> Command {
        let words = std::iter::once("shiqi-ca-agent").chain(line.split_whitespace());
        Request::try_parse_from(words)
            .expect("a valid request")
            .command
    }

    fn context() -> Result<(tempfile::TempDir, Context), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let ctx = Context::with_config(dir.path().to_owned(), crate::config::Config::default())?;
        Ok((dir, ctx))
    }

    #[test]
    fn a_user_key_may_only_act_on_its_own_name() -> TestResult {
        let (_dir, ctx) = context()?;
        let bob = key("bob", Role::User);
        for ok in [
            "sign --name bob",
            "sign --name bob --replaces 0a1b",
            "provision --name bob",
            "provision --name bob --no-kafka",
            "mysql-user bob",
            "kafka-user bob",
            "brokers --json",
            "revoke --name bob --key 00 --reason superseded",
            "revoke --name bob",
        ] {
            assert!(authorize(&ctx, &bob, &request(ok)).is_ok(), "{ok}");
        }
        for refused in [
            "sign --name saige",
            "provision --name saige",
            "mysql-user saige",
            "kafka-user saige",
            "kafka-user bob --revoke",
            "revoke --name saige",
            "revoke 0a1b2c",
            "list",
            "crl",
            "server-cert kafka-broker --kind kafka --san localhost --out /tmp/x",
            "init",
            "enroll --list",
            "enroll mallory --ssh-key /tmp/k.pub --role admin",
            "unblock bob",
            "serve --key SHA256:x",
        ] {
            let err = authorize(&ctx, &bob, &request(refused)).expect_err(refused);
            assert!(
                matches!(err, AgentError::Forbidden { ref key, .. } if key == "SHA256:bob"),
                "{refused}: {err:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn a_user_key_may_revoke_its_own_certificates_by_serial_only() -> TestResult {
        let (dir, ctx) = context()?;
        let mut inventory = ctx.inventory()?;
        let now = OffsetDateTime::now_utc();
        let mut issue = |name: &str, kind| {
            inventory.issue(|s| {
                Ok(shiqi_ca::inventory::NewCert {
                    name: name.to_owned(),
                    kind,
                    subject: format!("CN={name}"),
                    not_before: now,
                    not_after: now + time::Duration::days(1),
                    der: s.as_bytes().to_vec(),
                })
            })
        };
        let own = issue("bob", CertKind::Client)?.serial;
        let other = issue("saige", CertKind::Client)?.serial;
        let server = issue("bob", CertKind::Server)?.serial;
        let bob = key("bob", Role::User);
        assert!(authorize(&ctx, &bob, &request(&format!("revoke {own}"))).is_ok());
        for serial in [other, server] {
            assert!(authorize(&ctx, &bob, &request(&format!("revoke {serial}"))).is_err());
        }
        drop(dir);
        Ok(())
    }

    #[test]
    fn admins_and_local_callers_may_do_everything_but_nest_serve_or_generate_docs() -> TestResult {
        let (_dir, ctx) = context()?;
        let local = Caller::Local {
            account: "shiqi-ca".into(),
            sudo_user: None,
        };
        for caller in [key("saige", Role::Admin), local] {
            for ok in [
                "sign --name bob",
                "list",
                "revoke --name bob",
                "enroll --list",
            ] {
                assert!(authorize(&ctx, &caller, &request(ok)).is_ok(), "{ok}");
            }
            assert!(authorize(&ctx, &caller, &request("serve --key SHA256:x")).is_err());
            // `man DIR` would write files as the agent's account: not over SSH, not even for
            // an admin (`run` answers both before a caller is looked at).
            assert!(authorize(&ctx, &caller, &request("man /tmp/x")).is_err());
            assert!(authorize(&ctx, &caller, &request("completions bash")).is_err());
        }
        Ok(())
    }

    #[test]
    fn callers_are_named_for_the_audit_log() {
        assert_eq!(
            key("bob", Role::User).to_string(),
            "key SHA256:bob (bob, user)"
        );
        let local = Caller::Local {
            account: "shiqi-ca".into(),
            sudo_user: Some("root".into()),
        };
        assert_eq!(local.to_string(), "local shiqi-ca (sudo by root)");
    }
}
