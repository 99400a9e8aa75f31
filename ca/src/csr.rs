//! Making the CSR on the laptop: CN=NAME and nothing else the policy would refuse.

use rcgen::{CertificateParams, DistinguishedName, DnType};

use crate::error::Error;
use crate::key::PrivateKey;
use crate::name::ProfileName;

/// A PEM CSR for `name`, signed by `key`. The key itself stays with the caller.
pub fn build(key: &PrivateKey, name: &ProfileName) -> Result<String, Error> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name.as_str());
    params.distinguished_name = dn;
    params
        .serialize_request(key.pair())
        .and_then(|csr| csr.pem())
        .map_err(|source| Error::Signing {
            what: "certificate signing request",
            source,
        })
}
