//! Signing a client certificate: the CSR checked against the name and policy, the inventory
//! written in the transaction that makes the certificate, and the facts the laptop needs
//! (brokers, MySQL) gathered for the answer. `sign` and `provision` call it.
//!
//! A refusal changes no state: the inventory is written only inside that transaction.

use shiqi_ca::Port;
use shiqi_ca::cert::Cert;
use shiqi_ca::inventory::{CertKind, NewCert, Status};
use shiqi_ca::issue::{Lifetime, Validity};
use shiqi_ca::policy::check_csr;
use shiqi_ca::protocol::{
    CertPem, MissingFact, MysqlFacts, PROTOCOL_VERSION, ServerFacts, SignResponse,
};
use shiqi_ca::{ProfileName, Span};

use crate::audit;
use crate::error::AgentError;
use crate::ops::Cluster;
use crate::state::Context;

/// What the caller asks for besides the CSR.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ask<'a> {
    /// The serial of the certificate the new one replaces (a rotation), as given.
    pub(crate) replaces: Option<&'a str>,
    /// The lifetime asked for (the config's default when absent).
    pub(crate) lifetime: Option<Span>,
}

/// Signs `csr` for `name` and records the outcome in the audit log (and, with `replaces`, the
/// rotation).
pub(crate) fn issue(
    ctx: &Context,
    name: &str,
    csr: &[u8],
    ask: &Ask<'_>,
    cluster: &Cluster<'_>,
) -> anyhow::Result<SignResponse> {
    let replaces = ask.replaces;
    let result = sign(ctx, name, csr, ask, cluster);
    let (serial, outcome, reason) = match &result {
        Ok(r) => (Some(r.serial.to_hex()), "ok", None),
        Err(e) => (None, "refused", Some(e.to_string())),
    };
    audit::record(
        ctx,
        &audit::Entry {
            action: "sign",
            name,
            serial: serial.clone(),
            outcome,
            reason: reason.clone(),
        },
    );
    if let Some(old) = replaces {
        audit::record(
            ctx,
            &audit::Entry {
                action: "rotate",
                name,
                serial,
                outcome,
                reason: Some(match reason {
                    Some(why) => format!("replacing {old}: {why}"),
                    None => format!("replaces {old}"),
                }),
            },
        );
    }
    result
}

/// Signing is the agent's most frequent call, so it also keeps the CRL from going stale (a CRL
/// past its nextUpdate locks every user out). Best effort: a problem here never fails the sign.
pub(crate) fn refresh_crl(ctx: &Context) {
    let updated = ctx
        .ca()
        .and_then(|ca| crate::crl::update(ctx, &ca, crate::crl::When::IfDue));
    match updated {
        Ok(u) if u.changed() || crate::crl::reload_pending(ctx) => {
            if let Err(e) = crate::crl::reload_mysql(ctx) {
                tracing::warn!("wrote a new CRL, but MySQL did not re-read it: {e:#}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot refresh the CRL: {e:#}"),
    }
}

fn sign(
    ctx: &Context,
    name: &str,
    csr: &[u8],
    ask: &Ask<'_>,
    cluster: &Cluster<'_>,
) -> anyhow::Result<SignResponse> {
    let name: ProfileName = name.parse()?;
    if ctx.config.reserved_names().contains(&name.as_str()) {
        return Err(AgentError::ReservedName {
            name: name.to_string(),
        }
        .into());
    }
    let checked = check_csr(csr, &name)?;
    let ca = ctx.ca()?;

    let mut inventory = ctx.inventory()?;
    if let Some(old) = ask.replaces {
        check_replaces(&inventory, &name, old)?;
    }
    crate::limits::check_certificate_cap(ctx, &inventory, &name)?;
    // A name that belongs to a server certificate (a broker, MariaDB) is never a client.
    if inventory.is_server_name(name.as_str())? {
        return Err(AgentError::ReservedName {
            name: name.to_string(),
        }
        .into());
    }
    if let Some(asked) = ask.lifetime {
        Lifetime::Client.check(asked)?;
    }
    let (lifetime, capped_at) = ctx
        .config
        .lifetime
        .client_for(ctx.caller.role(), ask.lifetime);
    let validity = Validity::for_span(time::OffsetDateTime::now_utc(), Lifetime::Client, lifetime)?;
    let record = inventory.issue(|serial| {
        let cert = ca.issue_client(&checked, serial, validity)?;
        Ok(NewCert::from_cert(name.as_str(), CertKind::Client, &cert))
    })?;
    let cert = Cert::from_der(&record.der)?;
    tracing::debug!(serial = %cert.serial(), name = %name, "issued client certificate");

    Ok(SignResponse {
        version: PROTOCOL_VERSION,
        name: name.clone(),
        serial: cert.serial().clone(),
        not_before: cert.not_before(),
        not_after: cert.not_after(),
        certificate_pem: CertPem::of(&cert),
        chain_pem: vec![CertPem::of(ca.cert())],
        ca_pem: CertPem::of(ca.cert()),
        facts: facts(ctx, &ca, &name, cluster),
        capped_at,
    })
}

/// A rotation names the certificate it replaces: it must be a client certificate of the same
/// name from this CA (a profile made against another CA needs a new `setup`), not revoked.
fn check_replaces(
    inventory: &shiqi_ca::inventory::Inventory,
    name: &ProfileName,
    old: &str,
) -> anyhow::Result<()> {
    let serial: shiqi_ca::Serial = old.trim().parse()?;
    let refuse = |why: &str| AgentError::BadReplaces {
        serial: serial.to_hex(),
        why: why.to_owned(),
    };
    let Some(record) = inventory.by_serial(&serial)? else {
        return Err(refuse("this CA never issued it").into());
    };
    if record.kind != CertKind::Client || record.name != name.as_str() {
        return Err(refuse(&format!(
            "it is the {} certificate of `{}`, not a client certificate of `{name}`",
            record.kind, record.name
        ))
        .into());
    }
    // A revoked serial is no longer the profile's: a rotation that read `profile.json` before
    // another run replaced it would otherwise get a certificate that nothing ever revokes
    // (issue 42).
    if record.status == Status::Revoked {
        return Err(AgentError::ReplacesRevoked {
            serial: serial.to_hex(),
            name: name.to_string(),
        }
        .into());
    }
    Ok(())
}

/// What the client needs to know; each fact that cannot be learned is listed with its reason.
/// The brokers come over `cluster`'s connection, made here on first use (after the CSR has
/// passed, so a refusal opens nothing) and kept for the request's next steps.
fn facts(
    ctx: &Context,
    ca: &shiqi_ca::issue::Ca,
    name: &ProfileName,
    cluster: &Cluster<'_>,
) -> ServerFacts {
    let mut facts = ServerFacts::default();
    let brokers = cluster
        .admin(ca)
        .and_then(|admin| crate::kafka::brokers(admin).map_err(|e| e.to_string()));
    match brokers {
        Ok(k) => facts.kafka = Some(k),
        Err(reason) => facts.missing.push(MissingFact {
            fact: "kafka.brokers".into(),
            reason: reason.into(),
        }),
    }
    let m = &ctx.config.mysql;
    if m.host.is_empty() {
        facts.missing.push(MissingFact {
            fact: "mysql".into(),
            reason: "MySQL is not configured on the server".into(),
        });
    } else {
        // `Config::load` validated both; a failure here is reported, never emitted.
        match (m.host.parse(), Port::try_from(m.port)) {
            (Ok(host), Ok(port)) => {
                facts.mysql = Some(MysqlFacts {
                    host,
                    port,
                    user: name.clone(),
                });
            }
            (Err(e), _) | (_, Err(e)) => facts.missing.push(MissingFact {
                fact: "mysql".into(),
                reason: format!("agent.toml [mysql]: {e}").into(),
            }),
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use shiqi_ca::inventory::Inventory;
    use time::{Duration, OffsetDateTime};

    use super::*;

    fn client(inv: &mut Inventory, name: &str) -> anyhow::Result<shiqi_ca::Serial> {
        let now = OffsetDateTime::now_utc();
        let r = inv.issue(|s| {
            Ok(NewCert {
                name: name.to_owned(),
                kind: CertKind::Client,
                subject: format!("CN={name}"),
                not_before: now,
                not_after: now + Duration::days(30),
                der: s.as_bytes().to_vec(),
            })
        })?;
        Ok(r.serial)
    }

    #[test]
    fn replaces_only_a_live_certificate_of_the_same_name() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut inv = Inventory::open(&dir.path().join("inventory.sqlite"))?;
        let name: ProfileName = "saige".parse()?;
        let mine = client(&mut inv, "saige")?;
        let theirs = client(&mut inv, "bob")?;
        check_replaces(&inv, &name, &mine.to_hex())?;
        let other = check_replaces(&inv, &name, &theirs.to_hex()).err();
        assert!(
            matches!(
                other.as_ref().and_then(|e| e.downcast_ref()),
                Some(AgentError::BadReplaces { .. })
            ),
            "{other:?}"
        );
        // Revoked by a run that won the race: replacing it would leave the new certificate
        // nobody's.
        inv.revoke(&mine, Some("superseded"), OffsetDateTime::now_utc())?;
        let revoked = check_replaces(&inv, &name, &mine.to_hex()).err();
        assert!(
            matches!(
                revoked.as_ref().and_then(|e| e.downcast_ref()),
                Some(AgentError::ReplacesRevoked { .. })
            ),
            "{revoked:?}"
        );
        Ok(())
    }
}
