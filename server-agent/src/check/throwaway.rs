//! The certificate `check` tries the servers with: a fresh key made here (it never leaves this
//! process), a client certificate from the CA for a name no user can have, revoked at the end.

use shiqi_ca::cert::Cert;
use shiqi_ca::inventory::{CertKind, NewCert};
use shiqi_ca::issue::{Ca, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};
use time::OffsetDateTime;

use crate::error::AgentError;
use crate::state::Context;

/// How long the throwaway certificate is valid: long enough for the slowest check, short
/// enough that the CRL lists it only briefly.
pub(super) const LIFETIME: time::Duration = time::Duration::minutes(15);

/// The prefix of every throwaway name (the rest is the key's id).
pub(super) const PREFIX: &str = "shiqi-check-";

/// A throwaway identity.
pub(super) struct Throwaway {
    /// `shiqi-check-…`, the certificate's CN.
    pub(super) name: String,
    /// Its key.
    pub(super) key: PrivateKey,
    /// Its certificate.
    pub(super) cert: Cert,
}

impl Throwaway {
    /// Makes a key and has the CA certify it, recorded in the inventory like the agent's own
    /// admin identity.
    ///
    /// # Errors
    /// When the key, the inventory or the signature fails.
    pub(super) fn issue(ctx: &Context, ca: &Ca) -> Result<Self, AgentError> {
        let key = PrivateKey::generate(KeyType::EcdsaP256)?;
        let id = key.key_id().to_string();
        let name = format!("{PREFIX}{}", id.get(..10).unwrap_or(&id));
        let now = OffsetDateTime::now_utc();
        let mut inventory = ctx.inventory()?;
        let record = inventory.issue(|serial| {
            let cert =
                ca.issue_for_key(&name, &key, serial, Validity::starting_now(now, LIFETIME))?;
            Ok(NewCert::from_cert(&name, CertKind::Admin, &cert))
        })?;
        let cert = Cert::from_der(&record.der)?;
        Ok(Self { name, key, cert })
    }

    /// Revokes it, writes and publishes the CRL, and has MySQL re-read it.
    ///
    /// # Errors
    /// When the inventory, the CRL or MySQL's reload fails.
    pub(super) fn revoke(&self, ctx: &Context, ca: &Ca) -> Result<(), AgentError> {
        let mut inventory = ctx.inventory()?;
        inventory.revoke(
            self.cert.serial(),
            Some(shiqi_ca::crl::Reason::CessationOfOperation.as_str()),
            OffsetDateTime::now_utc(),
        )?;
        crate::crl::update(ctx, ca, crate::crl::When::Always)?;
        crate::crl::reload_mysql(ctx)?;
        crate::audit::record(
            ctx,
            &crate::audit::Entry {
                action: "check",
                name: &self.name,
                serial: Some(self.cert.serial().to_hex()),
                outcome: "ok",
                reason: Some("revoked the throwaway certificate of `check`".to_owned()),
            },
        );
        Ok(())
    }
}
