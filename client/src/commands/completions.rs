//! `shiqi-connect completions SHELL`: the completion script clap_complete generates from the
//! same clap definitions the binary parses with, on stdout (packagers redirect it into place).

use std::process::ExitCode;

use clap::CommandFactory as _;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::commands::print_stdout;

/// The binary's name as the scripts complete it.
const BIN: &str = "shiqi-connect";

/// The completion script for `shell`.
pub(crate) fn script(shell: Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `completions`.
///
/// # Errors
/// When stdout cannot be written.
pub(crate) fn run(shell: Shell) -> anyhow::Result<ExitCode> {
    print_stdout(&script(shell))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::*;

    /// Every visible subcommand, nested ones too (`tunnel up`).
    fn subcommands(cmd: &clap::Command, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            out.push(sub.get_name().to_owned());
            subcommands(sub, out);
        }
    }

    #[test]
    fn every_shell_completes_every_subcommand() {
        let mut names = Vec::new();
        subcommands(&Cli::command(), &mut names);
        for expected in [
            "setup",
            "tunnel",
            "up",
            "datagrip",
            "jdbc",
            "completions",
            "man",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected} missing");
        }
        for shell in Shell::value_variants() {
            let s = script(*shell);
            for name in &names {
                assert!(s.contains(name.as_str()), "{shell}: no `{name}`");
            }
        }
        assert!(script(Shell::Bash).contains("--project"));
    }
}
