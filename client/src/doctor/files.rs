//! Prerequisites: the profile's files exist with private modes, and the clients the user will
//! run (mysql/mariadb, kcat, java/keytool) are on PATH — a seed story lost time to a missing
//! mysql client before its first login.

use std::path::{Path, PathBuf};

use crate::doctor::{CheckId, Context, Finding, Findings};
use crate::profile::files as pf;
use crate::ssh::config::find_in_path;

/// Every file a profile must have, given what it has (the catalogue's: Kafka files only with
/// brokers, `my.cnf` only with MySQL; the ones every profile has when `profile.json` is
/// unreadable).
fn required(ctx: &Context) -> Vec<&'static pf::Kind> {
    pf::CATALOGUE
        .iter()
        .filter(|k| match &ctx.profile {
            Ok(p) => k.present(p),
            Err(_) => k.when == pf::When::Always,
        })
        .collect()
}

fn mode(path: &Path) -> Option<u32> {
    crate::os::files::mode(path)
}

/// `files`: existence and modes.
pub(crate) fn check(ctx: &Context, st: &mut Findings) {
    let Some(dir) = &ctx.dir else {
        return;
    };
    let shown = ctx.show(dir);
    if !dir.is_dir() {
        st.push(Finding::fail(
            CheckId::Files,
            format!("the profile folder `{shown}` does not exist"),
            format!("make the profile: `{}`", ctx.setup_again()),
        ));
        return;
    }
    // None where the OS has no mode bits (Windows: the folder's inherited ACL, not checked).
    let dir_mode = mode(dir);
    let files = required(ctx);
    let (mut problems, mut fixes) = Scan::of(dir, &files).problems(ctx);
    if let Some(dir_mode) = dir_mode.filter(|m| m & 0o077 != 0) {
        problems.push(format!("the folder `{shown}` is {dir_mode:04o}"));
        fixes.push(format!("`chmod 700 {shown}`"));
    }
    if !problems.is_empty() {
        st.push(Finding::fail(
            CheckId::Files,
            problems.join("; "),
            fixes.join("; then "),
        ));
    } else if dir_mode.is_some() {
        st.push(Finding::ok(
            CheckId::Files,
            format!(
                "`{shown}`: {} files; secrets 0600 in a 0700 folder",
                files.len()
            ),
        ));
    } else {
        st.push(Finding::ok(
            CheckId::Files,
            format!(
                "`{shown}`: {} files; who may read them is the folder's inherited ACL (not \
                 checked on this OS)",
                files.len()
            ),
        ));
    }
}

/// The profile's files that are missing or too open.
struct Scan {
    missing: Vec<&'static str>,
    /// Secrets others may read, and their modes.
    loose: Vec<(PathBuf, u32)>,
    /// `ssh_config` when others may write it.
    writable: Vec<PathBuf>,
}

impl Scan {
    fn of(dir: &Path, files: &[&'static pf::Kind]) -> Self {
        let mut scan = Self {
            missing: Vec::new(),
            loose: Vec::new(),
            writable: Vec::new(),
        };
        for kind in files {
            let p = dir.join(kind.name);
            if !p.is_file() {
                scan.missing.push(kind.name);
                continue;
            }
            match mode(&p) {
                None => {}
                // Secrets: no group or other bits allowed.
                Some(m) if kind.secret && m & 0o077 != 0 => scan.loose.push((p, m)),
                // ssh refuses a config that others may write ("Bad owner or permissions").
                Some(m) if kind.name == pf::SSH_CONFIG && m & 0o022 != 0 => scan.writable.push(p),
                Some(_) => {}
            }
        }
        scan
    }

    /// What is wrong, and the fixes.
    fn problems(&self, ctx: &Context) -> (Vec<String>, Vec<String>) {
        let mut problems = Vec::new();
        let mut fixes = Vec::new();
        if !self.missing.is_empty() {
            problems.push(format!("missing: `{}`", self.missing.join("`, `")));
            let fix = if self.missing.contains(&pf::CLIENT_KEY) {
                // The key never leaves the laptop: without it the certificate is useless.
                format!(
                    "restore `{}` from a backup, or make a new key and certificate: `{}`",
                    pf::CLIENT_KEY,
                    ctx.setup_again()
                )
            } else {
                format!("rebuild the profile: `{}`", ctx.setup_again())
            };
            fixes.push(fix);
        }
        if !self.loose.is_empty() {
            let list: Vec<String> = self
                .loose
                .iter()
                .map(|(p, m)| format!("`{}` is {m:04o}", ctx.show(p)))
                .collect();
            problems.push(format!("readable by others: {}", list.join(", ")));
            let paths: Vec<String> = self.loose.iter().map(|(p, _)| ctx.show(p)).collect();
            fixes.push(format!("`chmod 600 {}`", paths.join(" ")));
        }
        if !self.writable.is_empty() {
            let paths: Vec<String> = self.writable.iter().map(|p| ctx.show(p)).collect();
            problems.push(format!(
                "others may write `{}`, so ssh refuses it",
                paths.join("`, `")
            ));
            fixes.push(format!("`chmod 600 {}`", paths.join(" ")));
        }
        (problems, fixes)
    }
}

/// How to install a missing client on this system.
fn install_hint(debian: &str, brew: &str) -> String {
    crate::os::install_hint(debian, brew)
}

/// Homebrew's keg-only mysql-client is not on PATH after `brew install` (seed: "mysql: not
/// found until brew install mysql-client plus a PATH line").
fn keg_only_mysql() -> Option<PathBuf> {
    [
        "/opt/homebrew/opt/mysql-client/bin",
        "/usr/local/opt/mysql-client/bin",
    ]
    .iter()
    .map(|d| Path::new(d).join("mysql"))
    .find(|p| p.is_file())
}

/// `tool.*`: the clients, when the profile uses them.
pub(crate) fn tools(ctx: &Context, st: &mut Findings) {
    let (kafka, mysql) = match &ctx.profile {
        Ok(p) => (!p.brokers.is_empty(), p.mysql.is_some()),
        Err(_) => (true, true),
    };
    if mysql {
        let found = find_in_path("mariadb").or_else(|| find_in_path("mysql"));
        st.push(match (found, keg_only_mysql()) {
            (Some(p), _) => Finding::ok(CheckId::ToolMysql, format!("`{}`", ctx.show(&p))),
            (None, Some(keg)) => Finding::warn(
                CheckId::ToolMysql,
                format!("`{}` is installed but not on PATH", keg.display()),
                format!(
                    "add it to PATH: `echo 'export PATH=\"{}:$PATH\"' >> ~/.zshrc`, then open a \
                     new terminal",
                    keg.parent()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default()
                ),
            ),
            (None, None) => Finding::warn(
                CheckId::ToolMysql,
                "no `mysql` or `mariadb` client on PATH",
                install_hint("mariadb-client", "mysql-client"),
            ),
        });
    }
    if kafka {
        let found = find_in_path("kcat").or_else(|| find_in_path("kafkacat"));
        st.push(match found {
            Some(p) => Finding::ok(CheckId::ToolKcat, format!("`{}`", ctx.show(&p))),
            None => Finding::warn(
                CheckId::ToolKcat,
                "no `kcat` on PATH (the quickest way to try `librdkafka.conf`)",
                install_hint("kcat", "kcat"),
            ),
        });
        let java = find_in_path("java");
        let keytool = find_in_path("keytool");
        st.push(match (java, keytool) {
            (Some(j), Some(k)) => Finding::ok(
                CheckId::ToolJava,
                format!("`{}`, `{}`", ctx.show(&j), ctx.show(&k)),
            ),
            (j, k) => {
                let missing: Vec<&str> = [("java", j.is_none()), ("keytool", k.is_none())]
                    .iter()
                    .filter(|(_, m)| *m)
                    .map(|(n, _)| *n)
                    .collect();
                Finding::warn(
                    CheckId::ToolJava,
                    format!(
                        "no `{}` on PATH (Kafka's console tools and `client.properties` need \
                         Java; DataGrip brings its own)",
                        missing.join("`, `")
                    ),
                    install_hint("default-jre", "openjdk"),
                )
            }
        });
    }
}
