//! Step 4b: putting a profile on disk all at once. The files go into a staging folder next to
//! the target (`$SHIQI_HOME/.NAME.tmp-XXXX`), which is then renamed into place — swapped with
//! the old profile under `--force` — so a failure at any point leaves either the old profile or
//! none, never half of one.

use std::path::{Path, PathBuf};

use shiqi_ca::ProfileName;

use crate::error::{Error, ProfileError};
use crate::fsutil;

/// One file of a profile: its name in the folder and its bytes.
pub(crate) struct ProfileFile {
    /// File name, e.g. `client.key`.
    pub(crate) name: &'static str,
    /// Content (may be a secret; never logged).
    pub(crate) bytes: Vec<u8>,
}

impl std::fmt::Debug for ProfileFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProfileFile({}, {} bytes)", self.name, self.bytes.len())
    }
}

/// What [`install`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Installed {
    /// A new profile folder.
    Created(PathBuf),
    /// An existing profile was replaced (`--force`).
    Replaced(PathBuf),
}

/// Checks, before any work, that `name` may be written under `root`.
///
/// # Errors
/// [`ProfileError::Exists`] when it exists and `force` is off.
pub(crate) fn check_free(root: &Path, name: &ProfileName, force: bool) -> Result<(), Error> {
    let dir = crate::profile::dir(root, name);
    if !force && dir.symlink_metadata().is_ok() {
        return Err(Error::Profile(ProfileError::Exists {
            name: name.to_string(),
            path: dir,
        }));
    }
    Ok(())
}

/// Writes `files` as profile `name` under `root` (created 0700 if missing).
///
/// # Errors
/// [`ProfileError::Exists`] without `force`; [`Error::Io`] on any file-system failure, after
/// which the staging folder is gone and the previous profile (if any) is untouched.
#[tracing::instrument(skip_all, fields(profile = %name))]
pub(crate) fn install(
    root: &Path,
    name: &ProfileName,
    files: &[ProfileFile],
    force: bool,
) -> Result<Installed, Error> {
    fsutil::create_private_dir(root)?;
    check_free(root, name, force)?;
    let target = crate::profile::dir(root, name);
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempdir_in(root)
        .map_err(|source| Error::Io {
            action: "create a staging folder in",
            path: root.to_path_buf(),
            source,
        })?;
    fsutil::set_visibility(staging.path(), fsutil::Visibility::Private)?;
    for f in files {
        fsutil::write_private(&staging.path().join(f.name), &f.bytes)?;
    }
    fsutil::sync_dir(staging.path())?;
    tracing::debug!(staging = %staging.path().display(), files = files.len(), "profile staged");

    let installed = if target.symlink_metadata().is_ok() {
        // `--force` over a profile whose tunnel runs: keep its pid file, log and control
        // socket, so that `tunnel down` and `ssh -O exit` can still stop it.
        let names: Vec<&str> = files.iter().map(|f| f.name).collect();
        carry_over(&target, staging.path(), &names)?;
        swap(staging.path(), &target)?;
        // The staging path now holds the old profile; dropping the TempDir removes it.
        drop(staging);
        Installed::Replaced(target)
    } else {
        std::fs::rename(staging.path(), &target).map_err(|source| Error::Io {
            action: "move the new profile into place at",
            path: target.clone(),
            source,
        })?;
        // Renamed away: nothing left for the TempDir to delete.
        let _ = staging.keep();
        Installed::Created(target)
    };
    fsutil::sync_dir(root)?;
    Ok(installed)
}

/// A complete profile in a staging folder next to its target (`$SHIQI_HOME/.NAME.tmp-XXXX`),
/// not yet in place: `rotate` checks the new certificate from here before anything changes.
/// Dropped without [`Staged::replace`], it is removed and the old profile is untouched.
pub(crate) struct Staged {
    root: PathBuf,
    target: PathBuf,
    staging: tempfile::TempDir,
    names: Vec<&'static str>,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Staged({})", self.staging.path().display())
    }
}

/// Writes `files` into a fresh staging folder for profile `name` under `root`.
///
/// # Errors
/// [`Error::Io`] on any file-system failure (the staging folder is then removed).
pub(crate) fn stage(
    root: &Path,
    name: &ProfileName,
    files: &[ProfileFile],
) -> Result<Staged, Error> {
    fsutil::create_private_dir(root)?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempdir_in(root)
        .map_err(|source| Error::Io {
            action: "create a staging folder in",
            path: root.to_path_buf(),
            source,
        })?;
    fsutil::set_visibility(staging.path(), fsutil::Visibility::Private)?;
    for f in files {
        fsutil::write_private(&staging.path().join(f.name), &f.bytes)?;
    }
    fsutil::sync_dir(staging.path())?;
    Ok(Staged {
        root: root.to_path_buf(),
        target: crate::profile::dir(root, name),
        staging,
        names: files.iter().map(|f| f.name).collect(),
    })
}

impl Staged {
    /// The staging folder: a complete profile (its files name the final paths, not this one).
    pub(crate) fn path(&self) -> &Path {
        self.staging.path()
    }

    /// Puts the staged profile in place of the existing one in one atomic swap.
    ///
    /// Entries of the old folder that the new profile does not replace — the tunnel's
    /// `tunnel.pid`, `tunnel.state.json`, `tunnel.log` and OpenSSH's control socket — are
    /// hard-linked into the new folder first: a tunnel running in the background keeps its
    /// log, its pid file and its control socket (a socket is found by its inode, which the link
    /// keeps), so `tunnel status`, `tunnel down` and `ssh -O exit` go on working.
    ///
    /// # Errors
    /// [`Error::Io`]; the old profile is then untouched.
    pub(crate) fn replace(self) -> Result<Installed, Error> {
        if self.target.symlink_metadata().is_err() {
            std::fs::rename(self.staging.path(), &self.target).map_err(|source| Error::Io {
                action: "move the new profile into place at",
                path: self.target.clone(),
                source,
            })?;
            let _ = self.staging.keep();
            fsutil::sync_dir(&self.root)?;
            return Ok(Installed::Created(self.target));
        }
        carry_over(&self.target, self.staging.path(), &self.names)?;
        swap(self.staging.path(), &self.target)?;
        // The staging path now holds the old profile; dropping the TempDir removes it.
        let Self {
            root,
            target,
            staging,
            ..
        } = self;
        drop(staging);
        fsutil::sync_dir(&root)?;
        Ok(Installed::Replaced(target))
    }
}

/// Hard-links every entry of `old` that is not a profile file (nor one of `replaced`, a leftover
/// temporary file or a folder) into `new`.
fn carry_over(old: &Path, new: &Path, replaced: &[&str]) -> Result<(), Error> {
    let entries = std::fs::read_dir(old).map_err(|source| Error::Io {
        action: "read the profile folder",
        path: old.to_path_buf(),
        source,
    })?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(text) = name.to_str() else { continue };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        // A profile file the new profile does not have (say, `my.cnf` of a server that no
        // longer has MySQL) is not carried over: only what others put there (the tunnel's).
        if replaced.contains(&text)
            // Every file a profile can have is never carried over from an old profile.
            || crate::profile::files::kind(text).is_some()
            || text.starts_with(".shiqi-tmp-")
            || is_dir
        {
            continue;
        }
        let to = new.join(&name);
        if let Err(source) = std::fs::hard_link(entry.path(), &to) {
            // A file system without hard links: a copy keeps what can be kept.
            tracing::debug!(file = text, error = %source, "cannot link; copying");
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                std::fs::copy(entry.path(), &to).map_err(|source| Error::Io {
                    action: "carry over",
                    path: entry.path(),
                    source,
                })?;
            }
        }
    }
    Ok(())
}

/// Exchanges two folders atomically where the OS can ([`crate::os::files::exchange`]);
/// elsewhere, or where the file system cannot, moves the old one aside first and restores it if
/// the second rename fails.
fn swap(staging: &Path, target: &Path) -> Result<(), Error> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    };
    if crate::os::files::exchange(staging, target) {
        return Ok(());
    }
    let aside = target.with_file_name(format!(
        ".{}.old-{}",
        target
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::rename(target, &aside).map_err(io("move the old profile aside", target))?;
    if let Err(source) = std::fs::rename(staging, target) {
        let _ = std::fs::rename(&aside, target);
        return Err(Error::Io {
            action: "move the new profile into place at",
            path: target.to_path_buf(),
            source,
        });
    }
    // The staging path is now free; put the old profile there so the caller's cleanup removes it.
    std::fs::rename(&aside, staging).map_err(io("clean up the old profile at", &aside))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn files(content: &str) -> Vec<ProfileFile> {
        vec![
            ProfileFile {
                name: "client.key",
                bytes: content.as_bytes().to_vec(),
            },
            ProfileFile {
                name: "profile.json",
                bytes: b"{}".to_vec(),
            },
        ]
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn creates_then_refuses_then_replaces_atomically() {
        let home = tempfile::tempdir().expect("tempdir");
        let root = home.path().join(".shiqi");
        let name: ProfileName = "saige".parse().expect("name");

        let first = install(&root, &name, &files("one"), false).expect("create");
        let dir = root.join("saige");
        assert_eq!(first, Installed::Created(dir.clone()));
        // Where the OS has mode bits (not Windows).
        use crate::os::files::mode;
        if mode(&root).is_some() {
            assert_eq!((mode(&root), mode(&dir)), (Some(0o700), Some(0o700)));
        }
        assert_eq!(listing(&dir), ["client.key", "profile.json"]);

        let e = install(&root, &name, &files("two"), false).expect_err("exists");
        assert!(matches!(e, Error::Profile(ProfileError::Exists { .. })));
        assert_eq!(
            fs::read_to_string(dir.join("client.key")).expect("read"),
            "one"
        );

        let again = install(&root, &name, &files("two"), true).expect("replace");
        assert_eq!(again, Installed::Replaced(dir.clone()));
        assert_eq!(
            fs::read_to_string(dir.join("client.key")).expect("read"),
            "two"
        );
        // No staging or old folder is left next to the profile.
        assert_eq!(listing(&root), ["saige"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_profile_and_no_staging() {
        let home = tempfile::tempdir().expect("tempdir");
        let root = home.path().to_path_buf();
        let name: ProfileName = "saige".parse().expect("name");
        install(&root, &name, &files("one"), false).expect("create");
        // A file name with a missing sub-folder cannot be written.
        let bad = vec![ProfileFile {
            name: "no/such/dir",
            bytes: vec![],
        }];
        assert!(install(&root, &name, &bad, true).is_err());
        assert_eq!(
            fs::read_to_string(root.join("saige/client.key")).expect("read"),
            "one"
        );
        assert_eq!(listing(&root), ["saige"]);
    }

    #[test]
    fn staged_replace_keeps_the_tunnel_files_and_a_dropped_stage_changes_nothing() {
        let home = tempfile::tempdir().expect("tempdir");
        let root = home.path().to_path_buf();
        let name: ProfileName = "saige".parse().expect("name");
        install(&root, &name, &files("one"), false).expect("create");
        let dir = root.join("saige");
        fsutil::write_private(&dir.join("tunnel.pid"), b"4242\n").expect("pid");
        // OpenSSH's control socket (none on Windows: Win32-OpenSSH has no ControlMaster).
        let sock = crate::os::control::ControlSocket::bind(&dir.join("tunnel.sock"));

        // Dropped: the old profile is untouched and no staging folder is left.
        let staged = stage(&root, &name, &files("two")).expect("stage");
        assert_eq!(
            fs::read_to_string(staged.path().join("client.key")).expect("read"),
            "two"
        );
        drop(staged);
        assert_eq!(listing(&root), ["saige"]);
        assert_eq!(
            fs::read_to_string(dir.join("client.key")).expect("read"),
            "one"
        );

        let staged = stage(&root, &name, &files("two")).expect("stage");
        assert_eq!(
            staged.replace().expect("replace"),
            Installed::Replaced(dir.clone())
        );
        assert_eq!(
            fs::read_to_string(dir.join("client.key")).expect("read"),
            "two"
        );
        assert_eq!(
            fs::read_to_string(dir.join("tunnel.pid")).expect("pid kept"),
            "4242\n"
        );
        // The control socket still reaches the listener through the new folder.
        if let Some(sock) = &sock {
            assert!(sock.reached_at(&dir.join("tunnel.sock")));
        }
        assert_eq!(listing(&root), ["saige"]);
    }

    #[test]
    fn swap_fallback_restores_on_failure_free_path() {
        let home = tempfile::tempdir().expect("tempdir");
        let a = home.path().join("a");
        let b = home.path().join("b");
        fsutil::create_private_dir(&a).expect("a");
        fsutil::create_private_dir(&b).expect("b");
        fsutil::write_private(&a.join("f"), b"new").expect("write");
        fsutil::write_private(&b.join("f"), b"old").expect("write");
        swap(&a, &b).expect("swap");
        assert_eq!(fs::read_to_string(b.join("f")).expect("read"), "new");
        assert_eq!(fs::read_to_string(a.join("f")).expect("read"), "old");
    }
}
