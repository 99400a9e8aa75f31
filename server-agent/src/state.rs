//! The state directory and what lives in it: the CA, the inventory, the audit log, the CRL and
//! the agent's own cached admin identity; and the command's one async runtime.
//!
//! The agent is synchronous except where a driver is async (mysql_async): those few calls go
//! through [`Context::block_on`] on one current-thread runtime made per process, so no command
//! builds its own and nothing spawns threads it does not need.

use std::path::{Path, PathBuf};

use shiqi_ca::cert::Cert;
use shiqi_ca::inventory::Inventory;
use shiqi_ca::issue::{Ca, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};

use crate::caller::Caller;
use crate::config::Config;
use crate::error::AgentError;
use crate::fsutil;

/// The state directory, the loaded config, who asks, and the runtime.
#[derive(Debug)]
pub(crate) struct Context {
    /// The state directory.
    pub(crate) dir: PathBuf,
    /// The config.
    pub(crate) config: Config,
    /// The config file named with `--config`, if one was (the forced command repeats it).
    pub(crate) config_path: Option<PathBuf>,
    /// Who runs this request (audit lines, enrollments and blocks name it).
    pub(crate) caller: Caller,
    /// The key id of the SSH certificate a principal's caller logged in with, as sshd exposed
    /// it (`ExposeAuthInfo`), for the audit log.
    pub(crate) certificate_key_id: Option<String>,
    runtime: tokio::runtime::Runtime,
}

/// The agent's own client identity for the Kafka admin API.
pub(crate) struct AdminIdentity {
    /// Its key.
    pub(crate) key: PrivateKey,
    /// Its certificate.
    pub(crate) cert: Cert,
}

impl Context {
    /// The state directory `dir` with the config at `config` (default `dir/agent.toml`, where a
    /// missing file means all defaults).
    ///
    /// # Errors
    /// An unreadable or invalid config, or no runtime.
    pub(crate) fn new(dir: &Path, config: Option<&Path>) -> Result<Self, AgentError> {
        let loaded = match config {
            Some(p) => Config::load(p, true)?,
            None => Config::load(&dir.join("agent.toml"), false)?,
        };
        let mut ctx = Self::with_config(dir.to_path_buf(), loaded)?;
        ctx.config_path = config.map(Path::to_path_buf);
        Ok(ctx)
    }

    /// A context for an already loaded config.
    ///
    /// # Errors
    /// [`AgentError::Runtime`].
    #[expect(clippy::disallowed_methods, reason = "this is the agent's one runtime")]
    pub(crate) fn with_config(dir: PathBuf, config: Config) -> Result<Self, AgentError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(AgentError::Runtime)?;
        Ok(Self {
            dir,
            config,
            config_path: None,
            caller: Caller::local(),
            certificate_key_id: None,
            runtime,
        })
    }

    /// Runs `future` to completion on the process's runtime.
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A file in the state directory.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Loads the CA.
    pub(crate) fn ca(&self) -> Result<Ca, AgentError> {
        let key_path = self.path("ca.key");
        if !key_path.exists() {
            return Err(AgentError::NoCa {
                dir: self.dir.clone(),
            });
        }
        let cert = read(&self.path("ca.crt"))?;
        let key = read(&key_path)?;
        let dp = self.config.crl.distribution_point();
        Ok(Ca::from_pem(&cert, &key)?.with_crl_distribution_point(dp.as_deref()))
    }

    /// Opens the inventory.
    pub(crate) fn inventory(&self) -> Result<Inventory, shiqi_ca::Error> {
        Inventory::open(&self.path("inventory.sqlite"))
    }

    /// The agent's admin identity: the cached one while it has more than a quarter of its life
    /// left, else a fresh one (recorded in the inventory as kind `admin`).
    pub(crate) fn admin_identity(&self, ca: &Ca) -> Result<AdminIdentity, AgentError> {
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
    std::fs::read_to_string(path).map_err(|why| AgentError::File {
        path: path.to_owned(),
        why,
    })
}
