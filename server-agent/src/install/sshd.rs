//! The sshd block for the agent's account, in a drop-in file of its own (in the folder the main
//! config `Include`s), checked with `sshd -t` before sshd reloads it, and with `sshd -T` after:
//! what sshd really gives the account, as `enroll` and `check` read it.

use std::path::{Path, PathBuf};

use super::{Install, Outcome};
use crate::error::AgentError;

/// The folder of `*.conf` files `config` includes, as sshd resolves it (relative paths are
/// relative to /etc/ssh).
fn included_dir(config: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config).ok()?;
    text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        let key = words.next()?;
        if !key.eq_ignore_ascii_case("include") {
            return None;
        }
        words.find_map(|pattern| {
            let dir = pattern.strip_suffix("/*.conf")?;
            let dir = Path::new(dir);
            Some(if dir.is_absolute() {
                dir.to_path_buf()
            } else {
                Path::new("/etc/ssh").join(dir)
            })
        })
    })
}

/// Writes the drop-in, checks, reloads.
pub(super) fn ensure(i: &mut Install) -> Result<(), AgentError> {
    let config = i.args.sshd_config.clone();
    let sshd = i.args.sshd.clone();
    let account = i.account().to_owned();
    let Some(dir) = included_dir(&config) else {
        i.report(
            Outcome::NeedsYou,
            "sshd",
            format!(
                "{} includes no `*.conf` folder: add `Include /etc/ssh/sshd_config.d/*.conf` at \
                 its top and run install again, or add this block at its end: {}",
                config.display(),
                crate::sshd::block(&account).trim_end().replace('\n', "; ")
            ),
        );
        return Ok(());
    };
    // One per account: a second CA on the same host gets its own.
    let path = dir.join(format!("{account}.conf"));
    let text = format!(
        "# Written by `shiqi-ca-agent install`: what an enrolled key may do on this server is \
         forward to\n# the services (its authorized_keys line says where); no listeners, no \
         socket forwards, no TTY,\n# and no way in but the enrolled keys and principals (each \
         with its forced command).\n{}",
        crate::sshd::block(&account),
    );
    let old = std::fs::read_to_string(&path).ok();
    let changed = i.file(
        &path,
        &text,
        0o644,
        Some((0, 0)),
        &super::folder::Trust::root(),
    )?;
    if i.dry_run() {
        i.sshd_safe = true;
        let outcome = Outcome::of(changed);
        i.report(
            outcome,
            "sshd",
            format!("{} with the Match block for `{account}`", path.display()),
        );
        return Ok(());
    }
    if changed {
        test_or_put_back(&sshd, &config, &path, old.as_deref())?;
    }
    let wrong =
        crate::sshd::unsafe_settings(&sshd, &config, &account, crate::sshd::LAPTOP_ADDRESS)?;
    if !wrong.is_empty() {
        i.report(
            Outcome::NeedsYou,
            "sshd",
            format!(
                "{} is in place but sshd still gives `{account}` {}: an earlier line of {} \
                 wins (sshd keeps the first value); remove it there",
                path.display(),
                wrong.join(", "),
                config.display()
            ),
        );
        return Ok(());
    }
    i.sshd_safe = true;
    // `sshd -T` reads the files, not the running sshd: a reload that failed on an earlier run
    // is remembered here, so this run tries it again.
    let state = super::folder::Folder::open(&i.state_dir, &i.trust_account())?;
    let pending = state.entry(RELOAD_PENDING)?.is_some();
    if !changed && !pending {
        i.report(
            Outcome::Already,
            "sshd",
            format!("{} gives `{account}` local forwards only", path.display()),
        );
        return Ok(());
    }
    let wrote = if changed {
        format!("wrote {}, `sshd -t` passed", path.display())
    } else {
        format!(
            "{} was in place but sshd had not reloaded it",
            path.display()
        )
    };
    match reload(&sshd, &config) {
        Ok(pid) => {
            let _ = state.remove(RELOAD_PENDING);
            i.report(
                Outcome::Done,
                "sshd",
                format!("{wrote}, reloaded sshd (pid {pid}): `{account}` gets local forwards only"),
            );
        }
        Err(why) => {
            i.sshd_safe = false;
            let _ = state.write(RELOAD_PENDING, b"", 0o600, None);
            i.report(
                Outcome::NeedsYou,
                "sshd",
                format!(
                    "{wrote}, but {why}: reload sshd (systemctl reload ssh), then run install \
                     again"
                ),
            );
        }
    }
    Ok(())
}

/// `sshd -t` with the drop-in just written at `path`; if sshd refuses it, what was there
/// before (`old`, or nothing) is put back.
fn test_or_put_back(
    sshd: &Path,
    config: &Path,
    path: &Path,
    old: Option<&str>,
) -> Result<(), AgentError> {
    let test = std::process::Command::new(sshd)
        .arg("-t")
        .arg("-f")
        .arg(config)
        .output();
    let ok = test.as_ref().is_ok_and(|o| o.status.success());
    if !ok {
        // Put back what was there: a config sshd refuses must not wait for its next start.
        let (dir, name) = super::folder::split(path)?;
        let dir = super::folder::Folder::open(dir, &super::folder::Trust::root())?;
        let _ = match old {
            Some(text) => dir.write(name, text.as_bytes(), 0o644, Some((0, 0))),
            None => dir.remove(name),
        };
        let why = test.map_or_else(
            |e| e.to_string(),
            |o| String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        );
        return Err(AgentError::Local {
            why: format!(
                "`sshd -t` refuses the config with {}: {}; it was put back",
                path.display(),
                shiqi_ca::text::one_line(&why, 300)
            ),
        });
    }
    Ok(())
}

/// In the state directory while sshd has not reloaded the drop-in install wrote.
const RELOAD_PENDING: &str = "sshd-reload-pending";

/// SIGHUP to the pid in sshd's pid file: sshd re-reads its config (what `systemctl reload ssh`
/// does too).
fn reload(sshd: &Path, config: &Path) -> Result<i32, String> {
    let file = crate::sshd::pid_file(sshd, config).ok_or("sshd names no pid file")?;
    let pid: i32 = std::fs::read_to_string(&file)
        .map_err(|e| format!("no running sshd ({}: {e})", file.display()))?
        .trim()
        .parse()
        .map_err(|_| format!("{} holds no pid", file.display()))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    )
    .map_err(|e| format!("cannot signal sshd (pid {pid}): {e}"))?;
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::included_dir;

    #[test]
    fn finds_the_included_folder_as_sshd_resolves_it() {
        let dir = tempfile::tempdir().expect("dir");
        let config = dir.path().join("sshd_config");
        let case = |text: &str| {
            crate::fsutil::write_atomic(&config, text.as_bytes(), 0o644).expect("write");
            included_dir(&config)
        };
        assert_eq!(
            case("# Debian\nInclude /etc/ssh/sshd_config.d/*.conf\nPort 22\n"),
            Some("/etc/ssh/sshd_config.d".into())
        );
        assert_eq!(
            case("include sshd_config.d/*.conf\n"),
            Some("/etc/ssh/sshd_config.d".into())
        );
        assert_eq!(case("Port 22\n"), None);
        assert_eq!(case("Include /etc/ssh/extra.conf\n"), None);
    }
}
