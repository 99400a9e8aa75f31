//! This host: the state directory's owners and modes, the published CRL's next update, the
//! sshd settings the agent's account gets, and the last backup of the CA.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use time::OffsetDateTime;

use super::Finding;
use crate::state::Context;

/// Files of the state directory that only the agent's account may read (the directory itself
/// must be private too: it holds the inventory).
const PRIVATE: [&str; 2] = ["ca.key", "admin/admin.key"];

/// The host's findings.
pub(super) fn check(ctx: &Context) -> Vec<Finding> {
    vec![state_dir(ctx), crl(ctx), sshd(ctx), backup(ctx)]
}

/// How old a backup may be before `check` says so: the revocations and certificates of the last
/// week are what a restore would lose.
const BACKUP_AGE: time::Duration = time::Duration::days(7);

/// When the CA was last backed up: its key and inventory live on this disk alone otherwise.
fn backup(ctx: &Context) -> Finding {
    let fix = format!(
        "`shiqi-ca-agent --state-dir {} backup --out FILE --passphrase-file PASS` and keep FILE \
         off this server (daily, e.g. from cron, with the passphrase apart from it)",
        ctx.dir.display()
    );
    let Some(last) = crate::ops::backup::last(ctx) else {
        return Finding::warn("state.backup", "the CA was never backed up", fix);
    };
    let at = OffsetDateTime::parse(&last.at, &time::format_description::well_known::Rfc3339).ok();
    let text = format!("last backup {} to {}", last.at, last.file);
    match at {
        Some(at) if OffsetDateTime::now_utc() - at <= BACKUP_AGE => {
            Finding::ok("state.backup", text)
        }
        _ => Finding::warn("state.backup", format!("{text}: older than 7 days"), fix),
    }
}

fn state_dir(ctx: &Context) -> Finding {
    let uid = nix::unistd::geteuid().as_raw();
    let mut wrong = Vec::new();
    let mut look = |path: &Path, private: bool| match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            let mode = meta.mode() & 0o7777;
            if meta.uid() != uid {
                wrong.push(format!("{} is owned by uid {}", path.display(), meta.uid()));
            }
            if mode & 0o022 != 0 {
                wrong.push(format!(
                    "{} is writable by others ({mode:04o})",
                    path.display()
                ));
            } else if private && mode & 0o077 != 0 {
                wrong.push(format!(
                    "{} is readable by others ({mode:04o})",
                    path.display()
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path != ctx.dir.as_path() => {}
        Err(e) => wrong.push(format!("{}: {e}", path.display())),
    };
    look(&ctx.dir, true);
    for f in PRIVATE {
        look(&ctx.path(f), true);
    }
    let password = ctx.dir.join(&ctx.config.mysql.admin_password_file);
    look(&password, true);
    if wrong.is_empty() {
        Finding::ok(
            "state.modes",
            format!(
                "{} and its secrets belong to this account only",
                ctx.dir.display()
            ),
        )
    } else {
        Finding::fail(
            "state.modes",
            wrong.join("; "),
            format!(
                "chown -R the agent's account {} and chmod go-rwx its key, inventory and \
                 password files",
                ctx.dir.display()
            ),
        )
    }
}

fn crl(ctx: &Context) -> Finding {
    let dir = ctx
        .config
        .crl
        .publish_dir
        .clone()
        .unwrap_or_else(|| ctx.dir.clone());
    let path = dir.join(crate::crl::CRL_DER);
    let info = std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|der| {
            let ca = ctx.ca().map_err(|e| e.to_string())?;
            shiqi_ca::crl::read_crl(&der, ca.cert().der()).map_err(|e| e.to_string())
        });
    let info = match info {
        Ok(i) => i,
        Err(why) => {
            return Finding::fail(
                "crl.next_update",
                format!("cannot read the CRL {}: {why}", path.display()),
                "run `shiqi-ca-agent crl` as the agent's account",
            );
        }
    };
    let now = OffsetDateTime::now_utc();
    let Some(next) = info.next_update else {
        return Finding::fail(
            "crl.next_update",
            format!("{} has no nextUpdate", path.display()),
            "run `shiqi-ca-agent crl`",
        );
    };
    let left = next - now;
    let text = format!(
        "{} is due for renewal by {} ({} h left)",
        path.display(),
        next.date(),
        left.whole_hours()
    );
    if left <= time::Duration::ZERO {
        Finding::fail(
            "crl.next_update",
            format!(
                "{} expired at {next}: servers that check it refuse everyone",
                path.display()
            ),
            "run `shiqi-ca-agent crl` now, and `crl --refresh` daily (cron or a systemd timer)",
        )
    } else if left < ctx.config.crl.refresh_before() {
        Finding::warn(
            "crl.next_update",
            text,
            "`crl --refresh` is not running: run it daily (cron or a systemd timer)",
        )
    } else {
        Finding::ok("crl.next_update", text)
    }
}

fn sshd(ctx: &Context) -> Finding {
    let account = match crate::authorized_keys::account() {
        Ok(a) => a.name,
        Err(e) => return Finding::fail("sshd.block", e.to_string(), "run as the agent's account"),
    };
    match crate::sshd::check(ctx, &account) {
        Ok(()) => Finding::ok(
            "sshd.block",
            format!(
                "sshd gives `{account}` local forwards only (no listeners, no socket forwards, \
                 no TTY, no agent or tunnel) and no way in but enrolled keys and principals"
            ),
        ),
        Err(crate::AgentError::SshdUnsafe { why, block, .. }) => Finding::fail(
            "sshd.block",
            format!("an enrolled key can do more than forward: {why}"),
            format!(
                "add `{}` to sshd_config (or a file in sshd_config.d), `sshd -t`, reload sshd",
                block.trim_end().replace('\n', "; ")
            ),
        ),
        Err(e) => Finding::skip("sshd.block", format!("cannot ask sshd: {e}")),
    }
}
