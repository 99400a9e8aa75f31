//! Private files and folders: every write of the client goes through here.
//!
//! A file is written to a tempfile in its own folder (private), synced, then renamed over the
//! target, so a reader sees the old file or the new one and never half of one. Folders are
//! private. Who may read what is [`Visibility`]'s (the OS seam). Nothing here knows what the
//! files mean.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;
pub use crate::os::files::Visibility;

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}

/// Creates `path` (and missing parents) and makes `path` itself private, also when it existed.
///
/// # Errors
/// When a component cannot be created or made private.
pub fn create_private_dir(path: &Path) -> Result<(), Error> {
    crate::os::files::create_private_dir(path).map_err(io("create folder", path))
}

/// Gives a file or folder `visibility`.
///
/// # Errors
/// When it cannot be changed.
pub fn set_visibility(path: &Path, visibility: Visibility) -> Result<(), Error> {
    crate::os::files::set_visibility(path, visibility).map_err(io("set permissions on", path))
}

/// Creates `path` and missing parents with the default mode; an existing folder keeps its mode
/// (for folders that are the user's, not ours: a DataGrip project's `.idea`).
///
/// # Errors
/// When a component cannot be created.
pub fn create_dir_all(path: &Path) -> Result<(), Error> {
    fs::create_dir_all(path).map_err(io("create folder", path))
}

/// Writes `bytes` to `path` atomically, private: tempfile in the same folder, fsync, rename,
/// fsync of the folder. The folder must exist.
///
/// # Errors
/// When the folder is not writable or the disk is full; the target is then untouched.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_atomic(path, bytes, None)
}

/// Like [`write_private`] for a file that is not secret and may be shared (a project's
/// `.idea` files, man pages): an existing file keeps its permissions, a new one is
/// [`Visibility::Shared`].
///
/// # Errors
/// As [`write_private`].
pub fn write_shared(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_atomic(path, bytes, Some(path))
}

/// `keep_from`: the file whose permissions the new one takes (shared when it does not exist);
/// `None`: private.
fn write_atomic(path: &Path, bytes: &[u8], keep_from: Option<&Path>) -> Result<(), Error> {
    let dir = parent(path);
    // tempfile creates its files private; the permissions are set before any byte.
    let mut tmp = tempfile::Builder::new()
        .prefix(".shiqi-tmp-")
        .tempfile_in(&dir)
        .map_err(io("create a temporary file in", &dir))?;
    if let Some(from) = keep_from {
        let kept = crate::os::files::copy_permissions(from, tmp.path())
            .map_err(io("set permissions on", tmp.path()))?;
        if !kept {
            set_visibility(tmp.path(), Visibility::Shared)?;
        }
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
    crate::os::files::sync_dir(dir).map_err(io("sync folder", dir))
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
    use crate::os::files::mode;

    #[test]
    fn writes_private_files_atomically() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("a/b");
        create_private_dir(&sub).expect("mkdir");
        let f = sub.join("x");
        write_private(&f, b"one").expect("write");
        write_private(&f, b"two").expect("overwrite");
        assert_eq!(fs::read(&f).expect("read"), b"two");
        if cfg!(unix) {
            assert_eq!(mode(&sub), Some(0o700));
            assert_eq!(mode(&f), Some(0o600));
        }
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&sub).expect("ls").count(), 1);
    }

    #[test]
    fn shared_files_keep_existing_permissions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("dataSources.xml");
        write_shared(&f, b"one").expect("write");
        assert_eq!(fs::read(&f).expect("read"), b"one");
        if cfg!(unix) {
            assert_eq!(mode(&f), Some(0o644));
            // Made private by its owner: it stays so.
            set_visibility(&f, Visibility::Private).expect("chmod");
            write_shared(&f, b"two").expect("write");
            assert_eq!(
                (mode(&f), fs::read(&f).expect("read")),
                (Some(0o600), b"two".to_vec())
            );
        }
    }

    #[test]
    fn tightens_an_existing_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        set_visibility(dir.path(), Visibility::Shared).expect("chmod");
        create_private_dir(dir.path()).expect("mkdir");
        if cfg!(unix) {
            assert_eq!(mode(dir.path()), Some(0o700));
        }
    }
}
