//! Rotation: a new key and certificate for an existing profile, over the one SSH session.
//!
//! In this order, so that a failure at any point leaves a working profile:
//! 0. `profile.json` is read under the profile's lock (`journal`), which every writer of the
//!    profile takes, so OLD below is the profile's certificate and no one else's;
//! 1. a new key and CSR on this machine (the key never leaves it), signed by the agent with
//!    `sign --replaces OLD` (the agent checks OLD is this name's, not revoked, and logs a
//!    `rotate`); a renewal may instead bring one it signed on an earlier attempt (`renew`);
//! 2. every profile file built anew — same paths, same keystore password (DataGrip and Java
//!    configs store it), same brokers and forwards (refreshing those is `tunnel up`'s job) — in
//!    a staging folder next to the profile;
//! 3. the new certificate logs in from there ([`verify`]: every broker and MySQL, through the
//!    session). If a service refuses it, the new certificate is revoked and the old profile
//!    stays as it was;
//! 4. the staged profile replaces the old one in one atomic swap, keeping the tunnel's files (a
//!    running tunnel only uses the SSH key, so it goes on working);
//! 5. the old serial is revoked (`superseded`) unless `keep_old`, or unless no service could be
//!    reached to prove the new certificate works.

use std::path::Path;

use serde::Serialize;
use shiqi_ca::crl::Reason;
use shiqi_ca::key::PrivateKey;
use shiqi_ca::protocol::RevokeResponse;
use shiqi_ca::{ProfileName, Span};

use crate::agent::{self, AgentCommand, Revocation, Signed};
use crate::error::{Error, ProfileError};
use crate::profile::lock;
use crate::profile::{Certificate, Profile};
use crate::ssh::Session;
use crate::steps::verify::{self, Login};
use crate::steps::{journal, keygen, profile_files, write};

/// What a rotation did.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Rotated {
    /// The certificate before.
    pub(crate) old: Certificate,
    /// `profile.json` after.
    pub(crate) profile: Profile,
    /// The new certificate's logins.
    pub(crate) logins: Vec<Login>,
    /// The agent's answer to revoking the old certificate, when it was revoked.
    pub(crate) revoked: Option<RevokeResponse>,
    /// Why the old certificate is still valid, when it is.
    pub(crate) kept_old: Option<String>,
    /// The agent's error when it revoked the old certificate but could not make that effective
    /// everywhere (MySQL or Kafka unreachable).
    pub(crate) revoke_incomplete: Option<String>,
}

/// What a rotation does with the certificate it replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OldCertificate {
    /// Revoke it as `superseded` once the new one has logged in somewhere (the default): the
    /// server keeps the owner's open MySQL sessions, which may already use the new one.
    Supersede,
    /// Leave it valid until it expires (`--keep-old`).
    Keep,
    /// Revoke it as `keyCompromise` at once (`--compromised`): the server also ends every MySQL
    /// session of the name, since a thief's cannot be told apart from the owner's.
    Compromised,
}

/// Rotates the certificate of the profile in `dir`, reading its `profile.json` under the
/// profile's lock (waiting for a run that holds it, such as the tunnel's renewal): a profile
/// read before the lock may name a certificate that run has replaced and revoked since, and
/// rotating that one would leave the other run's certificate valid and nobody's, or revoke the
/// wrong serial as `keyCompromise` (issue 42).
///
/// # Errors
/// A key, signing or SSH error (nothing changed); [`ProfileError::NewCertRefused`] when a service
/// refused the new certificate (the old profile is untouched, the new certificate revoked);
/// [`Error::Io`] when the new profile cannot be put in place (the old one is untouched);
/// [`ProfileError::Busy`] when another run held the profile for [`lock::PATIENCE`].
/// With `lifetime`, the profile asks for that lifetime from this certificate on.
#[tracing::instrument(skip_all, fields(profile = %name))]
pub(crate) async fn rotate(
    session: &Session,
    dir: &Path,
    name: &ProfileName,
    old: OldCertificate,
    lifetime: Option<Span>,
) -> Result<Rotated, Error> {
    let root = dir.parent().unwrap_or(dir);
    let lock = lock::lock_waiting(root, name, lock::PATIENCE).await?;
    let mut profile = Profile::load(dir)?;
    if lifetime.is_some() {
        profile.lifetime = lifetime;
    }
    let agent = AgentCommand::new(&profile.server.agent_command)?;
    // Crash safety (see `journal`): a rotation that died left its keys journaled; the profile's
    // own key is the one to keep.
    let current = journal::profile_key(dir);
    journal::settle(&lock, session, &agent, name, current.as_ref(), false).await?;
    let fresh = keygen::keygen(name, profile.certificate.key_type)?;
    lock.add(&fresh.key.key_id())?;
    if let Some(old) = &current {
        // Until this run decides (revoked, or kept on purpose), a run killed after the swap
        // must not leave the old certificate valid.
        lock.add(old)?;
    }
    let result = async {
        let signed = agent::sign_replacing(
            session,
            &agent,
            name,
            profile.asked_lifetime(),
            &fresh.csr_pem,
            &fresh.key,
            &profile.certificate.serial,
        )
        .await?;
        finish(
            session,
            dir,
            &profile,
            old,
            &agent,
            &fresh.key,
            &signed,
            Proof::Optional,
        )
        .await
    }
    .await;
    let keep = match &result {
        Ok(_) => {
            if let Some(old) = &current {
                lock.forget(old)?;
            }
            journal::profile_key(dir)
        }
        Err(_) => current.clone(),
    };
    if let Err(e) = journal::settle(&lock, session, &agent, name, keep.as_ref(), true).await {
        tracing::warn!("left for the next run to revoke: {e}");
    }
    result
}

/// Whether a rotation may go on when no service could be reached to try the new certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Yes, keeping the old certificate valid (a rotation run by hand: the user asked now).
    Optional,
    /// No: nothing changes, and the caller keeps the new certificate for its next attempt (a
    /// renewal, which has time).
    Required,
}

/// Steps 2 to 5 for a certificate `signed` for `key`, replacing the profile's (`profile`, read
/// under the lock the caller holds).
///
/// # Errors
/// As [`rotate`]; with [`Proof::Required`], [`ProfileError::RenewalWaits`] when no service answered.
#[expect(
    clippy::too_many_arguments,
    reason = "one call site each in rotate and renew; a struct would only rename them"
)]
pub(crate) async fn finish(
    session: &Session,
    dir: &Path,
    profile: &Profile,
    fate: OldCertificate,
    agent: &AgentCommand,
    key: &PrivateKey,
    signed: &Signed,
    proof: Proof,
) -> Result<Rotated, Error> {
    let agent = agent.clone();
    let name = &profile.name;
    let root = dir.parent().unwrap_or(dir);
    let old = profile.certificate.clone();
    let mut new = profile.clone();
    new.certificate = Certificate {
        serial: signed.response.serial.clone(),
        not_before: signed.response.not_before,
        not_after: signed.response.not_after,
        key_type: key.key_type(),
    };
    let password =
        crate::profile::files::read_password(dir).unwrap_or_else(shiqi_ca::Secret::random_password);
    let files = profile_files::build(&profile_files::Inputs {
        dir,
        target: session.target(),
        key,
        signed,
        profile: &new,
        forwards: &profile.forwards,
        password: &password,
    })?;
    let staged = write::stage(root, name, &files)?;

    let logins = verify::logins(session, staged.path(), &new).await;
    if let Some(refused) = logins.iter().find(|l| !l.check.ok && !l.unreachable) {
        drop(staged);
        // Never leave a certificate nobody uses valid.
        let revoked_new = agent::revoke(
            session,
            &agent,
            &Revocation::Serial(new.certificate.serial.clone()),
            Reason::CessationOfOperation,
        )
        .await
        .is_ok();
        return Err(Error::Profile(ProfileError::NewCertRefused {
            service: refused.service.clone(),
            why: refused.check.detail.to_string(),
            serial: new.certificate.serial.to_string(),
            revoked_new,
        }));
    }
    let proved = logins.is_empty() || logins.iter().any(|l| l.check.ok);
    if !proved && proof == Proof::Required {
        drop(staged);
        return Err(Error::Profile(ProfileError::RenewalWaits {
            name: name.to_string(),
            why: format!(
                "no broker and no MySQL server could be reached to try the new certificate \
                 (serial {}, kept for the next attempt)",
                new.certificate.serial
            ),
        }));
    }
    staged.replace()?;

    let mut rotated = Rotated {
        old,
        profile: new,
        logins,
        revoked: None,
        kept_old: None,
        revoke_incomplete: None,
    };
    let reason = match fate {
        OldCertificate::Keep => {
            rotated.kept_old = Some("`--keep-old` was given".to_owned());
            return Ok(rotated);
        }
        OldCertificate::Supersede => Reason::Superseded,
        // A stolen key goes whether or not the new certificate could be tried.
        OldCertificate::Compromised => Reason::KeyCompromise,
    };
    if !proved && reason == Reason::Superseded {
        rotated.kept_old = Some(
            "no broker and no MySQL server could be reached to prove that the new certificate \
             logs in"
                .to_owned(),
        );
        return Ok(rotated);
    }
    match agent::revoke(
        session,
        &agent,
        &Revocation::Serial(rotated.old.serial.clone()),
        reason,
    )
    .await
    {
        Ok(r) => {
            rotated.revoke_incomplete = r.incomplete;
            rotated.revoked = Some(r.response);
        }
        Err(e) => rotated.kept_old = Some(format!("revoking it failed: {e}")),
    }
    Ok(rotated)
}
