//! Private files: written 0600 through a tempfile in the same folder, fsynced, then renamed,
//! so a reader never sees half a key and a crash leaves the old file.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::error::AgentError;

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> AgentError + '_ {
    move |why| AgentError::File {
        path: path.to_owned(),
        why,
    }
}

/// Creates `dir` (and parents) and sets it to 0700.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), AgentError> {
    fs::create_dir_all(dir).map_err(file_error(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(file_error(dir))
}

/// Creates `dir` with mode 0700 if it is missing; an existing folder keeps its mode and owner
/// (`server-cert --out /etc/kafka` must not lock the broker out of its own folder).
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), AgentError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(AgentError::File {
            path: dir.to_owned(),
            why: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "not a folder"),
        }),
        Err(_) => create_private_dir(dir),
    }
}

/// Writes `bytes` to `path` atomically with mode 0600.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AgentError> {
    write_atomic(path, bytes, 0o600)
}

/// Writes `bytes` to `path` atomically with the given mode (0644 for public certificates).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AgentError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(file_error(path))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .map_err(file_error(path))?;
    tmp.write_all(bytes).map_err(file_error(path))?;
    tmp.as_file().sync_all().map_err(file_error(path))?;
    tmp.persist(path).map_err(|e| AgentError::File {
        path: path.to_owned(),
        why: e.error,
    })?;
    Ok(())
}

/// Writes `bytes` to `path` only if it does not exist yet (0600); false if it existed.
pub(crate) fn create_new_private(path: &Path, bytes: &[u8]) -> Result<bool, AgentError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(file_error(path))?;
    tmp.write_all(bytes).map_err(file_error(path))?;
    tmp.as_file().sync_all().map_err(file_error(path))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(true),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(AgentError::File {
            path: path.to_owned(),
            why: e.error,
        }),
    }
}
