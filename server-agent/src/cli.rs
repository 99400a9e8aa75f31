//! The command line (clap derive only). Each doc comment is the help text.
// The doc comments below are `--help` text, which clap prints as written: `[default: …]` and
// `<state-dir>` are for people, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use shiqi_ca::protocol;

/// `--version`: the version, the commit built from and the target.
pub const VERSION: &str = shiqi_ca::version!();

/// The shiqi CA agent: signs client CSRs, provisions MySQL users, reports the Kafka cluster.
#[derive(Debug, Parser)]
#[command(name = "shiqi-ca-agent", version = VERSION, about)]
pub struct Cli {
    /// Global options.
    #[command(flatten)]
    pub global: Global,
    /// Log more to stderr (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The CA's state directory (key, certificate, inventory, CRL, audit log).
    #[arg(
        long,
        global = true,
        env = "SHIQI_CA_DIR",
        default_value = "/var/lib/shiqi-ca"
    )]
    pub state_dir: PathBuf,
    /// The agent's TOML config [default: <state-dir>/agent.toml; missing = all defaults].
    #[arg(long, global = true, env = "SHIQI_CA_CONFIG")]
    pub config: Option<PathBuf>,
}

/// The agent's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the private CA in the state directory (refuses to overwrite one).
    Init(InitArgs),
    /// Issue a server certificate and write what that server needs (keystores, config fragment).
    ServerCert(ServerCertArgs),
    /// Sign one PEM CSR read from stdin; answer with one JSON document on stdout.
    Sign(SignArgs),
    /// Create or update the certificate-only MySQL user for NAME (idempotent).
    MysqlUser(MysqlUserArgs),
    /// `sign`, `kafka-user` and `mysql-user` for NAME in one request (what `shiqi-connect setup`
    /// sends): the CSR on stdin, one JSON document with all three answers on stdout.
    Provision(ProvisionArgs),
    /// Give Kafka principal `User:NAME` the ACLs of `[kafka] grants` (idempotent), or delete
    /// all of its ACLs with `--revoke`.
    KafkaUser(KafkaUserArgs),
    /// List every Kafka broker's advertised host:port, from the cluster's metadata.
    Brokers(BrokersArgs),
    /// Print this agent's build and the protocol it speaks with `shiqi-connect` (what the
    /// laptop's doctor asks, to tell a laptop and an agent that need the same release).
    Version(VersionArgs),
    /// List the issued certificates.
    List(ListArgs),
    /// Revoke a certificate (by serial) or every valid client certificate of a name, publish the
    /// new CRL, and make it effective on MySQL and Kafka.
    Revoke(RevokeArgs),
    /// Write a new CRL now, or with `--refresh` only when it is due (for cron or a systemd
    /// timer: "nothing to do" exits 0).
    Crl(CrlArgs),
    /// Enroll a person's SSH key with a name and a role and install its `authorized_keys` line;
    /// or `--list`, `--remove FINGERPRINT`, `--sync`.
    Enroll(EnrollArgs),
    /// Set up this server, as root: the agent's account and CA, the sshd block for it, MariaDB's
    /// TLS and the agent's admin account, the brokers' certificate and settings, a daily CRL
    /// timer, the first admin. Changes only what differs; `--dry-run` changes nothing.
    Install(Box<InstallArgs>),
    /// The server's doctor: try each broker and MySQL with a throwaway certificate from this CA
    /// (refused without one, accepted with it, denied without ACLs, its CN as principal, refused
    /// once revoked, with the seconds that took), and check MariaDB's TLS settings, the sshd
    /// block, the state directory and the CRL. One line per finding with the fix.
    Check(CheckArgs),
    /// Lift the block a `revoke --name NAME` put on NAME, so that it can be signed again.
    Unblock(UnblockArgs),
    /// Write the CA (key, certificate, inventory, agent.toml) to one file encrypted to a
    /// passphrase (age, scrypt), for `restore` on a new server. Local only.
    Backup(BackupArgs),
    /// Put a backup's CA into an empty state directory (refused where a CA exists unless
    /// `--force`); the CRL number skips ahead. Local only.
    Restore(RestoreArgs),
    /// Answer one request from `SSH_ORIGINAL_COMMAND` for the enrolled key KEY: what sshd runs
    /// through the forced command that `enroll` installs. Not for people.
    Serve(ServeArgs),
    /// Print a completion script for a shell (bash, zsh, fish, powershell, elvish). Needs no
    /// state directory; not a request.
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per command into DIR
    /// (`shiqi-ca-agent.1`, `shiqi-ca-agent-sign.1`, …). Needs no state directory; not a request.
    Man(ManArgs),
}

/// `backup --out FILE`.
#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// Where to write the encrypted backup (replaced atomically, mode 0600).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The passphrase's file (its first line), or `-` for stdin; never an argument.
    #[arg(long, value_name = "FILE")]
    pub passphrase_file: PathBuf,
}

/// `restore FILE`.
#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    /// The backup `backup --out` wrote.
    pub file: PathBuf,
    /// The passphrase's file (its first line), or `-` for stdin.
    #[arg(long, value_name = "FILE")]
    pub passphrase_file: PathBuf,
    /// Restore over a CA that is there (moved aside into `before-restore-TIME/` first).
    #[arg(long)]
    pub force: bool,
}

/// `completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `man [DIR]`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page into this folder instead of printing the main one.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `enroll`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("action").required(true)
    .args(["name", "list", "remove", "sync"]))]
pub struct EnrollArgs {
    /// The name the key acts as (its profile name; a `user` may only ask for this name).
    #[arg(requires_all = ["who", "role"])]
    pub name: Option<String>,
    /// The person's public key: an OpenSSH `.pub` file, or `-` for one line on stdin.
    #[arg(long, value_name = "FILE", requires = "name", group = "who")]
    pub ssh_key: Option<PathBuf>,
    /// Instead of a key: a principal of user certificates signed by an SSH CA that sshd trusts
    /// (`TrustedUserCAKeys`), installed in `authorized_principals` (sshd's
    /// `AuthorizedPrincipalsFile` for the agent's account).
    #[arg(long, value_name = "PRINCIPAL", requires = "name", group = "who")]
    pub ssh_principal: Option<String>,
    /// `user`: only its own name; `admin`: everything.
    #[arg(long, requires = "name")]
    pub role: Option<String>,
    /// List the enrolled keys.
    #[arg(long)]
    pub list: bool,
    /// Remove the key with this fingerprint (`SHA256:…`, as `--list` shows it).
    #[arg(long, value_name = "FINGERPRINT")]
    pub remove: Option<String>,
    /// Rewrite `authorized_keys` from the enrolled keys (after changing `[access]` or moving
    /// the agent binary).
    #[arg(long)]
    pub sync: bool,
    /// With `--list`: JSON instead of a table.
    #[arg(long, requires = "list")]
    pub json: bool,
}

/// `unblock`.
#[derive(Debug, Args)]
pub struct UnblockArgs {
    /// The name.
    pub name: String,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The fingerprint of the key sshd authenticated (`SHA256:…`), written by `enroll`.
    #[arg(
        long,
        value_name = "FINGERPRINT",
        required_unless_present = "principal"
    )]
    pub key: Option<String>,
    /// The certificate principal sshd authenticated (its `AuthorizedPrincipalsFile` line),
    /// written by `enroll --ssh-principal`.
    #[arg(long, value_name = "PRINCIPAL", conflicts_with = "key")]
    pub principal: Option<String>,
}

/// A request as a person's key sends it: one command, none of the global options (the state
/// directory and config are the forced command's, never the caller's).
#[derive(Debug, Parser)]
#[command(
    name = "shiqi-ca-agent",
    version,
    about = "The shiqi CA agent (through SSH)"
)]
pub struct Request {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The CA key: `p256` (ECDSA P-256) or `rsa3072`.
    #[arg(long, default_value = "p256", env = "SHIQI_CA_KEY_TYPE")]
    pub key_type: String,
    /// The CA certificate's common name.
    #[arg(long, default_value = "shiqi-connect CA", env = "SHIQI_CA_COMMON_NAME")]
    pub common_name: String,
}

/// What a server certificate is for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ServerKind {
    /// A Kafka broker: PKCS#12 keystore + truststore + server.properties fragment.
    Kafka,
    /// MariaDB/MySQL: PEM files + a [mysqld] fragment.
    Mysql,
}

/// `server-cert`.
#[derive(Debug, Args)]
pub struct ServerCertArgs {
    /// The certificate's common name (e.g. `kafka-broker`, `mariadb`).
    pub name: String,
    /// The server kind.
    #[arg(long, value_enum)]
    pub kind: ServerKind,
    /// A DNS name or IP address clients verify (repeat for each; for a broker every advertised
    /// host name).
    #[arg(long = "san", required = true)]
    pub sans: Vec<String>,
    /// Where to write the files: created 0700 if missing; an existing folder keeps its mode.
    /// Keys and keystores are written 0600, certificates 0644.
    #[arg(long)]
    pub out: PathBuf,
    /// Validity in days [default: config `lifetime.server_days`].
    #[arg(long)]
    pub days: Option<u64>,
}

/// `sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The name the certificate is for; the CSR's subject must be exactly CN=NAME.
    #[arg(long)]
    pub name: String,
    /// Skip asking Kafka for its brokers (the answer then lists that fact as missing).
    #[arg(long)]
    pub no_kafka: bool,
    /// The serial of the certificate this one replaces (`shiqi-connect rotate`/`renew`): it must
    /// be a client certificate of the same name. Recorded in the audit log as a `rotate`.
    #[arg(long, value_name = "SERIAL")]
    pub replaces: Option<String>,
}

/// `provision`.
#[derive(Debug, Args)]
pub struct ProvisionArgs {
    /// The name the certificate, the Kafka principal and the MySQL user are for.
    #[arg(long)]
    pub name: String,
    /// Neither ask Kafka for its brokers nor grant ACLs.
    #[arg(long)]
    pub no_kafka: bool,
}

/// `mysql-user`.
#[derive(Debug, Args)]
pub struct MysqlUserArgs {
    /// The user (and certificate) name.
    pub name: String,
}

/// `kafka-user`.
#[derive(Debug, Args)]
pub struct KafkaUserArgs {
    /// The user (and certificate) name; the principal is `User:NAME`.
    pub name: String,
    /// Delete every ACL of `User:NAME` instead (no certificate needed), and list what was
    /// deleted.
    #[arg(long)]
    pub revoke: bool,
}

/// `brokers`.
#[derive(Debug, Args)]
pub struct BrokersArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Only the certificates of this name.
    #[arg(long)]
    pub name: Option<String>,
    /// Only `valid`, `revoked` or `expired` ones.
    #[arg(long)]
    pub status: Option<String>,
}

/// `revoke`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["serial", "name"]))]
pub struct RevokeArgs {
    /// The serial (hex, as `list` prints it) of the certificate to revoke.
    pub serial: Option<String>,
    /// Revoke every valid client certificate of NAME instead.
    #[arg(long)]
    pub name: Option<String>,
    /// With `--name`: only the certificates of NAME for this public key (the SHA-256 of its
    /// SubjectPublicKeyInfo, hex). Finding none is not an error: the laptop uses this to
    /// revoke a certificate whose setup never finished.
    #[arg(long, requires = "name")]
    pub key: Option<String>,
    /// Why: unspecified, key-compromise, ca-compromise, affiliation-changed, superseded,
    /// cessation-of-operation or certificate-hold.
    #[arg(long, default_value = "unspecified")]
    pub reason: String,
}

/// `install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// Print what would change and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The agent's system account (home = the state directory).
    #[arg(long, default_value = "shiqi-ca")]
    pub account: String,
    /// Take over `--account` although it exists and does not look like one install made (a
    /// person's, `www-data`): it then holds the CA key and runs the forced command.
    #[arg(long)]
    pub adopt_account: bool,
    /// Where the CRL is published for MariaDB and the brokers to read.
    #[arg(long, default_value = "/var/lib/shiqi-ca-pub")]
    pub publish_dir: PathBuf,
    /// The sshd config; the block goes into the `*.conf` folder it includes.
    #[arg(long, default_value = "/etc/ssh/sshd_config")]
    pub sshd_config: PathBuf,
    /// The sshd binary (`sshd -t`, `sshd -T`).
    #[arg(long, default_value = "/usr/sbin/sshd")]
    pub sshd: PathBuf,
    /// The brokers' bootstrap address as this server reaches them (HOST:PORT[,…]); without it
    /// Kafka is left out.
    #[arg(long, value_name = "HOST:PORT,…")]
    pub kafka_bootstrap: Option<String>,
    /// A name the brokers advertise (repeat; default: the bootstrap hosts), for their
    /// certificate's SANs.
    #[arg(long = "kafka-san", value_name = "HOST")]
    pub kafka_san: Vec<String>,
    /// Where the brokers' stores and settings go.
    #[arg(long, default_value = "/etc/kafka/shiqi-tls")]
    pub kafka_tls_dir: PathBuf,
    /// The account the brokers run as (their files are handed to it).
    #[arg(long, value_name = "USER")]
    pub kafka_owner: Option<String>,
    /// A broker's server.properties to apply the settings to (a backup is kept beside it).
    #[arg(long, value_name = "FILE")]
    pub kafka_properties: Option<PathBuf>,
    /// Leave MySQL/MariaDB out.
    #[arg(long)]
    pub no_mysql: bool,
    /// mysqld's Unix socket (the admin logs in there).
    #[arg(long, default_value = "/run/mysqld/mysqld.sock")]
    pub mysql_socket: PathBuf,
    /// mysqld's TCP port on 127.0.0.1 (where the tunnel reaches it).
    #[arg(long, default_value_t = 3306)]
    pub mysql_port: u16,
    /// The folder of `[mysqld]` drop-ins mysqld reads.
    #[arg(long, default_value = "/etc/mysql/mariadb.conf.d")]
    pub mysql_conf_dir: PathBuf,
    /// Where MariaDB's certificate and key go.
    #[arg(long, default_value = "/etc/mysql/shiqi-tls")]
    pub mysql_tls_dir: PathBuf,
    /// The account mysqld runs as.
    #[arg(long, default_value = "mysql")]
    pub mysql_owner: String,
    /// How `crl --refresh` runs daily.
    #[arg(long, value_enum, default_value_t = Timer::Auto)]
    pub timer: Timer,
    /// The first admin's name.
    #[arg(long, requires = "ssh_key")]
    pub admin: Option<String>,
    /// The first admin's OpenSSH public key file.
    #[arg(long, requires = "admin", value_name = "FILE")]
    pub ssh_key: Option<PathBuf>,
    /// Put the CA of this backup (`backup --out`) in place instead of making a new one, on a
    /// server that has none; enrolled keys' lines are written again once sshd is safe.
    #[arg(long, value_name = "FILE", requires = "passphrase_file")]
    pub restore: Option<PathBuf>,
    /// The backup's passphrase file (its first line), with `--restore`.
    #[arg(long, value_name = "FILE", requires = "restore")]
    pub passphrase_file: Option<PathBuf>,
}

/// How the daily `crl --refresh` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Timer {
    /// A systemd timer when systemd runs this machine, else a line telling you.
    Auto,
    /// A systemd timer.
    Systemd,
    /// None: a line tells you to schedule it.
    None,
}

/// `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
    /// Do not revoke the throwaway certificate and time the servers' refusal (quicker; the
    /// revocation checks are then skipped).
    #[arg(long)]
    pub no_revocation: bool,
}

/// `crl`.
#[derive(Debug, Args)]
pub struct CrlArgs {
    /// Only when it is due: missing, or fewer than `[crl] refresh_before_days` left.
    #[arg(long)]
    pub refresh: bool,
    /// Do not ask MySQL to re-read the CRL (the servers are about to start and read it anyway,
    /// e.g. `ExecStartPre=` before mariadbd).
    #[arg(long)]
    pub no_reload: bool,
    /// Print JSON instead of one line.
    #[arg(long)]
    pub json: bool,
}

/// The laptop's side of the contract: the commands it sends, as the shared
/// [`protocol::Request`], with every value parsed into its strict type. Any other command (or
/// option the laptop never sends, such as `--no-kafka`) is not a laptop request.
impl TryFrom<&Command> for protocol::Request {
    type Error = String;

    fn try_from(command: &Command) -> Result<Self, String> {
        fn parsed<T: std::str::FromStr>(what: &str, raw: &str) -> Result<T, String>
        where
            T::Err: std::fmt::Display,
        {
            raw.trim().parse().map_err(|e| format!("{what}: {e}"))
        }
        Ok(match command {
            Command::Provision(a) if !a.no_kafka => Self::Provision {
                name: parsed("name", &a.name)?,
            },
            Command::Sign(a) if !a.no_kafka => Self::Sign {
                name: parsed("name", &a.name)?,
                replaces: a
                    .replaces
                    .as_deref()
                    .map(|s| parsed("replaces", s))
                    .transpose()?,
            },
            Command::Brokers(a) if a.json => Self::Brokers,
            Command::Version(a) if a.json => Self::Version,
            Command::Revoke(a) => Self::Revoke {
                target: match (&a.serial, &a.name, &a.key) {
                    (Some(s), None, None) => protocol::RevokeTarget::Serial(parsed("serial", s)?),
                    (None, Some(n), None) => protocol::RevokeTarget::Name(parsed("name", n)?),
                    (None, Some(n), Some(k)) => {
                        protocol::RevokeTarget::Key(parsed("name", n)?, parsed("key", k)?)
                    }
                    _ => return Err("revoke takes a serial or --name [--key]".to_owned()),
                },
                reason: parsed("reason", &a.reason)?,
            },
            _ => return Err("not a request the laptop sends".to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use shiqi_ca::crl::Reason;
    use shiqi_ca::protocol::{Request as Wire, RevokeTarget};

    use super::*;

    /// Every request the laptop can send parses here to the same request: the laptop's words
    /// and the agent's options cannot drift apart.
    #[test]
    fn every_laptop_request_means_the_same_on_the_agent() {
        let name: shiqi_ca::ProfileName = "saige".parse().expect("name");
        let serial: shiqi_ca::Serial = "0a1b".parse().expect("serial");
        let key: shiqi_ca::KeyId = "ab".repeat(32).parse().expect("key id");
        let requests = [
            Wire::Provision { name: name.clone() },
            Wire::Sign {
                name: name.clone(),
                replaces: None,
            },
            Wire::Sign {
                name: name.clone(),
                replaces: Some(serial.clone()),
            },
            Wire::Brokers,
            Wire::Version,
            Wire::Revoke {
                target: RevokeTarget::Serial(serial),
                reason: Reason::Superseded,
            },
            Wire::Revoke {
                target: RevokeTarget::Name(name.clone()),
                reason: Reason::KeyCompromise,
            },
            Wire::Revoke {
                target: RevokeTarget::Key(name, key),
                reason: Reason::Unspecified,
            },
        ];
        for wire in requests {
            let argv = wire.to_argv();
            let parsed = Request::try_parse_from(
                std::iter::once("shiqi-ca-agent".to_owned()).chain(argv.clone()),
            )
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let back = Wire::try_from(&parsed.command).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            assert_eq!(back, wire, "{argv:?}");
        }
        let admin_only =
            Request::try_parse_from(["shiqi-ca-agent", "list", "--json"]).expect("list");
        assert!(Wire::try_from(&admin_only.command).is_err());
    }
}
