//! One lock per name around everything that grants or takes away what the name may do: `sign`,
//! `provision`, `kafka-user`, `mysql-user`, `revoke` and `unblock`.
//!
//! Without it a `provision` that passed its checks just before `revoke --name bob` blocked the
//! name could create `User:bob`'s ACLs (or `ACCOUNT UNLOCK` the MySQL user) after revoke had
//! deleted them and verified every broker: revoke would report success over a live grant. With
//! it the two run one after the other, so whichever comes second sees the other's result.
//!
//! An advisory lock (`flock(2)` through `File::lock`) on `<state>/locks/NAME.lock`: the kernel
//! drops it when the process dies, so a killed request never leaves the name stuck. Names are
//! [`ProfileName`]s, so the path cannot leave the folder.

use std::fs::{File, OpenOptions, TryLockError};
use std::time::{Duration, Instant};

use shiqi_ca::ProfileName;
use shiqi_ca::inventory::CertKind;

use crate::error::AgentError;
use crate::fsutil;
use crate::state::Context;

/// Longer than any one request takes (a revoke waits up to `[kafka] timeout_secs` for each of
/// its Kafka steps and 10 s for MySQL), short enough that a stuck caller gets an answer.
const WAIT: Duration = Duration::from_secs(120);

/// Held while it lives.
#[derive(Debug)]
pub(crate) struct NameLock {
    _file: File,
}

/// Waits for the lock of `name` (at most two minutes).
///
/// # Errors
/// [`AgentError::File`] when the lock file cannot be opened, [`AgentError::Busy`] when another
/// request holds it too long.
pub(crate) fn acquire(ctx: &Context, name: &ProfileName) -> Result<NameLock, AgentError> {
    acquire_within(ctx, name, WAIT)
}

fn acquire_within(
    ctx: &Context,
    name: &ProfileName,
    wait: Duration,
) -> Result<NameLock, AgentError> {
    let dir = ctx.path("locks");
    if !dir.is_dir() {
        fsutil::create_private_dir(&dir)?;
    }
    let path = dir.join(format!("{name}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|why| AgentError::File {
            path: path.clone(),
            why,
        })?;
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(NameLock { _file: file }),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(AgentError::Busy {
                    name: name.to_string(),
                    secs: wait.as_secs(),
                });
            }
            Err(TryLockError::Error(why)) => return Err(AgentError::File { path, why }),
        }
    }
}

/// Whether `name` may still hold grants: not blocked, and with a valid client certificate.
/// Checked again after granting, so that a grant which raced a revocation all the same (an
/// older agent mid-upgrade takes no lock) is rolled back instead of left behind.
///
/// # Errors
/// `Blocked` or [`AgentError::NoCertificate`] when it may not; the inventory's error.
pub(crate) fn still_entitled(ctx: &Context, name: &ProfileName) -> Result<(), AgentError> {
    let inventory = ctx.inventory()?;
    if let Some(block) = inventory.blocked(name.as_str())? {
        return Err(shiqi_ca::Error::Blocked {
            name: name.to_string(),
            since: block.blocked_at,
        }
        .into());
    }
    if inventory
        .latest_valid(name.as_str(), CertKind::Client)?
        .is_none()
    {
        return Err(AgentError::NoCertificate {
            name: name.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn one_holder_per_name_and_names_do_not_share() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let ctx = Context::with_config(dir.path().to_owned(), Config::default())?;
        let (bob, alice): (ProfileName, ProfileName) = ("bob".parse()?, "alice".parse()?);
        let held = acquire(&ctx, &bob)?;
        // Another open file description of the same file, as another process would have.
        let err = acquire_within(&ctx, &bob, Duration::from_millis(100)).expect_err("held");
        assert!(matches!(err, AgentError::Busy { .. }), "{err}");
        let _alice = acquire_within(&ctx, &alice, Duration::ZERO)?;
        drop(held);
        acquire_within(&ctx, &bob, Duration::ZERO)?;
        Ok(())
    }
}
