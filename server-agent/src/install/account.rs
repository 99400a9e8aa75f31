//! The agent's account, its state directory and published-CRL directory, `agent.toml`, the CA
//! and its first CRL, and the first admin's key.

use std::path::Path;
use std::process::Command;

use super::{Install, Outcome, run};
use crate::error::AgentError;

/// The account's uid and gid, if it exists.
pub(super) fn ids(name: &str) -> Option<(u32, u32)> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| (u.uid.as_raw(), u.gid.as_raw()))
}

const SHADOW: &str = "/etc/shadow";

/// Why the existing account `name` does not look like one install made (a system account, no
/// password, home = the state directory), if it exists and does not: a person's account or a
/// service's (`www-data`, home /var/www) must not become the CA's by a typo.
pub(super) fn foreign(name: &str, state: &Path) -> Option<String> {
    let user = nix::unistd::User::from_name(name).ok().flatten()?;
    if user.dir != state {
        return Some(format!(
            "its home is {}, not the state directory {}",
            user.dir.display(),
            state.display()
        ));
    }
    let first_person = login_defs("UID_MIN").unwrap_or(1000);
    if user.uid.as_raw() >= first_person {
        return Some(format!(
            "it is a person's account (uid {} ≥ UID_MIN {first_person})",
            user.uid
        ));
    }
    let shadow = std::fs::read_to_string(SHADOW).unwrap_or_default();
    if has_password(&shadow, name) {
        return Some("it has a password".to_owned());
    }
    None
}

/// A number from /etc/login.defs (`UID_MIN 1000`).
fn login_defs(key: &str) -> Option<u32> {
    let text = std::fs::read_to_string("/etc/login.defs").ok()?;
    text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some(key))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// Whether `shadow` gives `name` a usable password hash (`$…`).
fn has_password(shadow: &str, name: &str) -> bool {
    shadow.lines().any(|line| {
        let mut fields = line.split(':');
        fields.next() == Some(name) && fields.next().is_some_and(|p| p.starts_with('$'))
    })
}

/// Whether `shadow` (the text of `/etc/shadow`) has `name` locked: a password field starting
/// with `!`, as `useradd` leaves it.
fn locked(shadow: &str, name: &str) -> bool {
    shadow.lines().any(|line| {
        let mut fields = line.split(':');
        fields.next() == Some(name) && fields.next().is_some_and(|p| p.starts_with('!'))
    })
}

/// `usermod -p '*'`: no password, not locked.
fn unlock(name: &str) -> Result<(), AgentError> {
    let mut unlock = Command::new("usermod");
    unlock.args(["-p", "*", name]);
    run(unlock, None, "usermod -p '*'").map(drop)
}

/// The system account (home = the state directory, a shell because sshd runs the forced
/// command with it, no password but not locked: OpenSSH refuses `!` even for keys without PAM),
/// and the directories it owns.
pub(super) fn ensure(i: &mut Install) -> Result<(), AgentError> {
    let name = i.account().to_owned();
    let state = i.state_dir.clone();
    match ids(&name) {
        // A `useradd` that worked and a `usermod` that did not leave the account locked.
        Some(_) if std::fs::read_to_string(SHADOW).is_ok_and(|t| locked(&t, &name)) => {
            if !i.dry_run() {
                unlock(&name)?;
            }
            i.report(
                Outcome::Done,
                "account",
                format!(
                    "unlocked `{name}` (password field `*`: no password, but OpenSSH refuses a \
                     locked account even for keys)"
                ),
            );
        }
        Some(_) => i.report(Outcome::Already, "account", format!("`{name}` exists")),
        None => {
            if !i.dry_run() {
                let mut add = Command::new("useradd");
                add.args([
                    "--system",
                    "--user-group",
                    "--shell",
                    "/bin/sh",
                    "--home-dir",
                ])
                .arg(&state)
                .arg(&name);
                run(add, None, "useradd")?;
                unlock(&name)?;
            }
            i.report(
                Outcome::Done,
                "account",
                format!(
                    "created the system account `{name}` (home {})",
                    state.display()
                ),
            );
        }
    }
    let owner = ids(&name);
    // sshd reads the account's keys from its home, which may be elsewhere than the state.
    let home = nix::unistd::User::from_name(&name)
        .ok()
        .flatten()
        .map_or_else(|| state.clone(), |u| u.dir);
    let dirs = [
        (state.clone(), 0o700),
        (home.join(".ssh"), 0o700),
        (i.args.publish_dir.clone(), 0o755),
    ];
    let trust = i.trust_account();
    let mut made = Vec::new();
    for (dir, mode) in dirs {
        // Root changes modes and owners here: through a handle on the folder itself (opened
        // without following a link), never by its path after a check.
        let (parent, leaf) = super::folder::split(&dir)?;
        let parent = match super::folder::Folder::open(parent, &trust) {
            Ok(p) => Some(p),
            Err(AgentError::File { why, .. }) if why.kind() == std::io::ErrorKind::NotFound => {
                if i.dry_run() {
                    None
                } else {
                    Some(super::folder::Folder::open_or_create(parent, &trust)?)
                }
            }
            Err(e) => return Err(e),
        };
        let present = match &parent {
            Some(p) => p.entry(leaf)?.is_some(),
            None => false,
        };
        let right = match (&parent, present) {
            (Some(p), true) => {
                let st = p.sub(leaf, &trust)?.stat()?;
                st.st_mode & 0o7777 == mode
                    && owner.is_some_and(|(u, g)| st.st_uid == u && st.st_gid == g)
            }
            _ => false,
        };
        if right {
            continue;
        }
        if !i.dry_run()
            && let Some(parent) = parent
        {
            if !present {
                parent.mkdir(leaf)?;
            }
            parent.sub(leaf, &trust)?.set(Some(mode), owner)?;
        }
        made.push(format!("{} ({mode:04o})", dir.display()));
    }
    if made.is_empty() {
        i.report(
            Outcome::Already,
            "directories",
            format!(
                "{} and {} belong to `{name}`",
                state.display(),
                i.args.publish_dir.display()
            ),
        );
    } else {
        i.report(
            Outcome::Done,
            "directories",
            format!("{} owned by `{name}`", made.join(", ")),
        );
    }
    Ok(())
}

/// `agent.toml`, written only when missing: an existing one is the admin's and is kept.
pub(super) fn config(i: &mut Install) -> Result<(), AgentError> {
    let path = i.state_dir.join("agent.toml");
    if path.exists() {
        i.report(
            Outcome::Already,
            "agent.toml",
            format!("{} exists (kept as it is)", path.display()),
        );
        return Ok(());
    }
    let a = &i.args;
    let toml_str = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut text = String::from(
        "# shiqi-ca-agent's config, written by `shiqi-ca-agent install` (which never rewrites it).\n\
         # Every key is documented in docs/server.md (the agent's config).\n\n[kafka]\n",
    );
    text.push_str(&format!(
        "bootstrap = {}\n",
        toml_str(a.kafka_bootstrap.as_deref().unwrap_or(""))
    ));
    text.push_str("\n[mysql]\n");
    if a.no_mysql {
        text.push_str("host = \"\"\n");
    } else {
        text.push_str(&format!(
            "host = \"127.0.0.1\"\nport = {}\n# The admin logs in over mysqld's socket as this account (unix_socket): no password.\n\
             admin_user = {}\nadmin_socket = {}\n",
            a.mysql_port,
            toml_str(i.account()),
            toml_str(&a.mysql_socket.display().to_string()),
        ));
    }
    text.push_str(&format!(
        "\n[crl]\npublish_dir = {}\n\n[access]\nsshd_config = {}\nsshd = {}\n",
        toml_str(&a.publish_dir.display().to_string()),
        toml_str(&a.sshd_config.display().to_string()),
        // `enroll` asks this sshd (`sshd -T`) whether the block is in force, as install did.
        toml_str(&a.sshd.display().to_string()),
    ));
    // Checked the way the agent will read it, before it is written.
    let parsed: Result<crate::config::Config, _> = toml::from_str(&text);
    if let Err(e) = parsed {
        return Err(AgentError::Local {
            why: format!("the agent.toml install would write does not parse: {e}"),
        });
    }
    let owner = ids(i.account());
    let trust = i.trust_account();
    i.file(&path, &text, 0o600, owner, &trust)?;
    i.report(
        Outcome::Done,
        "agent.toml",
        format!("wrote {}", path.display()),
    );
    Ok(())
}

/// The CA (kept if present) and the published CRL, both made by the account.
pub(super) fn ca(i: &mut Install) -> Result<(), AgentError> {
    if i.state_dir.join("ca.key").exists() {
        i.report(
            Outcome::Already,
            "ca",
            format!("the CA in {} is kept", i.state_dir.display()),
        );
    } else if let (Some(file), Some(pass)) =
        (i.args.restore.clone(), i.args.passphrase_file.clone())
    {
        if !i.dry_run() {
            restore(i, &file, &pass)?;
        }
        i.report(
            Outcome::Done,
            "ca",
            format!(
                "restored the CA from {} into {}",
                file.display(),
                i.state_dir.display()
            ),
        );
    } else {
        if !i.dry_run() {
            i.as_account(&["init"], None)?;
        }
        i.report(
            Outcome::Done,
            "ca",
            format!("created the CA in {}", i.state_dir.display()),
        );
    }
    let published = i.args.publish_dir.join(crate::crl::CRL_PEM);
    if published.exists() {
        i.report(
            Outcome::Already,
            "crl",
            format!("{} exists (the timer refreshes it)", published.display()),
        );
    } else {
        if !i.dry_run() {
            // Before MariaDB reads it: it refuses to start TLS when ssl_crl names no file.
            i.as_account(&["crl", "--refresh", "--no-reload"], None)?;
        }
        i.report(
            Outcome::Done,
            "crl",
            format!("published the first CRL in {}", published.display()),
        );
    }
    Ok(())
}

/// `restore` as the account: the backup (the admin's file, read as root) is handed over in the
/// state directory, the passphrase on stdin (never in argv).
fn restore(i: &mut Install, file: &Path, pass: &Path) -> Result<(), AgentError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|why| AgentError::File {
            path: path.to_owned(),
            why,
        })
    };
    let sealed = read(file)?;
    let passphrase = read(pass)?;
    let line = String::from_utf8_lossy(&passphrase)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let owner = ids(i.account());
    let state = super::folder::Folder::open(&i.state_dir, &i.trust_account())?;
    const STAGED: &str = "restore.age";
    state.write(STAGED, &sealed, 0o600, owner)?;
    let staged = i.state_dir.join(STAGED).display().to_string();
    let done = i.as_account(
        &["restore", &staged, "--passphrase-file", "-"],
        Some(format!("{line}\n").as_bytes()),
    );
    let _ = state.remove(STAGED);
    done?;
    // Remembered on disk: the lines wait for sshd and the brokers, maybe until a later run.
    state.write(SYNC_PENDING, b"", 0o600, None)?;
    Ok(())
}

/// After a restore: the MySQL user of every name with a valid client certificate, made again
/// with `mysql-user NAME` as the account. They follow from the inventory as the keys' lines do,
/// and a new server's MariaDB has none of them (an existing one keeps them: `mysql-user`
/// updates in place). Says what it did, or nothing when MySQL is off.
fn mysql_users(i: &Install) -> Result<String, AgentError> {
    let config = crate::config::Config::load(&i.state_dir.join("agent.toml"), true)?;
    if config.mysql.host.is_empty() {
        return Ok(String::new());
    }
    let listed = i.as_account(&["list", "--json"], None)?;
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&listed).map_err(|e| AgentError::Local {
            why: format!("`list --json` gave no certificate list: {e}"),
        })?;
    let names: std::collections::BTreeSet<shiqi_ca::ProfileName> = rows
        .iter()
        .filter(|r| r["kind"] == "client" && r["status"] == "valid")
        .filter_map(|r| r["name"].as_str()?.parse().ok())
        .collect();
    for name in &names {
        i.as_account(&["mysql-user", name.as_str()], None)?;
    }
    Ok(format!(
        "; made the MySQL users of {} name(s) with a valid certificate",
        names.len()
    ))
}

/// In the state directory from a restore until the enrolled keys' lines are written again.
const SYNC_PENDING: &str = "enroll-sync-pending";

/// The first admin: `--admin NAME --ssh-key FILE`, enrolled as the account (enroll checks the
/// sshd block first, and refuses without it).
pub(super) fn admin(i: &mut Install) -> Result<(), AgentError> {
    let (Some(name), Some(key_file)) = (i.args.admin.clone(), i.args.ssh_key.clone()) else {
        i.report(
            Outcome::NeedsYou,
            "admin",
            "no --admin NAME --ssh-key FILE: enroll the first admin with `sudo -u ACCOUNT \
             shiqi-ca-agent enroll NAME --ssh-key FILE --role admin`",
        );
        return Ok(());
    };
    let (line, fingerprint) = public_key(&key_file)?;
    if !i.sshd_safe {
        i.report(
            Outcome::NeedsYou,
            "admin",
            format!(
                "`{name}` is not enrolled: sshd does not yet give `{}` forwards only (see the \
                 sshd line); run install again once it does",
                i.account()
            ),
        );
        return Ok(());
    }
    // A dry run never opens the inventory (opening it may migrate it): it looks for the key's
    // line in the account's authorized_keys instead.
    let in_keys_file = || {
        let home = nix::unistd::User::from_name(i.account())
            .ok()
            .flatten()
            .map(|u| u.dir);
        let body = line.split_whitespace().nth(1).unwrap_or_default();
        home.and_then(|h| std::fs::read_to_string(h.join(".ssh/authorized_keys")).ok())
            .is_some_and(|keys| !body.is_empty() && keys.lines().any(|l| l.contains(body)))
    };
    let enrolled = if i.dry_run() {
        in_keys_file()
    } else {
        i.state_dir.join("inventory.sqlite").exists()
            && i.as_account(&["enroll", "--list", "--json"], None)
                .is_ok_and(|out| {
                    serde_json::from_str::<Vec<serde_json::Value>>(&out).is_ok_and(|keys| {
                        keys.iter().any(|k| {
                            k["name"] == name.as_str()
                                && k["fingerprint"] == fingerprint.as_str()
                                && k["role"] == "admin"
                        })
                    })
                })
    };
    let pending = i.state_dir.join(SYNC_PENDING).exists();
    if enrolled && pending && !i.dry_run() {
        // The enrollments came back with the inventory; their lines are this server's to write
        // (they name this server's agent and brokers), once the brokers trust the CA.
        if let Err(e) = i.as_account(&["enroll", "--sync"], None) {
            i.report(
                Outcome::NeedsYou,
                "admin",
                format!(
                    "the restored enrollments have no lines yet: `enroll --sync` failed ({e}); \
                     restart the brokers with the settings above, then run install again"
                ),
            );
            return Ok(());
        }
        let users = match mysql_users(i) {
            Ok(users) => users,
            Err(e) => {
                i.report(
                    Outcome::NeedsYou,
                    "admin",
                    format!(
                        "the restored certificates' MySQL users are not all made yet ({e}); \
                         fix MariaDB (the mysql lines above), then run install again"
                    ),
                );
                return Ok(());
            }
        };
        super::folder::Folder::open(&i.state_dir, &i.trust_account())?.remove(SYNC_PENDING)?;
        i.report(
            Outcome::Done,
            "admin",
            format!(
                "`{name}` is enrolled as admin with {fingerprint} (restored); wrote every \
                 enrolled key's line again (enroll --sync){users}"
            ),
        );
        return Ok(());
    }
    if enrolled {
        i.report(
            Outcome::Already,
            "admin",
            format!("`{name}` is enrolled as admin with {fingerprint}"),
        );
        return Ok(());
    }
    if !i.dry_run() {
        // enroll allows forwards to exactly the brokers the cluster advertises, so it needs
        // their answer; brokers not yet restarted with install's settings do not trust this
        // CA's admin. Asked first, so that any failure of enroll itself is an error.
        let kafka = crate::config::Config::load(&i.state_dir.join("agent.toml"), true)
            .is_ok_and(|c| !c.kafka.bootstrap.is_empty());
        if kafka && let Err(e) = i.as_account(&["brokers", "--json"], None) {
            i.report(
                Outcome::NeedsYou,
                "admin",
                format!(
                    "`{name}` is not enrolled yet: the brokers do not answer this CA's admin \
                     (restart them with the settings above), then run install again ({e})"
                ),
            );
            return Ok(());
        }
        i.as_account(
            &["enroll", &name, "--ssh-key", "-", "--role", "admin"],
            Some(line.as_bytes()),
        )?;
    }
    i.report(
        Outcome::Done,
        "admin",
        format!("enrolled `{name}` as admin with {fingerprint}"),
    );
    Ok(())
}

/// The one OpenSSH public key line of `path` (read as root: the admin's own file) and its
/// SHA-256 fingerprint.
pub(super) fn public_key(path: &Path) -> Result<(String, String), AgentError> {
    let text = std::fs::read_to_string(path).map_err(|why| AgentError::File {
        path: path.to_owned(),
        why,
    })?;
    let line = text.trim().to_owned();
    let fingerprint = ssh_key::PublicKey::from_openssh(&line)
        .map(|k| k.fingerprint(ssh_key::HashAlg::Sha256).to_string())
        .map_err(|e| AgentError::Local {
            why: format!(
                "--ssh-key {}: not one OpenSSH public key line ({e}); give an id_*.pub file",
                path.display()
            ),
        })?;
    Ok((line, fingerprint))
}

#[cfg(test)]
mod tests {
    use super::{has_password, locked};

    #[test]
    fn only_a_hash_is_a_password() {
        let shadow = "alice:$y$j9T$abc:19000::::::\nshiqi-ca:*:19000::::::\nlocked:!:1::::::\n";
        assert!(has_password(shadow, "alice"));
        assert!(!has_password(shadow, "shiqi-ca"));
        assert!(!has_password(shadow, "locked"));
        assert!(!has_password(shadow, "nobody"));
    }

    #[test]
    fn a_bang_in_the_password_field_is_locked_and_only_for_that_account() {
        let shadow = "root:*:19000:0:99999:7:::\nshiqi-ca:!:19000::::::\nshiqi-ca2:*:19000::::::\n";
        assert!(locked(shadow, "shiqi-ca"));
        assert!(!locked(shadow, "shiqi-ca2"));
        assert!(!locked(shadow, "root"));
        assert!(!locked(shadow, "nobody"));
        assert!(!locked("shiqi-ca!:!:1::::::\n", "shiqi-ca"));
    }
}
