//! The README's commands exist with the flags it shows: every `shiqi-connect …` and
//! `shiqi-ca-agent …` line of its code blocks is parsed by the real command-line definitions
//! (placeholders filled in). No stack needed.

use clap::Parser as _;

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));

/// The commands of `program` that README.md shows, as argument lists: code lines (indented four
/// spaces) that run it, after `sudo`, `sudo -u …` or `ssh HOST`, up to a comment, pipe or redirection;
/// placeholders become sample values and `[optional]` parts and the first of `a|b` are kept.
fn readme_commands(readme: &str, program: &str) -> Vec<Vec<String>> {
    let sample = |word: &str| -> String {
        let w = word.replace(['[', ']'], "");
        let w = w.split('|').next().unwrap_or_default().to_owned();
        let w = w
            .replace(",…", "")
            .replace(":port", ":22")
            .replace('…', "x");
        match w.as_str() {
            "NAME" => "saige".to_owned(),
            "DEST" => "you@vm".to_owned(),
            "FILE" | "DIR" => "/tmp/x".to_owned(),
            "HOST:PORT" => "localhost:9092".to_owned(),
            "SERIAL" => "0a".to_owned(),
            _ => w,
        }
    };
    readme
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter_map(|l| {
            let at = l.find(&format!("{program} "))?;
            // Only where the program is the command: at the start, or after sudo/ssh.
            let before = l[..at].trim();
            let runs = before.is_empty()
                || before == "sudo"
                || before.starts_with("sudo -u ")
                || (before.starts_with("ssh ") && before.split_whitespace().count() == 2);
            runs.then(|| &l[at..])
        })
        .map(|cmd| {
            let cut = [" #", " |", " <", " >"]
                .iter()
                .filter_map(|c| cmd.find(c))
                .min()
                .unwrap_or(cmd.len());
            cmd[..cut].split_whitespace().map(sample).collect()
        })
        .collect()
}

#[test]
fn every_command_the_readme_shows_parses() {
    // `--version` and `--help` parse into clap's "display this" answers, not errors.
    let fails = |e: &clap::Error| {
        !matches!(
            e.kind(),
            clap::error::ErrorKind::DisplayVersion | clap::error::ErrorKind::DisplayHelp
        )
    };
    let mut checked = 0;
    for words in readme_commands(README, "shiqi-connect") {
        if let Err(e) = shiqi_connect::cli::Cli::try_parse_from(&words).map(drop) {
            assert!(
                !fails(&e),
                "README: `{}` does not parse:\n{e}",
                words.join(" ")
            );
        }
        checked += 1;
    }
    for words in readme_commands(README, "shiqi-ca-agent") {
        if let Err(e) = shiqi_ca_agent::cli::Cli::try_parse_from(&words).map(drop) {
            assert!(
                !fails(&e),
                "README: `{}` does not parse:\n{e}",
                words.join(" ")
            );
        }
        checked += 1;
    }
    assert!(checked > 30, "only {checked} README commands found");
}
