//! The agent account's `authorized_keys`, written from the enrolled keys: one line per key,
//! each restricted to the agent's forced command and to port forwards towards the services.
//!
//! ```text
//! restrict,port-forwarding,permitopen="127.0.0.1:3306",command="/usr/local/bin/shiqi-ca-agent --state-dir /var/lib/shiqi-ca serve --key SHA256:…" ssh-ed25519 AAAA… shiqi-ca-agent:bob
//! ```
//!
//! `restrict` turns off everything (pty, agent and X11 forwarding, `~/.ssh/rc`) and future
//! features too; `port-forwarding` with `permitopen` gives back only the tunnel's targets; the
//! forced command replaces whatever the client asks to run (sshd(8), "AUTHORIZED_KEYS FILE
//! FORMAT"). Lines that end without the `shiqi-ca-agent:` marker are someone else's and are kept
//! as they are, with a warning when they give a shell.

use std::path::{Path, PathBuf};

use shiqi_ca::inventory::access::Enrollment;

use crate::error::AgentError;
use crate::fsutil;
use crate::state::Context;

/// The comment that marks a line as the agent's.
const MARKER: &str = "shiqi-ca-agent:";

const HEADER: &str = "# Keys enrolled with `shiqi-ca-agent enroll` (lines ending in \
                      `shiqi-ca-agent:NAME`) are rewritten by it; edit them with `enroll`.\n";

/// What [`sync`] wrote.
#[derive(Debug)]
pub(crate) struct Synced {
    /// The file.
    pub(crate) path: PathBuf,
    /// Lines that were not the agent's and give a shell on this account.
    pub(crate) warnings: Vec<String>,
    /// Where every enrolled key may forward to.
    pub(crate) targets: Vec<String>,
}

/// The file `enroll` manages (`[access] authorized_keys`, else the agent account's own).
///
/// # Errors
/// [`AgentError::Request`] when the account has no home in the password database.
pub(crate) fn path(ctx: &Context) -> Result<PathBuf, AgentError> {
    if let Some(p) = &ctx.config.access.authorized_keys {
        return Ok(p.clone());
    }
    let user = account()?;
    Ok(user.dir.join(".ssh").join("authorized_keys"))
}

/// The principals file `enroll --ssh-principal` manages (`[access] authorized_principals`, else
/// the agent account's `~/.ssh/authorized_principals`).
///
/// # Errors
/// [`AgentError::Request`] when the account has no home in the password database.
pub(crate) fn principals_path(ctx: &Context) -> Result<PathBuf, AgentError> {
    if let Some(p) = &ctx.config.access.authorized_principals {
        return Ok(p.clone());
    }
    Ok(account()?.dir.join(".ssh").join("authorized_principals"))
}

/// The forced command for an enrollment: this binary, the state directory and config it runs
/// with now, and `serve --key FINGERPRINT` (or `serve --principal P`).
///
/// # Errors
/// [`AgentError::Request`] when a path cannot be written inside the option's quotes.
pub(crate) fn forced_command(ctx: &Context, who: &Enrollment) -> Result<String, AgentError> {
    let exe = std::env::current_exe().map_err(|why| AgentError::File {
        path: PathBuf::from("/proc/self/exe"),
        why,
    })?;
    let dir = std::fs::canonicalize(&ctx.dir).unwrap_or_else(|_| ctx.dir.clone());
    let mut words = vec![word(&exe)?, "--state-dir".to_owned(), word(&dir)?];
    if let Some(config) = &ctx.config_path {
        let config = std::fs::canonicalize(config).unwrap_or_else(|_| config.clone());
        words.extend(["--config".to_owned(), word(&config)?]);
    }
    let (flag, value) = match who.principal() {
        Some(p) => ("--principal", p),
        None => ("--key", who.fingerprint.as_str()),
    };
    words.extend(["serve".to_owned(), flag.to_owned(), value.to_owned()]);
    Ok(words.join(" "))
}

/// A path as one shell word that can also sit inside `command="…"` (no quote, backslash or
/// control character, which would need escaping at two levels).
fn word(path: &Path) -> Result<String, AgentError> {
    let text = path.to_str().filter(|t| {
        !t.chars()
            .any(|c| c == '"' || c == '\\' || c == '\'' || c.is_control())
    });
    let Some(text) = text else {
        return Err(AgentError::Request {
            why: format!(
                "`{}` cannot be written into authorized_keys (quotes, backslashes or control \
                 characters)",
                path.display()
            ),
        });
    };
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        Ok(text.to_owned())
    } else {
        Ok(format!("'{text}'"))
    }
}

/// The line for one key, or for one principal (`AuthorizedPrincipalsFile` lines take the same
/// options, then the principal; they have no comment, so the forced command marks them).
pub(crate) fn line(key: &Enrollment, command: &str, permit_open: &[String]) -> String {
    let mut options = vec!["restrict".to_owned()];
    if !permit_open.is_empty() {
        options.push("port-forwarding".to_owned());
        options.extend(permit_open.iter().map(|t| format!("permitopen=\"{t}\"")));
    }
    options.push(format!("command=\"{command}\""));
    match key.principal() {
        Some(p) => format!("{} {p}", options.join(",")),
        None => format!(
            "{} {} {MARKER}{}",
            options.join(","),
            key.public_key,
            key.name
        ),
    }
}

/// The file's new text: the lines of `existing` that are not the agent's, then one line per
/// key; and a warning per foreign line that gives a shell (no forced command).
pub(crate) fn render(
    existing: &str,
    keys: &[(Enrollment, String)],
    permit_open: &[String],
) -> (String, Vec<String>) {
    let mut text = String::from(HEADER);
    let mut warnings = Vec::new();
    for (n, l) in existing.lines().enumerate() {
        let trimmed = l.trim();
        if l == HEADER.trim_end() || is_ours(trimmed) {
            continue;
        }
        if !trimmed.is_empty() && !trimmed.starts_with('#') && !trimmed.contains("command=") {
            warnings.push(format!(
                "line {} of authorized_keys was not written by `enroll` and has no forced \
                 command: that key gets a shell on the CA's account",
                n + 1
            ));
        }
        text.push_str(l);
        text.push('\n');
    }
    for (key, command) in keys {
        text.push_str(&line(key, command, permit_open));
        text.push('\n');
    }
    (text, warnings)
}

fn is_ours(line: &str) -> bool {
    line.rsplit_once(' ')
        .is_some_and(|(_, comment)| comment.starts_with(MARKER))
        || line.contains(" serve --principal ")
}

/// Why [`sync`] rewrites the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A key is added, or every line rewritten (`enroll --sync`): sshd must hold the agent's
    /// account to forwards only ([`crate::sshd::check`]), and the forward targets are asked
    /// afresh (the cluster's advertised brokers).
    Install,
    /// A key is removed: always allowed, and the remaining lines keep the targets they have.
    Remove,
}

/// Rewrites the file from `keys` (atomically, 0600, `~/.ssh` made 0700 if missing).
///
/// # Errors
/// [`AgentError::SshdUnsafe`] (installing while sshd lets the account listen or forward
/// sockets), the cluster's error (when the targets need its brokers), [`AgentError::File`] or
/// [`AgentError::Request`]. Nothing is written then.
pub(crate) fn sync(
    ctx: &Context,
    keys: &[Enrollment],
    purpose: Purpose,
) -> Result<Synced, AgentError> {
    let path = path(ctx)?;
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(why) => return Err(AgentError::File { path, why }),
    };
    let lines = keys
        .iter()
        .map(|k| Ok((k.clone(), forced_command(ctx, k)?)))
        .collect::<Result<Vec<_>, AgentError>>()?;
    let (principal_lines, key_lines): (Vec<_>, Vec<_>) = lines
        .into_iter()
        .partition(|(k, _)| k.principal().is_some());
    let principals = principals_path(ctx)?;
    let existing_principals = match std::fs::read_to_string(&principals) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(why) => {
            return Err(AgentError::File {
                path: principals,
                why,
            });
        }
    };
    let targets = match (purpose, current_targets(&existing)) {
        (Purpose::Remove, Some(kept)) => kept,
        (Purpose::Install, _) => {
            let account = account()?.name;
            crate::sshd::check(ctx, &account)?;
            if !principal_lines.is_empty() {
                crate::sshd::check_principals(ctx, &account, &principals)?;
            }
            targets(ctx)?
        }
        (Purpose::Remove, None) => targets(ctx)?,
    };
    let (text, mut warnings) = render(&existing, &key_lines, &targets);
    // The principals file only once a principal is enrolled (or to take its lines out again).
    let principals_text = if principal_lines.is_empty() && existing_principals.is_none() {
        None
    } else {
        let (text, more) = render(
            existing_principals.as_deref().unwrap_or_default(),
            &principal_lines,
            &targets,
        );
        warnings.extend(
            more.into_iter()
                .map(|w| w.replace("authorized_keys", "authorized_principals")),
        );
        Some(text)
    };
    for p in [Some(&path), principals_text.as_ref().map(|_| &principals)]
        .into_iter()
        .flatten()
    {
        if let Some(dir) = p.parent()
            && !dir.exists()
        {
            fsutil::create_private_dir(dir)?;
        }
    }
    fsutil::write_private(&path, text.as_bytes())?;
    if let Some(text) = principals_text {
        fsutil::write_private(&principals, text.as_bytes())?;
    }
    Ok(Synced {
        path,
        warnings,
        targets,
    })
}

/// The forward targets for every key: `[access] permit_open`, else the services, with the
/// brokers the cluster advertises now.
fn targets(ctx: &Context) -> Result<Vec<String>, AgentError> {
    if !ctx.config.permit_open_asks_kafka() {
        return Ok(ctx.config.permit_open(&[]));
    }
    let ca = ctx.ca()?;
    let facts =
        crate::kafka::brokers(&crate::kafka::Admin::connect(ctx, &ca)?).map_err(|e| match e {
            AgentError::Kafka { bootstrap, why } => AgentError::Kafka {
                bootstrap,
                why: format!(
                    "{why} (enroll allows forwards to exactly the brokers the cluster advertises; \
                     or list the targets in `[access] permit_open`)"
                ),
            },
            other => other,
        })?;
    let brokers: Vec<(String, u16)> = facts
        .brokers
        .iter()
        .map(|b| (b.host.to_string(), b.port.get()))
        .collect();
    Ok(ctx.config.permit_open(&brokers))
}

/// The targets the agent's lines already carry (they all carry the same), if it wrote any.
fn current_targets(existing: &str) -> Option<Vec<String>> {
    let line = existing.lines().map(str::trim).find(|l| is_ours(l))?;
    let options = line.split(" command=\"").next()?;
    Some(
        options
            .split(',')
            .filter_map(|o| o.strip_prefix("permitopen=\"")?.strip_suffix('"'))
            .map(str::to_owned)
            .collect(),
    )
}

/// The account the agent runs as (from the password database, not `$USER`).
pub(crate) fn account() -> Result<nix::unistd::User, AgentError> {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .ok_or_else(|| AgentError::Request {
            why: "the agent's account has no entry in the password database; set `[access] \
                  authorized_keys` in agent.toml"
                .to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use shiqi_ca::inventory::access::Role;
    use time::OffsetDateTime;

    use super::*;

    fn key(name: &str) -> Enrollment {
        Enrollment {
            fingerprint: format!("SHA256:{name}"),
            name: name.to_owned(),
            role: Role::User,
            public_key: format!("ssh-ed25519 AAAAC3{name}"),
            enrolled_at: OffsetDateTime::UNIX_EPOCH,
            enrolled_by: "local root".to_owned(),
        }
    }

    #[test]
    fn each_key_gets_the_forced_command_and_only_the_tunnel_targets() {
        let permit = ["127.0.0.1:3306".to_owned(), "localhost:*".to_owned()];
        assert_eq!(
            line(
                &key("bob"),
                "/bin/agent --state-dir /s serve --key SHA256:bob",
                &permit
            ),
            "restrict,port-forwarding,permitopen=\"127.0.0.1:3306\",permitopen=\"localhost:*\",\
             command=\"/bin/agent --state-dir /s serve --key SHA256:bob\" ssh-ed25519 AAAAC3bob \
             shiqi-ca-agent:bob"
        );
        // No targets: no forwarding at all.
        assert!(line(&key("bob"), "c", &[]).starts_with("restrict,command=\"c\" "));
    }

    #[test]
    fn a_principal_gets_its_line_with_the_same_options_and_is_rewritten_as_ours() {
        let mut p = key("alice");
        p.fingerprint = format!("{}alice.team", Enrollment::PRINCIPAL);
        p.public_key = String::new();
        let permit = ["127.0.0.1:3306".to_owned()];
        let l = line(&p, "/bin/agent serve --principal alice.team", &permit);
        assert_eq!(
            l,
            "restrict,port-forwarding,permitopen=\"127.0.0.1:3306\",\
             command=\"/bin/agent serve --principal alice.team\" alice.team"
        );
        // A second render replaces the line it wrote, keeping someone else's.
        let existing = format!("{HEADER}{l}\ncommand=\"/usr/bin/x\" ops\n");
        let (text, warnings) = render(&existing, &[(p, "c".to_owned())], &[]);
        assert_eq!(
            text,
            format!("{HEADER}command=\"/usr/bin/x\" ops\nrestrict,command=\"c\" alice.team\n")
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn foreign_lines_are_kept_and_a_shell_key_is_warned_about() {
        let existing = format!(
            "{HEADER}ssh-ed25519 AAAAold admin@host\n\
             restrict,command=\"/bin/agent serve --key SHA256:gone\" ssh-ed25519 AAAAgone shiqi-ca-agent:gone\n\
             command=\"/usr/bin/backup\" ssh-ed25519 AAAAbackup\n"
        );
        let (text, warnings) = render(&existing, &[(key("bob"), "c".to_owned())], &[]);
        assert_eq!(
            text,
            format!(
                "{HEADER}ssh-ed25519 AAAAold admin@host\n\
                 command=\"/usr/bin/backup\" ssh-ed25519 AAAAbackup\n\
                 restrict,command=\"c\" ssh-ed25519 AAAAC3bob shiqi-ca-agent:bob\n"
            )
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("line 2 "), "{warnings:?}");
        // Rendering its own output again changes nothing.
        let (again, _) = render(&text, &[(key("bob"), "c".to_owned())], &[]);
        assert_eq!(again, text);
    }

    #[test]
    fn a_removal_keeps_the_targets_the_lines_carry() {
        let permit = ["127.0.0.1:3306".to_owned(), "[::1]:9093".to_owned()];
        let (text, _) = render(
            "ssh-ed25519 AAAAold admin@host\n",
            &[(key("bob"), "/bin/agent serve --key SHA256:bob".to_owned())],
            &permit,
        );
        assert_eq!(current_targets(&text).as_deref(), Some(&permit[..]));
        let (none, _) = render("", &[(key("bob"), "c".to_owned())], &[]);
        assert_eq!(current_targets(&none), Some(Vec::new()));
        assert_eq!(current_targets("ssh-ed25519 AAAAold admin@host\n"), None);
    }

    #[test]
    fn paths_are_single_shell_words_or_refused() {
        assert_eq!(
            word(Path::new("/usr/bin/agent")).ok(),
            Some("/usr/bin/agent".into())
        );
        assert_eq!(
            word(Path::new("/opt/my ca")).ok(),
            Some("'/opt/my ca'".into())
        );
        for bad in ["/a\"b", "/a'b", "/a\\b", "/a\nb"] {
            assert!(word(Path::new(bad)).is_err(), "{bad:?}");
        }
    }
}
