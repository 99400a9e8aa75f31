//! A TLS client identity for Kafka: the CA as the only root, the client certificate and its key
//! (rustls, the workspace's one crypto provider).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The profile's TLS client settings, read once for every Kafka probe; a profile whose files
/// cannot be read carries the reason, and every probe fails with it.
#[derive(Clone)]
pub(crate) struct ProfileTls(Result<Arc<rustls::ClientConfig>, String>);

impl ProfileTls {
    /// Reads the CA, the client certificate and its key of `id`.
    pub(crate) fn from_identity(id: &super::Identity) -> Self {
        Self(pem_config(&id.ca, &id.cert, &id.key).map(Arc::new))
    }

    /// A client identity from the PEM files a librdkafka config names (`ssl.ca.location`,
    /// `ssl.certificate.location`, `ssl.key.location`).
    pub(crate) fn from_pem_files(ca: &Path, cert: &Path, key: &Path) -> Self {
        Self(pem_config(ca, cert, key).map(Arc::new))
    }

    /// A client identity from DER parts (a Java keystore's chain and key, a truststore's CAs).
    pub(crate) fn from_der(roots: Vec<Vec<u8>>, chain: Vec<Vec<u8>>, key: Vec<u8>) -> Self {
        let roots = roots.into_iter().map(CertificateDer::from).collect();
        let chain = chain.into_iter().map(CertificateDer::from).collect();
        let key = PrivateKeyDer::try_from(key).map_err(|e| format!("unusable private key: {e}"));
        Self(key.and_then(|k| build(roots, chain, k)).map(Arc::new))
    }

    /// The config, or why there is none.
    pub(crate) fn config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.0.clone()
    }

    #[cfg(test)]
    pub(crate) fn without_client_certificate() -> Self {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        Self(Ok(Arc::new(config)))
    }
}

/// PEM files: the CA (the only root), the client certificate (chain) and its key.
fn pem_config(ca: &Path, cert: &Path, key: &Path) -> Result<rustls::ClientConfig, String> {
    let read_certs = |path: &Path| -> Result<Vec<CertificateDer<'static>>, String> {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("`{}` holds no certificate", path.display()));
        }
        Ok(certs)
    };
    // In this order, so that the first missing file is the one named.
    let roots = read_certs(ca)?;
    let chain = read_certs(cert)?;
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read `{}`: {e}", key.display()))?;
    build(roots, chain, key_der)
}

/// The workspace's rustls config for these roots and this client identity.
fn build(
    roots: Vec<CertificateDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<rustls::ClientConfig, String> {
    let mut store = rustls::RootCertStore::empty();
    for ca in roots {
        store
            .add(ca)
            .map_err(|e| format!("cannot use a CA certificate: {e}"))?;
    }
    // The provider the whole workspace uses (design.md: one crypto stack), named explicitly so
    // no process-wide default has to be installed.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(store)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("the client certificate and key do not go together: {e}"))
}
