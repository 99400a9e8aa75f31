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

/// One setting the agent's account must get: as `sshd -T` prints it, as sshd_config spells
/// it, the value, and whether an sshd built without it (no GSSAPI or Kerberos) may leave it out.
pub(crate) struct Rule {
    /// `sshd -T`'s key.
    pub(crate) key: &'static str,
    /// sshd_config's keyword.
    pub(crate) name: &'static str,
    /// The required value.
    pub(crate) value: &'static str,
    /// Absent from `sshd -T` is fine (the feature is not built in).
    pub(crate) optional: bool,
}

const fn rule(key: &'static str, name: &'static str, value: &'static str) -> Rule {
    Rule {
        key,
        name,
        value,
        optional: false,
    }
}

/// What an enrolled key's owner could otherwise do with the account, setting by setting:
/// listen or forward sockets on the server (`restrict,port-forwarding` gives back `-R` and
/// Unix-socket forwards), get a terminal, X11, an agent socket on the server, a tun device,
/// `~/.ssh/rc` run; and every way in besides the enrolled keys' forced commands: keys from an
/// `AuthorizedKeysCommand` (EC2 Instance Connect) or principals from a command, GSSAPI,
/// host-based or keyboard-interactive (PAM) logins, passwords.
pub(crate) const REQUIRED: [Rule; 14] = [
    rule("allowtcpforwarding", "AllowTcpForwarding", "local"),
    rule(
        "allowstreamlocalforwarding",
        "AllowStreamLocalForwarding",
        "no",
    ),
    rule("permitlisten", "PermitListen", "none"),
    rule("permittty", "PermitTTY", "no"),
    rule("x11forwarding", "X11Forwarding", "no"),
    rule("allowagentforwarding", "AllowAgentForwarding", "no"),
    rule("permittunnel", "PermitTunnel", "no"),
    rule("permituserrc", "PermitUserRC", "no"),
    rule("authorizedkeyscommand", "AuthorizedKeysCommand", "none"),
    rule(
        "authorizedprincipalscommand",
        "AuthorizedPrincipalsCommand",
        "none",
    ),
    rule("hostbasedauthentication", "HostbasedAuthentication", "no"),
    rule(
        "kbdinteractiveauthentication",
        "KbdInteractiveAuthentication",
        "no",
    ),
    rule("passwordauthentication", "PasswordAuthentication", "no"),
    Rule {
        key: "gssapiauthentication",
        name: "GSSAPIAuthentication",
        value: "no",
        optional: true,
    },
];

/// Where certificates may log in: only through the principals file `enroll --ssh-principal`
/// writes (each line with its forced command). Without one, sshd lets any certificate from a
/// `TrustedUserCAKeys` CA that names the account log in with a shell.
pub(crate) const PRINCIPALS_FILE: &str = ".ssh/authorized_principals";

/// Where the checks pretend the connection comes from: a laptop anywhere (TEST-NET-1), and the
/// address this request came from when it came over SSH. `Match Address` blocks for other
/// networks are the admin's to keep in line with these.
const ANY_LAPTOP: &str = "192.0.2.1";

/// The block to add to sshd_config for `account`: every [`REQUIRED`] setting, the principals
/// file, and `ExposeAuthInfo` (sshd then tells the agent which certificate logged in, for the
/// audit log).
pub(crate) fn block(account: &str) -> String {
    let mut text = format!("Match User {account}\n");
    for r in REQUIRED {
        text.push_str(&format!("    {} {}\n", r.name, r.value));
    }
    text.push_str(&format!(
        "    AuthorizedPrincipalsFile {PRINCIPALS_FILE}\n    ExposeAuthInfo yes\n"
    ));
    text
}

/// Refuses unless sshd gives `account` every [`REQUIRED`] value.
///
/// # Errors
/// [`AgentError::SshdUnsafe`] naming each setting that differs, or [`AgentError::Request`] when
/// sshd cannot be asked.
pub(crate) fn check(ctx: &Context, account: &str) -> Result<(), AgentError> {
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
pub(crate) fn unsafe_settings(
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
pub(crate) const LAPTOP_ADDRESS: &str = ANY_LAPTOP;

/// The pid file sshd (`sshd -T -f config`) writes, for a reload by SIGHUP.
pub(crate) fn pid_file(sshd: &Path, config: &Path) -> Option<std::path::PathBuf> {
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
pub(crate) fn check_principals(
    ctx: &Context,
    account: &str,
    file: &Path,
) -> Result<(), AgentError> {
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

/// The settings that differ from [`REQUIRED`] in `sshd -T` output, each as `Name value, not
/// required`, and the certificate rule: a `TrustedUserCAKeys` with no
/// `AuthorizedPrincipalsFile` lets any certificate naming the account in.
fn differences(printed: &str) -> Vec<String> {
    let value = |key: &str| {
        printed.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            k.eq_ignore_ascii_case(key).then(|| v.trim())
        })
    };
    let mut out: Vec<String> = REQUIRED
        .iter()
        .filter_map(|r| match value(r.key) {
            Some(v) if v.eq_ignore_ascii_case(r.value) => None,
            None if r.optional => None,
            Some(v) if r.key == "authorizedkeyscommand" => Some(format!(
                "AuthorizedKeysCommand {} (EC2 Instance Connect or a directory lookup?), not none: \
                 any key it returns logs in as the account without the forced command",
                v.escape_debug()
            )),
            Some(v) => Some(format!("{} {}, not {}", r.name, v.escape_debug(), r.value)),
            None => Some(format!("{} unset, not {}", r.name, r.value)),
        })
        .collect();
    let cas = value("trustedusercakeys").is_some_and(|v| !v.eq_ignore_ascii_case("none"));
    let principals =
        value("authorizedprincipalsfile").is_some_and(|v| !v.eq_ignore_ascii_case("none"));
    if cas && !principals {
        out.push(format!(
            "AuthorizedPrincipalsFile none while TrustedUserCAKeys is set, not \
             {PRINCIPALS_FILE}: any certificate naming the account gets a shell"
        ));
    }
    out
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

    /// `sshd -T` lines giving every [`REQUIRED`] value.
    fn all_required() -> String {
        REQUIRED
            .iter()
            .map(|r| format!("{} {}\n", r.key, r.value))
            .collect()
    }

    #[test]
    fn the_block_and_the_differences_name_each_setting() {
        let text = block("shiqi-ca");
        assert!(text.starts_with("Match User shiqi-ca\n"), "{text}");
        for want in [
            "    AllowTcpForwarding local\n",
            "    PermitListen none\n",
            "    AllowAgentForwarding no\n",
            "    PermitTunnel no\n",
            "    PermitUserRC no\n",
            "    AuthorizedKeysCommand none\n",
            "    AuthorizedPrincipalsCommand none\n",
            "    GSSAPIAuthentication no\n",
            "    AuthorizedPrincipalsFile .ssh/authorized_principals\n",
        ] {
            assert!(text.contains(want), "{want}{text}");
        }
        assert!(differences(&format!("port 22\n{}", all_required())).is_empty());
        // An sshd built without GSSAPI prints no such line: fine.
        let no_gssapi: String = all_required()
            .lines()
            .filter(|l| !l.starts_with("gssapi"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(differences(&no_gssapi).is_empty());
        // Debian's defaults: every forward, a TTY, an agent socket, ~/.ssh/rc, passwords.
        let stock = "allowtcpforwarding yes\nallowstreamlocalforwarding yes\npermitlisten any\n\
                     permittty yes\nx11forwarding yes\nallowagentforwarding yes\npermittunnel no\n\
                     permituserrc yes\nauthorizedkeyscommand none\n\
                     authorizedprincipalscommand none\nhostbasedauthentication no\n\
                     kbdinteractiveauthentication yes\npasswordauthentication yes\n\
                     gssapiauthentication no\n";
        assert_eq!(
            differences(stock),
            [
                "AllowTcpForwarding yes, not local",
                "AllowStreamLocalForwarding yes, not no",
                "PermitListen any, not none",
                "PermitTTY yes, not no",
                "X11Forwarding yes, not no",
                "AllowAgentForwarding yes, not no",
                "PermitUserRC yes, not no",
                "KbdInteractiveAuthentication yes, not no",
                "PasswordAuthentication yes, not no",
            ]
        );
        assert!(
            differences("allowtcpforwarding local\n")
                .contains(&"PermitTTY unset, not no".to_owned())
        );
        // EC2 Instance Connect's key command is named as such.
        let ec2 = all_required().replace(
            "authorizedkeyscommand none",
            "authorizedkeyscommand /usr/share/ec2-instance-connect/eic_run_authorized_keys %u %f",
        );
        let found = differences(&ec2);
        assert!(
            found.len() == 1 && found[0].contains("EC2 Instance Connect"),
            "{found:?}"
        );
    }

    #[test]
    fn a_trusted_ssh_ca_without_a_principals_file_is_refused() {
        let with_ca = format!("{}trustedusercakeys /etc/ssh/user_ca.pub\n", all_required());
        let found = differences(&format!("{with_ca}authorizedprincipalsfile none\n"));
        assert!(
            found.len() == 1 && found[0].starts_with("AuthorizedPrincipalsFile none"),
            "{found:?}"
        );
        assert!(differences(&format!("{with_ca}authorizedprincipalsfile .ssh/p\n")).is_empty());
        // No CA trusted: no principals file is needed.
        let no_ca = format!(
            "{}trustedusercakeys none\nauthorizedprincipalsfile none\n",
            all_required()
        );
        assert!(differences(&no_ca).is_empty());
    }

    /// sshd itself, on a config written here: Debian's defaults are refused, the block passes,
    /// a `Match` for another user does not count, an earlier `Match all` that loosens a setting
    /// wins over the block (sshd keeps the first value) and is refused, and a server-wide SSH
    /// CA with the old five-line block is refused. Skipped where OpenSSH's sshd is missing.
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
        let found = ask(stock, "agent")?;
        for want in [
            "AllowTcpForwarding",
            "AllowAgentForwarding",
            "PermitUserRC",
            "PasswordAuthentication",
        ] {
            assert!(
                found.iter().any(|f| f.starts_with(want)),
                "{want}: {found:?}"
            );
        }
        let fixed = format!("{stock}{}", block("agent"));
        assert!(ask(&fixed, "agent")?.is_empty());
        assert_eq!(ask(&fixed, "someone")?.len(), found.len());
        let loosened = format!(
            "{stock}Match all\n    AllowAgentForwarding yes\n{}",
            block("agent")
        );
        assert_eq!(
            ask(&loosened, "agent")?,
            ["AllowAgentForwarding yes, not no"]
        );
        let old_block = "Match User agent\n    AllowTcpForwarding local\n    \
                         AllowStreamLocalForwarding no\n    PermitListen none\n    PermitTTY no\n    \
                         X11Forwarding no\n";
        let ca = dir.path().join("user_ca.pub");
        let with_ca = format!("{stock}TrustedUserCAKeys {}\n{old_block}", ca.display());
        let found = ask(&with_ca, "agent")?;
        assert!(
            found
                .iter()
                .any(|f| f.starts_with("AuthorizedPrincipalsFile none")),
            "{found:?}"
        );
        Ok(())
    }
}
