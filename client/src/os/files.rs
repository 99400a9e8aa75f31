//! What a file's permissions say: Unix mode bits, which Windows does not have (its ACLs are
//! not read here, so the mode checks that use this say nothing there).

use std::path::Path;

/// The permission bits (`0o777`) of `path`, following links; `None` when it cannot be read or
/// the OS has no mode bits.
#[cfg(unix)]
pub(crate) fn mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

/// The permission bits (`0o777`) of `path`: Windows has none.
#[cfg(not(unix))]
pub(crate) fn mode(_path: &Path) -> Option<u32> {
    None
}

/// Whether `path` is a file this account may run (any execute bit on Unix; any file elsewhere).
#[cfg(unix)]
pub(crate) fn is_executable(path: &Path) -> bool {
    path.is_file() && mode(path).is_some_and(|m| m & 0o111 != 0)
}

/// Whether `path` is a file Windows runs: `.exe`, `.cmd`, `.bat` or `.com`.
#[cfg(not(unix))]
pub(crate) fn is_executable(path: &Path) -> bool {
    path.is_file()
        && path.extension().is_some_and(|e| {
            ["exe", "cmd", "bat", "com"]
                .iter()
                .any(|x| e.eq_ignore_ascii_case(x))
        })
}

/// The file names a program called `stem` has on this OS: `stem` on Unix; `stem.exe`,
/// `stem.cmd`, `stem.bat` on Windows.
pub(crate) fn program_names(stem: &str) -> Vec<String> {
    if cfg!(windows) {
        ["exe", "cmd", "bat"]
            .iter()
            .map(|x| format!("{stem}.{x}"))
            .collect()
    } else {
        vec![stem.to_owned()]
    }
}

/// `path` as the files the client writes name it: `/` between components on Windows too, since
/// Java's `.properties` and MySQL's option files read `\` as an escape, and Windows (Java,
/// OpenSSL, OpenSSH, MySQL clients) takes `/` as well.
pub(crate) fn portable(path: &Path) -> String {
    let text = path.display().to_string();
    if cfg!(windows) {
        text.replace('\\', "/")
    } else {
        text
    }
}

/// Flushes a folder's entries (renames, new files) to disk. Unix: `fsync` on the folder.
/// Windows cannot open a folder as a file without backup semantics, and NTFS journals its
/// renames: nothing to do there.
#[cfg(unix)]
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir).and_then(|f| f.sync_all())
}

/// Flushes a folder's entries to disk: nothing to do on Windows (see the Unix version).
#[cfg(not(unix))]
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::metadata(dir).map(drop)
}

/// Who may read a file or folder the client writes. Unix: private files are 0600 and private
/// folders 0700, shared ones 0644/0755, executables 0755. Windows: a new file inherits its
/// folder's ACL, and the profile lives under `%USERPROFILE%`, which only its owner (and
/// administrators) may read; nothing more is set there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    /// Only this account: keys, passwords, profiles.
    Private,
    /// Readable by everyone: man pages, a project's `.idea` files.
    Shared,
    /// Readable and runnable by everyone (the tests' stand-in for DataGrip's launcher).
    Executable,
}

impl Visibility {
    /// The Unix permission bits for a file (`dir = false`) or a folder.
    pub(crate) fn mode(self, dir: bool) -> u32 {
        match (self, dir) {
            (Self::Private, false) => 0o600,
            (Self::Private, true) => 0o700,
            (Self::Shared, false) => 0o644,
            (Self::Shared, true) | (Self::Executable, _) => 0o755,
        }
    }
}

/// Gives `path` (a file or folder) `visibility`.
///
/// # Errors
/// When `path` cannot be read or changed.
#[cfg(unix)]
pub(crate) fn set_visibility(path: &Path, visibility: Visibility) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::fs::metadata(path)?.is_dir();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(visibility.mode(dir)))
}

/// Gives `path` `visibility`: the folder's inherited ACL already decides (see [`Visibility`]).
///
/// # Errors
/// When `path` does not exist.
#[cfg(not(unix))]
pub(crate) fn set_visibility(path: &Path, _visibility: Visibility) -> std::io::Result<()> {
    std::fs::metadata(path).map(drop)
}

/// Creates `path` and its missing parents, `path` itself private from its first moment.
///
/// # Errors
/// When a component cannot be created.
#[cfg(unix)]
pub(crate) fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(Visibility::Private.mode(true))
        .create(path)?;
    // It may have existed with other bits.
    set_visibility(path, Visibility::Private)
}

/// Creates `path` and its missing parents.
///
/// # Errors
/// When a component cannot be created.
#[cfg(not(unix))]
pub(crate) fn create_private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)
}

/// Gives `to` the permissions `from` has, if `from` exists; `false` when it does not.
///
/// # Errors
/// When `to` cannot be changed.
pub(crate) fn copy_permissions(from: &Path, to: &Path) -> std::io::Result<bool> {
    match std::fs::metadata(from) {
        Ok(m) => std::fs::set_permissions(to, m.permissions()).map(|()| true),
        Err(_) => Ok(false),
    }
}

/// Opens `path` for appending, creating it private.
///
/// # Errors
/// When it cannot be opened or created.
pub(crate) fn open_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, Visibility::Private.mode(false));
    options.open(path)
}

/// Exchanges two folders in one step where the OS can (Linux `renameat2(RENAME_EXCHANGE)`,
/// macOS `renameatx_np(RENAME_SWAP)`, through rustix); `Ok(false)` elsewhere or where the file
/// system cannot, and nothing was changed.
pub(crate) fn exchange(a: &Path, b: &Path) -> bool {
    #[cfg(any(target_os = "linux", target_vendor = "apple"))]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
            Ok(()) => return true,
            Err(e) => tracing::debug!(error = %e, "RENAME_EXCHANGE unavailable"),
        }
    }
    #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
    let _ = (a, b);
    false
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn visibility_gives_the_unix_bits_for_files_and_folders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("f");
        crate::fsutil::write_private(&f, b"x").expect("write");
        for (v, file, folder) in [
            (Visibility::Private, 0o600, 0o700),
            (Visibility::Shared, 0o644, 0o755),
            (Visibility::Executable, 0o755, 0o755),
        ] {
            set_visibility(&f, v).expect("file");
            set_visibility(dir.path(), v).expect("folder");
            assert_eq!(
                (mode(&f), mode(dir.path())),
                (Some(file), Some(folder)),
                "{v:?}"
            );
        }
        let log = dir.path().join("log");
        drop(open_private_append(&log).expect("open"));
        assert_eq!(mode(&log), Some(0o600));
    }
}
