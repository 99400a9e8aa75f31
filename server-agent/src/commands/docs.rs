//! What a packager runs: `completions SHELL` and `man [DIR]`, the agent's completion scripts
//! (clap_complete) and man pages (clap_mangen), generated from the same clap definitions it
//! parses with, and `units [DIR]`, the systemd units `install` writes: none can drift from the
//! binary. Run before any state is opened; refused as requests over SSH (`access::authorize`).

use std::path::{Path, PathBuf};

use clap_complete::Shell;

use crate::commands::print_text;
use crate::error::AgentError;
use crate::fsutil;
use crate::handler::{Audience, Handler};
use crate::state::Context;

/// `completions SHELL`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

impl Handler for CompletionsArgs {
    fn action(&self) -> &'static str {
        "completions"
    }

    fn describe(&self) -> String {
        "`completions` (run it on the server itself)".to_owned()
    }

    fn audience(&self) -> Audience {
        Audience::Nobody
    }

    /// `run` answers it before any state is opened; `authorize` refuses it as a request.
    fn run(&self, _ctx: &Context) -> anyhow::Result<()> {
        Err(AgentError::Request {
            why: "`completions` and `man` are not requests".to_owned(),
        }
        .into())
    }
}

/// `man [DIR]`.
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// Write every page into this folder instead of printing the main one.
    #[arg(value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

impl Handler for ManArgs {
    fn action(&self) -> &'static str {
        "man"
    }

    fn describe(&self) -> String {
        "`man` (run it on the server itself)".to_owned()
    }

    fn audience(&self) -> Audience {
        Audience::Nobody
    }

    /// `run` answers it before any state is opened; `authorize` refuses it as a request.
    fn run(&self, _ctx: &Context) -> anyhow::Result<()> {
        Err(AgentError::Request {
            why: "`completions` and `man` are not requests".to_owned(),
        }
        .into())
    }
}

/// `units [DIR]`.
#[derive(Debug, clap::Args)]
pub(crate) struct UnitsArgs {
    /// Write `shiqi-ca-crl.service` and `shiqi-ca-crl.timer` into this folder instead of
    /// printing them.
    #[arg(value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The agent's path in the package.
    #[arg(long, value_name = "PATH", default_value = "/usr/bin/shiqi-ca-agent")]
    pub(crate) exe: PathBuf,
    /// The account `install` makes (its `--account`).
    #[arg(long, default_value = "shiqi-ca")]
    pub(crate) account: String,
}

impl Handler for UnitsArgs {
    fn action(&self) -> &'static str {
        "units"
    }

    fn describe(&self) -> String {
        "`units` (run it on the server itself)".to_owned()
    }

    fn audience(&self) -> Audience {
        Audience::Nobody
    }

    /// `run` answers it before any state is opened; `authorize` refuses it as a request.
    fn run(&self, _ctx: &Context) -> anyhow::Result<()> {
        Err(AgentError::Request {
            why: "`units` is not a request".to_owned(),
        }
        .into())
    }
}

/// Prints the units `install` writes for `args.account` and `state_dir`, or writes them into
/// `args.dir` (0644) and lists them.
///
/// # Errors
/// When the account is not a valid one, `dir` or a unit cannot be written, or stdout cannot.
pub(crate) fn units(args: &UnitsArgs, state_dir: &Path) -> anyhow::Result<()> {
    crate::install::check_account(&args.account)?;
    if !args.exe.is_absolute() || !state_dir.is_absolute() {
        return Err(AgentError::Local {
            why: "`--exe` and `--state-dir` must be absolute paths (systemd runs the unit from /)"
                .to_owned(),
        }
        .into());
    }
    let (service, timer) = crate::install::units_for(&args.exe, state_dir, &args.account);
    let name = crate::install::UNIT_NAME;
    let Some(dir) = &args.dir else {
        return print_text(&format!("{service}\n{timer}"));
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot create `{}`", dir.display())))?;
    let mut listing = String::new();
    for (file, text) in [
        (format!("{name}.service"), service),
        (format!("{name}.timer"), timer),
    ] {
        let path = dir.join(file);
        fsutil::write_atomic(&path, text.as_bytes(), 0o644)?;
        listing.push_str(&format!("{}\n", path.display()));
    }
    print_text(&listing)
}

/// The binary's name as the scripts complete it.
const BIN: &str = "shiqi-ca-agent";

/// The completion script for `shell` of the command line `cli` (`Cli::command()`).
pub(crate) fn script(shell: Shell, mut cli: clap::Command) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cli, BIN, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Prints the completion script for `shell`.
///
/// # Errors
/// When stdout cannot be written.
pub(crate) fn completions(shell: Shell, cli: clap::Command) -> anyhow::Result<()> {
    print_text(&script(shell, cli))
}

/// Every page of the command line `cli`: file name and roff text, the main page first.
pub(crate) fn pages(cli: clap::Command) -> Vec<(String, Vec<u8>)> {
    let mut cmd = cli.disable_help_subcommand(true);
    // Gives each subcommand its full name (`shiqi-ca-agent-server-cert`), as clap_mangen's own
    // `generate_to` does.
    cmd.build();
    let mut out = Vec::new();
    walk(cmd, &mut out);
    out
}

fn walk(cmd: clap::Command, out: &mut Vec<(String, Vec<u8>)>) {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = man.render(&mut page);
    out.push((man.get_filename(), page));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        walk(sub.clone(), out);
    }
}

/// Prints the main page, or writes every page into `dir` (0644) and lists them.
///
/// # Errors
/// When `dir` or a page cannot be written, or stdout cannot.
pub(crate) fn man(dir: Option<&Path>, cli: clap::Command) -> anyhow::Result<()> {
    let pages = pages(cli);
    let Some(dir) = dir else {
        return print_text(&String::from_utf8_lossy(&pages[0].1));
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot create `{}`", dir.display())))?;
    let mut listing = String::new();
    for (name, page) in &pages {
        let path = dir.join(name);
        fsutil::write_atomic(&path, page, 0o644)?;
        listing.push_str(&format!("{}\n", path.display()));
    }
    print_text(&listing)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use clap::ValueEnum as _;

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn completions_name_every_subcommand() {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_owned())
            .collect();
        assert!(names.iter().any(|n| n == "server-cert"));
        for shell in Shell::value_variants() {
            let s = script(*shell, Cli::command());
            for n in &names {
                assert!(s.contains(n.as_str()), "{shell}: no `{n}`");
            }
        }
    }

    #[test]
    fn every_command_has_a_page_that_renders() {
        let pages = pages(Cli::command());
        assert_eq!(pages[0].0, "shiqi-ca-agent.1");
        let main = String::from_utf8_lossy(&pages[0].1);
        assert!(main.contains(".TH shiqi-ca-agent 1"), "{main}");
        for n in [
            "shiqi-ca-agent-sign.1",
            "shiqi-ca-agent-server-cert.1",
            "shiqi-ca-agent-man.1",
        ] {
            assert!(pages.iter().any(|(p, _)| p == n), "{n} missing");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        man(Some(dir.path()), Cli::command()).expect("writes");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("ls").count(),
            pages.len()
        );
    }

    #[test]
    fn units_are_what_install_writes_and_bad_values_write_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = |dir: &Path, exe: &str, account: &str| UnitsArgs {
            dir: Some(dir.to_owned()),
            exe: PathBuf::from(exe),
            account: account.to_owned(),
        };
        let state = Path::new("/var/lib/shiqi-ca");
        units(
            &args(dir.path(), "/usr/bin/shiqi-ca-agent", "shiqi-ca"),
            state,
        )
        .expect("writes");
        let (service, timer) =
            crate::install::units_for(Path::new("/usr/bin/shiqi-ca-agent"), state, "shiqi-ca");
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect("written");
        assert_eq!(read("shiqi-ca-crl.service"), service);
        assert_eq!(read("shiqi-ca-crl.timer"), timer);
        assert!(service.contains(
            "ExecStart=/usr/bin/shiqi-ca-agent --state-dir /var/lib/shiqi-ca crl --refresh"
        ));

        let empty = tempfile::tempdir().expect("tempdir");
        for (exe, account, state, want) in [
            ("/usr/bin/x", "Bad!", state, "plain system account"),
            ("bin/x", "shiqi-ca", state, "absolute"),
            ("/usr/bin/x", "shiqi-ca", Path::new("rel"), "absolute"),
        ] {
            let e = units(&args(empty.path(), exe, account), state).expect_err(want);
            assert!(e.to_string().contains(want), "{e}");
        }
        assert_eq!(std::fs::read_dir(empty.path()).expect("reads").count(), 0);
    }
}
