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
use crate::error::Error;
use crate::printer::{ColorChoice, Printer};
use crate::profile::{Roots, tilde};
use crate::prompt::Prompter;

/// Exit status when a check fails.
pub const EXIT_PROBLEM: u8 = 1;

/// Everything `doctor` needs, settled before any check runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// What to check.
    pub inputs: Inputs,
    /// The profile name, if a profile is checked.
    pub name: Option<String>,
    /// `--json`.
    pub json: bool,
    /// `--yes`: never ask (for a key passphrase).
    pub yes: bool,
    /// Colour the statuses.
    pub color: bool,
}

impl Settings {
    /// Settles the profile (the one named, or the only one) and the `--config` files.
    ///
    /// # Errors
    /// A missing `--config` file, an unknown or ambiguous profile, no `$HOME`.
    pub fn resolve(args: &DoctorArgs, global: &GlobalArgs) -> Result<Self, Error> {
        let roots = Roots::resolve(global.shiqi_home.as_deref())?;
        let mut configs = Vec::new();
        for c in &args.configs {
            let p = std::path::absolute(c).unwrap_or_else(|_| c.clone());
            if !p.is_file() {
                return Err(Error::InvalidValue {
                    what: "`--config` file",
                    given: p.display().to_string(),
                    why: "no such file",
                });
            }
            configs.push(p);
        }
        let mut bootstrap = Vec::new();
        for b in &args.bootstrap {
            // Parsed as the agent's answers are: a host name or IP and a port, nothing else.
            let parsed: shiqi_ca::Bootstrap =
                b.trim().parse().map_err(|_| Error::InvalidValue {
                    what: "`--bootstrap` address",
                    given: b.chars().take(100).collect(),
                    why: "expected HOST:PORT (a DNS name or an IP address, and a port)",
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
pub async fn run(
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
pub fn line(c: &Finding, color: bool) -> String {
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
pub fn summary(checks: &[Finding]) -> String {
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
mod tests {
    use super::*;

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
