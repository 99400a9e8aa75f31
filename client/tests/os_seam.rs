//! Every OS difference of the laptop side lives in `client/src/os/` (docs/design.md, other
//! operating systems): outside it, the code that ships (each file up to its `#[cfg(test)]`
//! module) names no Unix- or Windows-only API and asks no `cfg` about the OS.

use std::path::Path;

const FORBIDDEN: &[&str] = &[
    "std::os::unix",
    "std::os::windows",
    "cfg(unix",
    "cfg(windows",
    "cfg(not(unix",
    "cfg(not(windows",
    "cfg!(unix",
    "cfg!(windows",
    "target_os",
    "target_vendor",
    "target_family",
    "tokio::signal::unix",
    "tokio::signal::windows",
    "tokio::net::windows",
    "rustix::",
    "nix::",
    "process_group",
    "connect_uds",
    "connect_named_pipe",
    "PermissionsExt",
    "OpenOptionsExt",
    "DirBuilderExt",
    "MetadataExt",
    "CommandExt",
    "\"/proc/",
    "\"/etc/passwd",
];

fn visit(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "os") && path.parent() == Some(src()) {
                continue;
            }
            visit(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read");
            for (n, line) in text
                .lines()
                .take_while(|l| l.trim() != "#[cfg(test)]")
                .enumerate()
            {
                for word in FORBIDDEN {
                    if line.contains(word) && !line.trim_start().starts_with("//") {
                        found.push(format!("{}:{}: `{word}`", path.display(), n + 1));
                    }
                }
            }
        }
    }
}

fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

#[test]
fn no_os_specific_api_outside_the_os_module() {
    let mut found = Vec::new();
    visit(src(), &mut found);
    assert!(
        found.is_empty(),
        "move these into client/src/os/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_what_it_looks_for() {
    // The scan is not vacuous: the os module itself is full of them.
    let text = std::fs::read_to_string(src().join("os/control.rs")).expect("read");
    assert!(FORBIDDEN.iter().any(|w| text.contains(w)));
}
