//! Reading certificates: serial, validity, subject, SANs, and the subject strings MySQL compares.
//!
//! `REQUIRE SUBJECT` / `REQUIRE ISSUER` are compared against OpenSSL's `X509_NAME_oneline`
//! form (`/CN=saige`, RDNs in certificate order). OpenSSL 1.1+ prints names differently
//! (`CN = saige`) and `-nameopt compat` does not restore the old form
//! (<https://github.com/openssl/openssl/issues/5605>), so the string is built here from the DER.

use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Name;

use crate::error::Error;
use crate::key::PrivateKey;
use crate::name::Serial;

/// A parsed certificate; owns its DER.
#[derive(Clone, Debug)]
pub struct Cert {
    der: Vec<u8>,
    serial: Serial,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    subject: String,
    subject_oneline: String,
    issuer_oneline: String,
    common_name: Option<String>,
    dns_names: Vec<String>,
    ip_addresses: Vec<std::net::IpAddr>,
    spki: Vec<u8>,
    is_ca: bool,
    crl_distribution_points: Vec<String>,
}

impl Cert {
    /// Parses the first certificate of a PEM document.
    pub fn from_pem(pem: &str) -> Result<Self, Error> {
        let first = pem_blocks(pem, "CERTIFICATE")?
            .into_iter()
            .next()
            .ok_or(Error::NoCertificate)?;
        Self::from_der(&first)
    }

    /// Parses a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Self, Error> {
        let bad = |why: String| Error::CertParse { why };
        let (rest, x509) = X509Certificate::from_der(der).map_err(|e| bad(e.to_string()))?;
        if !rest.is_empty() {
            return Err(bad("trailing bytes after the certificate".to_owned()));
        }
        let tbs = &x509.tbs_certificate;
        let mut crl_distribution_points = Vec::new();
        for ext in x509.extensions() {
            if let ParsedExtension::CRLDistributionPoints(points) = ext.parsed_extension() {
                for point in points.iter() {
                    if let Some(DistributionPointName::FullName(names)) = &point.distribution_point
                    {
                        crl_distribution_points.extend(names.iter().filter_map(|n| match n {
                            GeneralName::URI(uri) => Some((*uri).to_owned()),
                            _ => None,
                        }));
                    }
                }
            }
        }
        let mut dns_names = Vec::new();
        let mut ip_addresses = Vec::new();
        if let Ok(Some(san)) = x509.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => dns_names.push((*d).to_owned()),
                    GeneralName::IPAddress(b) => {
                        if let Ok(a) = <[u8; 4]>::try_from(*b) {
                            ip_addresses.push(std::net::IpAddr::from(a));
                        } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                            ip_addresses.push(std::net::IpAddr::from(a));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(Self {
            serial: Serial::from_bytes(x509.raw_serial()),
            not_before: tbs.validity.not_before.to_datetime(),
            not_after: tbs.validity.not_after.to_datetime(),
            subject: tbs.subject.to_string(),
            subject_oneline: oneline(&tbs.subject)?,
            issuer_oneline: oneline(&tbs.issuer)?,
            common_name: tbs
                .subject
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(str::to_owned),
            dns_names,
            ip_addresses,
            spki: tbs.subject_pki.raw.to_vec(),
            is_ca: x509.is_ca(),
            crl_distribution_points,
            der: der.to_vec(),
        })
    }

    /// The DER encoding.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// The certificate as PEM.
    pub fn pem(&self) -> String {
        pem_encode("CERTIFICATE", &self.der)
    }

    /// The serial number.
    pub fn serial(&self) -> &Serial {
        &self.serial
    }

    /// Start of validity.
    pub fn not_before(&self) -> OffsetDateTime {
        self.not_before
    }

    /// End of validity.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// The subject in RFC 4514-like form (`CN=saige`), for messages.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The subject in the `/CN=saige` form MySQL's `REQUIRE SUBJECT` compares.
    pub fn subject_oneline(&self) -> &str {
        &self.subject_oneline
    }

    /// The issuer in the `/CN=…` form MySQL's `REQUIRE ISSUER` compares.
    pub fn issuer_oneline(&self) -> &str {
        &self.issuer_oneline
    }

    /// The first common name, if any.
    pub fn common_name(&self) -> Option<&str> {
        self.common_name.as_deref()
    }

    /// DNS names in the subject alternative names.
    pub fn dns_names(&self) -> &[String] {
        &self.dns_names
    }

    /// IP addresses in the subject alternative names.
    pub fn ip_addresses(&self) -> &[std::net::IpAddr] {
        &self.ip_addresses
    }

    /// Whether the certificate is a CA (basic constraints `CA:TRUE`).
    pub fn is_ca(&self) -> bool {
        self.is_ca
    }

    /// The URIs of its CRL distribution points (where a relying party fetches the CRL).
    pub fn crl_distribution_points(&self) -> &[String] {
        &self.crl_distribution_points
    }

    /// The DER SubjectPublicKeyInfo.
    pub fn public_key_der(&self) -> &[u8] {
        &self.spki
    }

    /// The certified key's [`crate::KeyId`].
    pub fn key_id(&self) -> crate::name::KeyId {
        crate::name::KeyId::of_spki(&self.spki)
    }

    /// Whether `key` is the private half of this certificate's key.
    pub fn matches_key(&self, key: &PrivateKey) -> bool {
        key.public_key_der() == self.spki
    }

    /// Whether a TLS client verifying `host` would accept this certificate's names (SAN only,
    /// as Java and webpki do; a `*.` wildcard covers one label).
    pub fn covers_host(&self, host: &str) -> bool {
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
            return self.ip_addresses.contains(&ip);
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.dns_names.iter().any(|n| {
            let n = n.to_ascii_lowercase();
            match n.strip_prefix("*.") {
                Some(suffix) => host
                    .split_once('.')
                    .is_some_and(|(label, rest)| !label.is_empty() && rest == suffix),
                None => n == host,
            }
        })
    }

    /// Whether `issuer` signed this certificate (signature check only).
    pub fn is_signed_by(&self, issuer: &Cert) -> bool {
        let Ok((_, me)) = X509Certificate::from_der(&self.der) else {
            return false;
        };
        let Ok((_, ca)) = X509Certificate::from_der(&issuer.der) else {
            return false;
        };
        me.verify_signature(Some(ca.public_key())).is_ok()
    }
}

/// The `/SN=value/…` form of a name, in certificate order, as `X509_NAME_oneline` prints it.
fn oneline(name: &X509Name<'_>) -> Result<String, Error> {
    let mut out = String::new();
    for rdn in name.iter_rdn() {
        for atv in rdn.iter() {
            let oid = atv.attr_type().to_id_string();
            let short = openssl_short_name(&oid).ok_or_else(|| Error::CertParse {
                why: format!("name attribute {oid} has no OpenSSL short name"),
            })?;
            let value = atv.as_str().map_err(|_| Error::CertParse {
                why: format!("name attribute {short} is not a string"),
            })?;
            out.push('/');
            out.push_str(short);
            out.push('=');
            out.push_str(value);
        }
    }
    Ok(out)
}

/// OpenSSL's short names (`OBJ_nid2sn`) for the attributes a DN here can carry.
fn openssl_short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.5" => "serialNumber",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The DER contents of every PEM block with the given label (`CERTIFICATE`, …).
pub fn pem_blocks(text: &str, label: &str) -> Result<Vec<Vec<u8>>, Error> {
    let blocks = pem::parse_many(text).map_err(|e| Error::CertParse {
        why: format!("bad PEM: {e}"),
    })?;
    Ok(blocks
        .into_iter()
        .filter(|p| p.tag() == label)
        .map(pem::Pem::into_contents)
        .collect())
}

/// Every certificate in a PEM bundle, in order.
pub fn certs_from_pem(text: &str) -> Result<Vec<Cert>, Error> {
    pem_blocks(text, "CERTIFICATE")?
        .iter()
        .map(|der| Cert::from_der(der))
        .collect()
}

/// PEM-encodes DER with 64-column lines and `\n` line ends.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    pem::encode_config(&pem::Pem::new(label, der.to_vec()), config)
}
