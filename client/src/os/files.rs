//! What a file's permissions say: Unix mode bits, which Windows does not have (its ACLs are
//! not read here, so the mode checks that use this say nothing there).

use std::path::Path;

/// The permission bits (`0o777`) of `path`, following links; `None` when it cannot be read or
/// the OS has no mode bits.
#[cfg(unix)]
pub fn mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

/// The permission bits (`0o777`) of `path`: Windows has none.
#[cfg(not(unix))]
pub fn mode(_path: &Path) -> Option<u32> {
    None
}

/// Whether `path` is a file this account may run (any execute bit on Unix; any file elsewhere).
#[cfg(unix)]
pub fn is_executable(path: &Path) -> bool {
    path.is_file() && mode(path).is_some_and(|m| m & 0o111 != 0)
}

/// Whether `path` is a file this account may run (any execute bit on Unix; any file elsewhere).
#[cfg(not(unix))]
pub fn is_executable(path: &Path) -> bool {
    path.is_file()
}
