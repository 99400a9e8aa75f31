//! Starts DataGrip on a project folder: the `datagrip` launcher JetBrains Toolbox or the
//! tarball's `bin/datagrip.sh` puts on PATH (Border0's CLI does the same: `datagrip DIR`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{DataGripError, Error};

/// The launcher names looked for on PATH, in order: Toolbox's script (`datagrip`;
/// `datagrip.cmd` on Windows), the Windows installer's `datagrip64.exe`, the tarball's
/// `datagrip.sh`.
pub(crate) fn launchers() -> Vec<String> {
    let mut names = crate::os::files::program_names("datagrip");
    names.extend(crate::os::files::program_names("datagrip64"));
    names.push("datagrip.sh".to_owned());
    names
}

/// The first launcher on `path` (a PATH value).
pub(crate) fn find(path: Option<&OsStr>) -> Option<PathBuf> {
    let path = path?;
    let names = launchers();
    std::env::split_paths(path).find_map(|dir| {
        names
            .iter()
            .map(|name| dir.join(name))
            .find(|p| crate::os::files::is_executable(p))
    })
}

/// Starts `launcher DIR` detached from our terminal (the IDE outlives this command).
///
/// # Errors
/// [`DataGripError::Launch`] when it cannot be started.
pub(crate) fn open(launcher: &Path, project: &Path) -> Result<u32, Error> {
    Command::new(launcher)
        .arg(project)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(|child| child.id())
        .map_err(|source| {
            Error::DataGrip(DataGripError::Launch {
                program: launcher.to_path_buf(),
                source,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_executable_launcher_on_path() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        // Not executable (no execute bit; on Windows, no program's extension): skipped.
        let (skipped, runnable) = if cfg!(windows) {
            ("datagrip", "datagrip.cmd")
        } else {
            ("datagrip", "datagrip.sh")
        };
        crate::fsutil::write_private(&a.path().join(skipped), b"#!/bin/sh\n").expect("write");
        crate::fsutil::write_private(&b.path().join(runnable), b"#!/bin/sh\n").expect("write");
        crate::fsutil::set_visibility(
            &b.path().join(runnable),
            crate::fsutil::Visibility::Executable,
        )
        .expect("chmod");
        let path = std::env::join_paths([a.path(), b.path()]).expect("join");
        assert_eq!(find(Some(&path)), Some(b.path().join(runnable)));
        assert_eq!(find(Some(a.path().as_os_str())), None);
        assert_eq!(find(None), None);
    }
}
