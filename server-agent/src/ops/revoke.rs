//! Revocation that locks the door: what `revoke` does to the CA, MySQL and Kafka.
//!
//! In this order, so that the lasting record exists before anything that can fail:
//! 1. the inventory marks the certificate(s) revoked;
//! 2. a new CRL is written to the state directory and `[crl] publish_dir`;
//! 3. MySQL: `ACCOUNT LOCK` when no valid certificate is left for the name, `FLUSH SSL` so that
//!    the server's `ssl_crl` refuses the revoked certificate at the handshake, and `KILL` of the
//!    user's open sessions (not for `superseded`: a rotation's old certificate belongs to the
//!    same person, who may already be using the new one — sessions cannot be told apart by
//!    certificate);
//! 4. Kafka: when no valid certificate is left, every ACL of `User:NAME` is deleted, so
//!    connections opened before get authorization errors at their next request; brokers that
//!    check revocation (JVM `com.sun.net.ssl.checkRevocation`) refuse new handshakes with the
//!    revoked certificate once they re-read the CRL (within 30 s).
//!
//! Every step's outcome is in the [`RevokeResponse`]; a step that could not reach MySQL or Kafka
//! says so there (`failures` lists it), and running it again finishes the job (every step is
//! idempotent).

use std::collections::BTreeSet;

use shiqi_ca::cert::Cert;
use shiqi_ca::crl::{Reason, parse_reason};
use shiqi_ca::inventory::{CertKind, Inventory, Record, Status};
use shiqi_ca::issue::Ca;
use shiqi_ca::protocol::{
    CrlFacts, KafkaRevocation, MysqlRevocation, PROTOCOL_VERSION, RevokeResponse, RevokeTarget,
    RevokedCert,
};
use shiqi_ca::{ProfileName, Serial};

use crate::audit;
use crate::crl::{self, When};
use crate::error::AgentError;
use crate::mysql;
use crate::ops::acls;
use crate::state::Context;

/// Revokes what `target` names for `reason` and makes it effective on MySQL and Kafka. The
/// answer holds every step's outcome; only a refusal, or a failure before the CRL is written,
/// is an error.
pub(crate) fn revoke(
    ctx: &Context,
    target: &RevokeTarget,
    reason: Reason,
) -> anyhow::Result<RevokeResponse> {
    let ca = ctx.ca()?;
    let mut inventory = ctx.inventory()?;
    let (name, kind, mut found) = targets(&inventory, target)?;
    // `--name` (not `--key`, a laptop's cleanup of its own unfinished setup) stops the name
    // from being signed again. A `sign` racing this one either committed before the block (and
    // the second look below revokes its certificate too) or is refused by it.
    let blocked = match target {
        RevokeTarget::Name(_) => {
            let by = ctx.caller.to_string();
            let block = inventory.block(&name, &by, time::OffsetDateTime::now_utc())?;
            found = targets(&inventory, target)?.2;
            Some(block)
        }
        RevokeTarget::Serial(_) | RevokeTarget::Key(..) => None,
    };
    let targets = found;
    if targets.is_empty() {
        // `--key` found nothing to revoke: report the CRL as it is and touch nothing else.
        drop(inventory);
        let updated = crl::update(ctx, &ca, When::IfDue)?;
        return Ok(answer(&name, Vec::new(), updated.facts));
    }

    let now = time::OffsetDateTime::now_utc();
    let mut revoked = Vec::with_capacity(targets.len());
    for target in &targets {
        let already = target.status == Status::Revoked;
        let record = inventory.revoke(&target.serial, Some(reason.as_str()), now)?;
        revoked.push(RevokedCert {
            serial: record.serial.clone(),
            kind: record.kind.as_str().into(),
            reason: record.reason.as_deref().map(parse_reason).transpose()?,
            revoked_at: record.revoked_at.unwrap_or(now),
            already,
        });
    }
    // The lasting record: if this fails the command fails, and `crl --refresh` (or the next
    // `sign`) writes it, because it sees the inventory's list differ from the CRL's.
    // `IfDue` rebuilds whenever the CRL lacks any revocation in the inventory, and skips when
    // a concurrent revoke's CRL, written after ours committed, already lists it: a burst of
    // revocations signs (and makes every server re-read) one CRL, not one each.
    let updated = crl::update(ctx, &ca, When::IfDue)?;
    tracing::debug!(number = updated.facts.number, "CRL written");

    let mut response = answer(&name, revoked, updated.facts);
    if let Some(block) = &blocked {
        response.warnings.push(
            format!(
                "`{name}` is blocked since {}: no new certificate for it until an admin runs \
                 `shiqi-ca-agent unblock {name}`",
                shiqi_ca::text::utc(block.blocked_at)
            )
            .into(),
        );
    }
    if ctx.config.crl.distribution_point().is_none() {
        response.warnings.push(
            "`[crl]` has no publish_dir or distribution_point: certificates carry no CRL \
             distribution point, so Kafka brokers cannot refuse a revoked certificate at the \
             handshake"
                .into(),
        );
    }
    if kind != CertKind::Client {
        response.warnings.push(
            format!(
                "a revoked {kind} certificate is refused only by peers that check the CRL; issue a \
             new one with `shiqi-ca-agent server-cert` and restart the server that uses it"
            )
            .into(),
        );
        reload_only(ctx, &mut response);
        return Ok(response);
    }
    let still_valid = inventory.valid_for(&name, CertKind::Client)?;
    response.still_valid = still_valid.iter().map(|r| r.serial.clone()).collect();
    effective(ctx, &ca, &name, reason, &mut response)?;
    Ok(response)
}

/// The answer before steps 3 and 4: what was revoked and the CRL that lists it.
fn answer(name: &str, revoked: Vec<RevokedCert>, crl: CrlFacts) -> RevokeResponse {
    RevokeResponse {
        version: PROTOCOL_VERSION,
        name: name.into(),
        revoked,
        still_valid: Vec::new(),
        crl,
        mysql: None,
        kafka: None,
        warnings: Vec::new(),
    }
}

/// Steps 3 and 4 for a client certificate of `name`, with the limits of what they did.
fn effective(
    ctx: &Context,
    ca: &Ca,
    name: &str,
    reason: Reason,
    response: &mut RevokeResponse,
) -> anyhow::Result<()> {
    let user: ProfileName = name.parse()?;
    let none_left = response.still_valid.is_empty();
    let end_sessions = none_left || reason != Reason::Superseded;
    if !ctx.config.mysql.host.is_empty() {
        response.mysql = Some(mysql_side(ctx, ca, &user, none_left, end_sessions));
    }
    if !ctx.config.kafka.bootstrap.is_empty() {
        response.kafka = Some(kafka_side(ctx, &user, &response.still_valid, none_left));
        if !none_left && reason != Reason::Superseded {
            response.warnings.push(format!(
                "another certificate of `{name}` is still valid, so `User:{name}` keeps its ACLs: \
                 Kafka connections opened with the revoked certificate stay open until they \
                 close (Kafka cannot end them); revoke every certificate of the name \
                 (`revoke --name {name}`) to cut them"
            ).into());
        }
    }
    if ctx.config.crl.publish_dir.is_none() && !none_left {
        response.warnings.push(
            "no `[crl] publish_dir`: MySQL cannot read the CRL, so the revoked certificate can \
             still log in while another certificate of the name is valid"
                .into(),
        );
    }
    Ok(())
}

/// The certificates a request names, with the name and kind they belong to.
fn targets(
    inventory: &Inventory,
    target: &RevokeTarget,
) -> anyhow::Result<(String, CertKind, Vec<Record>)> {
    let (name, key) = match target {
        RevokeTarget::Serial(serial) => {
            let record =
                inventory
                    .by_serial(serial)?
                    .ok_or_else(|| shiqi_ca::Error::UnknownSerial {
                        serial: serial.to_string(),
                    })?;
            return Ok((record.name.clone(), record.kind, vec![record]));
        }
        RevokeTarget::Name(name) => (name, None),
        RevokeTarget::Key(name, key) => (name, Some(key)),
    };
    let of_key =
        |r: &Record| key.is_none_or(|k| Cert::from_der(&r.der).is_ok_and(|c| &c.key_id() == k));
    let all: Vec<Record> = inventory
        .of_name(name.as_str(), CertKind::Client)?
        .into_iter()
        .filter(of_key)
        .collect();
    if all.is_empty() && key.is_some() {
        return Ok((name.to_string(), CertKind::Client, Vec::new()));
    }
    if all.is_empty() {
        return Err(AgentError::NoCertificate {
            name: name.to_string(),
        }
        .into());
    }
    // Expired certificates are refused anyway and stay out of the CRL; the rest (revoked ones
    // included, so that a second run repeats the MySQL and Kafka steps) are acted on.
    let now = time::OffsetDateTime::now_utc();
    let valid: BTreeSet<Serial> = inventory
        .valid_for(name.as_str(), CertKind::Client)?
        .into_iter()
        .map(|r| r.serial)
        .collect();
    // `--key` cleans up after a laptop run that did not finish: only what is still valid needs
    // doing, so a repeat is free (no CRL, no MySQL, no Kafka).
    let targets = all
        .into_iter()
        .filter(|r| {
            valid.contains(&r.serial)
                || (key.is_none() && r.status == Status::Revoked && r.not_after > now)
        })
        .collect();
    Ok((name.to_string(), CertKind::Client, targets))
}

fn mysql_side(
    ctx: &Context,
    ca: &Ca,
    user: &ProfileName,
    lock: bool,
    end_sessions: bool,
) -> MysqlRevocation {
    let address = mysql::address(ctx);
    let host = ctx.config.mysql.user_host.clone();
    // The account's `REQUIRE ISSUER` is the CA's subject (see `mysql-user`).
    let issuer = ca.cert().subject_oneline().to_owned();
    let mut out = MysqlRevocation::default();
    let result: Result<(), AgentError> = ctx.block_on(async {
        let mut conn = mysql::connect(ctx).await?;
        let done = async {
            // Lock first, so that nothing logs in again between the reload and the kill.
            if lock {
                out.locked = mysql::lock_account(&mut conn, &address, user, &host, &issuer).await?;
            }
            if ctx.config.crl.publish_dir.is_some() {
                out.reloaded_with = Some(mysql::reload_tls(&mut conn, &address).await?.into());
            }
            if end_sessions {
                out.killed = mysql::kill_sessions(&mut conn, &address, user).await?;
            }
            Ok(())
        }
        .await;
        let _ = conn.disconnect().await;
        done
    });
    if let Err(e) = result {
        out.error = Some(e.to_string().into());
    }
    if ctx.config.crl.publish_dir.is_some() {
        crl::note_reload(ctx, out.reloaded_with.is_some());
    }
    out
}

fn kafka_side(
    ctx: &Context,
    user: &ProfileName,
    still_valid: &[Serial],
    none_left: bool,
) -> KafkaRevocation {
    let mut out = KafkaRevocation::default();
    if !none_left {
        let serials: Vec<String> = still_valid.iter().map(Serial::to_hex).collect();
        out.kept_because = Some(format!("still valid for `{user}`: {}", serials.join(", ")).into());
        return out;
    }
    match acls::revoke(ctx, user) {
        Ok(r) => out.deleted = r.deleted,
        Err(e) => out.error = Some(format!("{e:#}").into()),
    }
    out
}

/// A server or admin certificate: only MySQL's view of the CRL needs refreshing.
fn reload_only(ctx: &Context, response: &mut RevokeResponse) {
    match crl::reload_mysql(ctx) {
        Ok(Some(statement)) => {
            response.mysql = Some(MysqlRevocation {
                reloaded_with: Some(statement.into()),
                ..MysqlRevocation::default()
            });
        }
        Ok(None) => {}
        Err(e) => {
            response.mysql = Some(MysqlRevocation {
                error: Some(format!("{e:#}").into()),
                ..MysqlRevocation::default()
            });
        }
    }
}

/// Records `result` in the audit log: a refusal under the name or serial as `asked`, else one
/// line per newly revoked certificate (or one saying none was) with what was done.
pub(crate) fn record(
    ctx: &Context,
    asked: &str,
    serial: Option<&str>,
    result: &anyhow::Result<RevokeResponse>,
) {
    let response = match result {
        Ok(r) => r,
        Err(e) => {
            audit::record(
                ctx,
                &audit::Entry {
                    action: "revoke",
                    name: asked,
                    serial: serial.map(str::to_owned),
                    outcome: "refused",
                    reason: Some(format!("{e:#}")),
                },
            );
            return;
        }
    };
    let outcome = if failures(response).is_empty() {
        "ok"
    } else {
        "partial"
    };
    let effects = effects(response);
    let newly: Vec<&RevokedCert> = response.revoked.iter().filter(|r| !r.already).collect();
    if newly.is_empty() {
        audit::record(
            ctx,
            &audit::Entry {
                action: "revoke",
                name: response.name.as_str(),
                serial: None,
                outcome,
                reason: Some(format!("nothing newly revoked; {effects}")),
            },
        );
    }
    for cert in newly {
        audit::record(
            ctx,
            &audit::Entry {
                action: "revoke",
                name: response.name.as_str(),
                serial: Some(cert.serial.to_hex()),
                outcome,
                reason: Some(format!(
                    "{}; {effects}",
                    cert.reason.map_or("unspecified", Reason::as_str)
                )),
            },
        );
    }
}

/// What could not be done, one line each (empty when every step did its part).
pub(crate) fn failures(r: &RevokeResponse) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = r.mysql.as_ref().and_then(|m| m.error.as_ref()) {
        out.push(format!("MySQL: {e}"));
    }
    if let Some(e) = r.kafka.as_ref().and_then(|k| k.error.as_ref()) {
        out.push(format!("Kafka: {e}"));
    }
    out
}

/// One line on what was done, for the audit log.
fn effects(r: &RevokeResponse) -> String {
    let mut parts = vec![format!("CRL #{} lists {}", r.crl.number, r.crl.revoked)];
    if let Some(m) = &r.mysql {
        let mut p = Vec::new();
        if m.locked {
            p.push("account locked".to_owned());
        }
        if let Some(s) = &m.reloaded_with {
            p.push(s.to_string());
        }
        p.push(format!("{} session(s) killed", m.killed.len()));
        if let Some(e) = &m.error {
            p.push(format!("error: {e}"));
        }
        parts.push(format!("mysql: {}", p.join(", ")));
    }
    if let Some(k) = &r.kafka {
        let what = match (&k.error, &k.kept_because) {
            (Some(e), _) => format!("error: {e}"),
            (None, Some(why)) => format!("ACLs kept ({why})"),
            (None, None) => format!("{} ACL(s) deleted", k.deleted.len()),
        };
        parts.push(format!("kafka: {what}"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use shiqi_ca::inventory::NewCert;
    use time::{Duration, OffsetDateTime};

    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn issue(inv: &mut Inventory, name: &str, kind: CertKind, days: i64) -> Record {
        let now = OffsetDateTime::now_utc();
        inv.issue(|s| {
            Ok(NewCert {
                name: name.to_owned(),
                kind,
                subject: format!("CN={name}"),
                not_before: now - Duration::days(1),
                not_after: now + Duration::days(days),
                der: s.as_bytes().to_vec(),
            })
        })
        .expect("issue")
    }

    fn by_name(name: &str) -> RevokeTarget {
        RevokeTarget::Name(name.parse().expect("a name"))
    }

    fn serial(serial: &Serial) -> RevokeTarget {
        RevokeTarget::Serial(serial.clone())
    }

    #[test]
    fn a_name_means_its_unexpired_client_certificates_revoked_ones_included() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut inv = Inventory::open(&dir.path().join("inventory.sqlite"))?;
        let a = issue(&mut inv, "saige", CertKind::Client, 30);
        let b = issue(&mut inv, "saige", CertKind::Client, 30);
        let _expired = issue(&mut inv, "saige", CertKind::Client, -1);
        let _other = issue(&mut inv, "bo", CertKind::Client, 30);
        inv.revoke(&b.serial, Some("superseded"), OffsetDateTime::now_utc())?;

        let (name, kind, found) = targets(&inv, &by_name("saige"))?;
        assert_eq!((name.as_str(), kind), ("saige", CertKind::Client));
        let serials: BTreeSet<_> = found.iter().map(|r| r.serial.clone()).collect();
        assert_eq!(
            serials,
            BTreeSet::from([a.serial.clone(), b.serial.clone()])
        );

        // A serial names one certificate of any kind; unknown serials and names are refused.
        let server = issue(&mut inv, "kafka-broker", CertKind::Server, 397);
        let (name, kind, found) = targets(&inv, &serial(&server.serial))?;
        assert_eq!(
            (name.as_str(), kind, found.len()),
            ("kafka-broker", CertKind::Server, 1)
        );
        assert!(targets(&inv, &serial(&"0abc".parse()?)).is_err());
        assert!(targets(&inv, &by_name("nobody")).is_err());
        Ok(())
    }

    #[test]
    fn failures_and_effects_read_for_people() {
        let now = OffsetDateTime::now_utc();
        let response = RevokeResponse {
            version: PROTOCOL_VERSION,
            name: "saige".into(),
            revoked: Vec::new(),
            still_valid: Vec::new(),
            crl: shiqi_ca::protocol::CrlFacts {
                number: 4,
                this_update: now,
                next_update: now,
                revoked: 2,
                path: "/s/crl.pem".into(),
                published: None,
            },
            mysql: Some(MysqlRevocation {
                reloaded_with: Some("FLUSH SSL".into()),
                killed: vec![7, 9],
                locked: true,
                error: None,
            }),
            kafka: Some(KafkaRevocation {
                error: Some("timed out".into()),
                ..KafkaRevocation::default()
            }),
            warnings: Vec::new(),
        };
        assert_eq!(failures(&response), ["Kafka: timed out"]);
        assert_eq!(
            effects(&response),
            "CRL #4 lists 2; mysql: account locked, FLUSH SSL, 2 session(s) killed; kafka: \
             error: timed out"
        );
    }
}
