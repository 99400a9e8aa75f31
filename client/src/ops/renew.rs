//! Renewal: a rotation that happens by itself once less than a third of the certificate's
//! lifetime is left (after 20 of 30 days by default). `renew`, `tunnel up` and cron or a
//! systemd timer call it; "nothing due" is a normal outcome, not an error.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use shiqi_ca::issue::BACKDATE;
use shiqi_ca::key::PrivateKey;
use shiqi_ca::{KeyId, ProfileName};
use time::OffsetDateTime;

use crate::agent::{self, AgentCommand};
use crate::error::{AgentError, Error, ProfileError};
use crate::ops::rotate::{self, Rotated};
use crate::profile::lock;
use crate::profile::{Certificate, Profile};
use crate::ssh::Session;
use crate::steps::{journal, keygen, verify};

/// What [`renew_if_due`] did.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub(crate) enum RenewOutcome {
    /// More than a third of the lifetime is left.
    NotDue {
        /// The certificate's end.
        #[serde(with = "time::serde::rfc3339")]
        not_after: OffsetDateTime,
        /// When it becomes due.
        #[serde(with = "time::serde::rfc3339")]
        due_from: OffsetDateTime,
    },
    /// Renewed (see [`rotate::rotate`]).
    Renewed(Box<Rotated>),
}

/// When a certificate becomes due for renewal: once two thirds of the lifetime it was signed
/// for have passed. The agent starts validity [`BACKDATE`] early for clocks that run behind;
/// counting that too would renew a 10-minute certificate after 5 minutes.
pub(crate) fn due_from(cert: &Certificate) -> OffsetDateTime {
    due_between(cert.not_before, cert.not_after)
}

/// [`due_from`] of a certificate valid from `not_before` to `not_after`.
pub(crate) fn due_between(not_before: OffsetDateTime, not_after: OffsetDateTime) -> OffsetDateTime {
    let signed_at = (not_before + BACKDATE).min(not_after);
    not_after - (not_after - signed_at) / 3
}

/// Whether it is due at `now`.
pub(crate) fn is_due(cert: &Certificate, now: OffsetDateTime) -> bool {
    now >= due_from(cert)
}

/// How many certificates one renewal may have signed (each refused by a service and revoked)
/// before it stops asking: without a bound, a renewal that kept failing signed one on every
/// attempt until the name's cap refused `renew`, `rotate` and `setup` alike (issue 42).
pub(crate) const MAX_SIGNED: u32 = 2;

/// Renews the certificate of the profile in `dir` if it is due, over `session` (which must be
/// logged in to the profile's server). `profile.json` is read under the profile's lock;
/// `patience` is how long to wait for it (`None`: not at all, for the tunnel, which tries again
/// at its next check).
///
/// Unlike a rotation by hand, a renewal has time, so it asks for nothing it cannot prove:
/// - the servers must answer with the current certificate first (unless it has expired): a
///   service that refuses it would refuse a new one too, and signing would only add a
///   certificate to revoke;
/// - a certificate signed on an earlier attempt and not yet tried (the session dropped, no
///   service answered) is tried again instead of signing another;
/// - at most [`MAX_SIGNED`] are signed per certificate replaced; then it stops and says so.
///
/// The old certificate is revoked once the new one has logged in.
///
/// # Errors
/// As [`rotate::finish`]; [`ProfileError::RenewalWaits`] when nothing was signed because the servers
/// do not answer with the current certificate; [`ProfileError::RenewalStopped`] after
/// [`MAX_SIGNED`]; [`ProfileError::Busy`] when another run holds the profile.
pub(crate) async fn renew_if_due(
    session: &Session,
    dir: &Path,
    name: &ProfileName,
    patience: Option<Duration>,
) -> Result<RenewOutcome, Error> {
    let root = dir.parent().unwrap_or(dir);
    let lock = match patience {
        Some(p) => lock::lock_waiting(root, name, p).await?,
        None => lock::lock(root, name)?,
    };
    let profile = Profile::load(dir)?;
    let cert = &profile.certificate;
    if !is_due(cert, OffsetDateTime::now_utc()) {
        return Ok(RenewOutcome::NotDue {
            not_after: cert.not_after,
            due_from: due_from(cert),
        });
    }
    let agent = AgentCommand::new(&profile.server.agent_command)?;
    let current = journal::profile_key(dir);
    journal::settle(&lock, session, &agent, name, current.as_ref(), false).await?;
    let result = renew_locked(&lock, session, dir, &profile, &agent, current.as_ref()).await;
    let keep = match &result {
        Ok(_) => journal::profile_key(dir),
        Err(_) => current.clone(),
    };
    if let Err(e) = journal::settle(&lock, session, &agent, name, keep.as_ref(), true).await {
        tracing::warn!("left for the next run to revoke: {e}");
    }
    Ok(RenewOutcome::Renewed(Box::new(result?)))
}

async fn renew_locked(
    lock: &lock::NameLock,
    session: &Session,
    dir: &Path,
    profile: &Profile,
    agent: &AgentCommand,
    current: Option<&KeyId>,
) -> Result<Rotated, Error> {
    let name = &profile.name;
    if profile.certificate.not_after > OffsetDateTime::now_utc() {
        answers_with_current(session, dir, profile).await?;
    }
    let mut record = lock
        .renewal(current)
        .unwrap_or_else(|| journal::Renewal::of(current));
    let kept = record.pending.as_ref().and_then(|p| kept(name, p));
    let (key, signed) = match kept {
        Some(k) => {
            tracing::info!(serial = %k.1.response.serial, "trying the certificate signed on an earlier attempt");
            k
        }
        None => {
            if record.signed >= MAX_SIGNED {
                return Err(Error::Profile(ProfileError::RenewalStopped {
                    name: name.to_string(),
                    signed: record.signed,
                }));
            }
            let fresh = keygen::keygen(name, profile.certificate.key_type)?;
            lock.add(&fresh.key.key_id())?;
            // Counted before asking: a run killed while the agent signs still spent one.
            record.signed += 1;
            record.pending = None;
            lock.set_renewal(&record)?;
            let signed = agent::sign_replacing(
                session,
                agent,
                name,
                profile.asked_lifetime(),
                &fresh.csr_pem,
                &fresh.key,
                &profile.certificate.serial,
            )
            .await;
            let signed = match signed {
                Ok(s) => s,
                Err(e) => {
                    if matches!(e, Error::Agent(AgentError::Refused { .. })) {
                        // Refused: nothing was signed for this key (see `journal::signing_refused`).
                        record.signed -= 1;
                        lock.set_renewal(&record)?;
                        lock.forget(&fresh.key.key_id())?;
                    }
                    return Err(e);
                }
            };
            record.pending = Some(journal::Pending {
                key_id: fresh.key.key_id().to_string(),
                key_pem: fresh.key.to_pkcs8_pem().expose().clone(),
                reply: serde_json::to_string(&signed.response).unwrap_or_default(),
            });
            lock.set_renewal(&record)?;
            (fresh.key, signed)
        }
    };
    let result = rotate::finish(
        session,
        dir,
        profile,
        rotate::OldCertificate::Supersede,
        agent,
        &key,
        &signed,
        rotate::Proof::Required,
    )
    .await;
    match &result {
        Ok(_) => lock.clear_renewal()?,
        // A service refused it while it accepts the current one: this certificate is done
        // (revoked by `finish`, or by the settle that follows: its key is journaled).
        Err(Error::Profile(ProfileError::NewCertRefused { .. })) => {
            record.pending = None;
            lock.set_renewal(&record)?;
        }
        // Not tried, or not everywhere: kept for the next attempt.
        Err(_) => {}
    }
    result
}

/// The pending certificate, if it is still usable: its key parses, the reply still checks, and
/// it has not expired.
fn kept(name: &ProfileName, p: &journal::Pending) -> Option<(PrivateKey, agent::Signed)> {
    let key = PrivateKey::from_pem(&p.key_pem).ok()?;
    let signed = agent::signed_from_kept(name, &key, &p.reply).ok()?;
    (signed.response.not_after > OffsetDateTime::now_utc()).then_some((key, signed))
}

/// Whether the servers answer with the profile's current certificate: no service refuses it,
/// and at least one answers.
///
/// # Errors
/// [`ProfileError::RenewalWaits`], naming the first refusal, or saying none answered.
async fn answers_with_current(
    session: &Session,
    dir: &Path,
    profile: &Profile,
) -> Result<(), Error> {
    let logins = verify::logins(session, dir, profile).await;
    judge_current(&logins).map_err(|why| {
        Error::Profile(ProfileError::RenewalWaits {
            name: profile.name.to_string(),
            why,
        })
    })
}

/// The verdict of [`answers_with_current`] on the current certificate's logins (pure).
fn judge_current(logins: &[verify::Login]) -> Result<(), String> {
    if let Some(refused) = logins.iter().find(|l| !l.check.ok && !l.unreachable) {
        return Err(format!(
            "{} refuses the current certificate too ({})",
            refused.service, refused.check.detail
        ));
    }
    if !logins.is_empty() && logins.iter().all(|l| l.unreachable) {
        return Err(
            "no broker and no MySQL server could be reached to try a new certificate".to_owned(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;
    use crate::profile::tests::sample;

    #[test]
    fn due_in_the_last_third_of_the_lifetime() {
        let mut cert = sample().certificate;
        let start = time::macros::datetime!(2026-10-01 00:00 UTC);
        cert.not_before = start - BACKDATE;
        cert.not_after = start + Duration::days(30);
        assert_eq!(due_from(&cert), start + Duration::days(20));
        assert!(!is_due(&cert, start + Duration::days(19)));
        assert!(is_due(&cert, start + Duration::days(20)));
        // Expired: due (SSH, not the old certificate, authorizes the renewal).
        assert!(is_due(&cert, start + Duration::days(45)));
        // Ten minutes: due after six minutes forty.
        cert.not_after = start + Duration::minutes(10);
        assert_eq!(due_from(&cert), start + Duration::seconds(400));
    }

    #[test]
    fn signs_only_when_the_servers_answer_with_the_current_certificate() {
        let login = |service: &str, ok: bool, unreachable: bool| verify::Login {
            service: service.to_owned(),
            check: if ok {
                crate::probe::Outcome::ok("logged in")
            } else {
                crate::probe::Outcome::fail("refused")
            },
            unreachable,
        };
        assert_eq!(
            judge_current(&[]),
            Ok(()),
            "no service to ask: nothing to wait for"
        );
        // A service that is down gives no verdict; one that answers is enough.
        assert_eq!(
            judge_current(&[login("broker 1", false, true), login("MySQL", true, false)]),
            Ok(())
        );
        // One refusal: a new certificate would be refused too (a locked account, a CRL the
        // server cannot read), so nothing is signed.
        let refused =
            judge_current(&[login("broker 1", true, false), login("MySQL", false, false)]);
        assert!(
            refused
                .as_ref()
                .is_err_and(|w| w.starts_with("MySQL refuses the current")),
            "{refused:?}"
        );
        // None answers: nothing could prove a new one.
        let none = judge_current(&[login("broker 1", false, true), login("MySQL", false, true)]);
        assert!(none.is_err(), "{none:?}");
    }
}
