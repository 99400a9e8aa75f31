//! `enroll NAME --ssh-key FILE --role user|admin`, `enroll --list`, `enroll --remove FP`,
//! `enroll --sync`: who may reach the agent over SSH, and as whom.
//!
//! The inventory is the record; `authorized_keys` is written from it. The order makes every
//! failure safe: a new key's line is written before its enrollment is recorded (a line without
//! an enrollment is refused by `serve`), and a removed key's enrollment is deleted before its
//! line (same reason).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use shiqi_ca::ProfileName;
use shiqi_ca::inventory::access::{Enrollment, Role};
use ssh_key::{HashAlg, PublicKey};

use crate::audit;
use crate::authorized_keys::{self, Purpose, Synced};
use crate::error::AgentError;
use crate::handler::Handler;
use crate::state::Context;

/// `enroll`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("action").required(true)
    .args(["name", "list", "remove", "sync"]))]
pub(crate) struct EnrollArgs {
    /// The name the key acts as (its profile name; a `user` may only ask for this name).
    #[arg(requires_all = ["who", "role"])]
    pub(crate) name: Option<String>,
    /// The person's public key: an OpenSSH `.pub` file, or `-` for one line on stdin.
    #[arg(long, value_name = "FILE", requires = "name", group = "who")]
    pub(crate) ssh_key: Option<PathBuf>,
    /// Instead of a key: a principal of user certificates signed by an SSH CA that sshd trusts
    /// (`TrustedUserCAKeys`), installed in `authorized_principals` (sshd's
    /// `AuthorizedPrincipalsFile` for the agent's account).
    #[arg(long, value_name = "PRINCIPAL", requires = "name", group = "who")]
    pub(crate) ssh_principal: Option<String>,
    /// `user`: only its own name; `admin`: everything.
    #[arg(long, requires = "name")]
    pub(crate) role: Option<String>,
    /// List the enrolled keys.
    #[arg(long)]
    pub(crate) list: bool,
    /// Remove the key with this fingerprint (`SHA256:…`, as `--list` shows it).
    #[arg(long, value_name = "FINGERPRINT")]
    pub(crate) remove: Option<String>,
    /// Rewrite `authorized_keys` from the enrolled keys (after changing `[access]` or moving
    /// the agent binary).
    #[arg(long)]
    pub(crate) sync: bool,
    /// With `--list`: JSON instead of a table.
    #[arg(long, requires = "list")]
    pub(crate) json: bool,
}

impl Handler for EnrollArgs {
    fn action(&self) -> &'static str {
        "enroll"
    }

    fn target(&self) -> String {
        self.name
            .as_deref()
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// A public key line is short; anything longer is not one.
const MAX_KEY_BYTES: u64 = 16 * 1024;

/// Runs the one action asked for.
pub(crate) fn run(ctx: &Context, args: &EnrollArgs) -> anyhow::Result<()> {
    if args.list {
        return list(ctx, args.json);
    }
    if let Some(fingerprint) = &args.remove {
        return remove(ctx, fingerprint.trim());
    }
    if args.sync {
        let synced =
            authorized_keys::sync(ctx, &ctx.inventory()?.enrollments()?, Purpose::Install)?;
        return report(&format!("rewrote {}\n", synced.path.display()), &synced);
    }
    let who = match (&args.ssh_key, &args.ssh_principal) {
        (Some(file), None) => Who::Key(file),
        (None, Some(p)) => Who::Principal(p),
        _ => {
            // clap's groups make this unreachable; say so plainly all the same.
            return Err(AgentError::Request {
                why: "enroll needs NAME, one of --ssh-key or --ssh-principal, and --role"
                    .to_owned(),
            }
            .into());
        }
    };
    let (Some(name), Some(role)) = (&args.name, &args.role) else {
        return Err(AgentError::Request {
            why: "enroll needs NAME, --ssh-key (or --ssh-principal) and --role".to_owned(),
        }
        .into());
    };
    add(ctx, name, &who, role)
}

/// Who is enrolled: a key, or a principal of an SSH CA's certificates.
enum Who<'a> {
    Key(&'a Path),
    Principal(&'a str),
}

/// The longest principal accepted (OpenSSH allows more; real ones are user names).
const MAX_PRINCIPAL: usize = 64;

/// A principal as it may appear in `authorized_principals` and in a forced command: one word of
/// `[A-Za-z0-9._@-]`, not starting with `-`.
fn principal(p: &str) -> Result<String, AgentError> {
    let p = p.trim();
    let ok = !p.is_empty()
        && p.len() <= MAX_PRINCIPAL
        && !p.starts_with('-')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._@-".contains(c));
    if ok {
        Ok(p.to_owned())
    } else {
        Err(AgentError::Request {
            why: format!(
                "`{}` is not a principal this agent installs: use 1 to {MAX_PRINCIPAL} of \
                 A-Z a-z 0-9 . _ @ - (as the SSH CA writes it with `ssh-keygen -n`)",
                shiqi_ca::text::one_line(p, 80)
            ),
        })
    }
}

fn add(ctx: &Context, name: &str, who: &Who<'_>, role: &str) -> anyhow::Result<()> {
    let name: ProfileName = name.trim().parse()?;
    if ctx.config.reserved_names().contains(&name.as_str()) {
        return Err(AgentError::ReservedName {
            name: name.to_string(),
        }
        .into());
    }
    let role: Role = role.trim().parse()?;
    let (fingerprint, public_key) = match who {
        Who::Key(file) => {
            let key = read_key(file)?;
            (
                key.fingerprint(HashAlg::Sha256).to_string(),
                key_line(&key, file)?,
            )
        }
        Who::Principal(p) => (
            format!("{}{}", Enrollment::PRINCIPAL, principal(p)?),
            String::new(),
        ),
    };
    let enrollment = Enrollment {
        fingerprint,
        name: name.to_string(),
        role,
        public_key,
        enrolled_at: time::OffsetDateTime::now_utc(),
        enrolled_by: ctx.caller.to_string(),
    };
    let mut inventory = ctx.inventory()?;
    let mut keys: Vec<Enrollment> = inventory
        .enrollments()?
        .into_iter()
        .filter(|k| k.fingerprint != enrollment.fingerprint)
        .collect();
    keys.push(enrollment.clone());
    let synced = authorized_keys::sync(ctx, &keys, Purpose::Install)?;
    let replaced = inventory.enroll(&enrollment)?;
    audit::record(
        ctx,
        &audit::Entry {
            action: "enroll",
            name: name.as_str(),
            serial: None,
            outcome: "ok",
            reason: Some(format!("key {} as {role}", enrollment.fingerprint)),
        },
    );
    let file = match who {
        Who::Key(_) => synced.path.clone(),
        Who::Principal(_) => authorized_keys::principals_path(ctx)?,
    };
    let mut text = format!(
        "enrolled {} as `{name}` ({role}) in {}\n",
        enrollment.fingerprint,
        file.display()
    );
    if let Some(old) = replaced {
        text.push_str(&format!(
            "(this {} was enrolled before as `{}` ({}); that is replaced)\n",
            if enrollment.principal().is_some() {
                "principal"
            } else {
                "key"
            },
            old.name,
            old.role
        ));
    }
    report(&text, &synced)
}

fn remove(ctx: &Context, fingerprint: &str) -> anyhow::Result<()> {
    let mut inventory = ctx.inventory()?;
    let Some(removed) = inventory.remove_enrollment(fingerprint)? else {
        return Err(AgentError::Request {
            why: format!(
                "no enrolled key has the fingerprint `{}`; `shiqi-ca-agent enroll --list` shows them",
                fingerprint.chars().take(100).collect::<String>()
            ),
        }
        .into());
    };
    let synced = authorized_keys::sync(ctx, &inventory.enrollments()?, Purpose::Remove)?;
    audit::record(
        ctx,
        &audit::Entry {
            action: "enroll-remove",
            name: &removed.name,
            serial: None,
            outcome: "ok",
            reason: Some(format!("key {} ({})", removed.fingerprint, removed.role)),
        },
    );
    report(
        &format!(
            "removed {} (`{}`, {}) from {}; its certificates stay valid until you revoke them \
             (`shiqi-ca-agent revoke --name {}`)\n",
            removed.fingerprint,
            removed.name,
            removed.role,
            if removed.principal().is_some() {
                authorized_keys::principals_path(ctx)?
            } else {
                synced.path.clone()
            }
            .display(),
            removed.name
        ),
        &synced,
    )
}

fn list(ctx: &Context, json: bool) -> anyhow::Result<()> {
    let keys = ctx.inventory()?.enrollments()?;
    if json {
        return crate::commands::print_json(&keys);
    }
    let mut text = format!(
        "{:<20} {:<6} {:<51} {}\n",
        "NAME", "ROLE", "KEY", "ENROLLED"
    );
    for k in &keys {
        text.push_str(&format!(
            "{:<20} {:<6} {:<51} {} by {}\n",
            k.name,
            k.role,
            k.fingerprint,
            k.enrolled_at.date(),
            k.enrolled_by
        ));
    }
    if keys.is_empty() {
        text.push_str(
            "(no keys enrolled: `shiqi-ca-agent enroll NAME --ssh-key FILE --role user`)\n",
        );
    }
    crate::commands::print_text(&text)
}

fn report(text: &str, synced: &Synced) -> anyhow::Result<()> {
    for w in &synced.warnings {
        tracing::warn!("{w}");
    }
    let targets = if synced.targets.is_empty() {
        "nothing".to_owned()
    } else {
        synced.targets.join(", ")
    };
    crate::commands::print_text(&format!(
        "{text}enrolled keys may forward to {targets}; after the brokers change, run \
         `shiqi-ca-agent enroll --sync`\n"
    ))
}

/// Reads one public key from `file` (`-`: stdin).
fn read_key(file: &Path) -> Result<PublicKey, AgentError> {
    let source_name = file.display().to_string();
    let mut text = String::new();
    let read = if file == Path::new("-") {
        std::io::stdin()
            .take(MAX_KEY_BYTES)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(MAX_KEY_BYTES).read_to_string(&mut text))
    };
    read.map_err(|why| AgentError::File {
        path: file.to_owned(),
        why,
    })?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let [line] = lines.as_slice() else {
        return Err(AgentError::PublicKey {
            source_name,
            why: format!("expected one key line, found {}", lines.len()),
        });
    };
    if line.starts_with("-----BEGIN") {
        return Err(AgentError::PublicKey {
            source_name,
            why: "this is a private key; never copy it to the server".to_owned(),
        });
    }
    PublicKey::from_openssh(line).map_err(|e| AgentError::PublicKey {
        source_name,
        why: e.to_string(),
    })
}

/// `TYPE BASE64`, without the comment (which is the caller's text).
fn key_line(key: &PublicKey, file: &Path) -> Result<String, AgentError> {
    let mut bare = key.clone();
    bare.set_comment("");
    bare.to_openssh()
        .map(|l| l.trim().to_owned())
        .map_err(|e| AgentError::PublicKey {
            source_name: file.display().to_string(),
            why: e.to_string(),
        })
}

#[cfg(test)]
mod tests {

    #[test]
    fn principals_are_one_plain_word() {
        assert_eq!(
            principal(" alice.team@corp ").expect("ok"),
            "alice.team@corp"
        );
        for bad in ["", "-o", "a b", "a\"b", "a,b", "a\nb", &"x".repeat(65)] {
            let e = principal(bad).expect_err(bad);
            assert!(e.to_string().contains("ssh-keygen -n"), "{e}");
        }
    }

    use super::*;

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@laptop";

    #[test]
    fn a_key_file_gives_its_fingerprint_and_a_line_without_the_comment() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("bob.pub");
        let write = |text: &str| crate::fsutil::write_private(&file, text.as_bytes());
        write(&format!("# bob's laptop\n{ED25519}\n"))?;
        let key = read_key(&file)?;
        assert_eq!(
            key.fingerprint(HashAlg::Sha256).to_string(),
            "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"
        );
        assert_eq!(
            key_line(&key, &file)?,
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
        );
        for (bad, why) in [
            ("", "found 0"),
            (&format!("{ED25519}\n{ED25519}") as &str, "found 2"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
            ("ssh-ed25519 AAAA!!", "not an OpenSSH public key"),
        ] {
            write(bad)?;
            let err = read_key(&file).expect_err(bad).to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        Ok(())
    }
}
