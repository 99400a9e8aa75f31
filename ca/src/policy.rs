//! The CSR policy: what the agent agrees to sign.
//!
//! The CSR is parsed and judged here with x509-parser, so every refusal names its reason. The
//! agent then builds the certificate's contents itself (subject, key usage, extended key usage,
//! `CA:FALSE`) from the *policy*, never from what the CSR asks for; only the public key and the
//! name are taken from it.

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::ParsedExtension;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
    OID_SIG_ED25519, OID_X509_COMMON_NAME,
};
use x509_parser::prelude::FromDer;

use crate::error::{CsrRefusal, Error};
use crate::key::KeyType;
use crate::name::ProfileName;

/// The largest CSR document the agent reads (the agent enforces it on stdin too).
pub const MAX_CSR_BYTES: usize = 64 * 1024;

/// The smallest RSA modulus accepted.
pub const MIN_RSA_BITS: usize = 2048;
/// The largest RSA modulus accepted.
pub const MAX_RSA_BITS: usize = 4096;

/// A CSR that passed the policy: its public key and the name it was checked against.
#[derive(Clone, Debug)]
pub struct CheckedCsr {
    pub(crate) name: ProfileName,
    pub(crate) spki_der: Vec<u8>,
    key_type: KeyType,
}

impl CheckedCsr {
    /// The name (CN) the certificate will carry.
    pub fn name(&self) -> &ProfileName {
        &self.name
    }

    /// The requester's key algorithm.
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The requester's DER SubjectPublicKeyInfo.
    pub fn public_key_der(&self) -> &[u8] {
        &self.spki_der
    }
}

/// Checks a PEM CSR against the policy for `name`.
///
/// # Errors
/// [`Error::CsrRefused`] with the reason: not a single PEM CSR, bad self-signature, a subject
/// other than exactly `CN=name`, a key other than ECDSA P-256/P-384, Ed25519 or RSA ≥ 2048,
/// CA basic constraints, SANs, or any other requested extension.
pub fn check_csr(pem_text: &[u8], name: &ProfileName) -> Result<CheckedCsr, Error> {
    let refuse = |reason: CsrRefusal| Error::CsrRefused { reason };
    if pem_text.len() > MAX_CSR_BYTES {
        return Err(refuse(CsrRefusal::TooLarge));
    }
    let text = std::str::from_utf8(pem_text).map_err(|_| refuse(CsrRefusal::NotPem))?;
    let blocks = pem::parse_many(text).map_err(|_| refuse(CsrRefusal::NotPem))?;
    let mut csrs = blocks
        .iter()
        .filter(|b| matches!(b.tag(), "CERTIFICATE REQUEST" | "NEW CERTIFICATE REQUEST"));
    let der = match (csrs.next(), csrs.next(), blocks.len()) {
        (Some(one), None, 1) => one.contents(),
        (None, _, _) => return Err(refuse(CsrRefusal::NotPem)),
        _ => return Err(refuse(CsrRefusal::MoreThanOne)),
    };
    let (rest, csr) =
        X509CertificationRequest::from_der(der).map_err(|_| refuse(CsrRefusal::Malformed))?;
    if !rest.is_empty() {
        return Err(refuse(CsrRefusal::Malformed));
    }
    let info = &csr.certification_request_info;
    // The key is judged before the signature: backends refuse to verify with weak keys, and
    // "RSA-1024 is not allowed" is the reason the requester needs to read.
    let key_type = key_type(&info.subject_pki).map_err(refuse)?;
    csr.verify_signature()
        .map_err(|_| refuse(CsrRefusal::BadSignature))?;

    let mut attrs = info.subject.iter_attributes();
    let cn = match (attrs.next(), attrs.next()) {
        (Some(atv), None) if atv.attr_type() == &OID_X509_COMMON_NAME => atv
            .as_str()
            .map_err(|_| refuse(CsrRefusal::Malformed))?
            .to_owned(),
        _ => {
            return Err(refuse(CsrRefusal::Subject {
                found: info.subject.to_string(),
                expected: name.to_string(),
            }));
        }
    };
    if cn != name.as_str() {
        return Err(refuse(CsrRefusal::Subject {
            found: format!("CN={cn}"),
            expected: name.to_string(),
        }));
    }

    if let Some(exts) = csr.requested_extensions() {
        for ext in exts {
            match ext {
                ParsedExtension::BasicConstraints(bc) if bc.ca => {
                    return Err(refuse(CsrRefusal::AsksForCa));
                }
                ParsedExtension::SubjectAlternativeName(_) => {
                    return Err(refuse(CsrRefusal::Extension("subjectAltName".to_owned())));
                }
                // Asked-for usages are ignored: the agent sets its own.
                ParsedExtension::BasicConstraints(_)
                | ParsedExtension::KeyUsage(_)
                | ParsedExtension::ExtendedKeyUsage(_) => {}
                other => {
                    return Err(refuse(CsrRefusal::Extension(
                        format!("{other:?}")
                            .split(['(', ' ', '{'])
                            .next()
                            .unwrap_or("unknown")
                            .to_owned(),
                    )));
                }
            }
        }
    }
    // Other CSR attributes (challengePassword, …) are neither needed nor accepted.
    for attr in info.iter_attributes() {
        if attr.oid != x509_parser::oid_registry::OID_PKCS9_EXTENSION_REQUEST {
            return Err(refuse(CsrRefusal::Extension(format!(
                "attribute {}",
                attr.oid
            ))));
        }
    }

    Ok(CheckedCsr {
        name: name.clone(),
        spki_der: info.subject_pki.raw.to_vec(),
        key_type,
    })
}

fn key_type(spki: &x509_parser::x509::SubjectPublicKeyInfo<'_>) -> Result<KeyType, CsrRefusal> {
    let alg = &spki.algorithm.algorithm;
    if alg == &OID_SIG_ED25519 {
        return Ok(KeyType::Ed25519);
    }
    if alg == &OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        return match curve {
            Some(c) if c == OID_EC_P256 => Ok(KeyType::EcdsaP256),
            Some(c) if c == OID_NIST_EC_P384 => Ok(KeyType::EcdsaP384),
            Some(c) => Err(CsrRefusal::Key(format!("ECDSA on curve {c}"))),
            None => Err(CsrRefusal::Key("ECDSA without a named curve".to_owned())),
        };
    }
    if alg == &OID_PKCS1_RSAENCRYPTION {
        let Ok(x509_parser::public_key::PublicKey::RSA(rsa)) = spki.parsed() else {
            return Err(CsrRefusal::Key(
                "RSA with a malformed public key".to_owned(),
            ));
        };
        // e = 65537 only: small exponents invite the classic e = 3 attacks on bad padding,
        // and every mainstream generator uses 65537.
        if rsa.try_exponent().ok() != Some(65537) {
            return Err(CsrRefusal::Key(format!(
                "RSA with public exponent {}",
                rsa.try_exponent()
                    .map_or_else(|_| "larger than 64 bits".to_owned(), |e| e.to_string())
            )));
        }
        let bits = rsa.key_size();
        return match bits {
            b if b < MIN_RSA_BITS => Err(CsrRefusal::Key(format!("RSA-{b}"))),
            // Larger keys buy nothing over P-384 and make every handshake slow.
            b if b > MAX_RSA_BITS => Err(CsrRefusal::Key(format!("RSA-{b}"))),
            b if b <= 2048 => Ok(KeyType::Rsa2048),
            b if b <= 3072 => Ok(KeyType::Rsa3072),
            _ => Ok(KeyType::Rsa4096),
        };
    }
    Err(CsrRefusal::Key(format!("algorithm {alg}")))
}
