//! `agent.toml`: every key optional; the defaults below are the documented ones
//! (docs/design.md, README).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use shiqi_ca::inventory::access::Role;
use shiqi_ca::issue::Lifetime;
use shiqi_ca::{ProfileName, Span};

use crate::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use crate::error::AgentError;

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Config {
    /// The Kafka cluster.
    pub(crate) kafka: KafkaConfig,
    /// The MySQL/MariaDB server.
    pub(crate) mysql: MysqlConfig,
    /// Default certificate lifetimes.
    pub(crate) lifetime: LifetimeConfig,
    /// The certificate revocation list.
    pub(crate) crl: CrlConfig,
    /// Who may reach the agent over SSH (`enroll`).
    pub(crate) access: AccessConfig,
    /// What one enrolled key may cost the server.
    pub(crate) limits: LimitsConfig,
}

/// `[limits]`: what an enrolled key can make the server do, so that one key (or whoever stole
/// it) cannot fill the disk, grow the CRL that every broker and MariaDB re-read, or keep the
/// agent busy. Local callers (the CA's operator) are not limited.
///
/// ```toml
/// [limits]
/// certificates_per_name = 20   # live (unrevoked, unexpired) certificates per name (user keys)
/// requests_per_minute = 60     # per enrolled key, refused ones included
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LimitsConfig {
    /// Unexpired client certificates (valid or revoked) a `user` key's name may hold; a `sign`
    /// past it is refused. A revoked certificate counts until it expires because it stays in
    /// the CRL. Admin keys are not capped (they may revoke and sign any name).
    pub(crate) certificates_per_name: u32,
    /// Requests one enrolled key may send per minute, refused ones included.
    pub(crate) requests_per_minute: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            certificates_per_name: 20,
            requests_per_minute: 60,
        }
    }
}

/// `[access]`: the `authorized_keys` lines `enroll` writes.
///
/// ```toml
/// [access]
/// # sshd_config = "/etc/ssh/sshd_config"   # what `enroll` checks with `sshd -T`
/// # sshd = "/usr/sbin/sshd"
/// # authorized_keys = "/var/lib/shiqi-ca/.ssh/authorized_keys"  # default: the agent account's
/// # authorized_principals = "/var/lib/shiqi-ca/.ssh/authorized_principals"  # same, for SSH CAs
/// # permit_open = ["127.0.0.1:3306", "localhost:19094"]  # default: MySQL and every broker
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct AccessConfig {
    /// The file `enroll` manages. Default: `~/.ssh/authorized_keys` of the account the agent
    /// runs as (from the password database, not `$HOME`).
    pub(crate) authorized_keys: Option<PathBuf>,
    /// The file `enroll --ssh-principal` manages, which sshd's `AuthorizedPrincipalsFile` names
    /// for the agent's account. Default: `~/.ssh/authorized_principals` of that account.
    pub(crate) authorized_principals: Option<PathBuf>,
    /// The sshd config `enroll` checks (`sshd -T`) before it installs a key line.
    pub(crate) sshd_config: PathBuf,
    /// The sshd binary that reads it.
    pub(crate) sshd: PathBuf,
    /// Where an enrolled key may forward ports to (`permitopen`, `HOST:PORT` or `HOST:*`): the
    /// tunnel's targets. Default: `[mysql] host:port`, the `[kafka] bootstrap` servers and every
    /// broker the cluster advertises when `enroll` runs (`enroll --sync` after brokers change).
    pub(crate) permit_open: Option<Vec<String>>,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            authorized_keys: None,
            authorized_principals: None,
            sshd_config: PathBuf::from("/etc/ssh/sshd_config"),
            sshd: PathBuf::from("/usr/sbin/sshd"),
            permit_open: None,
        }
    }
}

impl AccessConfig {
    fn check(&self) -> Result<(), String> {
        for (key, path) in [("sshd_config", &self.sshd_config), ("sshd", &self.sshd)] {
            if !path.is_absolute() {
                return Err(format!(
                    "access.{key} `{}` must be an absolute path",
                    path.display()
                ));
            }
        }
        for (key, path) in [
            ("authorized_keys", &self.authorized_keys),
            ("authorized_principals", &self.authorized_principals),
        ] {
            if let Some(path) = path
                && !path.is_absolute()
            {
                return Err(format!(
                    "access.{key} `{}` must be an absolute path",
                    path.display()
                ));
            }
        }
        for target in self.permit_open.iter().flatten() {
            check_permit_open(target)
                .map_err(|why| format!("access.permit_open `{target}`: {why}"))?;
        }
        Ok(())
    }
}

/// `HOST:PORT` or `HOST:*`, with a host that parses as one (so nothing can break out of the
/// option's quotes).
fn check_permit_open(target: &str) -> Result<(), String> {
    let (host, port) = target
        .rsplit_once(':')
        .ok_or("expected HOST:PORT or HOST:*")?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.parse::<shiqi_ca::Host>().map_err(|e| e.to_string())?;
    if port != "*" {
        let port: u16 = port
            .parse()
            .map_err(|_| "the port is not a number or `*`")?;
        shiqi_ca::Port::try_from(port).map_err(|e| e.to_string())?;
    }
    Ok(())
}

impl Config {
    /// The `permitopen` targets of every enrolled key (see [`AccessConfig::permit_open`]):
    /// exactly the MySQL address, the bootstrap servers and `brokers` (what the cluster
    /// advertises), so that a key reaches those services and no other port on the server's
    /// loopback (controller listeners, a plaintext listener, JMX, whatever else runs there).
    pub(crate) fn permit_open(&self, brokers: &[(String, u16)]) -> Vec<String> {
        if let Some(list) = &self.access.permit_open {
            return list.clone();
        }
        let mut out = Vec::new();
        let mut add = |target: String| {
            if !out.contains(&target) {
                out.push(target);
            }
        };
        if !self.mysql.host.is_empty() {
            add(host_port(&self.mysql.host, &self.mysql.port.to_string()));
        }
        for server in self.kafka.bootstrap.split(',').map(str::trim) {
            if let Some((host, port)) = server.rsplit_once(':') {
                add(host_port(
                    host.trim_start_matches('[').trim_end_matches(']'),
                    port,
                ));
            }
        }
        for (host, port) in brokers {
            add(host_port(host, &port.to_string()));
        }
        out
    }

    /// Whether the default targets need the cluster's advertised brokers (Kafka is configured
    /// and `[access] permit_open` does not list the targets itself).
    pub(crate) fn permit_open_asks_kafka(&self) -> bool {
        self.access.permit_open.is_none() && !self.kafka.bootstrap.is_empty()
    }
}

fn host_port(host: &str, port: &str) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `[kafka]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct KafkaConfig {
    /// Bootstrap address as the server sees it; empty disables Kafka.
    pub(crate) bootstrap: String,
    /// CN of the agent's own short-lived admin certificate (a super user on the brokers).
    pub(crate) admin_name: String,
    /// How long to wait for the cluster, in seconds.
    pub(crate) timeout_secs: u64,
    /// Names that must never get a client certificate (broker identities, super users).
    pub(crate) reserved_names: Vec<String>,
    /// The ACLs `kafka-user NAME` gives principal `User:NAME` (allow, from any host). A
    /// `[[kafka.grants]]` table in the file replaces this whole list.
    pub(crate) grants: Vec<KafkaGrant>,
}

/// One `[[kafka.grants]]` entry: some operations on the resources a name or prefix matches.
///
/// ```toml
/// [[kafka.grants]]
/// resource = "topic"     # topic | group | cluster | transactional-id
/// pattern = "prefixed"   # literal (default) | prefixed
/// name = "app."          # `{name}` is replaced by the user's name, e.g. "u.{name}."
/// operations = ["read", "write", "describe", "create", "describe-configs"]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KafkaGrant {
    /// The resource type.
    pub(crate) resource: ResourceType,
    /// How `name` matches.
    #[serde(default = "literal")]
    pub(crate) pattern: PatternType,
    /// The resource name or prefix; `{name}` stands for the user's name.
    pub(crate) name: String,
    /// What the user may do there.
    pub(crate) operations: Vec<Operation>,
}

fn literal() -> PatternType {
    PatternType::Literal
}

/// The user-name placeholder in [`KafkaGrant::name`].
const NAME_PLACEHOLDER: &str = "{name}";

impl KafkaGrant {
    fn new(resource: ResourceType, name: &str, operations: &[Operation]) -> Self {
        Self {
            resource,
            pattern: PatternType::Prefixed,
            name: name.to_owned(),
            operations: operations.to_vec(),
        }
    }

    /// The grants every user gets unless the config says otherwise: produce, consume, create
    /// and inspect topics under `app.`, and consume in groups under `app.` (a console consumer
    /// needs READ on its group, so `--group app.NAME`, not the random `console-consumer-…`).
    /// No IDEMPOTENT_WRITE on the cluster: since Kafka 3.0 WRITE on a topic implies it
    /// (KIP-679), and the default idempotent producer works with the topic grant alone.
    pub(crate) fn defaults() -> Vec<Self> {
        use Operation::*;
        vec![
            Self::new(
                ResourceType::Topic,
                "app.",
                &[Read, Write, Describe, Create, DescribeConfigs],
            ),
            Self::new(ResourceType::Group, "app.", &[Read, Describe]),
        ]
    }

    /// The ACLs for principal `User:NAME`, one per operation.
    pub(crate) fn bindings(&self, name: &ProfileName) -> Vec<AclBinding> {
        let resource_name = self.name.replace(NAME_PLACEHOLDER, name.as_str());
        self.operations
            .iter()
            .map(|&operation| AclBinding {
                resource: self.resource,
                name: resource_name.clone(),
                pattern: self.pattern,
                principal: format!("User:{name}"),
                host: "*".to_owned(),
                operation,
                permission: Permission::Allow,
            })
            .collect()
    }

    /// Refuses what Kafka would refuse (or silently never match).
    fn check(&self) -> Result<(), String> {
        let (resource, name) = (self.resource, self.name.as_str());
        // The longest user name, so that length checks hold for every user.
        let longest = name.replace(NAME_PLACEHOLDER, &"x".repeat(shiqi_ca::name::MAX_NAME_LEN));
        if name.is_empty() {
            return Err("`name` is empty".to_owned());
        }
        if longest.contains(['{', '}']) {
            return Err(format!(
                "`{name}`: the only placeholder is `{NAME_PLACEHOLDER}`"
            ));
        }
        if name.chars().any(char::is_control) {
            return Err("`name` contains a control character".to_owned());
        }
        // A prefix that could run on past the name would give `bo` the resources of `bo-x`:
        // `.` cannot occur in a name, so `{name}.` ends exactly where the name does.
        if self.pattern == PatternType::Prefixed
            && name
                .match_indices(NAME_PLACEHOLDER)
                .any(|(at, _)| !name[at + NAME_PLACEHOLDER.len()..].starts_with('.'))
        {
            return Err(format!(
                "prefixed {resource} `{name}`: put `.` right after `{NAME_PLACEHOLDER}` (as in \
                 `u.{NAME_PLACEHOLDER}.`), or user `bo` also gets the {resource}s of user `bo-x`"
            ));
        }
        if self.operations.is_empty() {
            return Err(format!("{resource} `{name}`: `operations` is empty"));
        }
        if let Some(op) = self
            .operations
            .iter()
            .find(|op| !resource.operations().contains(op))
        {
            let valid: Vec<_> = resource.operations().iter().map(|o| o.as_str()).collect();
            return Err(format!(
                "{resource} `{name}`: `{op}` does not apply to a {resource} (valid: {})",
                valid.join(", ")
            ));
        }
        match resource {
            ResourceType::Cluster
                if name != "kafka-cluster" || self.pattern != PatternType::Literal =>
            {
                Err(
                    "a cluster grant must be `pattern = \"literal\"`, `name = \"kafka-cluster\"`"
                        .to_owned(),
                )
            }
            ResourceType::Topic if name == "*" && self.pattern == PatternType::Literal => Ok(()),
            // Kafka's topic name rule (`Topic.validate`): [a-zA-Z0-9._-], at most 249 chars.
            ResourceType::Topic
                if longest.len() > 249
                    || !longest
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) =>
            {
                Err(format!(
                    "topic `{name}`: topic names are at most 249 of a-z, A-Z, 0-9, `.`, `_`, `-`"
                ))
            }
            _ => Ok(()),
        }
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            bootstrap: "localhost:19094".to_owned(),
            admin_name: "shiqi-admin".to_owned(),
            timeout_secs: 10,
            reserved_names: vec!["kafka-broker".to_owned()],
            grants: KafkaGrant::defaults(),
        }
    }
}

/// Where Debian's and Ubuntu's MariaDB and MySQL packages put mysqld's socket.
pub(crate) const DEFAULT_MYSQL_SOCKET: &str = "/run/mysqld/mysqld.sock";

/// `[mysql]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct MysqlConfig {
    /// Where mysqld listens, as the server sees it (the tunnel's target); empty disables MySQL.
    pub(crate) host: String,
    /// Its port.
    pub(crate) port: u16,
    /// The agent's admin account.
    pub(crate) admin_user: String,
    /// File holding the admin password, relative to the state directory. A missing file means
    /// no password: an account that logs in by socket credentials (`unix_socket`, `auth_socket`).
    pub(crate) admin_password_file: PathBuf,
    /// mysqld's Unix socket, where the admin logs in (default Debian's and Ubuntu's). `""` means
    /// TCP to `host:port`, which needs [`MysqlConfig::admin_tls_ca`].
    pub(crate) admin_socket: Option<PathBuf>,
    /// The CA that signed MySQL's server certificate (absolute, or relative to the state
    /// directory: `ca.crt` when it came from `server-cert --kind mysql`). The admin's TCP login
    /// runs inside TLS verified against this CA alone and against `host` as the server's name.
    pub(crate) admin_tls_ca: Option<PathBuf>,
    /// Host part of the users the agent creates: SSH forwards arrive from the server's loopback.
    pub(crate) user_host: String,
    /// Grants for every user, each as `PRIVILEGES ON db.table`.
    pub(crate) grants: Vec<String>,
}

impl Default for MysqlConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 3306,
            admin_user: "shiqi_agent".to_owned(),
            admin_password_file: PathBuf::from("mysql-admin.password"),
            admin_socket: Some(PathBuf::from(DEFAULT_MYSQL_SOCKET)),
            admin_tls_ca: None,
            user_host: "127.0.0.1".to_owned(),
            grants: vec!["SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON `app`.*".to_owned()],
        }
    }
}

impl MysqlConfig {
    /// The admin's password goes to whoever answers where the agent connects: a Unix socket
    /// (only mysqld can own its path), or TCP inside verified TLS. A plain TCP login would hand
    /// it to any process listening on the port while mysqld is down, which an enrolled key's
    /// forwards could once arrange; with no TLS the client library even encrypts it to an RSA key
    /// the listener chooses.
    fn check_admin_path(&self) -> Result<(), String> {
        if self.host.is_empty() {
            return Ok(());
        }
        let socket = self
            .admin_socket
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        match (socket, &self.admin_tls_ca) {
            (Some(socket), _) if !socket.is_absolute() => Err(format!(
                "[mysql] admin_socket `{}` must be an absolute path",
                socket.display()
            )),
            (Some(_), _) | (None, Some(_)) => Ok(()),
            (None, None) => Err(format!(
                "[mysql] admin_socket is empty, so the admin would send its password over plain \
                 TCP to {}:{}; set admin_tls_ca (the CA of MySQL's server certificate, e.g. \
                 \"ca.crt\") or admin_socket = \"{DEFAULT_MYSQL_SOCKET}\"",
                self.host, self.port
            )),
        }
    }
}

/// `[lifetime]`.
///
/// ```toml
/// [lifetime]
/// client = "30d"          # when the laptop asks for none ("10m", "1h", "30d"; 5m to 398d)
/// [lifetime.client_max]   # the most a laptop may ask for, by its enrolled key's role
/// user = "30d"
/// admin = "398d"          # and callers on the server itself
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LifetimeConfig {
    /// Client certificates when the laptop asks for no lifetime.
    client: Option<Span>,
    /// The same in whole days, as agent.toml said it before `client` (still read).
    client_days: Option<u32>,
    /// The most a laptop may ask for; more is signed at this maximum.
    pub(crate) client_max: ClientMax,
    /// Server certificates, in days.
    pub(crate) server_days: u32,
    /// The CA, in days.
    pub(crate) ca_days: u32,
    /// The agent's own admin certificate, in minutes.
    pub(crate) admin_minutes: u32,
}

/// `[lifetime.client_max]`: a client certificate's longest lifetime, by the caller's role.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ClientMax {
    /// Enrolled `user` keys.
    pub(crate) user: Span,
    /// Enrolled `admin` keys and local callers.
    pub(crate) admin: Span,
}

impl Default for ClientMax {
    fn default() -> Self {
        Self {
            user: DEFAULT_CLIENT,
            admin: Lifetime::Client.max(),
        }
    }
}

/// 30 days: what a laptop that asks for nothing gets (older laptops, `--openssh` profiles).
const DEFAULT_CLIENT: Span = match Span::days(30) {
    Some(s) => s,
    None => panic!("30 days is a span"),
};

impl Default for LifetimeConfig {
    fn default() -> Self {
        Self {
            client: None,
            client_days: None,
            client_max: ClientMax::default(),
            server_days: 397,
            ca_days: 3650,
            admin_minutes: 60,
        }
    }
}

impl LifetimeConfig {
    /// A client certificate's lifetime when the laptop asks for none (validated by
    /// [`Config::load`]; an invalid `client_days` falls back to the default here).
    pub(crate) fn client(&self) -> Span {
        self.client
            .or_else(|| self.client_days.and_then(Span::days))
            .unwrap_or(DEFAULT_CLIENT)
    }

    /// The lifetime of a client certificate for a caller of `role` (`None`: on the server) who
    /// asked for `asked`: what was asked (or the default), at most the role's maximum. The
    /// second value is that maximum when it cut the lifetime short.
    pub(crate) fn client_for(
        &self,
        role: Option<Role>,
        asked: Option<Span>,
    ) -> (Span, Option<Span>) {
        let max = match role {
            Some(Role::User) => self.client_max.user,
            Some(Role::Admin) | None => self.client_max.admin,
        };
        let want = asked.unwrap_or_else(|| self.client());
        if want > max {
            (max, Some(max))
        } else {
            (want, None)
        }
    }

    fn validate(&self) -> Result<(), String> {
        if self.client.is_some() && self.client_days.is_some() {
            return Err(
                "[lifetime] has both client and client_days: keep `client` only".to_owned(),
            );
        }
        let client_days = self.client_days.map(|days| {
            Span::days(days).ok_or_else(|| {
                format!(
                    "[lifetime] client_days = {days}: a client certificate may live {} to {}",
                    Lifetime::Client.min(),
                    Lifetime::Client.max()
                )
            })
        });
        let client_days = client_days.transpose()?;
        for (key, span) in [
            ("client_days", client_days),
            ("client", self.client),
            ("client_max.user", Some(self.client_max.user)),
            ("client_max.admin", Some(self.client_max.admin)),
        ] {
            if let Some(span) = span {
                Lifetime::Client
                    .check(span)
                    .map_err(|e| format!("[lifetime] {key} = {span}: {e}"))?;
            }
        }
        for (key, days, kind) in [
            ("server_days", self.server_days, Lifetime::Server),
            ("ca_days", self.ca_days, Lifetime::Ca),
        ] {
            if Span::days(days).is_none_or(|span| kind.check(span).is_err()) {
                return Err(format!(
                    "[lifetime] {key} = {days}: a {} certificate may live {} to {}",
                    kind.name(),
                    kind.min(),
                    kind.max()
                ));
            }
        }
        Ok(())
    }
}

/// `[crl]`: where the CRL is published and how long each one is valid.
///
/// ```toml
/// [crl]
/// publish_dir = "/var/lib/shiqi-ca-pub"   # readable by mysqld and the brokers; unset = none
/// # distribution_point = "file:///var/lib/shiqi-ca-pub/crl.der"   # default from publish_dir
/// validity_days = 30
/// refresh_before_days = 10
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CrlConfig {
    /// A folder the servers can read (MariaDB's `ssl_crl`, the brokers' CRL distribution
    /// point): every new `crl.pem` / `crl.der` is also copied there (0644). Unset: the CRL stays
    /// in the state directory only.
    pub(crate) publish_dir: Option<PathBuf>,
    /// The CRL distribution point written into every certificate issued from now on. Default:
    /// `file://<publish_dir>/crl.der` when `publish_dir` is set; `""` writes none. Keep it
    /// stable: certificates issued earlier keep the URL they were given.
    pub(crate) distribution_point: Option<String>,
    /// How long each CRL is valid (`nextUpdate - thisUpdate`), in days.
    pub(crate) validity_days: u32,
    /// A CRL is regenerated (by `sign`, `revoke` and `crl --refresh`) once fewer than this many
    /// days are left before its `nextUpdate`.
    pub(crate) refresh_before_days: u32,
}

impl Default for CrlConfig {
    fn default() -> Self {
        Self {
            publish_dir: None,
            distribution_point: None,
            validity_days: 30,
            refresh_before_days: 10,
        }
    }
}

impl CrlConfig {
    /// The distribution point URL to write into certificates, if any.
    pub(crate) fn distribution_point(&self) -> Option<String> {
        match (&self.distribution_point, &self.publish_dir) {
            (Some(url), _) if url.trim().is_empty() => None,
            (Some(url), _) => Some(url.trim().to_owned()),
            (None, Some(dir)) => Some(format!("file://{}", dir.join("crl.der").display())),
            (None, None) => None,
        }
    }

    /// [`CrlConfig::validity_days`] as a duration.
    pub(crate) fn validity(&self) -> time::Duration {
        time::Duration::days(i64::from(self.validity_days))
    }

    /// [`CrlConfig::refresh_before_days`] as a duration.
    pub(crate) fn refresh_before(&self) -> time::Duration {
        time::Duration::days(i64::from(self.refresh_before_days))
    }

    fn check(&self) -> Result<(), String> {
        if self.validity_days == 0 {
            return Err("crl.validity_days must be at least 1".to_owned());
        }
        if self.refresh_before_days >= self.validity_days {
            return Err(format!(
                "crl.refresh_before_days ({}) must be less than crl.validity_days ({}), or every \
                 run would regenerate the CRL",
                self.refresh_before_days, self.validity_days
            ));
        }
        if let Some(dir) = &self.publish_dir
            && (!dir.is_absolute() || dir.to_str().is_none_or(|d| d.chars().any(char::is_control)))
        {
            return Err(format!(
                "crl.publish_dir `{}` must be an absolute path",
                dir.display()
            ));
        }
        if let Some(url) = self.distribution_point()
            && (url.chars().any(|c| c.is_whitespace() || c.is_control())
                || !["file://", "http://", "ldap://"]
                    .iter()
                    .any(|scheme| url.starts_with(scheme)))
        {
            return Err(format!(
                "crl.distribution_point `{url}` must be a `file://`, `http://` or `ldap://` URL \
                 without spaces"
            ));
        }
        Ok(())
    }
}

impl Config {
    /// Reads the config; a missing file at the default path means all defaults, a missing file
    /// named explicitly is an error.
    pub(crate) fn load(path: &Path, explicit: bool) -> Result<Self, AgentError> {
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
        let mut config: Self = toml::from_str(&text).map_err(|e| AgentError::ConfigParse {
            path: path.to_owned(),
            why: e.message().to_owned(),
        })?;
        // `admin_socket = ""` means "no socket", as an empty `host` means "no MySQL".
        if config
            .mysql
            .admin_socket
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            config.mysql.admin_socket = None;
        }
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), AgentError> {
        let bad = |why: String| AgentError::ConfigParse {
            path: path.to_owned(),
            why,
        };
        self.lifetime.validate().map_err(bad)?;
        for grant in &self.mysql.grants {
            crate::sql::check_grant(grant).map_err(|why| bad(format!("grant `{grant}`: {why}")))?;
        }
        crate::sql::check_account_part(&self.mysql.user_host)
            .map_err(|why| bad(format!("mysql.user_host: {why}")))?;
        // These reach every laptop's config files through `sign` and `brokers`: refuse here
        // what the laptop would refuse there.
        self.mysql
            .user_host
            .parse::<shiqi_ca::Host>()
            .map_err(|e| bad(format!("[mysql] user_host: {e}")))?;
        if !self.mysql.host.is_empty() {
            self.mysql
                .host
                .parse::<shiqi_ca::Host>()
                .map_err(|e| bad(format!("[mysql] host: {e}")))?;
            shiqi_ca::Port::try_from(self.mysql.port)
                .map_err(|e| bad(format!("[mysql] port: {e}")))?;
        }
        self.mysql.check_admin_path().map_err(bad)?;
        if !self.kafka.bootstrap.is_empty() {
            self.kafka
                .bootstrap
                .parse::<shiqi_ca::Bootstrap>()
                .map_err(|e| bad(format!("[kafka] bootstrap: {e}")))?;
        }
        self.crl.check().map_err(bad)?;
        if self.limits.certificates_per_name == 0 || self.limits.requests_per_minute == 0 {
            return Err(bad(
                "[limits] certificates_per_name and requests_per_minute must be at least 1"
                    .to_owned(),
            ));
        }
        self.access.check().map_err(bad)?;
        for (i, grant) in self.kafka.grants.iter().enumerate() {
            grant
                .check()
                .map_err(|why| bad(format!("kafka.grants[{i}]: {why}")))?;
        }
        Ok(())
    }

    /// Names that may never be signed for: the agent's identities and the configured reserved
    /// names.
    pub(crate) fn reserved_names(&self) -> Vec<&str> {
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

    fn validated(text: &str) -> Result<Config, String> {
        let config: Config = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        config
            .validate(Path::new("agent.toml"))
            .map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn enrolled_keys_may_forward_to_the_services_only() -> Result<(), String> {
        // Default: the MySQL address, the bootstrap servers and every advertised broker, each
        // exactly once and with no wildcard port.
        let c =
            validated("[kafka]\nbootstrap = \"localhost:19094,10.0.0.5:9092,localhost:29094\"\n")?;
        let brokers = [
            ("localhost".to_owned(), 19094),
            ("localhost".to_owned(), 39094),
            ("::1".to_owned(), 9093),
        ];
        assert_eq!(
            c.permit_open(&brokers),
            [
                "127.0.0.1:3306",
                "localhost:19094",
                "10.0.0.5:9092",
                "localhost:29094",
                "localhost:39094",
                "[::1]:9093"
            ]
        );
        assert!(c.permit_open_asks_kafka());
        let c = validated("[mysql]\nhost = \"\"\n[kafka]\nbootstrap = \"[::1]:9092\"\n")?;
        assert_eq!(c.permit_open(&[]), ["[::1]:9092"]);
        let c = validated("[access]\npermit_open = [\"db.internal:3306\"]\n")?;
        assert_eq!(c.permit_open(&brokers), ["db.internal:3306"]);
        assert!(!c.permit_open_asks_kafka());
        // Nothing that could leave the option's quotes, no bare hosts, no relative file.
        for bad in [
            "[access]\npermit_open = [\"a\\\",command=\\\"x:1\"]\n",
            "[access]\npermit_open = [\"localhost\"]\n",
            "[access]\npermit_open = [\"localhost:0\"]\n",
            "[access]\nauthorized_keys = \"keys\"\n",
        ] {
            let err = validated(bad).expect_err(bad);
            assert!(err.contains("access."), "{bad}: {err}");
        }
        Ok(())
    }

    #[test]
    fn the_mysql_admin_logs_in_by_socket_or_verified_tls_only() -> Result<(), String> {
        let c = validated("")?;
        assert_eq!(
            c.mysql.admin_socket.as_deref(),
            Some(Path::new(DEFAULT_MYSQL_SOCKET))
        );
        let err = validated("[mysql]\nadmin_socket = \"\"\n").expect_err("plain TCP");
        assert!(
            err.contains("plain TCP to 127.0.0.1:3306") && err.contains("admin_tls_ca"),
            "{err}"
        );
        // Checked at load through `Config::load`, which turns `""` into no socket.
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let file = dir.path().join("agent.toml");
        crate::fsutil::write_private(&file, b"[mysql]\nadmin_socket = \"\"\n")
            .map_err(|e| e.to_string())?;
        assert!(Config::load(&file, true).is_err());
        crate::fsutil::write_private(
            &file,
            b"[mysql]\nadmin_socket = \"\"\nadmin_tls_ca = \"ca.crt\"\n",
        )
        .map_err(|e| e.to_string())?;
        let c = Config::load(&file, true).map_err(|e| e.to_string())?;
        assert!(c.mysql.admin_socket.is_none());
        assert!(validated("[mysql]\nadmin_socket = \"run/x.sock\"\n").is_err());
        // No MySQL at all: nothing to log in to.
        assert!(validated("[mysql]\nhost = \"\"\n").is_ok());
        Ok(())
    }

    #[test]
    fn refuses_lifetimes_beyond_their_caps() {
        for (text, key) in [
            ("[lifetime]\nclient_days = 399\n", "client_days = 399"),
            (
                "[lifetime]\nserver_days = 4000000000\n",
                "server_days = 4000000000",
            ),
            ("[lifetime]\nca_days = 7306\n", "ca_days = 7306"),
            ("[lifetime]\nclient_days = 0\n", "client_days = 0"),
            ("[lifetime]\nclient = \"4m\"\n", "client = 4m"),
            ("[lifetime]\nclient = \"1w\"\n", "invalid lifetime `1w`"),
            (
                "[lifetime.client_max]\nuser = \"399d\"\n",
                "client_max.user = 399d",
            ),
            (
                "[lifetime]\nclient = \"1h\"\nclient_days = 1\n",
                "both client and client_days",
            ),
        ] {
            let err = validated(text).expect_err(text);
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn a_client_gets_what_it_asks_up_to_its_roles_maximum() {
        let span = |s: &str| s.parse::<Span>().expect(s);
        let c = validated("[lifetime]\nclient = \"1h\"\n[lifetime.client_max]\nuser = \"1d\"\n")
            .expect("config");
        let l = &c.lifetime;
        assert_eq!(l.client_for(Some(Role::User), None), (span("1h"), None));
        assert_eq!(
            l.client_for(Some(Role::User), Some(span("10m"))),
            (span("10m"), None)
        );
        assert_eq!(
            l.client_for(Some(Role::User), Some(span("30d"))),
            (span("1d"), Some(span("1d")))
        );
        assert_eq!(
            l.client_for(Some(Role::Admin), Some(span("30d"))),
            (span("30d"), None)
        );
        assert_eq!(l.client_for(None, Some(span("398d"))), (span("398d"), None));
        // The old spelling is still read.
        let old = validated("[lifetime]\nclient_days = 7\n").expect("config");
        assert_eq!(old.lifetime.client(), span("7d"));
        assert_eq!(Config::default().lifetime.client(), span("30d"));
    }

    #[test]
    fn refuses_hosts_that_would_reach_laptop_configs() {
        for (text, key) in [
            (
                "[mysql]\nhost = \"localhost\\nMatch exec x\"\n",
                "[mysql] host",
            ),
            ("[mysql]\nhost = \"a b\"\n", "[mysql] host"),
            ("[mysql]\nport = 0\n", "[mysql] port"),
            ("[mysql]\nuser_host = \"%\"\n", "user_host"),
            (
                "[kafka]\nbootstrap = \"localhost:19094,\\\"x\"\n",
                "[kafka] bootstrap",
            ),
            ("[kafka]\nbootstrap = \"localhost\"\n", "[kafka] bootstrap"),
        ] {
            let err = validated(text).expect_err(text);
            assert!(err.contains(key), "{text}: {err}");
        }
        assert!(validated("[kafka]\nbootstrap = \"a:1,b:2\"\n").is_ok());
    }

    #[test]
    fn default_kafka_grants_cover_producing_and_consuming_under_app() {
        let c = validated("").expect("defaults are valid");
        let name: ProfileName = "saige".parse().expect("valid name");
        let acls: Vec<String> = c
            .kafka
            .grants
            .iter()
            .flat_map(|g| g.bindings(&name))
            .map(|b| b.to_string())
            .collect();
        assert_eq!(
            acls,
            [
                "User:saige allow read on prefixed topic `app.` from *",
                "User:saige allow write on prefixed topic `app.` from *",
                "User:saige allow describe on prefixed topic `app.` from *",
                "User:saige allow create on prefixed topic `app.` from *",
                "User:saige allow describe-configs on prefixed topic `app.` from *",
                "User:saige allow read on prefixed group `app.` from *",
                "User:saige allow describe on prefixed group `app.` from *",
            ]
        );
    }

    #[test]
    fn kafka_grants_parse_replace_the_defaults_and_expand_the_name() {
        let c = validated(
            r#"
            [[kafka.grants]]
            resource = "topic"
            pattern = "prefixed"
            name = "u.{name}."
            operations = ["all"]

            [[kafka.grants]]
            resource = "cluster"
            name = "kafka-cluster"
            operations = ["idempotent-write", "describe-configs"]

            [[kafka.grants]]
            resource = "transactional-id"
            pattern = "prefixed"
            name = "{name}."
            operations = ["write", "describe"]
            "#,
        )
        .expect("valid grants");
        assert_eq!(c.kafka.grants.len(), 3);
        assert_eq!(
            c.kafka.grants[1].pattern,
            PatternType::Literal,
            "literal is the default"
        );
        let name: ProfileName = "bo".parse().expect("valid name");
        let topic = c.kafka.grants[0].bindings(&name);
        assert_eq!(topic.len(), 1);
        assert_eq!(topic[0].name, "u.bo.");
        assert_eq!(topic[0].principal, "User:bo");
        assert_eq!(c.kafka.grants[2].bindings(&name)[0].name, "bo.");
        // An empty list is allowed: `kafka-user` then grants nothing.
        assert!(
            validated("[kafka]\ngrants = []\n")
                .expect("valid")
                .kafka
                .grants
                .is_empty()
        );
    }

    #[test]
    fn bad_kafka_grants_are_refused_at_load() {
        let grant = |body: &str| validated(&format!("[[kafka.grants]]\n{body}\n"));
        let refused = |body: &str| grant(body).expect_err(body);
        // Unknown keys, types, patterns and operations.
        assert!(
            refused("resource = \"topic\"\nname = \"a\"\noperations = [\"read\"]\nhost = \"x\"")
                .contains("unknown field")
        );
        assert!(
            refused("resource = \"user\"\nname = \"a\"\noperations = [\"read\"]")
                .contains("unknown variant")
        );
        assert!(
            refused(
                "resource = \"topic\"\npattern = \"match\"\nname = \"a\"\noperations = [\"read\"]"
            )
            .contains("unknown variant")
        );
        assert!(
            refused("resource = \"topic\"\nname = \"a\"\noperations = [\"any\"]")
                .contains("unknown variant")
        );
        assert!(
            refused("resource = \"topic\"\nname = \"a\"\noperations = [\"unknown\"]")
                .contains("unknown variant")
        );
        // Operations that do not apply to the resource, or none.
        let e = refused("resource = \"group\"\nname = \"app.\"\noperations = [\"write\"]");
        assert!(
            e.contains("kafka.grants[0]") && e.contains("`write` does not apply to a group"),
            "{e}"
        );
        assert!(
            refused("resource = \"topic\"\nname = \"app.\"\noperations = []").contains("empty")
        );
        // Names Kafka would refuse or that would never match.
        assert!(
            refused("resource = \"topic\"\nname = \"\"\noperations = [\"read\"]").contains("empty")
        );
        assert!(
            refused("resource = \"topic\"\nname = \"app/x\"\noperations = [\"read\"]")
                .contains("topic names")
        );
        assert!(
            refused("resource = \"topic\"\nname = \"{user}.\"\noperations = [\"read\"]")
                .contains("placeholder")
        );
        assert!(
            refused("resource = \"group\"\nname = \"a\\u0000b\"\noperations = [\"read\"]")
                .contains("control")
        );
        assert!(
            refused("resource = \"cluster\"\nname = \"mine\"\noperations = [\"describe\"]")
                .contains("kafka-cluster")
        );
        assert!(refused("resource = \"cluster\"\npattern = \"prefixed\"\nname = \"kafka-cluster\"\noperations = [\"describe\"]").contains("literal"));
        // A prefix that runs on past the name (`bo-` would cover `bo-x-…`) is refused; a
        // literal name may end anywhere.
        for runs_on in ["{name}-", "u.{name}", "{name}_x.", "{name}.{name}"] {
            let e = refused(&format!(
                "resource = \"group\"\npattern = \"prefixed\"\nname = \"{runs_on}\"\noperations = [\"read\"]"
            ));
            assert!(e.contains("right after `{name}`"), "{runs_on}: {e}");
        }
        assert!(
            grant("resource = \"group\"\nname = \"{name}-g\"\noperations = [\"read\"]").is_ok()
        );
        assert!(
            grant("resource = \"group\"\npattern = \"prefixed\"\nname = \"t.{name}.x.\"\noperations = [\"read\"]").is_ok()
        );
        // The literal wildcard is a valid topic name for ACLs.
        assert!(grant("resource = \"topic\"\nname = \"*\"\noperations = [\"describe\"]").is_ok());
    }

    #[test]
    fn crl_section_defaults_derives_the_distribution_point_and_checks_margins() {
        let c = validated("").expect("defaults");
        assert_eq!(c.crl.validity_days, 30);
        assert_eq!(c.crl.refresh_before_days, 10);
        assert_eq!(c.crl.distribution_point(), None);

        let c = validated("[crl]\npublish_dir = \"/srv/shiqi-pub\"\n").expect("valid");
        assert_eq!(
            c.crl.distribution_point().as_deref(),
            Some("file:///srv/shiqi-pub/crl.der")
        );
        let c = validated(
            "[crl]\npublish_dir = \"/srv/p\"\ndistribution_point = \"http://ca.example/crl.der\"\n",
        )
        .expect("valid");
        assert_eq!(
            c.crl.distribution_point().as_deref(),
            Some("http://ca.example/crl.der")
        );
        let c = validated("[crl]\npublish_dir = \"/srv/p\"\ndistribution_point = \"\"\n")
            .expect("valid");
        assert_eq!(c.crl.distribution_point(), None);

        for bad in [
            "[crl]\nvalidity_days = 0\n",
            "[crl]\nvalidity_days = 10\nrefresh_before_days = 10\n",
            "[crl]\npublish_dir = \"relative/dir\"\n",
            "[crl]\ndistribution_point = \"ftp://x/crl\"\n",
            "[crl]\ndistribution_point = \"file:///a b/crl.der\"\n",
            "[crl]\nrefresh = 3\n",
        ] {
            assert!(validated(bad).is_err(), "{bad}");
        }
    }
}
