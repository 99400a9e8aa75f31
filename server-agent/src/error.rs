//! The agent's error type. Messages name the fact; [`AgentError::hint`] names the fix.

use std::path::PathBuf;

/// What can go wrong in the agent outside of X.509 (which is `shiqi_ca::Error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The config file could not be read.
    #[error("cannot read config `{}`", path.display())]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid.
    #[error("invalid config `{}`: {why}", path.display())]
    ConfigParse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// `init` found a CA already there.
    #[error("a CA already exists in `{}`", dir.display())]
    CaExists {
        /// The state directory.
        dir: PathBuf,
    },
    /// No CA in the state directory.
    #[error("no CA in `{}`", dir.display())]
    NoCa {
        /// The state directory.
        dir: PathBuf,
    },
    /// A file in the state directory could not be read or written. The OS error is part of the
    /// message, not a `source`, so the report shows it once.
    #[error("`{}`: {why}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        why: std::io::Error,
    },
    /// install found a path it must not follow or change: a link, or a folder or file another
    /// account can change (`crate::install`'s folder handles).
    #[error("`{}` is {why}: install (as root) changes nothing through what another account can change", path.display())]
    Planted {
        /// The path.
        path: PathBuf,
        /// What it is (a symbolic link, owned by `kafka`, writable by every account).
        why: String,
        /// What to do about it.
        fix: String,
    },
    /// stdin could not be read.
    #[error("cannot read the CSR from stdin")]
    Stdin(#[source] std::io::Error),
    /// A reserved name (an agent identity, a broker, a system account).
    #[error("`{name}` is reserved for the server's own identities")]
    ReservedName {
        /// The name.
        name: String,
    },
    /// A MySQL account exists that the agent did not create.
    #[error("MySQL account `{user}` exists and was not created by shiqi-ca-agent")]
    ForeignAccount {
        /// The user name.
        user: String,
    },
    /// No valid certificate was issued for a name.
    #[error("no valid client certificate for `{name}` in the inventory")]
    NoCertificate {
        /// The name.
        name: String,
    },
    /// MySQL is not configured.
    #[error("MySQL is not configured (`[mysql] host` is empty)")]
    MysqlDisabled,
    /// Talking to MySQL failed.
    #[error("MySQL at `{address}`: {why}")]
    Mysql {
        /// Where.
        address: String,
        /// The server's or driver's message.
        why: String,
    },
    /// An enrolled key asked for something its role does not allow.
    #[error("key {key} ({name}, role {role}) may not ask for {what}")]
    Forbidden {
        /// The key's fingerprint (or the local account).
        key: String,
        /// The name it is enrolled as.
        name: String,
        /// Its role.
        role: shiqi_ca::inventory::access::Role,
        /// What it asked for.
        what: String,
    },
    /// `serve` was started for a key the inventory does not know (removed, or a line copied by
    /// hand).
    #[error("SSH key {key} is not enrolled on this server")]
    NotEnrolled {
        /// Its fingerprint.
        key: String,
    },
    /// A key's session asked for a shell, or sent something that is not one agent request.
    #[error("{why}")]
    Request {
        /// What is wrong with it.
        why: String,
    },
    /// A command run on the server itself (install, backup, check, units) that cannot go on:
    /// a wrong value or a missing prerequisite. The message names the fix.
    #[error("{why}")]
    Local {
        /// What is wrong, and what to do.
        why: String,
    },
    /// An SSH public key that cannot be enrolled.
    #[error("`{source_name}` is not an OpenSSH public key: {why}")]
    PublicKey {
        /// Where it came from (a file, or stdin).
        source_name: String,
        /// Why.
        why: String,
    },
    /// Kafka is not configured.
    #[error("Kafka is not configured (`[kafka] bootstrap` is empty)")]
    KafkaDisabled,
    /// Talking to Kafka failed.
    #[error("Kafka at `{bootstrap}`: {why}")]
    Kafka {
        /// The bootstrap address.
        bootstrap: String,
        /// What went wrong: the connection, the TLS handshake or the reply.
        why: String,
    },
    /// A Kafka ACL could not be built (a NUL byte in a name, an unknown type); nothing was sent.
    #[error("invalid Kafka ACL: {why}")]
    InvalidAcl {
        /// What is wrong.
        why: String,
    },
    /// An ACL request failed or the cluster refused (part of) it.
    #[error("Kafka {request} failed: {why} ({code})")]
    KafkaAcl {
        /// `CreateAcls`, `DescribeAcls` or `DeleteAcls`.
        request: &'static str,
        /// Kafka's error name, e.g. `CLUSTER_AUTHORIZATION_FAILED`, or `_TIMED_OUT` / `_TRANSPORT`.
        code: String,
        /// The broker's message, or what failed on the way.
        why: String,
    },
    /// `sign --replaces SERIAL` named a certificate that is not the name's.
    #[error("cannot replace certificate `{serial}`: {why}")]
    BadReplaces {
        /// The serial given.
        serial: String,
        /// Why it cannot be replaced.
        why: String,
    },
    /// `sign --replaces SERIAL` named a certificate that is revoked already.
    #[error("cannot replace certificate `{serial}` of `{name}`: it is revoked already")]
    ReplacesRevoked {
        /// The serial given.
        serial: String,
        /// The name.
        name: String,
    },
    /// `revoke` recorded the revocation and wrote the CRL, but could not make it effective
    /// everywhere.
    #[error("revoked `{name}` (listed in CRL #{crl_number}), but not everywhere: {why}")]
    RevokeIncomplete {
        /// The name.
        name: String,
        /// The CRL that lists it.
        crl_number: u64,
        /// What failed.
        why: String,
    },
    /// Another request for the same name held its lock too long.
    #[error("another request for `{name}` has been running for {secs} s")]
    Busy {
        /// The name.
        name: String,
        /// How long this one waited.
        secs: u64,
    },
    /// The name holds as many live certificates as `[limits]` allows.
    #[error(
        "`{name}` already has {count} live certificates (not revoked, not expired); the limit is {cap}"
    )]
    TooManyCertificates {
        /// The name.
        name: String,
        /// How many it has.
        count: u64,
        /// `[limits] certificates_per_name`.
        cap: u32,
    },
    /// The name holds as many revoked, unexpired certificates as the CRL may carry for it.
    #[error(
        "`{name}` already has {count} revoked certificates that have not expired; the CRL \
         carries at most {max} for one name"
    )]
    TooManyRevoked {
        /// The name.
        name: String,
        /// How many revoked, unexpired ones it has.
        count: u64,
        /// Five times `[limits] certificates_per_name`.
        max: u64,
    },
    /// A key sent more requests in the last minute than `[limits]` allows.
    #[error("key {key} sent more than {per_minute} requests in the last minute")]
    RateLimited {
        /// Its fingerprint.
        key: String,
        /// `[limits] requests_per_minute`.
        per_minute: u32,
    },
    /// sshd would let the agent's enrolled keys do more than forward to the services.
    #[error("sshd lets `{account}` keys {why}")]
    SshdUnsafe {
        /// The agent's account.
        account: String,
        /// What is wrong, setting by setting.
        why: String,
        /// The block that fixes it.
        block: String,
    },
    /// `check` found problems (each printed with its fix).
    #[error("{failed} check(s) failed")]
    CheckFailed {
        /// How many.
        failed: usize,
    },
    /// A command-line value that does not parse. The reason is part of the message, not a
    /// `source`, so the report shows it once.
    #[error("{flag}: {why}")]
    Argument {
        /// The flag, e.g. `--san`.
        flag: &'static str,
        /// Why.
        why: shiqi_ca::Error,
    },
    /// X.509, the inventory or a value's validation (`shiqi-ca`).
    #[error(transparent)]
    Ca(#[from] shiqi_ca::Error),
    /// The async runtime could not start (out of file descriptors or memory).
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// A template failed to render (a bug in the templates).
    #[error("cannot render template `{name}`: {why}")]
    Template {
        /// The template.
        name: &'static str,
        /// minijinja's message.
        why: String,
    },
}

impl AgentError {
    /// One next step for the user.
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            Self::Argument { why: source, .. } | Self::Ca(source) => return source.hint(),
            Self::Planted { fix, .. } => fix.clone(),
            Self::CaExists { .. } => {
                "the existing CA was left untouched; use another `--state-dir` for a new one".into()
            }
            Self::NoCa { dir } => format!(
                "run `shiqi-ca-agent --state-dir {} init` first",
                dir.display()
            ),
            Self::ReservedName { .. } => "choose a personal name such as `saige`".into(),
            Self::ForeignAccount { .. } => {
                "pick another name; the agent never takes over accounts it did not make".into()
            }
            Self::NoCertificate { name } => format!(
                "sign a CSR first: `shiqi-connect setup {name}` (or `shiqi-ca-agent sign --name {name}`)"
            ),
            Self::Mysql { .. } => {
                "check that mysqld runs and that `[mysql]` in agent.toml points at it".into()
            }
            Self::Kafka { .. } => {
                "check that the brokers run and that `[kafka] bootstrap` in agent.toml is right"
                    .into()
            }
            Self::KafkaAcl { code, .. } if code == "CLUSTER_AUTHORIZATION_FAILED" => {
                "the agent's admin identity (`[kafka] admin_name`, `User:shiqi-admin` by default) \
                 must be listed in the brokers' `super.users`"
                    .into()
            }
            Self::KafkaAcl { code, .. } if code == "SECURITY_DISABLED" => {
                "the brokers run without an authorizer: set `authorizer.class.name` \
                 (org.apache.kafka.metadata.authorizer.StandardAuthorizer) on every broker"
                    .into()
            }
            Self::KafkaAcl { .. } => {
                "check that the brokers run and that `[kafka] bootstrap` in agent.toml is right"
                    .into()
            }
            Self::BadReplaces { .. } => {
                "the profile was made against another CA or name; run `shiqi-connect setup NAME \
                 --force` to start over"
                    .into()
            }
            Self::ReplacesRevoked { name, .. } => format!(
                "another run replaced it (`shiqi-connect status {name}` shows the profile's \
                 serial now) or an admin revoked it; if so, `shiqi-connect setup {name} --force` \
                 starts over"
            ),
            Self::RevokeIncomplete { name, .. } => format!(
                "fix what failed, then run `shiqi-ca-agent revoke --name {name}` again: every step \
                 is repeated safely"
            ),
            Self::Busy { .. } => "try again in a minute; `shiqi-ca-agent list` shows the name's \
                                  certificates"
                .into(),
            Self::TooManyCertificates { name, .. } => format!(
                "revoke the ones no longer in use (`shiqi-ca-agent list` shows `{name}`'s), or an \
                 admin can raise `[limits] certificates_per_name` in agent.toml"
            ),
            Self::TooManyRevoked { .. } => {
                "each drops out when it expires; until then an admin can sign (admins are not \
                 capped), or raise `[limits] certificates_per_name` in agent.toml"
                    .into()
            }
            Self::RateLimited { .. } => {
                "wait a minute; an admin can raise `[limits] requests_per_minute` in agent.toml"
                    .into()
            }
            Self::SshdUnsafe { block, .. } => format!(
                "add this to sshd_config (or a file in /etc/ssh/sshd_config.d/), run `sshd -t`, \
                 reload sshd, then enroll again:\n{block}"
            ),
            Self::CheckFailed { .. } => {
                "each FAIL line says its fix; run `check` again after applying them".into()
            }
            Self::ConfigParse { .. } => {
                "every key is documented in docs/server.md (the agent's config)".into()
            }
            Self::Forbidden { role, .. } if *role == shiqi_ca::inventory::access::Role::User => {
                "a `user` key may sign, rotate and renew only its own name and read `brokers`; \
                 ask an admin of this CA"
                    .into()
            }
            Self::Forbidden { .. } => {
                "requests run one at a time, each as `shiqi-ca-agent COMMAND …`".into()
            }
            Self::NotEnrolled { key } => format!(
                "an admin enrolls it on the server: `shiqi-ca-agent enroll NAME --ssh-key KEY.pub \
                 --role user` (the key whose fingerprint is {key})"
            ),
            Self::Request { .. } => {
                "this account answers `shiqi-ca-agent` requests only (as `shiqi-connect` sends \
                 them); there is no shell"
                    .into()
            }
            Self::PublicKey { .. } => {
                "pass the `.pub` file (`ssh-keygen -y -f KEY > KEY.pub` makes one), or one line \
                 such as `ssh-ed25519 AAAA… bob@laptop` on stdin with `--ssh-key -`"
                    .into()
            }
            _ => return None,
        })
    }
}
