//! The README's commands exist with the flags it shows: every `shiqi-connect …` and
//! `shiqi-ca-agent …` line of its code blocks, and of the docs/ pages it links to, is parsed by
//! the real command-line definitions (placeholders filled in). No stack needed.

use clap::Parser as _;

/// The README and the pages its front page sends readers to, by name.
const PAGES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../README.md")),
    ("docs/laptop.md", include_str!("../../docs/laptop.md")),
    ("docs/endpoint.md", include_str!("../../docs/endpoint.md")),
    ("docs/lifetimes.md", include_str!("../../docs/lifetimes.md")),
    ("docs/server.md", include_str!("../../docs/server.md")),
    (
        "docs/server-by-hand.md",
        include_str!("../../docs/server-by-hand.md"),
    ),
    ("docs/teams.md", include_str!("../../docs/teams.md")),
    ("docs/security.md", include_str!("../../docs/security.md")),
    ("docs/install.md", include_str!("../../docs/install.md")),
    ("docs/numbers.md", include_str!("../../docs/numbers.md")),
    (
        "docs/conformance.md",
        include_str!("../../docs/conformance.md"),
    ),
];

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

/// Every docs/ page the README links to is in [`PAGES`], and the front page stays short.
#[test]
fn the_readme_links_its_pages_and_fits_a_newcomer() {
    let readme = PAGES[0].1;
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md is {lines} lines; move a section to docs/"
    );
    let mut rest = readme;
    while let Some(at) = rest.find("](docs/") {
        rest = &rest[at + 2..];
        let target = &rest[..rest.find([')', '#']).unwrap_or(rest.len())];
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(target);
        assert!(
            path.exists(),
            "README links to {target}, which is not there"
        );
        if target.ends_with(".md") && target != "docs/design.md" {
            assert!(
                PAGES.iter().any(|(p, _)| *p == target),
                "README links to {target}: add it to PAGES so its commands are checked"
            );
        }
    }
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
    for (page, text) in PAGES {
        for words in readme_commands(text, "shiqi-connect") {
            if let Err(e) = shiqi_connect::cli::Cli::try_parse_from(&words).map(drop) {
                assert!(
                    !fails(&e),
                    "{page}: `{}` does not parse:\n{e}",
                    words.join(" ")
                );
            }
            checked += 1;
        }
        for words in readme_commands(text, "shiqi-ca-agent") {
            if let Err(e) = shiqi_ca_agent::cli::Cli::try_parse_from(&words).map(drop) {
                assert!(
                    !fails(&e),
                    "{page}: `{}` does not parse:\n{e}",
                    words.join(" ")
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} commands found");
}
