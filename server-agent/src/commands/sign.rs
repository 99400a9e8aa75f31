//! `sign --name NAME`: one PEM CSR on stdin in, one `SignResponse` JSON document out.
//!
//! A refusal exits non-zero with one line on stderr and changes no state: the inventory is
//! written only inside the transaction that also makes the certificate.

use std::cell::OnceCell;
use std::io::Read as _;

use shiqi_ca::Port;
use shiqi_ca::cert::Cert;
use shiqi_ca::inventory::{CertKind, NewCert};
use shiqi_ca::issue::{Lifetime, Validity};
use shiqi_ca::policy::{MAX_CSR_BYTES, check_csr};
use shiqi_ca::protocol::{
    CertPem, MissingFact, MysqlFacts, PROTOCOL_VERSION, ServerFacts, SignResponse,
};
use shiqi_ca::{ProfileName, error::CsrRefusal};

use crate::audit;
use crate::cli::SignArgs;
use crate::error::AgentError;
use crate::kafka::Admin;
use crate::state::Context;

/// Signs the CSR and prints the answer.
pub fn run(ctx: &Context, args: SignArgs) -> anyhow::Result<()> {
    let admin = OnceCell::new();
    let brokers = if args.no_kafka {
        Brokers::NotAsked
    } else {
        Brokers::Ask(&admin)
    };
    let response = read_csr()
        .and_then(|csr| sign_recorded(ctx, &args.name, &csr, args.replaces.as_deref(), brokers))?;
    refresh_crl(ctx);
    crate::commands::print_json(&response)
}

/// Whether `sign` asks the cluster for its brokers.
#[derive(Clone, Copy)]
pub(crate) enum Brokers<'a> {
    /// No (`--no-kafka`): the answer lists the fact as missing.
    NotAsked,
    /// Yes, over the admin connection in the cell, made there on first use (after the CSR has
    /// passed, so a refusal opens nothing): `provision` reuses it for the ACLs.
    Ask(&'a OnceCell<Result<Admin<'a>, String>>),
}

/// Reads one PEM CSR from stdin, refusing more than a CSR can be.
pub(crate) fn read_csr() -> anyhow::Result<Vec<u8>> {
    let mut csr = Vec::new();
    std::io::stdin()
        .take(MAX_CSR_BYTES as u64 + 1)
        .read_to_end(&mut csr)
        .map_err(AgentError::Stdin)?;
    if csr.len() > MAX_CSR_BYTES {
        return Err(shiqi_ca::Error::CsrRefused {
            reason: CsrRefusal::TooLarge,
        }
        .into());
    }
    Ok(csr)
}

/// Signs `csr` for `name` and records the outcome in the audit log (and, with `replaces`, the
/// rotation).
pub(crate) fn sign_recorded<'a>(
    ctx: &'a Context,
    name: &str,
    csr: &[u8],
    replaces: Option<&str>,
    brokers: Brokers<'a>,
) -> anyhow::Result<SignResponse> {
    let result = sign(ctx, name, csr, replaces, brokers);
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

fn sign<'a>(
    ctx: &'a Context,
    name: &str,
    csr: &[u8],
    replaces: Option<&str>,
    brokers: Brokers<'a>,
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
    if let Some(old) = replaces {
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
    let validity = Validity::for_days(
        time::OffsetDateTime::now_utc(),
        Lifetime::Client,
        u64::from(ctx.config.lifetime.client_days),
    )?;
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
        facts: facts(ctx, &ca, &name, brokers),
    })
}

/// A rotation names the certificate it replaces: it must be a client certificate of the same
/// name from this CA (a profile made against another CA needs a new `setup`).
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
    Ok(())
}

/// What the client needs to know; each fact that cannot be learned is listed with its reason.
fn facts<'a>(
    ctx: &'a Context,
    ca: &shiqi_ca::issue::Ca,
    name: &ProfileName,
    brokers: Brokers<'a>,
) -> ServerFacts {
    let mut facts = ServerFacts::default();
    let mut missing = |reason: String| {
        facts.missing.push(MissingFact {
            fact: "kafka.brokers".into(),
            reason: reason.into(),
        });
    };
    let cell = match brokers {
        Brokers::NotAsked => {
            missing("not asked (--no-kafka)".to_owned());
            None
        }
        Brokers::Ask(_) if ctx.config.kafka.bootstrap.is_empty() => {
            missing("Kafka is not configured on the server".to_owned());
            None
        }
        Brokers::Ask(cell) => Some(cell),
    };
    if let Some(cell) = cell {
        let admin = cell.get_or_init(|| Admin::connect(ctx, ca).map_err(|e| e.to_string()));
        match admin {
            Ok(admin) => match crate::kafka::brokers(admin) {
                Ok(k) => facts.kafka = Some(k),
                Err(e) => missing(e.to_string()),
            },
            Err(why) => missing(why.clone()),
        }
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
