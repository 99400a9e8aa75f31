//! `shiqi-connect doctor [NAME] [--config FILE]…`: runs the checks of [`crate::doctor`] and
//! prints one line each on stdout (`ok`, `warn`, `fail`, `skip`, with the fix under every warn
//! and fail), or a JSON document with `--json`. Exit 0 when nothing fails, 1 when a check fails
//! (a problem found), 2 for bad input (STYLE §2).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use console::Style;
use serde::Serialize;

use crate::cli::{DoctorArgs, GlobalArgs};
use crate::doctor::{self, CheckId, Finding, Inputs, Status};
use crate::error::{Error, InputError};
use crate::printer::{ColorChoice, Printer};
use crate::profile::{Roots, tilde};
use crate::prompt::Prompter;

/// Exit status when a check fails.
pub(crate) const EXIT_PROBLEM: u8 = 1;

/// Everything `doctor` needs, settled before any check runs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// What to check.
    pub(crate) inputs: Inputs,
    /// The profile name, if a profile is checked.
    pub(crate) name: Option<String>,
    /// `--json`.
    pub(crate) json: bool,
    /// `--yes`: never ask (for a key passphrase).
    pub(crate) yes: bool,
    /// Colour the statuses.
    pub(crate) color: bool,
}

impl Settings {
    /// Settles the profile (the one named, or the only one) and the `--config` files.
    ///
    /// # Errors
    /// A missing `--config` file, an unknown or ambiguous profile, no `$HOME`.
    pub(crate) fn resolve(args: &DoctorArgs, global: &GlobalArgs) -> Result<Self, Error> {
        let roots = Roots::resolve(global.shiqi_home.as_deref())?;
        let mut configs = Vec::new();
        for c in &args.configs {
            let p = std::path::absolute(c).unwrap_or_else(|_| c.clone());
            if !p.is_file() {
                return Err(Error::Input(InputError::InvalidValue {
                    what: "`--config` file",
                    given: p.display().to_string(),
                    why: "no such file",
                }));
            }
            configs.push(p);
        }
        let mut bootstrap = Vec::new();
        for b in &args.bootstrap {
            // Parsed as the agent's answers are: a host name or IP and a port, nothing else.
            let parsed: shiqi_ca::Bootstrap = b.trim().parse().map_err(|_| {
                Error::Input(InputError::InvalidValue {
                    what: "`--bootstrap` address",
                    given: b.chars().take(100).collect(),
                    why: "expected HOST:PORT (a DNS name or an IP address, and a port)",
                })
            })?;
            bootstrap.push(
                parsed
                    .addresses()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        // Files or clusters given without NAME are checked on their own: someone else's
        // cluster, or a config this tool did not write.
        let direct = !configs.is_empty() || !bootstrap.is_empty();
        let name = match args.name.as_deref() {
            None if direct => None,
            n => Some(roots.pick(n, "doctor")?),
        };
        let color = match global.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        Ok(Self {
            inputs: Inputs {
                home: roots.home.clone(),
                profile_dir: name.as_ref().map(|n| roots.dir(n)),
                configs,
                bootstrap,
            },
            name: name.map(|n| n.to_string()),
            json: global.json,
            yes: global.yes,
            color,
        })
    }
}

/// The `--json` document.
#[derive(Serialize)]
struct Report<'a> {
    /// The profile checked, if any.
    profile: Option<&'a str>,
    /// The profile folder.
    dir: Option<&'a Path>,
    /// The worst status (`ok`, `warn`, `fail`).
    status: Status,
    /// Every check in order.
    checks: &'a [Finding],
}

/// Runs `doctor`.
///
/// # Errors
/// Bad input (see [`Settings::resolve`]) or a failure to write stdout.
pub(crate) async fn run(
    args: &DoctorArgs,
    global: &GlobalArgs,
    _printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let s = Settings::resolve(args, global)?;
    let prompter = if s.yes {
        Prompter::never()
    } else {
        Prompter::new(false)
    };
    // Human output streams line by line (a login may take seconds); JSON comes at the end.
    let sink: Option<doctor::Sink> = if s.json {
        None
    } else {
        if let Some(d) = &s.inputs.profile_dir {
            super::print_stdout(&format!("profile {}\n", tilde(d, &s.inputs.home)))?;
        }
        let color = s.color;
        Some(Box::new(move |c: &Finding| {
            // A closed stdout (`| head`) ends the output, not the checks.
            let _ = super::print_stdout(&line(c, color));
        }))
    };
    let st = doctor::run(&s.inputs, &prompter, sink).await;
    let worst = st.worst();
    if s.json {
        let report = Report {
            profile: s.name.as_deref(),
            dir: s.inputs.profile_dir.as_deref(),
            status: worst,
            checks: &st.checks,
        };
        let mut j = serde_json::to_string_pretty(&report).context("cannot write the report")?;
        j.push('\n');
        super::print_stdout(&j)?;
    } else {
        super::print_stdout(&summary(&st.checks))?;
    }
    Ok(if worst == Status::Fail {
        ExitCode::from(EXIT_PROBLEM)
    } else {
        ExitCode::SUCCESS
    })
}

/// `status  check  found`, then `fix:` and `note:` lines under it.
pub(crate) fn line(c: &Finding, color: bool) -> String {
    let style = match c.status {
        Status::Ok => Style::new().green(),
        Status::Warn => Style::new().yellow().bold(),
        Status::Fail => Style::new().red().bold(),
        Status::Skip => Style::new().dim(),
    }
    .force_styling(color);
    let cyan = Style::new().cyan().force_styling(color);
    let width = CheckId::WIDTH;
    let mut out = format!(
        "{}  {:<width$}  {}\n",
        style.apply_to(format!("{:<4}", c.status.as_str())),
        c.check.as_str(),
        c.found
    );
    let indent = " ".repeat(4 + 2 + width + 2);
    if let Some(fix) = &c.fix {
        out.push_str(&format!("{indent}{} {fix}\n", cyan.apply_to("fix:")));
    }
    for n in &c.notes {
        out.push_str(&format!("{indent}note: {n}\n"));
    }
    out
}

/// `18 ok, 1 warn, 1 fail, 2 skipped`.
pub(crate) fn summary(checks: &[Finding]) -> String {
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    format!(
        "\n{} ok, {} warn, {} fail, {} skipped\n",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skip)
    )
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;
    use crate::text::{HOSTILE, HOSTILE_SHOWN, has_raw_controls};

    /// A MySQL greeting (protocol 10) with `version` and no TLS offered.
    fn greeting(version: &str) -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(version.as_bytes());
        p.push(0);
        p.extend_from_slice(&[1, 0, 0, 0]); // connection id
        p.extend_from_slice(b"abcdefgh"); // auth data
        p.push(0);
        p.extend_from_slice(&0xf7ffu16.to_le_bytes()); // capabilities without CLIENT_SSL
        let len = u32::try_from(p.len()).expect("small").to_le_bytes();
        let mut out = vec![len[0], len[1], len[2], 0];
        out.extend_from_slice(&p);
        out
    }

    /// `doctor --config my.cnf` against a fake MySQL: the text and the `--json` output.
    async fn doctor_my_cnf(version: &str) -> (String, String) {
        let port = crate::probe::fake_server(greeting(version), 1);
        let dir = tempfile::tempdir().expect("tempdir");
        let cnf = dir.path().join("my.cnf");
        let text = format!("[client]\nhost=127.0.0.1\nport={port}\n");
        crate::fsutil::write_private(&cnf, text.as_bytes()).expect("write");
        let inputs = Inputs {
            home: dir.path().to_owned(),
            profile_dir: None,
            configs: vec![cnf],
            bootstrap: Vec::new(),
        };
        let st = doctor::run(&inputs, &Prompter::never(), None).await;
        let mut text: String = st.checks.iter().map(|c| line(c, true)).collect();
        text.push_str(&summary(&st.checks));
        let report = Report {
            profile: None,
            dir: None,
            status: st.worst(),
            checks: &st.checks,
        };
        (text, serde_json::to_string_pretty(&report).expect("json"))
    }

    #[tokio::test]
    async fn a_hostile_mysql_greeting_reaches_stdout_escaped() {
        let (text, json) = doctor_my_cnf(HOSTILE).await;
        // Colours are ours (ESC [ … m); nothing else may be a control character.
        let uncoloured = console::strip_ansi_codes(&text);
        assert!(!has_raw_controls(&uncoloured), "{uncoloured:?}");
        assert!(
            !text.contains("\u{1b}]") && !text.contains("\u{1b}[2J"),
            "{text:?}"
        );
        assert!(text.contains(HOSTILE_SHOWN), "{text}");
        // One line per finding: the forged `ok    files` line stays inside the version.
        assert!(
            !text.lines().any(|l| l.starts_with("ok    files")),
            "{text}"
        );
        assert!(
            !has_raw_controls(&json) && !json.contains("\\u001b"),
            "{json}"
        );
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        let found = v["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["check"] == "cluster.mysql"))
            .and_then(|c| c["found"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(found.contains(HOSTILE_SHOWN), "{found:?}");
        assert!(!has_raw_controls(&found), "{found:?}");
    }

    #[tokio::test]
    async fn a_huge_version_is_cut() {
        let (text, _) = doctor_my_cnf(&"9".repeat(60_000)).await;
        let longest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(longest < 500, "{longest}");
        assert!(text.contains("99…"), "{text}");
    }

    #[test]
    fn renders_one_line_per_check_with_fixes_and_a_summary() {
        let checks = vec![
            Finding::ok(CheckId::Files, "`~/.shiqi/saige`: 12 files"),
            Finding::fail(CheckId::Tunnel, "nothing listens", "start it").note("n"),
            Finding::skip(CheckId::LoginKafka, "needs `tunnel` to pass first"),
        ];
        let mut text: String = checks.iter().map(|c| line(c, false)).collect();
        text.push_str(&summary(&checks));
        insta::assert_snapshot!(text, @r"
        ok    files              `~/.shiqi/saige`: 12 files
        fail  tunnel             nothing listens
                                 fix: start it
                                 note: n
        skip  login.kafka        needs `tunnel` to pass first

        1 ok, 0 warn, 1 fail, 1 skipped
        ");
    }
}
