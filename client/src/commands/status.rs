//! `shiqi-connect status`: every profile under `$SHIQI_HOME` with its server, serial, expiry,
//! renewal date and tunnel, from the files alone (no network). Exit 1 when a certificate has
//! expired (or a profile cannot be read), so scripts can alert on it.

use std::process::ExitCode;

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::GlobalArgs;
use crate::clock;
use crate::commands::print_stdout;
use crate::ops::renew;
use crate::profile::{self, Profile, Roots};
use crate::tunnel::{self, Paths, State};

/// One profile's line.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    /// The profile name.
    pub(crate) name: String,
    /// `--server` as given to setup.
    pub(crate) server: Option<String>,
    /// The certificate's serial.
    pub(crate) serial: Option<String>,
    /// Its end of validity.
    #[serde(with = "time::serde::rfc3339::option")]
    pub(crate) not_after: Option<OffsetDateTime>,
    /// Whole days left (negative once expired).
    pub(crate) days_left: Option<i64>,
    /// Seconds left (negative once expired): certificates may live minutes.
    pub(crate) seconds_left: Option<i64>,
    /// What it was signed for: `1h`, `30d`.
    pub(crate) lifetime: Option<String>,
    /// When `renew` will renew it.
    #[serde(with = "time::serde::rfc3339::option")]
    pub(crate) renew_from: Option<OffsetDateTime>,
    /// `valid`, `renew-due`, `expired` or `unreadable`.
    pub(crate) state: &'static str,
    /// The built-in tunnel: `up (pid N)`, `reconnecting (pid N)`, `stale pid file`, or none.
    pub(crate) tunnel: Option<String>,
    /// What starts the tunnel at login (`tunnel up --at-login`), if anything.
    pub(crate) at_login: Option<String>,
    /// Why the profile cannot be read, when it cannot.
    pub(crate) error: Option<String>,
}

/// Runs `status`.
///
/// # Errors
/// When `$HOME` is unset or stdout cannot be written.
pub(crate) fn run(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let roots = Roots::resolve(global.shiqi_home.as_deref())?;
    let now = OffsetDateTime::now_utc();
    let rows: Vec<Row> = roots
        .profiles()
        .iter()
        .map(|name| {
            let dir = profile::dir(&roots.root, name);
            let tunnel = tunnel_state(&Paths::new(&roots.root, name), &roots.root, name);
            let at_login = tunnel::at_login(&roots.home, name).map(|item| match item.failing {
                Some(why) => format!("{} {} (failing: {why})", item.kind, item.location),
                None => format!("{} {}", item.kind, item.location),
            });
            match Profile::load(&dir) {
                Ok(p) => Row {
                    at_login,
                    ..row(&p, now, tunnel)
                },
                Err(e) => Row {
                    name: name.to_string(),
                    server: None,
                    serial: None,
                    not_after: None,
                    days_left: None,
                    seconds_left: None,
                    lifetime: None,
                    renew_from: None,
                    state: "unreadable",
                    tunnel,
                    at_login,
                    error: Some(e.to_string()),
                },
            }
        })
        .collect();
    let problem = rows
        .iter()
        .any(|r| matches!(r.state, "expired" | "unreadable"));
    if global.json {
        let mut text = serde_json::to_string_pretty(&rows).unwrap_or_default();
        text.push('\n');
        print_stdout(&text)?;
    } else if rows.is_empty() {
        print_stdout(&format!("no profiles in {}\n", roots.root.display()))?;
    } else {
        print_stdout(&table(&rows))?;
    }
    Ok(if problem {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn row(p: &Profile, now: OffsetDateTime, tunnel: Option<String>) -> Row {
    let cert = &p.certificate;
    let state = if cert.not_after <= now {
        "expired"
    } else if renew::is_due(cert, now) {
        "renew-due"
    } else {
        "valid"
    };
    Row {
        name: p.name.to_string(),
        server: Some(p.server.destination.clone()),
        serial: Some(cert.serial.to_string()),
        not_after: Some(cert.not_after),
        days_left: Some((cert.not_after - now).whole_days()),
        seconds_left: Some((cert.not_after - now).whole_seconds()),
        lifetime: Some(crate::clock::lifetime(cert.not_before, cert.not_after)),
        renew_from: Some(renew::due_from(cert)),
        state,
        tunnel,
        at_login: None,
        error: None,
    }
}

/// The built-in tunnel's state, when it has a pid file.
fn tunnel_state(
    paths: &Paths,
    root: &std::path::Path,
    name: &shiqi_ca::ProfileName,
) -> Option<String> {
    if !paths.pid.exists() {
        return None;
    }
    let Some(pid) = tunnel::running(&paths.pid, root, name) else {
        return Some("stale pid file".to_owned());
    };
    let phase = State::read(&paths.state)
        .filter(|s| s.pid == pid)
        .map_or_else(|| "running".to_owned(), |s| s.phase.to_string());
    Some(format!("{phase} (pid {pid})"))
}

fn table(rows: &[Row]) -> String {
    let date = |t: Option<OffsetDateTime>| {
        t.and_then(|t| t.format(&Rfc3339).ok())
            .unwrap_or_else(|| "-".to_owned())
    };
    let left = |r: &Row| match r.seconds_left {
        Some(s) if s > 0 => format!(
            "{} of {}",
            clock::span(time::Duration::seconds(s)),
            r.lifetime.as_deref().unwrap_or("?")
        ),
        Some(_) => "expired".to_owned(),
        None => "-".to_owned(),
    };
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.server.clone().unwrap_or_else(|| "-".to_owned()),
                r.serial.clone().unwrap_or_else(|| "-".to_owned()),
                date(r.not_after),
                left(r),
                r.renew_from.map_or_else(|| "-".to_owned(), clock::when),
                match &r.error {
                    Some(e) => format!("{}: {e}", r.state),
                    None => r.state.to_owned(),
                },
                match (&r.tunnel, &r.at_login) {
                    (Some(t), Some(_)) => format!("{t}, at login"),
                    (Some(t), None) => t.clone(),
                    (None, Some(_)) => "at login".to_owned(),
                    (None, None) => "-".to_owned(),
                },
            ]
        })
        .collect();
    let header = [
        "NAME",
        "SERVER",
        "SERIAL",
        "NOT AFTER",
        "LEFT",
        "RENEWS FROM",
        "STATE",
        "TUNNEL",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for c in &cells {
        for (w, v) in widths.iter_mut().zip(c.iter()) {
            *w = (*w).max(v.chars().count());
        }
    }
    let line = |values: Vec<&str>| {
        let mut s = String::new();
        for (i, (v, w)) in values.iter().zip(&widths).enumerate() {
            if i + 1 == values.len() {
                s.push_str(v);
            } else {
                s.push_str(&format!("{v:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for c in &cells {
        out.push_str(&line(c.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;
    use crate::profile::tests::sample;

    #[test]
    fn states_follow_the_lifetime_and_the_table_lines_up() {
        let mut p = sample();
        let start = OffsetDateTime::now_utc() - Duration::days(5);
        p.certificate.not_before = start;
        p.certificate.not_after = start + Duration::days(30);
        let now = OffsetDateTime::now_utc();
        let r = row(&p, now, None);
        assert_eq!((r.state, r.days_left), ("valid", Some(24)));
        assert_eq!(row(&p, now + Duration::days(20), None).state, "renew-due");
        let expired = row(&p, now + Duration::days(40), Some("up (pid 7)".into()));
        assert_eq!(expired.state, "expired");
        let text = table(&[r, expired]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME   SERVER"), "{text}");
        assert!(lines[2].ends_with("expired  up (pid 7)"), "{text}");
        let col = |l: &str| l.find("0a1b");
        assert_eq!(col(lines[1]), col(lines[2]));
    }
}
