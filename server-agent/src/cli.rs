//! The command line's top: the program, its global options, and the subcommands of
//! `Command`, whose arguments live each with its command (`commands/NAME.rs`). Each doc
//! comment is the help text.
// The doc comments below are `--help` text, which clap prints as written: `[default: …]` and
// `<state-dir>` are for people, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::{Args, Parser};

pub(crate) use crate::commands::Command;

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
    pub(crate) command: Command,
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
