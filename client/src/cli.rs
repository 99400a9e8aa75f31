//! The command line (clap derive only). Each doc comment is the help text; every flag has an
//! environment variable. Values are settled into `commands::*::Settings` before anything runs.
// The doc comments below are `--help` text, which clap prints as written: `[default: …]` and
// `<state-dir>` are for people, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::builder::FalseyValueParser;
use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;
use shiqi_ca::key::KeyType;

use crate::jdbc::{Driver, Verification};
use crate::printer::ColorChoice;

/// `--version`: the version, the commit built from and the target.
pub const VERSION: &str = shiqi_ca::version!();

/// One command from nothing to certificate logins for Kafka and MySQL over SSH.
#[derive(Debug, Parser)]
#[command(name = "shiqi-connect", version = VERSION, propagate_version = true)]
pub struct Cli {
    /// Flags every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// More detail on stderr (`-v` debug, `-vv` trace); `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors on stderr.
    #[arg(short, long, global = true, env = "SHIQI_QUIET", value_parser = FalseyValueParser::new())]
    pub quiet: bool,
    /// Never ask: a missing answer is an error with a hint.
    #[arg(short, long, global = true, env = "SHIQI_YES", value_parser = FalseyValueParser::new())]
    pub yes: bool,
    /// No progress lines (outcome lines still print).
    #[arg(long, global = true, env = "SHIQI_NO_PROGRESS", value_parser = FalseyValueParser::new())]
    pub no_progress: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true, env = "SHIQI_JSON", value_parser = FalseyValueParser::new())]
    pub json: bool,
    /// When to colour stderr (`NO_COLOR` is respected under `auto`).
    #[arg(long, global = true, env = "SHIQI_COLOR", value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Where profiles live [default: ~/.shiqi].
    #[arg(long = "home", global = true, env = "SHIQI_HOME", value_name = "DIR")]
    pub shiqi_home: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make a key on this machine, have the server certify it over SSH, and write a ready
    /// profile (Kafka, MySQL, SSH tunnel, DataGrip) to ~/.shiqi/NAME.
    Setup(SetupArgs),
    /// Open, close or check the SSH tunnel that forwards every Kafka broker and MySQL to this
    /// machine's 127.0.0.1.
    Tunnel(TunnelArgs),
    /// Check a profile and this machine, one line per check (ok, warn, fail, skip) with the fix
    /// for every problem: files, clients, SSH, certificate, tunnel, addresses, protocols, config
    /// keys, and real Kafka and MySQL logins. Exit 1 when a check fails.
    Doctor(DoctorArgs),
    /// Replace a profile's key and certificate: new key here, signed over SSH, checked against
    /// every broker and MySQL, every file swapped in at once, then the old certificate revoked.
    Rotate(RotateArgs),
    /// Rotate when less than a third of the certificate's lifetime is left; "nothing due"
    /// exits 0 (for cron or a systemd timer).
    Renew(RenewArgs),
    /// List every profile with its server, serial, expiry and tunnel. Exit 1 when one has
    /// expired.
    Status(StatusArgs),
    /// For an admin: revoke NAME's certificates on the server (`shiqi-ca-agent revoke` over
    /// SSH), which also locks its MySQL account and removes its Kafka ACLs when none is left.
    Revoke(RevokeArgs),
    /// Print DataGrip's import block for the profile's MySQL (Database Explorer → + → Import
    /// from Clipboard), or add the data source to a project's `.idea` with `--project DIR`.
    /// Certificate login through the tunnel: no password, no SSH in DataGrip.
    Datagrip(DatagripArgs),
    /// Print a JDBC URL for the profile's MySQL through the tunnel, for MySQL Connector/J or
    /// MariaDB Connector/J, with the certificate from the profile's keystores. The URL holds
    /// the keystore password: keep it as private as `keystore.password`.
    Jdbc(JdbcArgs),
    /// Print a completion script for a shell (bash, zsh, fish, powershell, elvish), e.g.
    /// `shiqi-connect completions bash > /usr/share/bash-completion/completions/shiqi-connect`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per command into DIR
    /// (`shiqi-connect.1`, `shiqi-connect-setup.1`, …), e.g. for `/usr/share/man/man1`.
    Man(ManArgs),
}

/// How `datagrip` and `jdbc` pick the driver and the verification; unset, they look at the
/// server through the tunnel.
#[derive(Debug, Args)]
pub struct MysqlClientArgs {
    /// The profile (may be left out when there is only one).
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    /// The JDBC driver [default: the server's kind, from its greeting through the tunnel;
    /// `mysql` when the tunnel is down].
    #[arg(long, env = "SHIQI_JDBC_DRIVER", value_enum)]
    pub driver: Option<Driver>,
    /// How the server's certificate is checked: `full` (CA and the name `127.0.0.1`) or `ca`
    /// [default: `full` when the certificate names `127.0.0.1` or the tunnel is down, else `ca`].
    #[arg(long, env = "SHIQI_JDBC_VERIFY", value_enum)]
    pub verify: Option<Verification>,
}

/// `shiqi-connect datagrip [NAME] [--project DIR [--open]]`.
#[derive(Debug, Args)]
pub struct DatagripArgs {
    /// The profile, driver and verification.
    #[command(flatten)]
    pub source: MysqlClientArgs,
    /// Add (or replace) the data source in `DIR/.idea/dataSources.xml` and
    /// `dataSources.local.xml`, keeping every other data source; DIR is created if missing.
    #[arg(long, env = "SHIQI_DATAGRIP_PROJECT", value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Then start DataGrip on DIR (the `datagrip` or `datagrip.sh` launcher on PATH).
    #[arg(long, requires = "project")]
    pub open: bool,
}

/// `shiqi-connect jdbc [NAME] [--driver mysql|mariadb]`.
#[derive(Debug, Args)]
pub struct JdbcArgs {
    /// The profile, driver and verification.
    #[command(flatten)]
    pub source: MysqlClientArgs,
}

/// `shiqi-connect completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `shiqi-connect man [DIR]`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page into this folder instead of printing the main one.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `shiqi-connect rotate [NAME] [--keep-old]`.
#[derive(Debug, Args)]
pub struct RotateArgs {
    /// The profile (may be left out when there is only one).
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    /// Leave the old certificate valid (it expires by itself).
    #[arg(long, env = "SHIQI_KEEP_OLD", value_parser = FalseyValueParser::new())]
    pub keep_old: bool,
    /// The old key may be stolen: revoke its certificate as `keyCompromise` at once, and have
    /// the server end every MySQL session of the name (reconnect with the new files).
    #[arg(long, conflicts_with = "keep_old")]
    pub compromised: bool,
    /// From now on ask for certificates that live this long (`10m`, `1h`, `30d`; kept in the
    /// profile for every renewal), starting with this one.
    #[arg(long, env = "SHIQI_LIFETIME", value_name = "SPAN")]
    pub lifetime: Option<shiqi_ca::Span>,
}

/// `shiqi-connect renew [NAME | --all]`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// The profile (may be left out when there is only one).
    #[arg(env = "SHIQI_PROFILE", conflicts_with = "all")]
    pub name: Option<String>,
    /// Every profile under the profile folder.
    #[arg(long)]
    pub all: bool,
}

/// `shiqi-connect status`.
#[derive(Debug, Args)]
pub struct StatusArgs {}

/// `shiqi-connect revoke NAME --server DEST [--serial S] [--reason R]`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// Whose certificates: every valid one of NAME, or only `--serial`.
    pub name: String,
    /// The server, as for `setup` [default: the server of the local profile NAME, if any].
    #[arg(long, env = "SHIQI_SERVER", value_name = "DESTINATION")]
    pub server: Option<String>,
    /// Reach the server through these jump hosts, as `ssh -J` does: `[user@]host[:port]`,
    /// comma-separated, nearest first. Replaces the config's `ProxyJump`; the profile keeps it.
    #[arg(long, env = "SHIQI_JUMP", value_name = "USER@HOST[:PORT],…")]
    pub jump: Option<String>,
    /// Revoke only this certificate (hex serial, as `shiqi-ca-agent list` shows it).
    #[arg(long, value_name = "SERIAL")]
    pub serial: Option<String>,
    /// Why: unspecified, key-compromise, ca-compromise, affiliation-changed, superseded,
    /// cessation-of-operation or certificate-hold.
    #[arg(long, default_value = "unspecified")]
    pub reason: String,
    /// How to run the agent on the server, as a shell command prefix.
    #[arg(
        long,
        env = "SHIQI_AGENT_COMMAND",
        default_value = "shiqi-ca-agent",
        value_name = "COMMAND"
    )]
    pub agent_command: String,
    /// Trust the server's host key when it is not in known_hosts yet, and add it there.
    #[arg(long, env = "SHIQI_ACCEPT_NEW_HOST_KEY", value_parser = FalseyValueParser::new())]
    pub accept_new_host_key: bool,
}

/// `shiqi-connect doctor [NAME] [--config FILE]…`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The profile (may be left out when there is only one). With `--config` or `--bootstrap`
    /// and no NAME, no profile is checked: the files and clusters are probed directly.
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    /// Lint this client config instead of the profile's: a Java `.properties`, a librdkafka/kcat
    /// file or a MySQL option file (the kind is guessed from its name and contents). Repeatable.
    #[arg(long = "config", value_name = "FILE", env = "SHIQI_DOCTOR_CONFIG")]
    pub configs: Vec<PathBuf>,
    /// Probe the Kafka cluster at HOST:PORT without a config file: every address it resolves
    /// to, what it speaks, and (for a plaintext listener) every advertised broker. Repeatable.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap: Vec<String>,
}

/// `shiqi-connect setup NAME`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Profile name: the certificate's CN, the MySQL user and the Kafka principal
    /// (`[a-z][a-z0-9_-]{0,31}`).
    pub name: String,
    /// The server, as ssh takes it: `user@host`, `ssh://user@host:port` or a Host alias from
    /// ~/.ssh/config (HostName, User, Port, IdentityFile are honoured).
    #[arg(long, env = "SHIQI_SERVER", value_name = "DESTINATION")]
    pub server: Option<String>,
    /// Key algorithm of the new client key: p256, p384, ed25519, rsa2048 or rsa3072.
    #[arg(long, env = "SHIQI_KEY_TYPE", default_value = "p256")]
    pub key_type: KeyType,
    /// Write PKCS#12 files with 3DES/SHA-1 for old JDKs (before 8u301 / 11.0.12) instead of
    /// AES-256.
    #[arg(long, env = "SHIQI_P12_LEGACY", value_parser = FalseyValueParser::new())]
    pub p12_legacy: bool,
    /// Trust the server's host key when it is not in known_hosts yet, and add it there
    /// (needed with `--yes` or without a terminal). A changed key is always refused.
    #[arg(long, env = "SHIQI_ACCEPT_NEW_HOST_KEY", value_parser = FalseyValueParser::new())]
    pub accept_new_host_key: bool,
    /// Use this known_hosts file instead of the configured ones.
    #[arg(long, env = "SHIQI_KNOWN_HOSTS", value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// Reach the server through these jump hosts, as `ssh -J` does: `[user@]host[:port]`,
    /// comma-separated, nearest first. Replaces the config's `ProxyJump`; the profile keeps it.
    #[arg(long, env = "SHIQI_JUMP", value_name = "USER@HOST[:PORT],…")]
    pub jump: Option<String>,
    /// How to run the agent on the server, as a shell command prefix.
    #[arg(
        long,
        env = "SHIQI_AGENT_COMMAND",
        default_value = "shiqi-ca-agent",
        value_name = "COMMAND"
    )]
    pub agent_command: String,
    /// The `Host` name of the tunnel in the profile's ssh_config.
    #[arg(
        long,
        env = "SHIQI_TUNNEL_HOST",
        default_value = "shiqi-tunnel",
        value_name = "NAME"
    )]
    pub tunnel_host: String,
    /// Replace an existing profile of this name (atomically: the old one stays until the new
    /// one is complete).
    #[arg(long, env = "SHIQI_FORCE", value_parser = FalseyValueParser::new())]
    pub force: bool,
    /// Add `Include ~/.shiqi/NAME/ssh_config` at the top of ~/.ssh/config (once), so plain
    /// `ssh -fN shiqi-tunnel` works.
    #[arg(long, env = "SHIQI_INSTALL_SSH_INCLUDE", value_parser = FalseyValueParser::new())]
    pub install_ssh_include: bool,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// With the local endpoint, let `my.cnf` and the JDBC URL send local files when the server
    /// asks (`LOAD DATA LOCAL INFILE`); off by default: a server, or a process posing as the
    /// endpoint while the tunnel is down, may ask for any file the client can read.
    #[arg(long, env = "SHIQI_ALLOW_LOCAL_INFILE", value_parser = FalseyValueParser::new())]
    pub allow_local_infile: bool,
    /// How long each certificate lives, kept in the profile for every renewal: `10m`, `1h`,
    /// `30d` (5m to 398d; the server signs at most its maximum for your key). Default: 1h with
    /// the local endpoint (the tunnel renews it; no client ever notices), else the server's
    /// default.
    #[arg(long, env = "SHIQI_LIFETIME", value_name = "SPAN")]
    pub lifetime: Option<shiqi_ca::Span>,
}

/// How Kafka clients reach the cluster (`setup`, `tunnel up`).
#[derive(Debug, Args, Clone, Default)]
pub struct EndpointArgs {
    /// `local`: the tunnel speaks Kafka on 127.0.0.1 and does TLS for the clients (no keystores
    /// in them; works whatever the brokers advertise). `direct`: clients do TLS themselves to
    /// each broker's advertised `localhost:PORT`. `auto` (setup's default): direct when every
    /// broker advertises a port of its own on localhost, local otherwise.
    #[arg(long, env = "SHIQI_ENDPOINT", value_name = "MODE")]
    pub endpoint: Option<EndpointMode>,
    /// The local endpoint's bootstrap port; each broker gets one of the ports just above it.
    #[arg(long, env = "SHIQI_ENDPOINT_PORT", value_name = "PORT")]
    pub endpoint_port: Option<u16>,
}

/// `--endpoint`: the one type both `setup` and `tunnel up` plan with
/// (`profile::plan::choose_endpoint`).
pub use crate::profile::plan::EndpointMode;

/// `shiqi-connect tunnel up|down|status [NAME]`.
#[derive(Debug, Args)]
pub struct TunnelArgs {
    /// What to do with the tunnel.
    #[command(subcommand)]
    pub action: TunnelAction,
}

/// The tunnel's verbs.
#[derive(Debug, Subcommand)]
pub enum TunnelAction {
    /// Ask the server for its current brokers, then start one SSH connection in the background
    /// that forwards 127.0.0.1:PORT for every broker and for MySQL (log: ~/.shiqi/NAME/tunnel.log).
    Up(TunnelUpArgs),
    /// Stop the tunnel (the built-in one or the OpenSSH one) and free every port.
    Down(TunnelDownArgs),
    /// List each forward, whether it listens, and whether a TLS login with the profile's
    /// certificate works through it. Exit 1 when one does not. With --watch, the running
    /// tunnel's live figures instead, once a second, until Ctrl-C.
    Status(TunnelStatusArgs),
    /// Run the tunnel in the foreground (what `up` starts in the background).
    #[command(hide = true)]
    Run(TunnelRunArgs),
}

/// How often a running tunnel asks the cluster for its brokers (and at every reconnect).
const CHECK_EVERY_HELP: &str = "Seconds between the running tunnel's looks at the cluster's \
                                brokers (it also looks after every reconnect); 0: only then";

/// `tunnel run NAME` (hidden).
#[derive(Debug, Args)]
pub struct TunnelRunArgs {
    /// The profile.
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    #[arg(long, env = "SHIQI_TUNNEL_CHECK_EVERY", default_value_t = 60, value_name = "SECS", help = CHECK_EVERY_HELP)]
    pub check_every: u64,
}

/// `tunnel up [NAME] [--openssh]`.
#[derive(Debug, Args)]
pub struct TunnelUpArgs {
    /// The profile (may be left out when there is only one).
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    /// Run OpenSSH with the profile's ssh_config (`ssh -fN -F …`) instead of the built-in
    /// client.
    #[arg(long, env = "SHIQI_TUNNEL_OPENSSH", value_parser = FalseyValueParser::new())]
    pub openssh: bool,
    /// Switch the profile's Kafka endpoint first (its client.properties, librdkafka.conf and
    /// ssh_config are rewritten to match).
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[arg(long, env = "SHIQI_TUNNEL_CHECK_EVERY", default_value_t = 60, value_name = "SECS", help = CHECK_EVERY_HELP)]
    pub check_every: u64,
    /// Also start this tunnel whenever you log in: a systemd user unit (restarted if it fails),
    /// a launchd agent on macOS, a Run entry on Windows. `tunnel down NAME --at-login` removes it.
    #[arg(long, conflicts_with = "openssh")]
    pub at_login: bool,
}

/// `tunnel down [NAME] [--at-login]`.
#[derive(Debug, Args)]
pub struct TunnelDownArgs {
    /// The profile (may be left out when there is only one).
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    /// Also stop starting it at login (what `tunnel up --at-login` installed).
    #[arg(long)]
    pub at_login: bool,
}

/// `tunnel status [NAME] [--watch]`.
#[derive(Debug, Args)]
pub struct TunnelStatusArgs {
    /// The profile (may be left out when there is only one).
    #[arg(env = "SHIQI_PROFILE")]
    pub name: Option<String>,
    /// Show the running tunnel's figures once a second until Ctrl-C: per port the connections
    /// and bytes/s each way, the local endpoint's clients and their requests, the brokers, the
    /// certificate's renewal, reconnects and the log's last lines (one line per second when
    /// not a terminal; the daemon's JSON with --json).
    #[arg(long)]
    pub watch: bool,
    /// With --watch: stop after N looks (as `top -n`), e.g. `--watch --json --count 1` for
    /// one set of figures in a script.
    #[arg(long, value_name = "N", requires = "watch", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn version_names_the_commit_and_the_target() {
        let v = Cli::command().render_version();
        assert!(v.starts_with("shiqi-connect 0."), "{v}");
        assert!(v.contains(env!("SHIQI_TARGET")), "{v}");
        let commit = v.split(['(', ',']).nth(1).unwrap_or_default();
        assert!(
            commit == "unknown commit" || commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{v}"
        );
    }

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_setup() {
        let cli = Cli::try_parse_from([
            "shiqi-connect",
            "-v",
            "setup",
            "saige",
            "--server",
            "u@h",
            "--yes",
            "--key-type",
            "rsa2048",
        ])
        .expect("parses");
        let Command::Setup(a) = cli.command else {
            panic!("not setup");
        };
        assert_eq!(a.name, "saige");
        assert_eq!(a.key_type, KeyType::Rsa2048);
        assert!(cli.global.yes && cli.global.verbose == 1);
    }

    #[test]
    fn parses_doctor() {
        let cli = Cli::try_parse_from([
            "shiqi-connect",
            "doctor",
            "saige",
            "--config",
            "a.properties",
            "--config",
            "my.cnf",
        ])
        .expect("parses");
        let Command::Doctor(d) = cli.command else {
            panic!("not doctor");
        };
        assert_eq!(d.name.as_deref(), Some("saige"));
        assert_eq!(d.configs.len(), 2);
    }

    #[test]
    fn parses_the_lifecycle_commands() {
        let cli = Cli::try_parse_from(["shiqi-connect", "rotate", "saige", "--keep-old"])
            .expect("parses");
        let Command::Rotate(r) = cli.command else {
            panic!("not rotate");
        };
        assert_eq!(r.name.as_deref(), Some("saige"));
        assert!(r.keep_old);
        let cli = Cli::try_parse_from(["shiqi-connect", "renew", "--all"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Renew(RenewArgs {
                all: true,
                name: None
            })
        ));
        assert!(Cli::try_parse_from(["shiqi-connect", "renew", "saige", "--all"]).is_err());
        let cli = Cli::try_parse_from(["shiqi-connect", "--json", "status"]).expect("parses");
        assert!(cli.global.json && matches!(cli.command, Command::Status(_)));
        let cli = Cli::try_parse_from([
            "shiqi-connect",
            "revoke",
            "saige",
            "--server",
            "admin@vm",
            "--serial",
            "0a1b",
            "--reason",
            "key-compromise",
        ])
        .expect("parses");
        let Command::Revoke(r) = cli.command else {
            panic!("not revoke");
        };
        assert_eq!(
            (
                r.name.as_str(),
                r.server.as_deref(),
                r.serial.as_deref(),
                r.reason.as_str()
            ),
            ("saige", Some("admin@vm"), Some("0a1b"), "key-compromise")
        );
    }

    #[test]
    fn parses_the_client_config_commands() {
        let cli = Cli::try_parse_from([
            "shiqi-connect",
            "datagrip",
            "saige",
            "--project",
            "/p",
            "--open",
            "--verify",
            "ca",
        ])
        .expect("parses");
        let Command::Datagrip(d) = cli.command else {
            panic!("not datagrip");
        };
        assert_eq!(d.source.name.as_deref(), Some("saige"));
        assert_eq!(d.source.verify, Some(Verification::Ca));
        assert!(d.open && d.project.is_some());
        // `--open` needs a project to open.
        assert!(Cli::try_parse_from(["shiqi-connect", "datagrip", "--open"]).is_err());
        let cli =
            Cli::try_parse_from(["shiqi-connect", "jdbc", "--driver", "mariadb"]).expect("parses");
        let Command::Jdbc(j) = cli.command else {
            panic!("not jdbc");
        };
        assert_eq!(j.source.driver, Some(Driver::Mariadb));
        assert!(Cli::try_parse_from(["shiqi-connect", "jdbc", "--driver", "oracle"]).is_err());
        let cli =
            Cli::try_parse_from(["shiqi-connect", "completions", "powershell"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Completions(CompletionsArgs {
                shell: Shell::PowerShell
            })
        ));
    }

    #[test]
    fn parses_tunnel() {
        let cli = Cli::try_parse_from(["shiqi-connect", "tunnel", "up", "saige", "--openssh"])
            .expect("parses");
        let Command::Tunnel(TunnelArgs {
            action: TunnelAction::Up(up),
        }) = cli.command
        else {
            panic!("not tunnel up");
        };
        assert_eq!(up.name.as_deref(), Some("saige"));
        assert!(up.openssh);
        let cli =
            Cli::try_parse_from(["shiqi-connect", "--json", "tunnel", "status"]).expect("parses");
        assert!(cli.global.json);
        assert!(matches!(
            cli.command,
            Command::Tunnel(TunnelArgs {
                action: TunnelAction::Status(TunnelStatusArgs {
                    name: None,
                    watch: false,
                    count: None
                })
            })
        ));
    }
}
