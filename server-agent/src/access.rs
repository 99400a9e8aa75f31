//! Who is asking, and whether they may. The one home of the agent's roles.
//!
//! A request arrives in one of two ways. Someone with a shell as the agent's own account (root
//! through `sudo -u`, cron, the admin on the server) is [`Caller::Local`]: the CA's operator, who
//! could read `ca.key` anyway. A person's SSH key reaches the agent only through the forced
//! command `enroll` installs, `serve --key FINGERPRINT`; that is [`Caller::Key`], and it may do
//! what its enrolled role allows and nothing else. The identity comes from the forced command
//! (written by an admin) and the inventory, never from the request, its options or the
//! environment the caller could set.

use shiqi_ca::inventory::access::Role;

pub(crate) use crate::caller::Caller;
use crate::error::AgentError;
use crate::handler::{Audience, Handler};
use crate::state::Context;

/// Whether `caller` may run `request` ([`Handler::audience`], then [`Handler::user_may`] for a
/// `user` key). Admins and local callers may run everything but a nested `serve`; a `user` key
/// only what concerns its own name.
///
/// # Errors
/// [`AgentError::Forbidden`] naming the key, the request and what the role allows.
pub(crate) fn authorize(
    ctx: &Context,
    caller: &Caller,
    request: &dyn Handler,
) -> Result<(), AgentError> {
    match request.audience() {
        // `serve` inside a request; the machine's own documentation (`man DIR` would write
        // files as the agent's account).
        Audience::Nobody => return Err(forbidden(caller, &request.describe())),
        // The CA key leaves the server only by the operator's hand: an admin key's owner may
        // sign and revoke any name, but never carry the key away or replace the CA.
        Audience::Local if !matches!(caller, Caller::Local { .. }) => {
            return Err(forbidden(caller, &request.describe()));
        }
        Audience::Local | Audience::Keys => {}
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
    if request.user_may(ctx, &key.name)? {
        Ok(())
    } else {
        Err(forbidden(caller, &request.describe()))
    }
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

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use shiqi_ca::inventory::CertKind;
    use shiqi_ca::inventory::access::Enrollment;
    use time::OffsetDateTime;

    use super::*;
    use crate::commands::Command;
    use crate::commands::serve::Request;

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
            assert!(authorize(&ctx, &bob, request(ok).handler()).is_ok(), "{ok}");
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
            let err = authorize(&ctx, &bob, request(refused).handler()).expect_err(refused);
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
        assert!(authorize(&ctx, &bob, request(&format!("revoke {own}")).handler()).is_ok());
        for serial in [other, server] {
            assert!(authorize(&ctx, &bob, request(&format!("revoke {serial}")).handler()).is_err());
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
                assert!(
                    authorize(&ctx, &caller, request(ok).handler()).is_ok(),
                    "{ok}"
                );
            }
            assert!(authorize(&ctx, &caller, request("serve --key SHA256:x").handler()).is_err());
            // `man DIR` would write files as the agent's account: not over SSH, not even for
            // an admin (`run` answers both before a caller is looked at).
            assert!(authorize(&ctx, &caller, request("man /tmp/x").handler()).is_err());
            assert!(authorize(&ctx, &caller, request("completions bash").handler()).is_err());
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
