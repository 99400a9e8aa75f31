//! `shiqi-connect man [DIR]`: man pages rendered by clap_mangen from the clap definitions —
//! the main page on stdout, or every page (`shiqi-connect.1`, `shiqi-connect-tunnel-up.1`, …)
//! written into DIR through `fsutil` (0644: man pages are for everyone).

use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory as _;

use crate::cli::Cli;
use crate::commands::print_stdout;
use crate::fsutil;

/// Every page: file name and roff text, the main page first.
pub(crate) fn pages() -> Vec<(String, Vec<u8>)> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Gives each subcommand its full name (`shiqi-connect-tunnel-up`), as clap_mangen's own
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

/// Runs `man`.
///
/// # Errors
/// When DIR or a page cannot be written, or stdout cannot.
pub(crate) fn run(dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    let pages = pages();
    let Some(dir) = dir else {
        let (_, main) = &pages[0];
        print_stdout(&String::from_utf8_lossy(main))?;
        return Ok(ExitCode::SUCCESS);
    };
    fsutil::create_dir_all(dir)?;
    let mut listing = String::new();
    for (name, page) in &pages {
        let path = dir.join(name);
        fsutil::write_shared(&path, page)?;
        listing.push_str(&format!("{}\n", path.display()));
    }
    print_stdout(&listing)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_a_page_that_renders() {
        let pages = pages();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "shiqi-connect.1");
        for n in [
            "shiqi-connect-setup.1",
            "shiqi-connect-tunnel-up.1",
            "shiqi-connect-datagrip.1",
            "shiqi-connect-jdbc.1",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("tunnel-run")), "{names:?}");
        let main = String::from_utf8_lossy(&pages[0].1);
        assert!(
            main.starts_with(".ie \\n(.g .ds Aq") || main.contains(".TH shiqi-connect 1"),
            "{main}"
        );
        assert!(main.contains(".TH shiqi-connect 1"), "{main}");
        assert!(main.contains("datagrip"), "{main}");
        let jdbc = pages
            .iter()
            .find(|(n, _)| n == "shiqi-connect-jdbc.1")
            .expect("jdbc");
        assert!(String::from_utf8_lossy(&jdbc.1).contains("mariadb"));
    }

    #[test]
    fn writes_every_page_readable_by_all() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("man1");
        run(Some(&out)).expect("writes");
        let page = out.join("shiqi-connect-jdbc.1");
        if cfg!(unix) {
            assert_eq!(crate::os::files::mode(&page), Some(0o644));
        }
        assert_eq!(std::fs::read_dir(&out).expect("ls").count(), pages().len());
    }
}
