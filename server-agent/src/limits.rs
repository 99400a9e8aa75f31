//! `[limits]`: what one enrolled key can make the server do. Every request of a key is charged
//! before it is parsed (a refused request still costs an audit line), and a `sign` past the
//! name's certificate cap is refused before anything is signed (for `user` keys). Local callers
//! are the CA's operator and are not limited.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shiqi_ca::ProfileName;
use shiqi_ca::inventory::access::Role;
use shiqi_ca::inventory::{CertKind, Inventory};

use crate::caller::Caller;
use crate::error::AgentError;
use crate::fsutil;
use crate::state::Context;

const WINDOW: Duration = Duration::from_secs(60);

/// Counts one request of `caller` and refuses it when its key has sent
/// `[limits] requests_per_minute` in the last minute already.
///
/// The key's recent request times live in `<state>/rate/<fingerprint>`, read and rewritten
/// under an exclusive lock so that concurrent sessions of one key are all counted.
///
/// # Errors
/// [`AgentError::RateLimited`], or [`AgentError::File`] when the file cannot be used (the
/// request is refused then too: a limit that fails open is no limit).
pub(crate) fn charge_request(ctx: &Context, caller: &Caller) -> Result<(), AgentError> {
    let fingerprint = match caller {
        Caller::Local { .. } => return Ok(()),
        Caller::Key(k) => k.fingerprint.as_str(),
        Caller::Unenrolled { fingerprint } => fingerprint.as_str(),
    };
    let dir = ctx.path("rate");
    if !dir.is_dir() {
        fsutil::create_private_dir(&dir)?;
    }
    let path = dir.join(file_name(fingerprint));
    let per_minute = ctx.config.limits.requests_per_minute;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let allowed = with_locked(&path, |times| admit(times, now, per_minute))?;
    if allowed {
        Ok(())
    } else {
        Err(AgentError::RateLimited {
            key: fingerprint.to_owned(),
            per_minute,
        })
    }
}

/// A caller's key (`SHA256:` and base64, which has `/` and `+`, or `principal:NAME`) as a file
/// name, one to one: letters, digits and `-` stay, every other byte is `_` and two hex digits
/// (`_` itself too). Two keys never share a bucket (`a.b` and `a@b` did when both became `a.b`).
fn file_name(fingerprint: &str) -> String {
    let mut out = String::with_capacity(fingerprint.len());
    for b in fingerprint.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' => out.push(char::from(b)),
            _ => out.push_str(&format!("_{b:02x}")),
        }
    }
    out
}

/// Drops the times older than a minute from `times`; admits `now` (and records it) when fewer
/// than `per_minute` remain.
fn admit(times: &mut Vec<u64>, now: Duration, per_minute: u32) -> bool {
    let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
    let since = now_ms.saturating_sub(u64::try_from(WINDOW.as_millis()).unwrap_or(0));
    times.retain(|&t| t > since && t <= now_ms);
    if times.len() >= per_minute as usize {
        return false;
    }
    times.push(now_ms);
    true
}

/// Runs `f` on the times in `path` under an exclusive lock and writes back what it leaves.
fn with_locked(path: &Path, f: impl FnOnce(&mut Vec<u64>) -> bool) -> Result<bool, AgentError> {
    let file_error = |why| AgentError::File {
        path: path.to_owned(),
        why,
    };
    let mut file: File = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(file_error)?;
    file.lock().map_err(file_error)?;
    let mut text = String::new();
    // A file that is not ours (or cut short by a crash) counts as empty.
    let _ = (&file).take(1 << 20).read_to_string(&mut text);
    let mut times: Vec<u64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let admitted = f(&mut times);
    let out: String = times.iter().map(|t| format!("{t}\n")).collect();
    file.set_len(0).map_err(file_error)?;
    file.seek(SeekFrom::Start(0)).map_err(file_error)?;
    file.write_all(out.as_bytes()).map_err(file_error)?;
    Ok(admitted)
}

/// Refuses a new certificate for `name` when a `user` key asks and the name already holds
/// `[limits] certificates_per_name` live ones (neither revoked nor expired: a revoked one no
/// longer lets anyone in, and counting it let failed renewals, each signed then revoked, lock
/// the user out for a month; issue 42). Admins and local callers are not capped:
/// they may revoke and sign any name anyway, and an operator's repair loop must not lock itself
/// out. Called under the name's lock, so concurrent signs cannot both pass.
///
/// # Errors
/// [`AgentError::TooManyCertificates`], or the inventory's error.
pub(crate) fn check_certificate_cap(
    ctx: &Context,
    inventory: &Inventory,
    name: &ProfileName,
) -> Result<(), AgentError> {
    if ctx.caller.role() != Some(Role::User) {
        return Ok(());
    }
    let now = time::OffsetDateTime::now_utc();
    let live = inventory.live_count(name.as_str(), CertKind::Client, now)?;
    let unexpired = inventory.unexpired_count(name.as_str(), CertKind::Client, now)?;
    within_caps(
        name,
        live,
        unexpired,
        ctx.config.limits.certificates_per_name,
    )
}

/// The cap's verdict for a name with `live` valid and `unexpired` valid-or-revoked client
/// certificates. Revoked ones do not count against `cap`, but each stays in the CRL until it
/// expires: a key that signs and revokes its own name in a loop would grow the list every
/// server reads. So they get a ceiling of their own, far above what rotations and (at most two
/// per certificate) failed renewals leave in a lifetime.
fn within_caps(name: &ProfileName, live: u64, unexpired: u64, cap: u32) -> Result<(), AgentError> {
    if live >= u64::from(cap) {
        return Err(AgentError::TooManyCertificates {
            name: name.to_string(),
            count: live,
            cap,
        });
    }
    let revoked = unexpired.saturating_sub(live);
    let ceiling = u64::from(cap).saturating_mul(REVOKED_FACTOR);
    if revoked >= ceiling {
        return Err(AgentError::TooManyRevoked {
            name: name.to_string(),
            count: revoked,
            max: ceiling,
        });
    }
    Ok(())
}

/// Revoked unexpired certificates a name may hold, as a multiple of `certificates_per_name`.
const REVOKED_FACTOR: u64 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_certificates_meet_the_cap_and_revoked_ones_a_ceiling_five_times_higher() {
        let name: ProfileName = "bob".parse().expect("name");
        assert!(within_caps(&name, 19, 19, 20).is_ok());
        assert!(matches!(
            within_caps(&name, 20, 20, 20),
            Err(AgentError::TooManyCertificates { count: 20, .. })
        ));
        // Failed renewals and rotations leave revoked ones: they do not block a sign...
        assert!(within_caps(&name, 1, 60, 20).is_ok());
        // ...until the CRL would carry a hundred for the name.
        assert!(matches!(
            within_caps(&name, 1, 101, 20),
            Err(AgentError::TooManyRevoked {
                count: 100,
                max: 100,
                ..
            })
        ));
    }

    #[test]
    fn every_key_gets_a_bucket_of_its_own() {
        let keys = [
            "SHA256:ab/c+d=",
            "SHA256:ab_c-d.",
            "principal:a.b",
            "principal:a@b",
            "principal:a_2eb",
            "principal:a_b",
        ];
        let names: std::collections::BTreeSet<String> = keys.iter().map(|k| file_name(k)).collect();
        assert_eq!(names.len(), keys.len(), "{names:?}");
        for name in &names {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{name}"
            );
        }
    }

    #[test]
    fn a_key_gets_its_quota_per_sliding_minute() {
        let mut times = Vec::new();
        let at = |s: u64| Duration::from_secs(1_000_000 + s);
        assert!((0..3).all(|i| admit(&mut times, at(i), 3)));
        assert!(!admit(&mut times, at(30), 3), "a fourth in the same minute");
        assert_eq!(times.len(), 3, "a refusal is not recorded");
        // The first one leaves the window after 60 s: room for exactly one more.
        assert!(admit(&mut times, at(60), 3));
        assert!(!admit(&mut times, at(60), 3));
        // Times from the future (a clock set back) do not block forever.
        let mut skewed = vec![u64::MAX; 5];
        assert!(admit(&mut skewed, at(0), 3));
    }

    #[test]
    fn the_times_file_survives_processes_and_garbage() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(file_name("SHA256:ab/c+d="));
        assert!(path.ends_with("SHA256_3aab_2fc_2bd_3d"));
        crate::fsutil::write_private(&path, b"garbage\n\0\n")?;
        let now = Duration::from_secs(2_000_000);
        for _ in 0..2 {
            assert!(with_locked(&path, |t| admit(t, now, 2))?);
        }
        assert!(!with_locked(&path, |t| admit(t, now, 2))?);
        assert_eq!(std::fs::read_to_string(&path)?.lines().count(), 2);
        Ok(())
    }
}
