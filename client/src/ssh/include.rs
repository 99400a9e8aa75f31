//! The `Include` line that makes `~/.ssh/config` read a profile's `ssh_config`.

use std::path::Path;

use crate::error::Error;
use crate::fsutil;
use crate::ssh::config::split_directive;

/// What [`install_include`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeChange {
    /// The line was already at the top.
    AlreadyThere,
    /// The line was added.
    Added,
    /// The line was found below a `Host`/`Match` block (where it is conditional) and moved up.
    Moved,
}

/// Puts `Include <include>` at the top of the ssh config `text`: ssh applies an `Include` to every
/// host only when it stands before the first `Host` or `Match` line. `None` when already there.
pub fn add_include(text: &str, include: &str, comment: &str) -> (Option<String>, IncludeChange) {
    let is_ours = |line: &str| {
        let (k, v) = split_directive(line.trim());
        k.eq_ignore_ascii_case("include") && v.trim_matches('"') == include
    };
    let mut seen_block = false;
    let mut misplaced = false;
    for line in text.lines() {
        let (k, _) = split_directive(line.trim());
        if k.eq_ignore_ascii_case("host") || k.eq_ignore_ascii_case("match") {
            seen_block = true;
        } else if is_ours(line) {
            if !seen_block {
                return (None, IncludeChange::AlreadyThere);
            }
            misplaced = true;
        }
    }
    let mut out = format!("# {comment}\nInclude {include}\n\n");
    for line in text.lines().filter(|l| !is_ours(l)) {
        out.push_str(line);
        out.push('\n');
    }
    let change = if misplaced {
        IncludeChange::Moved
    } else {
        IncludeChange::Added
    };
    (Some(out), change)
}

/// Adds the `Include` line to the ssh config at `config` (usually `~/.ssh/config`), creating it
/// (and `~/.ssh`, 0700) when missing. A symlinked config is written through to its target.
///
/// # Errors
/// When the file cannot be read or written.
pub fn install_include(
    config: &Path,
    include: &str,
    comment: &str,
) -> Result<IncludeChange, Error> {
    let real = std::fs::canonicalize(config).unwrap_or_else(|_| config.to_path_buf());
    if let Some(dir) = real.parent()
        && !dir.exists()
    {
        fsutil::create_private_dir(dir)?;
    }
    let text = fsutil::read_optional(&real)?.unwrap_or_default();
    let (new, change) = add_include(&text, include, comment);
    if let Some(new) = new {
        fsutil::write_private(&real, new.as_bytes())?;
    }
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_goes_on_top_once() {
        let inc = "~/.shiqi/saige/ssh_config";
        let (text, change) = add_include("Host a\n  User b\n", inc, "added by shiqi-connect");
        let text = text.expect("added");
        assert_eq!(change, IncludeChange::Added);
        assert_eq!(
            text,
            "# added by shiqi-connect\nInclude ~/.shiqi/saige/ssh_config\n\nHost a\n  User b\n"
        );
        assert_eq!(
            add_include(&text, inc, "x"),
            (None, IncludeChange::AlreadyThere)
        );

        let (moved, change) = add_include("Host a\nInclude ~/.shiqi/saige/ssh_config\n", inc, "c");
        assert_eq!(change, IncludeChange::Moved);
        assert_eq!(moved.expect("moved").matches("Include").count(), 1);
    }

    #[test]
    fn installs_include_idempotently_on_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join(".ssh/config");
        let inc = "~/.shiqi/saige/ssh_config";
        assert_eq!(
            install_include(&cfg, inc, "c").expect("first"),
            IncludeChange::Added
        );
        assert_eq!(
            install_include(&cfg, inc, "c").expect("again"),
            IncludeChange::AlreadyThere
        );
        let text = std::fs::read_to_string(&cfg).expect("read");
        assert_eq!(text.matches("Include").count(), 1);
    }
}
