//! The machine's scheduler: a systemd timer that runs `crl --refresh` daily as the account (a
//! CRL past its nextUpdate locks every user out of the servers that check it).
//!
//! The Debian package ships the same two units, made by `shiqi-ca-agent units` for the default
//! account and state directory, in `/usr/lib/systemd/system`; where those are byte for byte what
//! this install would write, it enables them instead of writing a copy into `/etc`.

use std::path::Path;
use std::process::Command;

use super::{Install, Outcome, Timer, run};
use crate::error::AgentError;

/// Where the units go.
const UNITS: &str = "/etc/systemd/system";
/// Where a package's units are.
const PACKAGED: &str = "/usr/lib/systemd/system";
/// The units' name, without `.service` or `.timer`.
pub(crate) const NAME: &str = "shiqi-ca-crl";

/// The service and timer that run `exe`'s `crl --refresh` on `state_dir` as `account`.
pub(crate) fn units_for(exe: &Path, state_dir: &Path, account: &str) -> (String, String) {
    units(&refresh_command(exe, state_dir), account)
}

fn refresh_command(exe: &Path, state_dir: &Path) -> String {
    format!(
        "{} --state-dir {} crl --refresh",
        exe.display(),
        state_dir.display()
    )
}

/// The service that runs `command` as `account`, and its daily timer.
fn units(command: &str, account: &str) -> (String, String) {
    let service = format!(
        "# From shiqi-ca-agent: `install` writes it, `units` makes it for a package.\n[Unit]\nDescription=Refresh the shiqi CA's CRL when due\nDocumentation=man:shiqi-ca-agent-crl(1)\n\n\
         [Service]\nType=oneshot\nUser={account}\nExecStart={command}\n"
    );
    let timer = "# From shiqi-ca-agent: `install` writes it, `units` makes it for a package.\n[Unit]\nDescription=Refresh the shiqi CA's CRL daily\nDocumentation=man:shiqi-ca-agent-crl(1)\n\n\
                 [Timer]\nOnCalendar=daily\nRandomizedDelaySec=1h\nPersistent=true\n\n\
                 [Install]\nWantedBy=timers.target\n"
        .to_owned();
    (service, timer)
}

pub(super) fn timer(i: &mut Install) -> Result<(), AgentError> {
    let use_systemd = match i.args.timer {
        Timer::Systemd => true,
        Timer::None => false,
        Timer::Auto => super::systemd(),
    };
    let command = refresh_command(&i.exe, &i.state_dir);
    if !use_systemd {
        i.report(
            Outcome::NeedsYou,
            "crl.timer",
            format!(
                "no systemd timer (--timer none, or no systemd here): run `{command}` daily as \
                 `{}` (cron)",
                i.account()
            ),
        );
        return Ok(());
    }
    let (service, timer) = units(&command, i.account());
    let dir = Path::new(UNITS);
    let (a, b) = if packaged(&service, &timer)? && !dir.join(format!("{NAME}.service")).exists() {
        (false, false)
    } else {
        let a = i.file(
            &dir.join(format!("{NAME}.service")),
            &service,
            0o644,
            Some((0, 0)),
            &super::folder::Trust::root(),
        )?;
        let b = i.file(
            &dir.join(format!("{NAME}.timer")),
            &timer,
            0o644,
            Some((0, 0)),
            &super::folder::Trust::root(),
        )?;
        (a, b)
    };
    // Unchanged files are not enough: an earlier run may have failed to enable the timer, or
    // someone stopped it.
    let active = || {
        Command::new("systemctl")
            .args(["is-active", "--quiet", &format!("{NAME}.timer")])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !(a || b) && active() {
        i.report(
            Outcome::Already,
            "crl.timer",
            format!("{NAME}.timer runs `crl --refresh` daily"),
        );
        return Ok(());
    }
    if !i.dry_run() {
        let mut reload = Command::new("systemctl");
        reload.arg("daemon-reload");
        run(reload, None, "systemctl daemon-reload")?;
        let mut enable = Command::new("systemctl");
        enable.args(["enable", "--now", &format!("{NAME}.timer")]);
        run(enable, None, "systemctl enable --now")?;
    }
    i.report(
        Outcome::Done,
        "crl.timer",
        format!(
            "{NAME}.timer enabled: `crl --refresh` daily as `{}`",
            i.account()
        ),
    );
    Ok(())
}

/// Whether the package's units are exactly `service` and `timer` (read through a root-owned
/// folder chain, as every file install touches).
fn packaged(service: &str, timer: &str) -> Result<bool, AgentError> {
    let folder =
        match super::folder::Folder::open(Path::new(PACKAGED), &super::folder::Trust::root()) {
            Ok(f) => f,
            Err(AgentError::File { why, .. }) if why.kind() == std::io::ErrorKind::NotFound => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
    let same = |name: String, text: &str| -> Result<bool, AgentError> {
        Ok(folder
            .read(&name, super::MAX_FILE)?
            .is_some_and(|(old, _)| old == text.as_bytes()))
    };
    Ok(same(format!("{NAME}.service"), service)? && same(format!("{NAME}.timer"), timer)?)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// systemd's own reading of the units install writes (`systemd-analyze verify`: syntax, the
    /// calendar, the account, the executable; not the man page they name, which the package
    /// installs), as a quick check here; `systemd_host::` e2e runs them. Skipped where
    /// systemd-analyze is missing.
    #[test]
    fn systemd_accepts_the_units() -> anyhow::Result<()> {
        let analyze = Path::new("/usr/bin/systemd-analyze");
        if !analyze.exists() {
            eprintln!("skipped: no {}", analyze.display());
            return Ok(());
        }
        let exe = std::env::current_exe()?;
        let account = nix::unistd::User::from_uid(nix::unistd::geteuid())?
            .map_or_else(|| "root".to_owned(), |u| u.name);
        let dir = tempfile::tempdir()?;
        let command = format!(
            "{} --state-dir /var/lib/shiqi-ca crl --refresh",
            exe.display()
        );
        let (service, timer) = super::units(&command, &account);
        let verify = |service: &str, timer: &str| -> anyhow::Result<std::process::Output> {
            crate::fsutil::write_atomic(
                &dir.path().join("shiqi-ca-crl.service"),
                service.as_bytes(),
                0o644,
            )?;
            crate::fsutil::write_atomic(
                &dir.path().join("shiqi-ca-crl.timer"),
                timer.as_bytes(),
                0o644,
            )?;
            Ok(std::process::Command::new(analyze)
                .args(["verify", "--man=no"])
                .arg(dir.path().join("shiqi-ca-crl.service"))
                .arg(dir.path().join("shiqi-ca-crl.timer"))
                .output()?)
        };
        let out = verify(&service, &timer)?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // And it would notice a broken one.
        let out = verify(
            &service,
            &timer.replace("OnCalendar=daily", "OnCalendar=dayly"),
        )?;
        assert!(!out.status.success(), "systemd-analyze took a bad calendar");
        Ok(())
    }
}
