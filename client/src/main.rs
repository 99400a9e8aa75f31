//! The `shiqi-connect` binary: parse, install the log subscriber, run, report.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use shiqi_connect::cli::{Cli, Command, TunnelAction, TunnelArgs};
use shiqi_connect::commands;
use tracing_subscriber::EnvFilter;

// musl's malloc returns large buffers to the OS on every free; see client/Cargo.toml.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[expect(
    clippy::disallowed_methods,
    reason = "this is the client's one runtime"
)]
fn main() -> ExitCode {
    let cli = Cli::parse();
    // Quiet by default; `-v` debug, `-vv` trace for our crates; RUST_LOG overrides; all on stderr.
    let level = match cli.global.verbose {
        0 => "warn",
        1 => "warn,shiqi_connect=debug,shiqi_ca=debug",
        _ => "info,shiqi_connect=trace,shiqi_ca=trace,russh=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(shiqi_connect::printer::LogWriter)
        .init();

    let printer = commands::printer(&cli.global);
    // The tunnel daemon runs on one thread, as OpenSSH does: one SSH connection has one reader
    // and one cipher state, so more workers only add thread stacks and malloc arenas.
    let daemon = matches!(
        &cli.command,
        Command::Tunnel(TunnelArgs {
            action: TunnelAction::Run(_),
            ..
        })
    );
    let runtime = if daemon {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Runtime::new()
    };
    let result = runtime
        .map_err(|e| anyhow::Error::new(e).context("cannot start the async runtime"))
        .and_then(|rt| rt.block_on(commands::run(cli, &printer)));
    result.unwrap_or_else(|err| {
        commands::report(&err, &printer);
        ExitCode::from(commands::EXIT_ERROR)
    })
}
