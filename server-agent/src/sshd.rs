//! The sshd settings the agent's account needs, checked the way sshd itself resolves them.
//!
//! An `authorized_keys` line cannot take away what sshd grants: `restrict,port-forwarding`
//! gives back remote (`-R`) and Unix-socket forwarding too, so on a stock sshd an enrolled key
//! could make sshd listen on the server (on `[::1]:P` when `127.0.0.1:P` is taken, which
//! `localhost` resolves to first on Debian) or plant a socket in the CA's state directory. Only
//! sshd_config can refuse those, so `enroll` installs no line until `sshd -T` — sshd's own
//! reading of its config, `Match` blocks and `Include`s resolved — says the agent's account
//! gets exactly [`REQUIRED`].

use std::path::Path;
use std::process::Command;

use crate::error::AgentError;
use crate::state::Context;

/// Each setting as `sshd -T` prints it, and the value the agent's account must get.
pub const REQUIRED: [(&str, &str, &str); 5] = [
    ("allowtcpforwarding", "AllowTcpForwarding", "local"),
    (
        "allowstreamlocalforwarding",
        "AllowStreamLocalForwarding",
        "no",
    ),
    ("permitlisten", "PermitListen", "none"),
    ("permittty", "PermitTTY", "no"),
    ("x11forwarding", "X11Forwarding", "no"),
];

/// Where the checks pretend the connection comes from: a laptop anywhere (TEST-NET-1), and the
/// address this request came from when it came over SSH. `Match Address` blocks for other
/// networks are the admin's to keep in line with these.
const ANY_LAPTOP: &str = "192.0.2.1";

/// The block to add to sshd_config for `account`.
pub fn block(account: &str) -> String {
    let mut text = format!("Match User {account}\n");
    for (_, name, value) in REQUIRED {
        text.push_str(&format!("    {name} {value}\n"));
    }
    text
}

/// Refuses unless sshd gives `account` every [`REQUIRED`] value.
///
/// # Errors
/// [`AgentError::SshdUnsafe`] naming each setting that differs, or [`AgentError::Request`] when
/// sshd cannot be asked.
pub fn check(ctx: &Context, account: &str) -> Result<(), AgentError> {
    let mut addresses = vec![ANY_LAPTOP.to_owned()];
    if let Some(from) = std::env::var("SSH_CLIENT")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
    {
        addresses.push(from);
    }
    let access = &ctx.config.access;
    for addr in addresses {
        let wrong = unsafe_settings(&access.sshd, &access.sshd_config, account, &addr)?;
        if !wrong.is_empty() {
            return Err(AgentError::SshdUnsafe {
                account: account.to_owned(),
                why: format!(
                    "{} (`sshd -T -f {} -C user={account},addr={addr}`)",
                    wrong.join(", "),
                    access.sshd_config.display()
                ),
                block: block(account),
            });
        }
    }
    Ok(())
}

/// Each [`REQUIRED`] setting sshd (`sshd -T -f config`) gives `account` connecting from `addr`
/// with another value, as `Name value, not required`. Empty: all as required.
///
/// # Errors
/// [`AgentError::Request`] when sshd cannot be asked.
pub fn unsafe_settings(
    sshd: &Path,
    config: &Path,
    account: &str,
    addr: &str,
) -> Result<Vec<String>, AgentError> {
    let scratch = tempfile::tempdir().map_err(|why| AgentError::File {
        path: std::env::temp_dir(),
        why,
    })?;
    let host_key = throwaway_host_key(scratch.path())?;
    let printed = effective(sshd, config, &host_key, account, addr)?;
    Ok(differences(&printed))
}

/// The address [`unsafe_settings`] pretends a laptop connects from.
pub const LAPTOP_ADDRESS: &str = ANY_LAPTOP;

/// The pid file sshd (`sshd -T -f config`) writes, for a reload by SIGHUP.
pub fn pid_file(sshd: &Path, config: &Path) -> Option<std::path::PathBuf> {
    let scratch = tempfile::tempdir().ok()?;
    let host_key = throwaway_host_key(scratch.path()).ok()?;
    let printed = effective(sshd, config, &host_key, "root", ANY_LAPTOP).ok()?;
    printed.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k.eq_ignore_ascii_case("pidfile") && v.trim() != "none")
            .then(|| std::path::PathBuf::from(v.trim()))
    })
}

/// Refuses to install principals unless sshd trusts an SSH CA for user certificates and reads
/// the agent's principals file for `account` (else a principal line would do nothing, or,
/// without `AuthorizedPrincipalsFile`, a certificate naming the account itself would get a
/// shell on it).
///
/// # Errors
/// [`AgentError::Request`] naming the settings to add, or when sshd cannot be asked.
pub fn check_principals(ctx: &Context, account: &str, file: &Path) -> Result<(), AgentError> {
    let access = &ctx.config.access;
    let scratch = tempfile::tempdir().map_err(|why| AgentError::File {
        path: std::env::temp_dir(),
        why,
    })?;
    let host_key = throwaway_host_key(scratch.path())?;
    let printed = effective(
        &access.sshd,
        &access.sshd_config,
        &host_key,
        account,
        ANY_LAPTOP,
    )?;
    let value = |key: &str| {
        printed.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            k.eq_ignore_ascii_case(key).then(|| v.trim().to_owned())
        })
    };
    let home = nix::unistd::User::from_name(account)
        .ok()
        .flatten()
        .map(|u| u.dir)
        .unwrap_or_default();
    let mut missing = Vec::new();
    if value("trustedusercakeys").is_none_or(|v| v == "none") {
        missing.push("TrustedUserCAKeys (the SSH CA's public key)".to_owned());
    }
    let names = value("authorizedprincipalsfile")
        .filter(|v| v != "none")
        .is_some_and(|v| expand(&v, &home, account) == file);
    if !names {
        missing.push(format!(
            "AuthorizedPrincipalsFile {} in the `Match User {account}` block",
            file.display()
        ));
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(AgentError::Request {
        why: format!(
            "sshd does not let certificates reach the agent's principals: add {} to {} and \
             reload sshd (ExposeAuthInfo yes there too puts the certificate's key id in the \
             audit log)",
            missing.join(" and "),
            access.sshd_config.display()
        ),
    })
}

/// An `AuthorizedPrincipalsFile` value as sshd opens it: `%h`, `%u`, `%%`, relative to home.
fn expand(value: &str, home: &Path, account: &str) -> std::path::PathBuf {
    let text = value
        .replace("%%", "\u{0}")
        .replace("%h", &home.to_string_lossy())
        .replace("%u", account)
        .replace('\u{0}', "%");
    let path = Path::new(&text);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        home.join(path)
    }
}

/// The settings that differ from [`REQUIRED`] in `sshd -T` output, each as `Name is value, not
/// required`.
fn differences(printed: &str) -> Vec<String> {
    REQUIRED
        .iter()
        .filter_map(|&(key, name, want)| {
            let got = printed.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                k.eq_ignore_ascii_case(key).then(|| v.trim())
            });
            match got {
                Some(v) if v.eq_ignore_ascii_case(want) => None,
                Some(v) => Some(format!("{name} {}, not {want}", v.escape_debug())),
                None => Some(format!("{name} unset, not {want}")),
            }
        })
        .collect()
}

/// sshd refuses to print its config without a host key it can read, and the real ones are
/// root's: a throwaway one lets the agent's own account ask.
fn throwaway_host_key(dir: &Path) -> Result<std::path::PathBuf, AgentError> {
    let key = dir.join("check_host_key");
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "shiqi-ca-agent sshd check",
            "-f",
        ])
        .arg(&key)
        .output()
        .map_err(|e| AgentError::Request {
            why: format!("cannot run ssh-keygen to check sshd's settings: {e}"),
        })?;
    if !out.status.success() {
        return Err(AgentError::Request {
            why: format!(
                "ssh-keygen failed: {}",
                shiqi_ca::text::one_line(String::from_utf8_lossy(&out.stderr).trim(), 200)
            ),
        });
    }
    Ok(key)
}

fn effective(
    sshd: &Path,
    config: &Path,
    host_key: &Path,
    account: &str,
    addr: &str,
) -> Result<String, AgentError> {
    let out = Command::new(sshd)
        .arg("-T")
        .arg("-f")
        .arg(config)
        .arg("-h")
        .arg(host_key)
        .arg("-C")
        .arg(format!("user={account},host={addr},addr={addr}"))
        .output()
        .map_err(|e| AgentError::Request {
            why: format!(
                "cannot run `{}` to check its settings for `{account}`: {e}; set `[access] sshd` \
                 in agent.toml to OpenSSH's sshd",
                sshd.display()
            ),
        })?;
    if !out.status.success() {
        return Err(AgentError::Request {
            why: format!(
                "`{} -T -f {}` failed: {}; set `[access] sshd_config` in agent.toml to the \
                 config the running sshd reads",
                sshd.display(),
                config.display(),
                shiqi_ca::text::one_line(String::from_utf8_lossy(&out.stderr).trim(), 300)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_principals_file_is_found_as_sshd_opens_it() {
        let home = Path::new("/home/ca");
        for (value, want) in [
            (
                ".ssh/authorized_principals",
                "/home/ca/.ssh/authorized_principals",
            ),
            ("%h/.ssh/p_%u", "/home/ca/.ssh/p_shiqi-ca"),
            ("/etc/ssh/principals/%u", "/etc/ssh/principals/shiqi-ca"),
            ("/etc/100%%/%u", "/etc/100%/shiqi-ca"),
        ] {
            assert_eq!(expand(value, home, "shiqi-ca"), Path::new(want), "{value}");
        }
    }

    use super::*;

    #[test]
    fn the_block_and_the_differences_name_each_setting() {
        assert_eq!(
            block("shiqi-ca"),
            "Match User shiqi-ca\n    AllowTcpForwarding local\n    AllowStreamLocalForwarding \
             no\n    PermitListen none\n    PermitTTY no\n    X11Forwarding no\n"
        );
        let good = "port 22\nallowtcpforwarding local\nallowstreamlocalforwarding no\n\
                    permitlisten none\npermittty no\nx11forwarding no\n";
        assert!(differences(good).is_empty());
        // Debian's defaults: everything allowed.
        let stock = "allowtcpforwarding yes\nallowstreamlocalforwarding yes\npermitlisten any\n\
                     permittty yes\nx11forwarding yes\n";
        assert_eq!(
            differences(stock),
            [
                "AllowTcpForwarding yes, not local",
                "AllowStreamLocalForwarding yes, not no",
                "PermitListen any, not none",
                "PermitTTY yes, not no",
                "X11Forwarding yes, not no"
            ]
        );
        assert_eq!(
            differences("allowtcpforwarding local\n"),
            [
                "AllowStreamLocalForwarding unset, not no",
                "PermitListen unset, not none",
                "PermitTTY unset, not no",
                "X11Forwarding unset, not no"
            ]
        );
    }

    /// sshd itself, on a config written here: Debian's defaults are refused, the block passes,
    /// and a `Match` for another user does not count. Skipped where OpenSSH's sshd is missing.
    #[test]
    fn sshd_itself_agrees() -> anyhow::Result<()> {
        let sshd = Path::new("/usr/sbin/sshd");
        // As root, sshd also wants its privilege separation folder, which exists wherever sshd
        // runs (the stack makes it; the e2e tests check `enroll` against the running sshd).
        let root = nix::unistd::geteuid().is_root();
        if !sshd.exists() || (root && !Path::new("/run/sshd").is_dir()) {
            eprintln!("skipped: no {} (or no /run/sshd)", sshd.display());
            return Ok(());
        }
        let dir = tempfile::tempdir()?;
        let key = throwaway_host_key(dir.path())?;
        let config = dir.path().join("sshd_config");
        let ask = |text: &str, user: &str| -> anyhow::Result<Vec<String>> {
            crate::fsutil::write_private(&config, text.as_bytes())?;
            Ok(differences(&effective(
                sshd, &config, &key, user, ANY_LAPTOP,
            )?))
        };
        let stock = "KbdInteractiveAuthentication no\nX11Forwarding yes\n";
        assert_eq!(ask(stock, "agent")?.len(), 5);
        let fixed = format!("{stock}{}", block("agent"));
        assert!(ask(&fixed, "agent")?.is_empty());
        assert_eq!(ask(&fixed, "someone")?.len(), 5);
        Ok(())
    }
}
