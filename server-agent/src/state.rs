//! The state directory and what lives in it: the CA, the inventory, the audit log, the CRL and
//! the agent's own cached admin identity.

use std::path::{Path, PathBuf};

use shiqi_ca::cert::Cert;
use shiqi_ca::inventory::Inventory;
use shiqi_ca::issue::{Ca, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};

use crate::cli::Global;
use crate::config::Config;
use crate::error::AgentError;
use crate::fsutil;

/// The state directory and the loaded config.
#[derive(Debug)]
pub struct Context {
    /// The state directory.
    pub dir: PathBuf,
    /// The config.
    pub config: Config,
}

/// The agent's own client identity for the Kafka admin API.
pub struct AdminIdentity {
    /// Its key.
    pub key: PrivateKey,
    /// Its certificate.
    pub cert: Cert,
}

impl Context {
    /// Resolves the state directory and reads the config.
    pub fn new(global: &Global) -> Result<Self, AgentError> {
        let (path, explicit) = match &global.config {
            Some(p) => (p.clone(), true),
            None => (global.state_dir.join("agent.toml"), false),
        };
        let config = Config::load(&path, explicit)?;
        Ok(Self {
            dir: global.state_dir.clone(),
            config,
        })
    }

    /// A file in the state directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Loads the CA.
    pub fn ca(&self) -> anyhow::Result<Ca> {
        let key_path = self.path("ca.key");
        if !key_path.exists() {
            return Err(AgentError::NoCa {
                dir: self.dir.clone(),
            }
            .into());
        }
        let cert = read(&self.path("ca.crt"))?;
        let key = read(&key_path)?;
        let dp = self.config.crl.distribution_point();
        Ok(Ca::from_pem(&cert, &key)?.with_crl_distribution_point(dp.as_deref()))
    }

    /// Opens the inventory.
    pub fn inventory(&self) -> Result<Inventory, shiqi_ca::Error> {
        Inventory::open(&self.path("inventory.sqlite"))
    }

    /// The agent's admin identity: the cached one while it has more than a quarter of its life
    /// left, else a fresh one (recorded in the inventory as kind `admin`).
    pub fn admin_identity(&self, ca: &Ca) -> anyhow::Result<AdminIdentity> {
        let dir = self.path("admin");
        let (key_path, cert_path) = (dir.join("admin.key"), dir.join("admin.crt"));
        let lifetime =
            time::Duration::minutes(i64::from(self.config.lifetime.admin_minutes.max(5)));
        let now = time::OffsetDateTime::now_utc();
        if let (Ok(k), Ok(c)) = (
            std::fs::read_to_string(&key_path),
            std::fs::read_to_string(&cert_path),
        ) && let (Ok(key), Ok(cert)) = (PrivateKey::from_pem(&k), Cert::from_pem(&c))
            && cert.common_name() == Some(self.config.kafka.admin_name.as_str())
            // Brokers that check revocation refuse a certificate without the CRL's location.
            && cert.crl_distribution_points() == ca.crl_distribution_points()
            && cert.matches_key(&key)
            && cert.is_signed_by(ca.cert())
            && cert.not_after() - now > lifetime / 4
        {
            return Ok(AdminIdentity { key, cert });
        }
        let key = PrivateKey::generate(KeyType::EcdsaP256)?;
        let name = self.config.kafka.admin_name.clone();
        let mut inventory = self.inventory()?;
        let record = inventory.issue(|serial| {
            let cert =
                ca.issue_for_key(&name, &key, serial, Validity::starting_now(now, lifetime))?;
            Ok(shiqi_ca::inventory::NewCert::from_cert(
                &name,
                shiqi_ca::inventory::CertKind::Admin,
                &cert,
            ))
        })?;
        let cert = Cert::from_der(&record.der)?;
        fsutil::create_private_dir(&dir)?;
        fsutil::write_private(&key_path, key.to_pkcs8_pem().expose().as_bytes())?;
        fsutil::write_private(&cert_path, cert.pem().as_bytes())?;
        Ok(AdminIdentity { key, cert })
    }
}

fn read(path: &Path) -> Result<String, AgentError> {
    std::fs::read_to_string(path).map_err(|source| AgentError::File {
        path: path.to_owned(),
        source,
    })
}
