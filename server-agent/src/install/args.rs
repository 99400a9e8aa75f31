//! `install`'s command line (clap): what `commands::install` passes to [`super::Install`].

use std::path::PathBuf;

/// `install`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct InstallArgs {
    /// Print what would change and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The agent's system account (home = the state directory).
    #[arg(long, default_value = "shiqi-ca")]
    pub(crate) account: String,
    /// Take over `--account` although it exists and does not look like one install made (a
    /// person's, `www-data`): it then holds the CA key and runs the forced command.
    #[arg(long)]
    pub(crate) adopt_account: bool,
    /// Where the CRL is published for MariaDB and the brokers to read.
    #[arg(long, default_value = "/var/lib/shiqi-ca-pub")]
    pub(crate) publish_dir: PathBuf,
    /// The sshd config; the block goes into the `*.conf` folder it includes.
    #[arg(long, default_value = "/etc/ssh/sshd_config")]
    pub(crate) sshd_config: PathBuf,
    /// The sshd binary (`sshd -t`, `sshd -T`).
    #[arg(long, default_value = "/usr/sbin/sshd")]
    pub(crate) sshd: PathBuf,
    /// The brokers' bootstrap address as this server reaches them (HOST:PORT[,…]); without it
    /// Kafka is left out.
    #[arg(long, value_name = "HOST:PORT,…")]
    pub(crate) kafka_bootstrap: Option<String>,
    /// A name the brokers advertise (repeat; default: the bootstrap hosts), for their
    /// certificate's SANs.
    #[arg(long = "kafka-san", value_name = "HOST")]
    pub(crate) kafka_san: Vec<String>,
    /// Where the brokers' stores and settings go.
    #[arg(long, default_value = "/etc/kafka/shiqi-tls")]
    pub(crate) kafka_tls_dir: PathBuf,
    /// The account the brokers run as (their files are handed to it).
    #[arg(long, value_name = "USER")]
    pub(crate) kafka_owner: Option<String>,
    /// A broker's server.properties to apply the settings to (a backup is kept beside it).
    #[arg(long, value_name = "FILE")]
    pub(crate) kafka_properties: Option<PathBuf>,
    /// Leave MySQL/MariaDB out.
    #[arg(long)]
    pub(crate) no_mysql: bool,
    /// mysqld's Unix socket (the admin logs in there).
    #[arg(long, default_value = "/run/mysqld/mysqld.sock")]
    pub(crate) mysql_socket: PathBuf,
    /// mysqld's TCP port on 127.0.0.1 (where the tunnel reaches it).
    #[arg(long, default_value_t = 3306)]
    pub(crate) mysql_port: u16,
    /// The folder of `[mysqld]` drop-ins mysqld reads.
    #[arg(long, default_value = "/etc/mysql/mariadb.conf.d")]
    pub(crate) mysql_conf_dir: PathBuf,
    /// Where MariaDB's certificate and key go.
    #[arg(long, default_value = "/etc/mysql/shiqi-tls")]
    pub(crate) mysql_tls_dir: PathBuf,
    /// The account mysqld runs as.
    #[arg(long, default_value = "mysql")]
    pub(crate) mysql_owner: String,
    /// How `crl --refresh` runs daily.
    #[arg(long, value_enum, default_value_t = Timer::Auto)]
    pub(crate) timer: Timer,
    /// The first admin's name.
    #[arg(long, requires = "ssh_key")]
    pub(crate) admin: Option<String>,
    /// The first admin's OpenSSH public key file.
    #[arg(long, requires = "admin", value_name = "FILE")]
    pub(crate) ssh_key: Option<PathBuf>,
    /// Put the CA of this backup (`backup --out`) in place instead of making a new one, on a
    /// server that has none; enrolled keys' lines are written again once sshd is safe.
    #[arg(long, value_name = "FILE", requires = "passphrase_file")]
    pub(crate) restore: Option<PathBuf>,
    /// The backup's passphrase file (its first line), with `--restore`.
    #[arg(long, value_name = "FILE", requires = "restore")]
    pub(crate) passphrase_file: Option<PathBuf>,
}

/// How the daily `crl --refresh` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Timer {
    /// A systemd timer when systemd runs this machine, else a line telling you.
    Auto,
    /// A systemd timer.
    Systemd,
    /// None: a line tells you to schedule it.
    None,
}
