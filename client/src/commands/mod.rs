//! The subcommands, and the error report every one of them ends with. `anyhow` is allowed here
//! (and in `main.rs`) only: library modules return [`crate::Error`].

pub mod doctor;
pub mod revoke;
pub mod rotate;
pub mod setup;
pub mod status;
pub mod tunnel;

use std::process::ExitCode;

use crate::cli::{Cli, Command, GlobalArgs};
use crate::error::Error;
use crate::printer::Printer;
use crate::prompt::Prompter;
use crate::ssh::Session;
use crate::ssh::config::Target;
use crate::ssh::known_hosts::HostKeyPolicy;

/// Exit status for errors and bad input (design.md, STYLE §2).
pub const EXIT_ERROR: u8 = 2;

/// The printer the flags ask for.
pub fn printer(global: &GlobalArgs) -> Printer {
    Printer::new(
        global.quiet,
        global.verbose > 0,
        global.no_progress,
        global.color,
    )
}

/// Runs the chosen subcommand.
///
/// # Errors
/// Whatever the subcommand reports; [`report`] prints it.
pub async fn run(cli: Cli, printer: &Printer) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Setup(args) => setup::run(&args, &cli.global, printer).await,
        Command::Tunnel(args) => tunnel::run(&args, &cli.global, printer).await,
        Command::Doctor(args) => doctor::run(&args, &cli.global, printer).await,
        Command::Rotate(args) => rotate::run_rotate(&args, &cli.global, printer).await,
        Command::Renew(args) => rotate::run_renew(&args, &cli.global, printer).await,
        Command::Status(_) => status::run(&cli.global),
        Command::Revoke(args) => revoke::run(&args, &cli.global, printer).await,
    }
}

/// Prints `error: …`, one `  caused by: …` per source, and the hint of the first typed error in
/// the chain that has one.
pub fn report(err: &anyhow::Error, printer: &Printer) {
    let mut chain = err.chain();
    let top = chain.next().map(ToString::to_string).unwrap_or_default();
    let causes: Vec<String> = chain.map(ToString::to_string).collect();
    let hint = err.chain().find_map(|e| {
        e.downcast_ref::<Error>().and_then(Error::hint).or_else(|| {
            e.downcast_ref::<shiqi_ca::Error>()
                .and_then(shiqi_ca::Error::hint)
        })
    });
    printer.error(&top, &causes, hint.as_deref());
}

/// Connects; an unknown host key is shown and asked about on a terminal, then the connection is
/// retried trusting exactly that key.
pub(crate) async fn connect(
    accept_new_host_key: bool,
    target: &Target,
    prompter: &Prompter,
    printer: &Printer,
) -> Result<Session, Error> {
    let policy = if accept_new_host_key {
        HostKeyPolicy::AcceptNew
    } else {
        HostKeyPolicy::Strict
    };
    match Session::connect(target, policy, prompter).await {
        Err(Error::HostKeyUnknown {
            host,
            algorithm,
            fingerprint,
            known_hosts,
        }) if prompter.is_interactive() => {
            let trusted = prompter.trust_host_key(&host, &algorithm, &fingerprint, &known_hosts);
            if !trusted {
                return Err(Error::HostKeyUnknown {
                    host,
                    algorithm,
                    fingerprint,
                    known_hosts,
                });
            }
            printer.note(&format!(
                "trusting {algorithm} key {fingerprint} for `{host}`"
            ));
            Session::connect(target, HostKeyPolicy::AcceptKey(fingerprint), prompter).await
        }
        other => other,
    }
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
///
/// # Errors
/// When stdout cannot be written for another reason.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}
