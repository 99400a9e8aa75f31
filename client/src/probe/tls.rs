//! The profile's TLS client identity for Kafka: `ca.crt` as the only root, `client.crt` and
//! `client.key` as the client certificate (rustls, the workspace's one crypto provider).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::profile::files;

/// The profile's TLS client settings, read once for every Kafka probe; a profile whose files
/// cannot be read carries the reason, and every probe fails with it.
#[derive(Clone)]
pub struct ProfileTls(Result<Arc<rustls::ClientConfig>, String>);

impl ProfileTls {
    /// Reads `ca.crt`, `client.crt` and `client.key` from the folder `dir`.
    pub fn from_profile(dir: &Path) -> Self {
        Self(client_config(dir).map(Arc::new))
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

fn client_config(dir: &Path) -> Result<rustls::ClientConfig, String> {
    let read_certs = |name: &str| -> Result<Vec<CertificateDer<'static>>, String> {
        let path = dir.join(name);
        let certs = CertificateDer::pem_file_iter(&path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("`{}` holds no certificate", path.display()));
        }
        Ok(certs)
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in read_certs(files::CA_CRT)? {
        roots
            .add(ca)
            .map_err(|e| format!("cannot use `{}`: {e}", files::CA_CRT))?;
    }
    let chain = read_certs(files::CLIENT_CRT)?;
    let key_path = dir.join(files::CLIENT_KEY);
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .map_err(|e| format!("cannot read `{}`: {e}", key_path.display()))?;
    // The provider the whole workspace uses (design.md: one crypto stack), named explicitly so
    // no process-wide default has to be installed.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("`client.crt` and `client.key` do not go together: {e}"))
}
