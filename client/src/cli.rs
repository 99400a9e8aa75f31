//! The command line (clap derive only). Each doc comment is the help text; every flag has an
//! environment variable. Values are settled into `commands::*::Settings` before anything runs.

use std::path::PathBuf;

use clap::builder::FalseyValueParser;
use clap::{Args, Parser, Subcommand};
use shiqi_ca::key::KeyType;

use crate::printer::ColorChoice;

/// One command from nothing to certificate logins for Kafka and MySQL over SSH.
#[derive(Debug, Parser)]
#[command(name = "shiqi-connect", version, propagate_version = true)]
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
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

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
        let Command::Setup(a) = cli.command;
        assert_eq!(a.name, "saige");
        assert_eq!(a.key_type, KeyType::Rsa2048);
        assert!(cli.global.yes && cli.global.verbose == 1);
    }
}
