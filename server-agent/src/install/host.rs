//! The machine's scheduler: a systemd timer that runs `crl --refresh` daily as the account (a
//! CRL past its nextUpdate locks every user out of the servers that check it).

use std::path::Path;
use std::process::Command;

use super::{Install, Outcome, Timer, run};
use crate::error::AgentError;

/// Where the units go.
const UNITS: &str = "/etc/systemd/system";
const NAME: &str = "shiqi-ca-crl";

/// The service that runs `command` as `account`, and its daily timer.
fn units(command: &str, account: &str) -> (String, String) {
    let service = format!(
        "# Written by `shiqi-ca-agent install`.\n[Unit]\nDescription=Refresh the shiqi CA's CRL when due\n\n\
         [Service]\nType=oneshot\nUser={account}\nExecStart={command}\n"
    );
    let timer = "# Written by `shiqi-ca-agent install`.\n[Unit]\nDescription=Refresh the shiqi CA's CRL daily\n\n\
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
    let command = format!(
        "{} --state-dir {} crl --refresh",
        i.exe.display(),
        i.state_dir.display()
    );
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
    let timer = timer.as_str();
    let dir = Path::new(UNITS);
    let a = i.file(
        &dir.join(format!("{NAME}.service")),
        &service,
        0o644,
        Some((0, 0)),
        &super::folder::Trust::root(),
    )?;
    let b = i.file(
        &dir.join(format!("{NAME}.timer")),
        timer,
        0o644,
        Some((0, 0)),
        &super::folder::Trust::root(),
    )?;
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// systemd's own reading of the units install writes (`systemd-analyze verify`: syntax, the
    /// calendar, the account, the executable), since the stack's server has no systemd to run
    /// them. Skipped where systemd-analyze is missing.
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
                .arg("verify")
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
