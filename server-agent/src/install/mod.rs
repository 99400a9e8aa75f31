//! `install`: the server side in one command, as root. Each step compares what is there with
//! what should be, changes only what differs, and prints one line: `done`, `already` (nothing
//! to change) or `needs you` (what a person must do, and why). `--dry-run` prints the same
//! lines as `would` and changes nothing.
//!
//! The CA's own work (init, server certificates, the CRL, enrolment) runs as the agent's
//! account through the agent's own commands (`runuser -u ACCOUNT -- shiqi-ca-agent …`), so
//! every file in the state directory belongs to that account exactly as if the admin had typed
//! them; install itself writes only what lives outside it (the sshd and MariaDB drop-ins, the
//! systemd units, the brokers' settings) and never touches the inventory as root.

mod account;
mod args;
mod folder;
mod host;
mod kafka;
mod mysql;
mod sshd;

pub(crate) use host::{NAME as UNIT_NAME, units_for};

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::AgentError;
use crate::progress::Progress;

pub(crate) use args::{InstallArgs, Timer};

/// What a step found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Changed something (or, in a dry run, would have).
    Done,
    /// Nothing to change.
    Already,
    /// A person must act; the line says what and why.
    NeedsYou,
}

impl Outcome {
    /// `Done` when a step changed something, else `Already`.
    fn of(changed: bool) -> Self {
        if changed { Self::Done } else { Self::Already }
    }
}

/// The install run: its options, and what each step reported.
pub(crate) struct Install {
    args: InstallArgs,
    state_dir: PathBuf,
    /// This executable, which the account's steps run.
    exe: PathBuf,
    lines: Vec<(Outcome, String, String)>,
    /// sshd gives the account only forwards (the step ended done or already): keys may be
    /// enrolled.
    sshd_safe: bool,
}

impl Install {
    /// An install of `args` into `state_dir`.
    ///
    /// # Errors
    /// When this executable cannot be found (the account runs it).
    pub(crate) fn new(args: InstallArgs, state_dir: &Path) -> Result<Self, AgentError> {
        let exe = std::env::current_exe().map_err(|why| AgentError::File {
            path: PathBuf::from("/proc/self/exe"),
            why,
        })?;
        Ok(Self {
            args,
            state_dir: state_dir.to_owned(),
            exe,
            lines: Vec::new(),
            sshd_safe: false,
        })
    }

    /// Whether nothing may change.
    pub(crate) fn dry_run(&self) -> bool {
        self.args.dry_run
    }

    /// Records one step's line.
    fn report(&mut self, outcome: Outcome, step: &str, text: impl Into<String>) {
        self.lines.push((outcome, step.to_owned(), text.into()));
    }

    /// Runs every step in order. A step that fails stops the run (later steps depend on it).
    ///
    /// # Errors
    /// The failing step's error; the lines so far are kept for [`Install::text`].
    pub(crate) fn run(&mut self) -> Result<(), AgentError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(AgentError::Local {
                why: "install must run as root (it creates an account and writes sshd's and \
                      MariaDB's config): sudo shiqi-ca-agent install …"
                    .to_owned(),
            });
        }
        let progress = Progress::start(false, "install: checking what was given");
        self.validate()?;
        progress.set("install: the account and its folder");
        account::ensure(self)?;
        progress.set("install: agent.toml");
        account::config(self)?;
        progress.set("install: the CA and its first CRL");
        account::ca(self)?;
        progress.set("install: sshd (the account's Match block, then a reload)");
        sshd::ensure(self)?;
        progress
            .set("install: MariaDB (its certificate and TLS drop-in; a restart when it changed)");
        mysql::ensure(self)?;
        progress.set("install: the brokers' certificate, stores and TLS settings");
        kafka::ensure(self)?;
        progress.set("install: the CRL refresh timer");
        host::timer(self)?;
        progress.set("install: the admin's key");
        account::admin(self)?;
        Ok(())
    }

    /// Everything given is checked before the first change: a bad value stops the run with
    /// nothing changed.
    fn validate(&self) -> Result<(), AgentError> {
        self.validate_account()?;
        self.validate_values()?;
        self.validate_files()
    }

    /// `--account`: a plain name ([`check_account`]), not root, and not someone else's unless
    /// adopted.
    fn validate_account(&self) -> Result<(), AgentError> {
        let a = &self.args;
        check_account(&a.account)?;
        if a.account == "root" || account::ids(&a.account).is_some_and(|(uid, _)| uid == 0) {
            return Err(AgentError::Local {
                why: "--account: the agent needs an account of its own, not root".to_owned(),
            });
        }
        if !a.adopt_account
            && let Some(why) = account::foreign(&a.account, &self.state_dir)
        {
            return Err(AgentError::Local {
                why: format!(
                    "--account `{}` exists and {why}: install would hand it the CA key and let \
                     enrolled keys run commands as it; choose a new name (install creates it), \
                     or pass --adopt-account if this account is meant for the agent alone",
                    a.account
                ),
            });
        }
        Ok(())
    }

    /// The values given (paths, names, addresses), in the order `validate` checks them.
    fn validate_values(&self) -> Result<(), AgentError> {
        let a = &self.args;
        for (flag, path) in [
            ("--state-dir", &self.state_dir),
            ("--publish-dir", &a.publish_dir),
            ("--kafka-tls-dir", &a.kafka_tls_dir),
            ("--mysql-tls-dir", &a.mysql_tls_dir),
            ("--mysql-conf-dir", &a.mysql_conf_dir),
        ] {
            if !path.is_absolute() {
                return Err(AgentError::Local {
                    why: format!("{flag} {}: give an absolute path", path.display()),
                });
            }
        }
        if let Some(name) = &a.admin {
            name.parse::<shiqi_ca::ProfileName>()
                .map_err(|why| AgentError::Argument {
                    flag: "--admin",
                    why,
                })?;
        }
        if let Some(b) = &a.kafka_bootstrap {
            b.parse::<shiqi_ca::Bootstrap>()
                .map_err(|why| AgentError::Argument {
                    flag: "--kafka-bootstrap",
                    why,
                })?;
        }
        for san in &a.kafka_san {
            san.parse::<shiqi_ca::Host>()
                .map_err(|why| AgentError::Argument {
                    flag: "--kafka-san",
                    why,
                })?;
        }
        if let Some(user) = &a.kafka_owner
            && account::ids(user).is_none()
        {
            return Err(AgentError::Local {
                why: format!("--kafka-owner: no account `{user}` on this machine"),
            });
        }
        Ok(())
    }

    /// What the values name on this machine: the kept config, files and accounts.
    fn validate_files(&self) -> Result<(), AgentError> {
        let a = &self.args;
        // The kept agent.toml decides where the CRL goes; a different --publish-dir would
        // publish one CRL there and point MariaDB and the brokers at another.
        let kept = self.state_dir.join("agent.toml");
        if let Ok(text) = std::fs::read_to_string(&kept)
            && let Ok(config) = toml::from_str::<crate::config::Config>(&text)
            && let Some(dir) = config.crl.publish_dir
            && dir != a.publish_dir
        {
            return Err(AgentError::Local {
                why: format!(
                    "--publish-dir {}: the kept {} publishes the CRL to {}; pass \
                     --publish-dir {} (install never rewrites agent.toml)",
                    a.publish_dir.display(),
                    kept.display(),
                    dir.display(),
                    dir.display()
                ),
            });
        }
        if let Some(file) = &a.kafka_properties
            && !file.is_file()
        {
            return Err(AgentError::Local {
                why: format!("--kafka-properties: {} is not a file", file.display()),
            });
        }
        if !a.no_mysql && account::ids(&a.mysql_owner).is_none() {
            return Err(AgentError::Local {
                why: format!(
                    "no account `{}` for MariaDB's files: install mariadb-server first, name its \
                     account with --mysql-owner, or leave MySQL out with --no-mysql",
                    a.mysql_owner
                ),
            });
        }
        if let Some(key) = &a.ssh_key {
            account::public_key(key)?;
        }
        for (flag, file) in [
            ("--restore", &a.restore),
            ("--passphrase-file", &a.passphrase_file),
        ] {
            if let Some(file) = file
                && !file.is_file()
            {
                return Err(AgentError::Local {
                    why: format!("{flag}: {} is not a file", file.display()),
                });
            }
        }
        for (flag, path) in [("--sshd-config", &a.sshd_config), ("--sshd", &a.sshd)] {
            if !path.exists() {
                return Err(AgentError::Local {
                    why: format!("{flag}: {} does not exist", path.display()),
                });
            }
        }
        Ok(())
    }

    /// The report: one line per step, then the summary.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for (outcome, step, text) in &self.lines {
            let mark = match (outcome, self.dry_run()) {
                (Outcome::Done, true) => "would",
                (Outcome::Done, false) => "done",
                (Outcome::Already, _) => "already",
                (Outcome::NeedsYou, _) => "needs you",
            };
            out.push_str(&format!(
                "{mark:<10} {step:<14} {}\n",
                shiqi_ca::text::one_line(text, 600)
            ));
        }
        let changed = self.changed();
        let needs = self
            .lines
            .iter()
            .filter(|l| l.0 == Outcome::NeedsYou)
            .count();
        out.push_str(&match (changed, needs, self.dry_run()) {
            (0, 0, _) => "nothing to change\n".to_owned(),
            (0, n, _) => format!("nothing to change; {n} step(s) need you\n"),
            (c, n, true) => format!("dry run: {c} step(s) would change, {n} need you\n"),
            (c, n, false) => format!("{c} step(s) changed, {n} need you\n"),
        });
        out
    }

    /// How many steps changed something.
    pub(crate) fn changed(&self) -> usize {
        self.lines.iter().filter(|l| l.0 == Outcome::Done).count()
    }

    /// The agent's account name.
    fn account(&self) -> &str {
        &self.args.account
    }

    /// Runs `shiqi-ca-agent ARGS` as the account (stdin from `input`), returning stdout.
    fn as_account(&self, args: &[&str], input: Option<&[u8]>) -> Result<String, AgentError> {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", self.account(), "--"])
            .arg(&self.exe)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(args)
            .env("SHIQI_CA_DIR", &self.state_dir);
        run(cmd, input, &format!("shiqi-ca-agent {}", args.join(" ")))
    }

    /// Whether `marker`, a file `server-cert` wrote, is at least as new as the CA certificate.
    fn issued_since_ca(&self, marker: &Path) -> bool {
        let ca = self.state_dir.join("ca.crt");
        match (std::fs::metadata(marker), std::fs::metadata(ca)) {
            (Ok(m), Ok(c)) => m.modified().ok() >= c.modified().ok(),
            _ => false,
        }
    }

    /// `server-cert NAME --kind KIND --san … --out DIR` as the account, into `dir` made afresh
    /// (private, the account's), then every file handed to `owner` (the service's account).
    ///
    /// All through a handle on `dir`'s parent, which only root, the agent's account and the
    /// service's may change: the account could swap `dir` for a link while it runs, and root
    /// must then chown nothing outside it.
    fn server_cert(
        &self,
        name: &str,
        kind: &str,
        sans: &[String],
        dir: &Path,
        owner: Option<(&str, (u32, u32))>,
    ) -> Result<(), AgentError> {
        let (uid, gid) = account::ids(self.account()).ok_or_else(|| AgentError::Local {
            why: format!("the account `{}` is missing", self.account()),
        })?;
        let mut trust = folder::Trust::root().and(self.account(), (uid, gid));
        if let Some((service, ids)) = owner {
            trust = trust.and(service, ids);
        }
        let (parent, leaf) = folder::split(dir)?;
        let parent = folder::Folder::open_or_create(parent, &trust)?;
        // The files it writes name their own paths, so it writes in place: the old folder waits
        // aside and comes back if issuing fails (the services keep working files meanwhile).
        let aside = format!("{leaf}.previous");
        parent.remove_tree(&aside)?;
        let had = parent.entry(leaf)?.is_some();
        if had {
            parent.rename(leaf, &aside)?;
        }
        let issued = (|| {
            if !parent.mkdir(leaf)? {
                return Err(AgentError::Planted {
                    path: dir.to_owned(),
                    why: "made by another account while install ran".into(),
                    fix: "run install again".into(),
                });
            }
            parent
                .sub(leaf, &trust)?
                .set(Some(0o700), Some((uid, gid)))?;
            let out = dir.display().to_string();
            let mut args = vec!["server-cert", name, "--kind", kind, "--out", &out];
            for san in sans {
                args.extend(["--san", san.as_str()]);
            }
            self.as_account(&args, None).map(drop)
        })();
        if let Err(e) = issued {
            let _ = parent.remove_tree(leaf);
            if had {
                let _ = parent.rename(&aside, leaf);
            }
            return Err(e);
        }
        parent.remove_tree(&aside)?;
        let Some((_, to)) = owner else {
            return Ok(());
        };
        // Opened again without following a link: only what the account wrote changes hands.
        parent.sub(leaf, &trust)?.hand_over(uid, to)
    }

    /// Writes `text` to `path` (mode, owner) unless it already holds exactly that; returns
    /// whether it changed (or would, in a dry run). The folder is opened through handles that
    /// only `trust` can change (made 0700 when missing), and the old file is replaced by a
    /// rename within it.
    fn file(
        &self,
        path: &Path,
        text: &str,
        mode: u32,
        owner: Option<(u32, u32)>,
        trust: &folder::Trust,
    ) -> Result<bool, AgentError> {
        let (dir, name) = folder::split(path)?;
        let open = if self.dry_run() {
            // A dry run creates nothing: a missing folder means the file would be written.
            match folder::Folder::open(dir, trust) {
                Ok(f) => Some(f),
                Err(AgentError::File { why, .. }) if why.kind() == std::io::ErrorKind::NotFound => {
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            Some(folder::Folder::open_or_create(dir, trust)?)
        };
        let Some(folder) = open else {
            return Ok(true);
        };
        if folder
            .read(name, MAX_FILE)?
            .is_some_and(|(old, _)| old == text.as_bytes())
        {
            return Ok(false);
        }
        if self.dry_run() {
            return Ok(true);
        }
        folder.write(name, text.as_bytes(), mode, owner)?;
        Ok(true)
    }

    /// Who may change the agent's own folders: root and its account (root alone while the
    /// account does not exist yet, as in a dry run on a bare server).
    fn trust_account(&self) -> folder::Trust {
        account::ids(self.account()).map_or_else(folder::Trust::root, |ids| {
            folder::Trust::root().and(self.account(), ids)
        })
    }
}

/// The largest file install reads back (configs and drop-ins are a few KiB).
pub(super) const MAX_FILE: u64 = 1 << 20;

/// Runs `cmd` (`what` names it in errors), feeding `input`; its stdout on success.
fn run(mut cmd: Command, input: Option<&[u8]>, what: &str) -> Result<String, AgentError> {
    use std::io::Write as _;
    use std::process::Stdio;
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let failed = |why: String| AgentError::Local {
        why: format!("`{what}` failed: {why}"),
    };
    let mut child = cmd.spawn().map_err(|e| failed(e.to_string()))?;
    if let (Some(bytes), Some(mut pipe)) = (input, child.stdin.take()) {
        pipe.write_all(bytes).map_err(|e| failed(e.to_string()))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        // The agent's `error: …` and `hint: …` lines, as one line.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        return Err(failed(shiqi_ca::text::one_line(&lines.join(" "), 600)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether systemd manages this machine.
/// `--account` is a plain system account name: a-z, 0-9, `_`, `-` (not first), at most 32.
///
/// # Errors
/// [`AgentError::Local`] naming the rule.
pub(crate) fn check_account(account: &str) -> Result<(), AgentError> {
    let plain = !account.is_empty()
        && account.len() <= 32
        && account
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
        && !account.starts_with('-');
    if plain {
        return Ok(());
    }
    Err(AgentError::Local {
        why: format!(
            "--account `{}`: use a plain system account name (a-z, 0-9, `_`, `-`, at most 32)",
            shiqi_ca::text::one_line(account, 40)
        ),
    })
}

fn systemd() -> bool {
    Path::new("/run/systemd/system").is_dir()
}
