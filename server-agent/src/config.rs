//! `agent.toml`: every key optional; the defaults below are the documented ones
//! (docs/design.md, README).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::AgentError;

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The Kafka cluster.
    pub kafka: KafkaConfig,
    /// The MySQL/MariaDB server.
    pub mysql: MysqlConfig,
    /// Default certificate lifetimes.
    pub lifetime: LifetimeConfig,
}

/// `[kafka]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    /// Bootstrap address as the server sees it; empty disables Kafka.
    pub bootstrap: String,
    /// CN of the agent's own short-lived admin certificate (a super user on the brokers).
    pub admin_name: String,
    /// How long to wait for the cluster, in seconds.
    pub timeout_secs: u64,
    /// Names that must never get a client certificate (broker identities, super users).
    pub reserved_names: Vec<String>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            bootstrap: "localhost:19094".to_owned(),
            admin_name: "shiqi-admin".to_owned(),
            timeout_secs: 10,
            reserved_names: vec!["kafka-broker".to_owned()],
        }
    }
}

/// `[mysql]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MysqlConfig {
    /// Where mysqld listens, as the server sees it (the tunnel's target); empty disables MySQL.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The agent's admin account.
    pub admin_user: String,
    /// File holding the admin password, relative to the state directory.
    pub admin_password_file: PathBuf,
    /// Unix socket for the admin connection; used instead of host/port when set.
    pub admin_socket: Option<PathBuf>,
    /// Host part of the users the agent creates: SSH forwards arrive from the server's loopback.
    pub user_host: String,
    /// Grants for every user, each as `PRIVILEGES ON db.table`.
    pub grants: Vec<String>,
}

impl Default for MysqlConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 3306,
            admin_user: "shiqi_agent".to_owned(),
            admin_password_file: PathBuf::from("mysql-admin.password"),
            admin_socket: None,
            user_host: "127.0.0.1".to_owned(),
            grants: vec!["SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON `app`.*".to_owned()],
        }
    }
}

/// `[lifetime]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LifetimeConfig {
    /// Client certificates, in days.
    pub client_days: u32,
    /// Server certificates, in days.
    pub server_days: u32,
    /// The CA, in days.
    pub ca_days: u32,
    /// The agent's own admin certificate, in minutes.
    pub admin_minutes: u32,
}

impl Default for LifetimeConfig {
    fn default() -> Self {
        Self {
            client_days: 30,
            server_days: 397,
            ca_days: 3650,
            admin_minutes: 60,
        }
    }
}

impl Config {
    /// Reads the config; a missing file at the default path means all defaults, a missing file
    /// named explicitly is an error.
    pub fn load(path: &Path, explicit: bool) -> Result<Self, AgentError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Self::default());
            }
            Err(source) => {
                return Err(AgentError::ConfigRead {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let config: Self = toml::from_str(&text).map_err(|e| AgentError::ConfigParse {
            path: path.to_owned(),
            why: e.message().to_owned(),
        })?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), AgentError> {
        let bad = |why: String| AgentError::ConfigParse {
            path: path.to_owned(),
            why,
        };
        if self.lifetime.client_days == 0 || self.lifetime.server_days == 0 {
            return Err(bad("lifetimes must be at least one day".to_owned()));
        }
        for grant in &self.mysql.grants {
            crate::mysql::check_grant(grant)
                .map_err(|why| bad(format!("grant `{grant}`: {why}")))?;
        }
        crate::mysql::check_account_part(&self.mysql.user_host)
            .map_err(|why| bad(format!("mysql.user_host: {why}")))?;
        Ok(())
    }

    /// Names that may never be signed for: the agent's identities and the configured reserved
    /// names.
    pub fn reserved_names(&self) -> Vec<&str> {
        let mut names = vec![
            self.kafka.admin_name.as_str(),
            self.mysql.admin_user.as_str(),
            "root",
            "mysql",
            "admin",
        ];
        names.extend(self.kafka.reserved_names.iter().map(String::as_str));
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_means_defaults_and_unknown_keys_are_refused() {
        let c: Config = toml::from_str("").expect("empty config parses");
        assert_eq!(c.kafka.bootstrap, "localhost:19094");
        assert_eq!(c.mysql.user_host, "127.0.0.1");
        assert!(toml::from_str::<Config>("[kafka]\nbootstrp = \"x\"\n").is_err());
    }
}
