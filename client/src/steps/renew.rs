//! Renewal: a rotation that happens by itself once less than a third of the certificate's
//! lifetime is left (after 20 of 30 days by default). `renew`, `tunnel up` and cron or a
//! systemd timer call it; "nothing due" is a normal outcome, not an error.

use std::path::Path;

use serde::Serialize;
use time::OffsetDateTime;

use crate::error::Error;
use crate::profile::{Certificate, Profile};
use crate::ssh::Session;
use crate::steps::rotate::{self, Rotated};

/// What [`renew_if_due`] did.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum RenewOutcome {
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

/// When a certificate becomes due for renewal: once two thirds of its lifetime have passed.
pub fn due_from(cert: &Certificate) -> OffsetDateTime {
    cert.not_after - (cert.not_after - cert.not_before) / 3
}

/// Whether it is due at `now`.
pub fn is_due(cert: &Certificate, now: OffsetDateTime) -> bool {
    now >= due_from(cert)
}

/// Renews the certificate of the profile in `dir` if it is due, over `session` (which must be
/// logged in to the profile's server). The old certificate is revoked once the new one has
/// logged in.
///
/// # Errors
/// As [`rotate::rotate`]; when nothing is due nothing is done and nothing can fail.
pub async fn renew_if_due(
    session: &Session,
    dir: &Path,
    profile: &Profile,
) -> Result<RenewOutcome, Error> {
    let cert = &profile.certificate;
    if !is_due(cert, OffsetDateTime::now_utc()) {
        return Ok(RenewOutcome::NotDue {
            not_after: cert.not_after,
            due_from: due_from(cert),
        });
    }
    let rotated = rotate::rotate(session, dir, profile, rotate::OldCertificate::Supersede).await?;
    Ok(RenewOutcome::Renewed(Box::new(rotated)))
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
        cert.not_before = start;
        cert.not_after = start + Duration::days(30);
        assert_eq!(due_from(&cert), start + Duration::days(20));
        assert!(!is_due(&cert, start + Duration::days(19)));
        assert!(is_due(&cert, start + Duration::days(20)));
        // Expired: due (SSH, not the old certificate, authorizes the renewal).
        assert!(is_due(&cert, start + Duration::days(45)));
    }
}
