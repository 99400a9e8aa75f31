//! `tunnel status`: is it running, and does each forward answer a real login.

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::probe::{self, Outcome, ProfileTls};
use crate::profile::{ForwardRecord, Profile};
use crate::tunnel::state::{Phase, State};
use crate::tunnel::{launch, process};

use super::{Settings, arrow, rfc3339};

/// How long one probe of `status` may take; a tunnel that is reconnecting makes clients wait.
const PROBE_TIMEOUT: Duration = Duration::from_secs(6);

/// What a forward carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Kafka,
    Mysql,
}

#[derive(Serialize)]
struct ForwardStatus {
    #[serde(flatten)]
    forward: ForwardRecord,
    kind: Kind,
    listening: bool,
    handshake: Outcome,
}

#[derive(Serialize)]
struct Running {
    /// `shiqi-connect` or `openssh`.
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<Phase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct StatusReport {
    profile: String,
    tunnel: Option<Running>,
    forwards: Vec<ForwardStatus>,
    ok: bool,
}

/// `tunnel status`: exit 0 when every forward listens and its login works, 1 otherwise.
///
/// # Errors
/// Only when the profile cannot be read.
pub async fn status(s: &Settings) -> anyhow::Result<ExitCode> {
    let profile = Profile::load(&s.paths.dir)?;
    let tunnel = if let Some(pid) = process::running(&s.paths.pid, &s.root, &s.name) {
        let st = State::read(&s.paths.state).filter(|st| st.pid == pid);
        Some(Running {
            kind: "shiqi-connect",
            pid: Some(pid),
            phase: st.as_ref().map(|st| st.phase),
            since: st.as_ref().map(|st| rfc3339(st.since)),
            server: st.as_ref().map(|st| st.server.clone()),
            error: st.and_then(|st| st.error),
        })
    } else if launch::openssh_alive(&s.paths, &profile.tunnel_host) {
        Some(Running {
            kind: "openssh",
            pid: None,
            phase: None,
            since: None,
            server: None,
            error: None,
        })
    } else {
        None
    };

    let tls = ProfileTls::from_profile(&s.paths.dir);
    let mut probes = tokio::task::JoinSet::new();
    for (i, f) in profile.forwards.iter().enumerate() {
        let kind = match &profile.mysql {
            Some(m) if m.port.get() == f.local_port && m.host == f.remote_host => Kind::Mysql,
            _ => Kind::Kafka,
        };
        let user = profile
            .mysql
            .as_ref()
            .map(|m| m.user.to_string())
            .unwrap_or_default();
        let (f, tls, dir) = (f.clone(), tls.clone(), s.paths.dir.clone());
        probes.spawn(async move {
            let listening = probe::kafka::listening(f.local_port).await;
            let host = f.remote_host.as_str();
            let handshake = match (listening, kind) {
                (false, _) => {
                    Outcome::fail(format!("nothing listens on 127.0.0.1:{}", f.local_port))
                }
                (true, Kind::Kafka) => {
                    probe::kafka::api_versions(f.local_port, host, &tls, PROBE_TIMEOUT).await
                }
                (true, Kind::Mysql) => {
                    probe::mysql::login(f.local_port, host, &user, &dir, PROBE_TIMEOUT).await
                }
            };
            (
                i,
                ForwardStatus {
                    forward: f,
                    kind,
                    listening,
                    handshake,
                },
            )
        });
    }
    let mut forwards: Vec<(usize, ForwardStatus)> = probes.join_all().await;
    forwards.sort_by_key(|(i, _)| *i);
    let forwards: Vec<ForwardStatus> = forwards.into_iter().map(|(_, f)| f).collect();
    let ok = !forwards.is_empty() && forwards.iter().all(|f| f.listening && f.handshake.ok);
    let report = StatusReport {
        profile: s.name.to_string(),
        tunnel,
        forwards,
        ok,
    };
    let out = if s.json {
        let mut j = serde_json::to_string_pretty(&report).unwrap_or_default();
        j.push('\n');
        j
    } else {
        status_text(&report)
    };
    crate::commands::print_stdout(&out)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn status_text(r: &StatusReport) -> String {
    let mut out = match &r.tunnel {
        None => format!("tunnel `{}`: not running\n", r.profile),
        Some(t) if t.kind == "openssh" => {
            format!("tunnel `{}`: OpenSSH (control socket answers)\n", r.profile)
        }
        Some(t) => {
            let mut line = format!("tunnel `{}`: shiqi-connect", r.profile);
            if let Some(pid) = t.pid {
                line.push_str(&format!(", pid {pid}"));
            }
            if let Some(p) = t.phase {
                line.push_str(&format!(", {p}"));
            }
            if let Some(since) = &t.since {
                line.push_str(&format!(" since {since}"));
            }
            if let Some(server) = &t.server {
                line.push_str(&format!(", through {server}"));
            }
            if let Some(e) = &t.error {
                line.push_str(&format!(" (last error: {e})"));
            }
            line.push('\n');
            line
        }
    };
    let width = r
        .forwards
        .iter()
        .map(|f| arrow(&f.forward).len())
        .max()
        .unwrap_or_default();
    for f in &r.forwards {
        out.push_str(&format!(
            "{} {:width$}  {}: {}\n",
            if f.listening && f.handshake.ok {
                "ok  "
            } else {
                "FAIL"
            },
            arrow(&f.forward),
            f.forward.purpose,
            f.handshake.detail
        ));
    }
    out
}
