//! The one way a profile changes in place: [`update`] takes the profile's lock
//! ([`super::lock`], which `setup`, `rotate` and every renewal hold for their whole run), reads
//! `profile.json` under it, applies the change, and writes `profile.json` last, atomically.
//!
//! Why one place: a writer that read `profile.json` before the lock could write back a
//! certificate section that a renewal had replaced meanwhile, so the profile named a revoked
//! serial while its files held the new one (the next rotation then replaced the wrong one, and
//! the renewal's certificate stayed valid and nobody's; issue 42). A change is therefore a
//! function of the profile as it is under the lock, never a profile read earlier.
//!
//! The whole-folder swaps of `setup` and `rotate` (`steps::write`) hold the same lock.

use std::path::Path;
use std::time::Duration;

use shiqi_ca::ProfileName;

use super::{Profile, files, lock};
use crate::error::{Error, ProfileError};

/// Applies `change` to the profile in `dir` under its lock, waiting up to `patience` for
/// another run that holds it (zero: try once, for the tunnel, which tries again later).
/// `change` may write other files of the folder (rendered from the profile it is given);
/// `profile.json` is written after it, and only when the profile changed.
///
/// # Errors
/// [`ProfileError::Busy`] when another run held the lock for `patience`;
/// [`ProfileError::Read`] when `profile.json` cannot be read; `change`'s error (nothing more is
/// written); [`Error::Io`] when `profile.json` cannot be written.
pub(crate) fn update<T>(
    dir: &Path,
    patience: Duration,
    change: impl FnOnce(&mut Profile) -> Result<T, Error>,
) -> Result<T, Error> {
    let root = dir.parent().unwrap_or(dir);
    let name = name_of(dir)?;
    let _lock = lock::lock_blocking(root, &name, patience)?;
    let before = Profile::load(dir)?;
    let mut profile = before.clone();
    let out = change(&mut profile)?;
    if profile != before {
        profile.save(dir)?;
    }
    Ok(out)
}

/// The profile's name: its folder's (`profile::dir` is `ROOT/NAME`).
fn name_of(dir: &Path) -> Result<ProfileName, Error> {
    let bad = |why: &str| {
        Error::Profile(ProfileError::Read {
            path: dir.join(files::PROFILE_JSON),
            why: why.to_owned(),
        })
    };
    dir.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| bad("its folder has no name"))?
        .parse()
        .map_err(|_| bad("its folder is not named after a profile"))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::*;
    use crate::profile::ForwardRecord;
    use crate::profile::tests::sample;

    fn profile_dir() -> (tempfile::TempDir, std::path::PathBuf, Profile) {
        let root = tempfile::tempdir().expect("tempdir");
        let p = sample();
        let dir = crate::profile::dir(root.path(), &p.name);
        crate::fsutil::create_private_dir(&dir).expect("dir");
        p.save(&dir).expect("profile.json");
        (root, dir, p)
    }

    /// Mirrors the daemon recording brokers while `tunnel up` switches the endpoint and a
    /// renewal rewrites the certificate: 20 writers at once, each adding its own forward. A
    /// read-modify-write without the lock loses some of them.
    #[test]
    fn twenty_concurrent_writers_lose_no_change() {
        const N: u16 = 20;
        let (_root, dir, p) = profile_dir();
        let dir = Arc::new(dir);
        let barrier = Arc::new(Barrier::new(usize::from(N)));
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (dir, barrier) = (Arc::clone(&dir), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    update(&dir, Duration::from_secs(30), |profile| {
                        let mut f: ForwardRecord =
                            profile.forwards.first().cloned().unwrap_or(ForwardRecord {
                                local_port: 0,
                                remote_host: "localhost".parse().expect("host"),
                                remote_port: shiqi_ca::Port::try_from(1).expect("port"),
                                purpose: String::new(),
                            });
                        f.local_port = 50_000 + i;
                        // Widen the window a racing writer would fall into.
                        std::thread::sleep(Duration::from_millis(5));
                        profile.forwards.push(f);
                        Ok(())
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer thread").expect("update");
        }
        let after = Profile::load(&dir).expect("load");
        assert_eq!(after.forwards.len(), p.forwards.len() + usize::from(N));
    }

    #[test]
    fn a_held_profile_is_busy_and_a_failed_change_writes_nothing() {
        let (root, dir, p) = profile_dir();
        let held = lock::lock(root.path(), &p.name).expect("lock");
        let busy = update(&dir, Duration::ZERO, |profile| {
            profile.brokers.clear();
            Ok(())
        });
        assert!(
            matches!(busy, Err(Error::Profile(ProfileError::Busy { .. }))),
            "{busy:?}"
        );
        drop(held);
        let failed: Result<(), Error> = update(&dir, Duration::ZERO, |profile| {
            profile.brokers.clear();
            Err(Error::Profile(ProfileError::Busy {
                name: "any".to_owned(),
            }))
        });
        assert!(failed.is_err());
        assert_eq!(Profile::load(&dir).expect("load"), p);
    }
}
