//! One run per profile at a time: a lock file in `$SHIQI_HOME/.locks/`, held for the run by
//! `setup`, `rotate`, every renewal and every in-place change of `profile.json`
//! ([`super::store`]). Whoever holds it may sweep the name's staging folders (`.NAME.tmp-*`)
//! that a killed run left, since no live run can own them. The key journal and the renewal
//! record beside it (`steps::journal`) are the holder's too.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use shiqi_ca::ProfileName;

use crate::error::{Error, ProfileError};
use crate::fsutil;

/// The folder of lock and journal files under the profiles' root.
const LOCKS: &str = ".locks";

/// How long a command run by hand waits for another run on the same profile before it gives
/// up: the tunnel's renewal holds the lock for a few seconds (one signature, one login per
/// service), a setup for about as long.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

/// How often a waiting run tries the lock again.
const RETRY: Duration = Duration::from_millis(100);

/// The held lock of one name; released when dropped (or when the process dies).
#[derive(Debug)]
pub(crate) struct NameLock {
    _file: File,
    root: PathBuf,
    name: ProfileName,
}

impl NameLock {
    /// `.locks/NAME.SUFFIX` beside the lock: the files only its holder may change (the key
    /// journal, the renewal record).
    pub(crate) fn file(&self, suffix: &str) -> PathBuf {
        file(&self.root, &self.name, suffix)
    }
}

/// `ROOT/.locks/NAME.SUFFIX`.
pub(crate) fn file(root: &Path, name: &ProfileName, suffix: &str) -> PathBuf {
    root.join(LOCKS).join(format!("{name}.{suffix}"))
}

/// Takes the name's lock, waiting up to `patience` for a run that holds it (the tunnel's
/// renewal, a `rotate` in another terminal): for commands run by hand, which would otherwise
/// fail only because they raced the tunnel.
///
/// # Errors
/// As [`lock`], [`ProfileError::Busy`] once `patience` has passed.
pub(crate) async fn lock_waiting(
    root: &Path,
    name: &ProfileName,
    patience: Duration,
) -> Result<NameLock, Error> {
    let deadline = Instant::now() + patience;
    loop {
        match lock(root, name) {
            Err(Error::Profile(ProfileError::Busy { .. })) if Instant::now() < deadline => {
                tokio::time::sleep(RETRY).await;
            }
            other => return other,
        }
    }
}

/// [`lock_waiting`] for code that is not async (its callers hold no connection that a blocked
/// thread would starve). A `patience` of zero tries once.
///
/// # Errors
/// As [`lock_waiting`].
pub(crate) fn lock_blocking(
    root: &Path,
    name: &ProfileName,
    patience: Duration,
) -> Result<NameLock, Error> {
    let deadline = Instant::now() + patience;
    loop {
        match lock(root, name) {
            Err(Error::Profile(ProfileError::Busy { .. })) if Instant::now() < deadline => {
                std::thread::sleep(RETRY);
            }
            other => return other,
        }
    }
}

/// Takes the name's lock (refusing if another run holds it) and sweeps its stale staging folders.
///
/// # Errors
/// [`ProfileError::Busy`] when another run holds the lock; [`Error::Io`] on file errors.
pub(crate) fn lock(root: &Path, name: &ProfileName) -> Result<NameLock, Error> {
    let locks = root.join(LOCKS);
    fsutil::create_private_dir(root)?;
    fsutil::create_private_dir(&locks)?;
    let path = file(root, name, "lock");
    let io = |action| {
        let path = path.clone();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    };
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io("open the lock file"))?;
    fsutil::set_visibility(&path, fsutil::Visibility::Private)?;
    match held.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(Error::Profile(ProfileError::Busy {
                name: name.to_string(),
            }));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io("lock")(e)),
    }
    sweep(root, name);
    Ok(NameLock {
        _file: held,
        root: root.to_path_buf(),
        name: name.clone(),
    })
}

/// Removes `.NAME.tmp-*` folders: only a run holding the name's lock calls this, and every
/// staging run holds it, so these were left by a run that died.
fn sweep(root: &Path, name: &ProfileName) {
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let path = e.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::debug!(path = %path.display(), "removed a stale staging folder"),
                Err(err) => tracing::warn!("cannot remove `{}`: {err}", path.display()),
            }
        }
    }
}
