//! The CA: creating it, loading it, and issuing client, server and admin certificates.
//!
//! Every issued certificate is v3 with `CA:FALSE`, key usage and extended key usage set here by
//! policy, an authority key identifier, and a random serial chosen by the inventory. Pure: no
//! files and no clock — callers pass the validity window.

use rcgen::{
    BasicConstraints, CertificateParams, CrlDistributionPoint, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyUsagePurpose, SanType, SerialNumber,
    SubjectPublicKeyInfo,
};
use time::OffsetDateTime;

use crate::cert::Cert;
use crate::error::Error;
use crate::key::{KeyType, PrivateKey};
use crate::name::Serial;
use crate::policy::CheckedCsr;
use crate::span::Span;

/// A validity window.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    /// Start (callers backdate a few minutes to absorb clock skew).
    pub not_before: OffsetDateTime,
    /// End.
    pub not_after: OffsetDateTime,
}

/// How far before "now" a certificate's validity starts, for clocks that run behind: a laptop
/// reading a certificate's lifetime subtracts it.
pub const BACKDATE: time::Duration = time::Duration::minutes(5);

impl Validity {
    /// From `now - BACKDATE` to `now + lifetime` (saturating: never a panic, whatever the input).
    pub fn starting_now(now: OffsetDateTime, lifetime: time::Duration) -> Self {
        Self {
            not_before: now.saturating_sub(BACKDATE),
            not_after: now.saturating_add(lifetime),
        }
    }

    /// `days` days from now for a certificate of `kind`, refused beyond its cap.
    ///
    /// # Errors
    /// [`Error::Lifetime`] for 0 days or more than [`Lifetime::max`].
    pub fn for_days(now: OffsetDateTime, kind: Lifetime, days: u64) -> Result<Self, Error> {
        let span = u32::try_from(days).ok().and_then(Span::days);
        match span {
            Some(span) => Self::for_span(now, kind, span),
            None => Err(Error::Lifetime {
                kind: kind.name(),
                given: format!("{days} days"),
                min: kind.min().to_string(),
                max: kind.max().to_string(),
            }),
        }
    }

    /// `span` from now for a certificate of `kind`, refused outside [`Lifetime::check`].
    ///
    /// # Errors
    /// [`Error::Lifetime`].
    pub fn for_span(now: OffsetDateTime, kind: Lifetime, span: Span) -> Result<Self, Error> {
        kind.check(span)?;
        Ok(Self::starting_now(now, span.duration()))
    }
}

/// What a certificate is, for its lifetime cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// A person's client certificate.
    Client,
    /// A server's (broker, MariaDB) certificate.
    Server,
    /// The CA itself.
    Ca,
}

impl Lifetime {
    /// The longest lifetime: 398 days for leaves (the CA/Browser Forum's cap, which clients
    /// such as Apple's enforce), 20 years for the CA.
    pub const fn max(self) -> Span {
        match self {
            Self::Client | Self::Server => Span::const_days(398),
            Self::Ca => Span::const_days(7305),
        }
    }

    /// The shortest: 5 minutes for a client certificate (step-ca's floor: less leaves no time to
    /// renew at two thirds across one slow SSH login), a day for servers and the CA.
    pub const fn min(self) -> Span {
        match self {
            Self::Client => Span::const_minutes(5),
            Self::Server | Self::Ca => Span::const_days(1),
        }
    }

    /// Whether a certificate of this kind may live `span`.
    ///
    /// # Errors
    /// [`Error::Lifetime`] outside [`Lifetime::min`]..=[`Lifetime::max`].
    pub fn check(self, span: Span) -> Result<(), Error> {
        if span < self.min() || span > self.max() {
            return Err(Error::Lifetime {
                kind: self.name(),
                given: span.to_string(),
                min: self.min().to_string(),
                max: self.max().to_string(),
            });
        }
        Ok(())
    }

    /// `client`, `server` or `CA`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
            Self::Ca => "CA",
        }
    }
}

/// What a server certificate is for: the extended key usage it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerUsage {
    /// `serverAuth` only (MariaDB).
    Server,
    /// `serverAuth` and `clientAuth` (a Kafka broker also dials its peers and controllers).
    ServerAndClient,
}

/// The certificate authority: its certificate and signing key.
pub struct Ca {
    cert: Cert,
    key: PrivateKey,
    /// Written into every leaf it issues (RFC 5280 §4.2.1.13); see
    /// [`Ca::with_crl_distribution_point`].
    crl_distribution_points: Vec<String>,
}

impl Ca {
    /// Creates a new self-signed root CA.
    pub fn create(key_type: KeyType, common_name: &str, validity: Validity) -> Result<Self, Error> {
        let key = PrivateKey::generate(key_type)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "shiqi-connect");
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(SerialNumber::from_slice(Serial::random().as_bytes()));
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        params.key_identifier_method = KeyIdMethod::Sha256;
        let cert = params
            .self_signed(key.pair())
            .map_err(|source| Error::Signing {
                what: "CA certificate",
                source,
            })?;
        Ok(Self {
            cert: Cert::from_der(cert.der())?,
            key,
            crl_distribution_points: Vec::new(),
        })
    }

    /// Loads a CA from its certificate and key PEM.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, Error> {
        let cert = Cert::from_pem(cert_pem)?;
        let key = PrivateKey::from_pem(key_pem)?;
        if !cert.matches_key(&key) {
            return Err(Error::CaKeyMismatch);
        }
        Ok(Self {
            cert,
            key,
            crl_distribution_points: Vec::new(),
        })
    }

    /// Puts a CRL distribution point (e.g. `file:///var/lib/shiqi-ca/pub/crl.der`) into every
    /// leaf certificate issued from now on; `None` or an empty string puts none.
    ///
    /// Java (Kafka's brokers with `-Dcom.sun.net.ssl.checkRevocation=true
    /// -Dcom.sun.security.enableCRLDP=true`) finds the CRL only through this extension, and
    /// refuses a certificate without one ("Could not determine revocation status"), so every leaf
    /// — client, server and admin — must carry it once the brokers check revocation.
    pub fn with_crl_distribution_point(mut self, url: Option<&str>) -> Self {
        self.crl_distribution_points = url
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(|u| vec![u.to_owned()])
            .unwrap_or_default();
        self
    }

    /// The CRL distribution point URLs written into leaves.
    pub fn crl_distribution_points(&self) -> &[String] {
        &self.crl_distribution_points
    }

    /// The CA certificate.
    pub fn cert(&self) -> &Cert {
        &self.cert
    }

    /// The CA key, for writing to disk (0600) once at `init`.
    pub fn key_pem(&self) -> crate::Secret<String> {
        self.key.to_pkcs8_pem()
    }

    /// An rcgen issuer for this CA (certificates and CRLs).
    pub fn issuer(&self) -> Result<Issuer<'static, &rcgen::KeyPair>, Error> {
        Issuer::from_ca_cert_der(&self.cert.der().to_vec().into(), self.key.pair()).map_err(
            |source| Error::Signing {
                what: "CA issuer",
                source,
            },
        )
    }

    /// Issues a client certificate (`clientAuth`) for a CSR that passed the policy.
    pub fn issue_client(
        &self,
        csr: &CheckedCsr,
        serial: &Serial,
        validity: Validity,
    ) -> Result<Cert, Error> {
        let spki = SubjectPublicKeyInfo::from_der(csr.public_key_der()).map_err(|source| {
            Error::Signing {
                what: "client certificate",
                source,
            }
        })?;
        let params = self.leaf_params(
            csr.name().as_str(),
            serial,
            validity,
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            Vec::new(),
            csr.key_type(),
        );
        self.sign(&params, &spki, "client certificate")
    }

    /// Issues a client certificate for a key the caller holds (the agent's own admin identity).
    pub fn issue_for_key(
        &self,
        common_name: &str,
        key: &PrivateKey,
        serial: &Serial,
        validity: Validity,
    ) -> Result<Cert, Error> {
        let params = self.leaf_params(
            common_name,
            serial,
            validity,
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            Vec::new(),
            key.key_type(),
        );
        self.sign(&params, key.pair(), "admin certificate")
    }

    /// Issues a server certificate whose SANs cover every name a client verifies (for a broker:
    /// its advertised host names; Java clients check them by default).
    pub fn issue_server(
        &self,
        common_name: &str,
        sans: &[String],
        usage: ServerUsage,
        key: &PrivateKey,
        serial: &Serial,
        validity: Validity,
    ) -> Result<Cert, Error> {
        if sans.is_empty() {
            return Err(Error::NoSans);
        }
        let sans = sans
            .iter()
            .map(|s| match s.parse::<std::net::IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => s
                    .clone()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(|_| Error::BadSan { san: s.clone() }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let eku = match usage {
            ServerUsage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            ServerUsage::ServerAndClient => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        let params = self.leaf_params(common_name, serial, validity, eku, sans, key.key_type());
        self.sign(&params, key.pair(), "server certificate")
    }

    fn leaf_params(
        &self,
        common_name: &str,
        serial: &Serial,
        validity: Validity,
        eku: Vec<ExtendedKeyUsagePurpose>,
        sans: Vec<SanType>,
        key_type: KeyType,
    ) -> CertificateParams {
        let mut params = leaf_params(common_name, serial, validity, eku, sans, key_type);
        if !self.crl_distribution_points.is_empty() {
            params.crl_distribution_points = vec![CrlDistributionPoint {
                uris: self.crl_distribution_points.clone(),
            }];
        }
        params
    }

    fn sign(
        &self,
        params: &CertificateParams,
        public_key: &impl rcgen::PublicKeyData,
        what: &'static str,
    ) -> Result<Cert, Error> {
        let issuer = self.issuer()?;
        let cert = params
            .signed_by(public_key, &issuer)
            .map_err(|source| Error::Signing { what, source })?;
        Cert::from_der(cert.der())
    }
}

fn leaf_params(
    common_name: &str,
    serial: &Serial,
    validity: Validity,
    eku: Vec<ExtendedKeyUsagePurpose>,
    sans: Vec<SanType>,
    key_type: KeyType,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.serial_number = Some(SerialNumber::from_slice(serial.as_bytes()));
    params.not_before = validity.not_before;
    params.not_after = validity.not_after;
    params.is_ca = IsCa::ExplicitNoCa;
    // keyEncipherment only means something for RSA key transport (RFC 5280 §4.2.1.3).
    params.key_usages = match key_type {
        KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ],
        _ => vec![KeyUsagePurpose::DigitalSignature],
    };
    params.extended_key_usages = eku;
    params.subject_alt_names = sans;
    params.use_authority_key_identifier_extension = true;
    params.key_identifier_method = KeyIdMethod::Sha256;
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_capped_without_overflow() {
        let now = OffsetDateTime::now_utc();
        assert!(Validity::for_days(now, Lifetime::Client, 398).is_ok());
        assert!(Validity::for_days(now, Lifetime::Ca, 7305).is_ok());
        for (kind, days) in [
            (Lifetime::Client, 0),
            (Lifetime::Client, 399),
            (Lifetime::Server, 4_000_000_000),
            (Lifetime::Ca, u64::MAX),
        ] {
            let e = Validity::for_days(now, kind, days).expect_err("capped");
            assert!(e.to_string().contains(&days.to_string()), "{e}");
        }
        let span = |s: &str| s.parse::<Span>().expect(s);
        assert!(Validity::for_span(now, Lifetime::Client, span("5m")).is_ok());
        for (kind, given) in [
            (Lifetime::Client, "4m"),
            (Lifetime::Client, "399d"),
            (Lifetime::Server, "23h"),
        ] {
            let e = Validity::for_span(now, kind, span(given)).expect_err(given);
            assert!(e.to_string().contains(given), "{e}");
        }
        // The unchecked form saturates instead of panicking.
        let v = Validity::starting_now(now, time::Duration::MAX);
        assert!(v.not_after > now);
    }
}
