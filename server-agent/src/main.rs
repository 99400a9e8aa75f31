//! `shiqi-ca-agent`: the server side of shiqi-connect. All work is in the library.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = shiqi_ca_agent::cli::Cli::parse();
    shiqi_ca_agent::logging::init(cli.verbose);
    match shiqi_ca_agent::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if shiqi_ca_agent::report::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            shiqi_ca_agent::report::print_error(&err);
            ExitCode::from(2)
        }
    }
}
