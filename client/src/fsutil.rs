//! Private files and folders: every write of the client goes through here.
//!
//! A file is written to a tempfile in its own folder (mode 0600), synced, then renamed over the
//! target, so a reader sees the old file or the new one and never half of one. Folders are 0700.
//! Nothing here knows what the files mean.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::Error;

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}

/// Creates `path` (and missing parents) and makes `path` itself mode 0700, also when it existed.
///
/// # Errors
/// When a component cannot be created or the mode cannot be set.
pub fn create_private_dir(path: &Path) -> Result<(), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(io("create folder", path))?;
    set_mode(path, 0o700)
}

/// Sets a file's or folder's permission bits.
pub fn set_mode(path: &Path, mode: u32) -> Result<(), Error> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(io("set permissions on", path))
}

/// Creates `path` and missing parents with the default mode; an existing folder keeps its mode
/// (for folders that are the user's, not ours: a DataGrip project's `.idea`).
///
/// # Errors
/// When a component cannot be created.
pub fn create_dir_all(path: &Path) -> Result<(), Error> {
    fs::create_dir_all(path).map_err(io("create folder", path))
}

/// Writes `bytes` to `path` atomically with mode 0600: tempfile in the same folder, fsync,
/// rename, fsync of the folder. The folder must exist.
///
/// # Errors
/// When the folder is not writable or the disk is full; the target is then untouched.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_with_mode(path, bytes, 0o600)
}

/// Like [`write_private`] for a file that is not secret and may be shared (a project's
/// `.idea` files, man pages): the existing file's mode is kept, a new file gets `mode`.
///
/// # Errors
/// As [`write_private`].
pub fn write_keeping_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let mode = fs::metadata(path).map_or(mode, |m| m.permissions().mode() & 0o7777);
    write_with_mode(path, bytes, mode)
}

fn write_with_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let dir = parent(path);
    // tempfile creates its files with mode 0600 on Unix; the mode is set before any byte.
    let mut tmp = tempfile::Builder::new()
        .prefix(".shiqi-tmp-")
        .tempfile_in(&dir)
        .map_err(io("create a temporary file in", &dir))?;
    if mode != 0o600 {
        set_mode(tmp.path(), mode)?;
    }
    tmp.write_all(bytes).map_err(io("write", tmp.path()))?;
    tmp.as_file().sync_all().map_err(io("sync", tmp.path()))?;
    tmp.persist(path).map_err(|e| Error::Io {
        action: "write",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    sync_dir(&dir)
}

/// Flushes a folder's entries (renames, new files) to disk.
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io("sync folder", dir))
}

/// Reads a file to a string; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Io {
            action: "read",
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_private_files_atomically() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("a/b");
        create_private_dir(&sub).expect("mkdir");
        let mode = fs::metadata(&sub).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);

        let f = sub.join("x");
        write_private(&f, b"one").expect("write");
        write_private(&f, b"two").expect("overwrite");
        assert_eq!(fs::read(&f).expect("read"), b"two");
        let mode = fs::metadata(&f).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&sub).expect("ls").count(), 1);
    }

    #[test]
    fn shared_files_keep_an_existing_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("dataSources.xml");
        write_keeping_mode(&f, b"one", 0o644).expect("write");
        let mode = |f: &Path| fs::metadata(f).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&f), 0o644);
        set_mode(&f, 0o640).expect("chmod");
        write_keeping_mode(&f, b"two", 0o644).expect("write");
        assert_eq!(
            (mode(&f), fs::read(&f).expect("read")),
            (0o640, b"two".to_vec())
        );
    }

    #[test]
    fn tightens_an_existing_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        set_mode(dir.path(), 0o755).expect("chmod");
        create_private_dir(dir.path()).expect("mkdir");
        let mode = fs::metadata(dir.path()).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
