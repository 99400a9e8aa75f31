//! Certificate revocation lists: revocation reasons and signing a CRL from inventory records.
//!
//! It owns the CRL's contents (RFC 5280 §5). It does not choose what is revoked or store
//! anything: callers pass [`Inventory::revoked`](crate::inventory::Inventory::revoked), a number
//! from [`Inventory::next_crl_number`](crate::inventory::Inventory::next_crl_number), and write
//! `crl.pem` / `crl.der` themselves.
//!
//! # Why the default validity is long
//!
//! A relying party (Kafka's JSSE, MySQL/MariaDB with `ssl-crl`, `openssl verify -crl_check`)
//! that finds a CRL past its `nextUpdate` fails *every* handshake with "CRL has expired", so a
//! CRL that nobody regenerated locks out all users, not only the revoked ones. This is a known
//! failure of small CAs: OpenVPN servers with `crl-verify` refuse every client once the easy-rsa
//! CRL (180 days by default) quietly expires. So [`DEFAULT_CRL_VALIDITY`] is 30 days, and callers regenerate the CRL on
//! every revocation and whenever one is older than a fraction of its validity — never relying on
//! a short `nextUpdate` to force freshness.

use std::fmt;
use std::str::FromStr;

use rcgen::{
    CertificateRevocationListParams, Issuer, KeyIdMethod, RevocationReason, RevokedCertParams,
    SerialNumber, SigningKey,
};
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime, UtcOffset};

use crate::error::Error;
use crate::inventory::{Record, Status};
use crate::name::Serial;

/// How long a CRL stays valid by default (its `nextUpdate - thisUpdate`). See the module docs.
pub const DEFAULT_CRL_VALIDITY: Duration = Duration::days(30);

/// The revocation reasons an operator may give (RFC 5280 §5.3.1), spelled in kebab-case.
///
/// `removeFromCRL`, `privilegeWithdrawn` and `aACompromise` are left out: they belong to delta
/// CRLs and attribute certificates, which this CA does not issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// No particular reason (written as no reason code, as RFC 5280 §5.3.1 asks).
    Unspecified,
    /// The private key leaked or may have.
    KeyCompromise,
    /// The CA's own key leaked.
    CaCompromise,
    /// The subject's name or affiliation changed.
    AffiliationChanged,
    /// A newer certificate replaces it.
    Superseded,
    /// It is no longer needed.
    CessationOfOperation,
    /// Temporarily suspended.
    CertificateHold,
}

impl Reason {
    /// Every reason, in RFC 5280 code order.
    pub const ALL: [Reason; 7] = [
        Self::Unspecified,
        Self::KeyCompromise,
        Self::CaCompromise,
        Self::AffiliationChanged,
        Self::Superseded,
        Self::CessationOfOperation,
        Self::CertificateHold,
    ];

    /// The kebab-case name, as accepted by [`parse_reason`] and stored in the inventory.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::KeyCompromise => "key-compromise",
            Self::CaCompromise => "ca-compromise",
            Self::AffiliationChanged => "affiliation-changed",
            Self::Superseded => "superseded",
            Self::CessationOfOperation => "cessation-of-operation",
            Self::CertificateHold => "certificate-hold",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Reason {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        parse_reason(s)
    }
}

impl From<Reason> for RevocationReason {
    fn from(reason: Reason) -> Self {
        match reason {
            Reason::Unspecified => Self::Unspecified,
            Reason::KeyCompromise => Self::KeyCompromise,
            Reason::CaCompromise => Self::CaCompromise,
            Reason::AffiliationChanged => Self::AffiliationChanged,
            Reason::Superseded => Self::Superseded,
            Reason::CessationOfOperation => Self::CessationOfOperation,
            Reason::CertificateHold => Self::CertificateHold,
        }
    }
}

/// Parses a revocation reason such as `key-compromise`.
///
/// # Errors
///
/// [`Error::InvalidChoice`], whose hint lists the valid names.
pub fn parse_reason(s: &str) -> Result<Reason, Error> {
    Reason::ALL
        .into_iter()
        .find(|r| r.as_str() == s)
        .ok_or_else(|| Error::InvalidChoice {
            what: "revocation reason",
            found: s.chars().take(64).collect(),
            choices: "unspecified, key-compromise, ca-compromise, affiliation-changed, \
                      superseded, cessation-of-operation, certificate-hold",
        })
}

/// A signed CRL in both encodings, with the facts callers record or print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrlOutput {
    /// PEM (`-----BEGIN X509 CRL-----`), for `crl.pem`.
    pub pem: String,
    /// DER, for `crl.der`.
    pub der: Vec<u8>,
    /// Its `thisUpdate` (whole seconds, UTC).
    pub this_update: OffsetDateTime,
    /// Its `nextUpdate`: regenerate well before this.
    pub next_update: OffsetDateTime,
    /// Its CRL number.
    pub number: u64,
}

/// Signs a CRL listing `revoked` (serial, revocation time, reason string mapped to
/// RevocationReason — unknown/None → Unspecified/None).
///
/// Records whose status is not [`Status::Revoked`] are skipped, so passing the wrong list can
/// never revoke a valid certificate. Expired revoked certificates stay listed: RFC 5280 §3.3
/// allows dropping them, but keeping them costs a few bytes and never surprises anyone.
///
/// # Errors
///
/// [`Error::CrlValidity`] if `validity` is not positive (or runs past year 9999), [`Error::Signing`] if rcgen refuses to sign
/// (e.g. the issuer's key usage lacks `cRLSign`).
pub fn build_crl(
    issuer: &Issuer<'_, impl SigningKey>,
    revoked: &[Record],
    number: u64,
    now: OffsetDateTime,
    validity: Duration,
) -> Result<CrlOutput, Error> {
    if !validity.is_positive() {
        return Err(Error::CrlValidity { validity });
    }
    // Second precision, UTC: what the CRL encodes, so the returned times match it exactly.
    let this_update = now
        .checked_to_offset(UtcOffset::UTC)
        .ok_or(Error::CrlValidity { validity })?
        .truncate_to_second();
    let next_update = this_update
        .checked_add(validity)
        .ok_or(Error::CrlValidity { validity })?;
    let revoked_certs = revoked
        .iter()
        .filter(|r| r.status == Status::Revoked)
        .map(|r| RevokedCertParams {
            serial_number: SerialNumber::from_slice(r.serial.as_bytes()),
            revocation_time: r.revoked_at.unwrap_or(this_update),
            reason_code: r
                .reason
                .as_deref()
                .map(|s| parse_reason(s).unwrap_or(Reason::Unspecified).into()),
            invalidity_date: None,
        })
        .collect();
    let params = CertificateRevocationListParams {
        this_update,
        next_update,
        crl_number: SerialNumber::from(number),
        issuing_distribution_point: None,
        revoked_certs,
        key_identifier_method: KeyIdMethod::Sha256,
    };
    let crl = params.signed_by(issuer).map_err(crl_err)?;
    Ok(CrlOutput {
        pem: crl.pem().map_err(crl_err)?,
        der: crl.der().to_vec(),
        this_update,
        next_update,
        number,
    })
}

/// What a CRL on disk says, as far as refreshing and checking it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrlInfo {
    /// Its `thisUpdate`.
    pub this_update: OffsetDateTime,
    /// Its `nextUpdate` (`None` if it has none, which RFC 5280 forbids for conforming CAs).
    pub next_update: Option<OffsetDateTime>,
    /// Its CRL number, if it carries one (and it fits in 64 bits).
    pub number: Option<u64>,
    /// The revoked serials it lists, in order.
    pub serials: Vec<Serial>,
}

impl CrlInfo {
    /// Whether a relying party should be handed a new CRL now: when it has no `nextUpdate`, or
    /// the `nextUpdate` is less than `refresh_before` away (or past).
    pub fn is_due(&self, now: OffsetDateTime, refresh_before: Duration) -> bool {
        self.next_update
            .is_none_or(|next| next - now < refresh_before)
    }
}

/// Reads a DER CRL and checks that `issuer_der` (the CA certificate, DER) signed it.
///
/// # Errors
///
/// [`Error::CrlParse`] if it is not a CRL or its signature does not verify.
pub fn read_crl(der: &[u8], issuer_der: &[u8]) -> Result<CrlInfo, Error> {
    let bad = |why: String| Error::CrlParse { why };
    let (_, crl) = x509_parser::parse_x509_crl(der).map_err(|e| bad(e.to_string()))?;
    let (_, ca) =
        x509_parser::parse_x509_certificate(issuer_der).map_err(|e| bad(e.to_string()))?;
    crl.verify_signature(ca.public_key()).map_err(|e| {
        bad(format!(
            "its signature does not verify with the CA's key ({e})"
        ))
    })?;
    Ok(CrlInfo {
        this_update: crl.last_update().to_datetime(),
        next_update: crl.next_update().map(|t| t.to_datetime()),
        number: crl.crl_number().and_then(|n| u64::try_from(n).ok()),
        serials: crl
            .iter_revoked_certificates()
            .map(|r| Serial::from_bytes(r.raw_serial()))
            .collect(),
    })
}

fn crl_err(source: rcgen::Error) -> Error {
    Error::Signing {
        what: "CRL",
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };

    use super::*;
    use crate::inventory::CertKind;
    use crate::name::Serial;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn test_ca() -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "shiqi test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        CertifiedIssuer::self_signed(params, KeyPair::generate()?)
    }

    fn revoked_record(reason: Option<&str>, at: OffsetDateTime) -> Record {
        Record {
            serial: Serial::random(),
            name: "saige".to_owned(),
            kind: CertKind::Client,
            subject: "CN=saige".to_owned(),
            not_before: at - Duration::days(1),
            not_after: at + Duration::days(29),
            issued_at: at - Duration::days(1),
            status: Status::Revoked,
            revoked_at: Some(at),
            reason: reason.map(str::to_owned),
            der: Vec::new(),
        }
    }

    #[test]
    fn reasons_parse_in_kebab_case() -> TestResult {
        for reason in Reason::ALL {
            assert_eq!(parse_reason(reason.as_str())?, reason);
            assert_eq!(
                serde_json::to_string(&reason)?,
                format!("\"{}\"", reason.as_str())
            );
        }
        assert_eq!(
            parse_reason("cessation-of-operation")?,
            Reason::CessationOfOperation
        );
        let err = parse_reason("KeyCompromise")
            .err()
            .ok_or("accepted camel case")?;
        let hint = err.hint().ok_or("no hint")?;
        assert!(
            hint.contains("key-compromise") && hint.contains("certificate-hold"),
            "{hint}"
        );
        Ok(())
    }

    #[test]
    fn crl_lists_revoked_serials_for_openssl_and_x509_parser() -> TestResult {
        let ca = test_ca()?;
        let now = OffsetDateTime::now_utc();
        let compromised = revoked_record(Some("key-compromise"), now - Duration::hours(2));
        let superseded = revoked_record(None, now - Duration::hours(1));
        let mut still_valid = revoked_record(None, now);
        still_valid.status = Status::Valid;
        still_valid.revoked_at = None;
        let records = [compromised.clone(), superseded.clone(), still_valid.clone()];

        let crl = build_crl(&ca, &records, 4242, now, DEFAULT_CRL_VALIDITY)?;
        assert_eq!(crl.number, 4242);
        assert_eq!(crl.next_update - crl.this_update, DEFAULT_CRL_VALIDITY);
        assert!(crl.pem.starts_with("-----BEGIN X509 CRL-----"));

        // The real consumer: openssl.
        let mut child = Command::new("openssl")
            .args(["crl", "-inform", "PEM", "-text", "-noout"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(crl.pem.as_bytes())?;
        let out = child.wait_with_output()?;
        let text = String::from_utf8(out.stdout)?;
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for listed in [&compromised, &superseded] {
            let upper = listed.serial.to_hex().to_uppercase();
            assert!(
                text.contains(&format!("Serial Number: {upper}")),
                "{upper}\n{text}"
            );
        }
        let unlisted = still_valid.serial.to_hex().to_uppercase();
        assert!(!text.contains(&unlisted), "valid serial listed\n{text}");
        assert!(
            text.contains("X509v3 CRL Number: \n                4242"),
            "{text}"
        );
        assert!(text.contains("Key Compromise"), "{text}");
        assert!(text.contains("Issuer: CN = shiqi test CA"), "{text}");

        // And x509-parser, checking the signature against the CA's public key.
        let (_, ca_cert) = x509_parser::parse_x509_certificate(ca.der())?;
        let (_, parsed) = x509_parser::parse_x509_crl(&crl.der)?;
        parsed.verify_signature(ca_cert.public_key())?;
        assert_eq!(
            parsed.crl_number().map(|n| n.to_string()),
            Some("4242".to_owned())
        );
        let serials: Vec<Serial> = parsed
            .iter_revoked_certificates()
            .map(|r| Serial::from_bytes(r.raw_serial()))
            .collect();
        assert_eq!(serials, vec![compromised.serial, superseded.serial]);
        assert_eq!(
            parsed.next_update().map(|t| t.timestamp()),
            Some(crl.next_update.unix_timestamp())
        );

        // A CRL signed by another key does not verify.
        let other = test_ca()?;
        let (_, other_cert) = x509_parser::parse_x509_certificate(other.der())?;
        assert!(parsed.verify_signature(other_cert.public_key()).is_err());
        Ok(())
    }

    #[test]
    fn empty_crl_is_valid_and_zero_validity_is_refused() -> TestResult {
        let ca = test_ca()?;
        let now = OffsetDateTime::now_utc();
        let crl = build_crl(&ca, &[], 1, now, DEFAULT_CRL_VALIDITY)?;
        let (_, parsed) = x509_parser::parse_x509_crl(&crl.der)?;
        assert_eq!(parsed.iter_revoked_certificates().count(), 0);
        assert!(matches!(
            build_crl(&ca, &[], 2, now, Duration::ZERO),
            Err(Error::CrlValidity { .. })
        ));
        Ok(())
    }

    #[test]
    fn read_crl_checks_the_issuer_and_tells_when_a_refresh_is_due() -> TestResult {
        let ca = test_ca()?;
        let now = OffsetDateTime::now_utc();
        let revoked = revoked_record(Some("superseded"), now);
        let crl = build_crl(
            &ca,
            std::slice::from_ref(&revoked),
            7,
            now,
            Duration::days(30),
        )?;
        let info = read_crl(&crl.der, ca.der())?;
        assert_eq!(info.serials, vec![revoked.serial]);
        assert_eq!(info.number, Some(7));
        assert_eq!(info.this_update, crl.this_update);
        assert_eq!(info.next_update, Some(crl.next_update));
        // 30 days left: not due with a 10-day margin, due with a 31-day one, due when past.
        assert!(!info.is_due(now, Duration::days(10)));
        assert!(info.is_due(now, Duration::days(31)));
        assert!(info.is_due(now + Duration::days(25), Duration::days(10)));
        assert!(info.is_due(now + Duration::days(40), Duration::days(10)));

        let other = test_ca()?;
        let err = read_crl(&crl.der, other.der())
            .err()
            .ok_or("foreign CA accepted")?;
        assert!(err.to_string().contains("signature"), "{err}");
        assert!(read_crl(b"junk", ca.der()).is_err());
        Ok(())
    }
}
