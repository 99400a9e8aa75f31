//! The CA agent: runs on the server, by an admin or by `shiqi-connect` through
//! `ssh server shiqi-ca-agent …`. It reads one request (arguments, and a CSR on stdin for
//! `sign`), answers with one JSON document on stdout, and writes nothing to stdout otherwise.
//!
//! X.509 work is `shiqi-ca`'s; this crate brings the state directory, the config, MySQL
//! (mysql_async) and Kafka (`kafka-protocol` over rustls). No `unsafe`, no C Kafka library.
#![forbid(unsafe_code)]

pub(crate) mod access;
pub(crate) mod acl;
pub(crate) mod audit;
pub(crate) mod authorized_keys;
pub(crate) mod caller;
pub(crate) mod check;
pub mod cli;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod crl;
pub(crate) mod error;
pub(crate) mod fsutil;
pub(crate) mod handler;
pub(crate) mod install;
pub(crate) mod kafka;
pub(crate) mod limits;
pub mod logging;
pub(crate) mod mysql;
pub(crate) mod name_lock;
pub(crate) mod ops;
pub(crate) mod progress;
pub(crate) mod render;
pub mod report;
pub(crate) mod sql;
pub(crate) mod sshd;
pub(crate) mod state;

use clap::CommandFactory as _;

pub use error::AgentError;

/// Runs one command from the command line: `serve` finds out who asks and what; everything
/// else is run by the local account, which may do everything.
pub fn run(cli: cli::Cli) -> anyhow::Result<()> {
    // Generated from the clap definitions; no state directory needed (packagers run these).
    match &cli.command {
        cli::Command::Completions(args) => {
            return commands::docs::completions(args.shell, cli::Cli::command());
        }
        cli::Command::Man(args) => {
            return commands::docs::man(args.dir.as_deref(), cli::Cli::command());
        }
        cli::Command::Units(args) => {
            return commands::docs::units(args, &cli.global.state_dir);
        }
        // Asked locally, it needs no state either (through `serve` it is a request).
        cli::Command::Version(args) => return commands::version::run(args),
        _ => {}
    }
    // As root, before any state exists: it makes the account that owns the state.
    if let cli::Command::Install(args) = cli.command {
        return commands::install::run(&cli.global.state_dir, args);
    }
    let mut ctx = state::Context::new(&cli.global.state_dir, cli.global.config.as_deref())?;
    match cli.command {
        cli::Command::Serve(args) => commands::serve::run(&mut ctx, args),
        command => {
            access::authorize(&ctx, &ctx.caller, command.handler())?;
            dispatch(&ctx, &command)
        }
    }
}

/// Runs one authorized command, holding the lock of the name it grants or revokes (see
/// [`name_lock`]).
pub(crate) fn dispatch(ctx: &state::Context, command: &commands::Command) -> anyhow::Result<()> {
    let handler = command.handler();
    let _held = match handler.locked_name(ctx)? {
        Some(name) => Some(name_lock::acquire(ctx, &name)?),
        None => None,
    };
    handler.run(ctx)
}
