//! `tunnel status`: is it running, and does each forward answer a real login.

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::probe::{self, Outcome, ProfileTls};
use crate::profile::{Endpoint, ForwardRecord, Profile};
use crate::text::Escaped;
use crate::tunnel::{self, BrokersCheck, Phase, Renewal, State};

use super::{Settings, arrow, rfc3339};

/// How long one probe of `status` may take; a tunnel that is reconnecting makes clients wait.
const PROBE_TIMEOUT: Duration = Duration::from_secs(6);

/// What a forward carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Kafka,
    Mysql,
    /// A port of the local endpoint: plaintext Kafka.
    Endpoint,
}

#[derive(Serialize)]
struct ForwardStatus {
    #[serde(flatten)]
    forward: ForwardRecord,
    kind: Kind,
    listening: bool,
    handshake: Outcome,
}

/// The background process, as its state file tells. `server` and `error` are [`Escaped`]: the
/// error quotes the SSH server and the agent's stderr.
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
    server: Option<Escaped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Escaped>,
    /// The daemon's last look at the cluster's brokers.
    #[serde(skip_serializing_if = "Option::is_none")]
    brokers: Option<BrokersShown>,
    /// The daemon's renewals of the certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    renewal: Option<RenewalShown>,
    /// Connections of other accounts the local endpoint refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<RefusedShown>,
}

/// The endpoint's refusals for the terminal (the line names an account of this machine).
#[derive(Serialize)]
struct RefusedShown {
    count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<Escaped>,
}

/// [`Renewal`] for the terminal: its error quotes the agent.
#[derive(Serialize)]
struct RenewalShown {
    not_after: String,
    due: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<Escaped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Escaped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<Escaped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_at: Option<String>,
    /// Failed attempts since the last renewal.
    attempts: u32,
    /// Renewals the running tunnel made since it started.
    renewed: u32,
    /// The last renewal's start and length.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_took_ms: Option<u64>,
}

impl From<Renewal> for RenewalShown {
    fn from(r: Renewal) -> Self {
        Self {
            renewed: r.renewed,
            last_started: r.last_run.as_ref().map(|run| rfc3339(run.started)),
            last_took_ms: r.last_run.as_ref().map(|run| run.took_ms),
            not_after: rfc3339(r.not_after),
            due: rfc3339(r.due),
            last: r.last.map(Escaped::from),
            error: r.error.map(Escaped::from),
            hint: r.hint.map(Escaped::from),
            retry_at: r.retry_at.map(rfc3339),
            attempts: r.attempts,
        }
    }
}

/// [`BrokersCheck`] for the terminal: its lines quote the cluster's answers.
#[derive(Serialize)]
struct BrokersShown {
    checked: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Escaped>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_serving: Vec<Escaped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_change: Option<Escaped>,
}

impl From<BrokersCheck> for BrokersShown {
    fn from(b: BrokersCheck) -> Self {
        Self {
            checked: rfc3339(b.checked),
            error: b.error.map(Escaped::from),
            not_serving: b.not_serving.into_iter().map(Escaped::from).collect(),
            last_change: b.last_change.map(Escaped::from),
        }
    }
}

impl Running {
    /// Our background process `pid`, with its state file if that is about the same process.
    fn ours(pid: u32, st: Option<State>) -> Self {
        let st = st.filter(|st| st.pid == pid);
        Self {
            kind: "shiqi-connect",
            pid: Some(pid),
            phase: st.as_ref().map(|st| st.phase),
            since: st.as_ref().map(|st| rfc3339(st.since)),
            server: st.as_ref().map(|st| Escaped::from(&st.server)),
            brokers: st
                .as_ref()
                .and_then(|st| st.brokers.clone())
                .map(BrokersShown::from),
            renewal: st
                .as_ref()
                .and_then(|st| st.renewal.clone())
                .map(RenewalShown::from),
            refused: st
                .as_ref()
                .and_then(|st| st.refused.clone())
                .map(|r| RefusedShown {
                    count: r.count,
                    last: r.last.map(Escaped::from),
                }),
            error: st.and_then(|st| st.error).map(Escaped::from),
        }
    }
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
pub(crate) async fn status(s: &Settings) -> anyhow::Result<ExitCode> {
    let profile = Profile::load(&s.paths.dir)?;
    let tunnel = if let Some(pid) = tunnel::running(&s.paths.pid, &s.root, &s.name) {
        Some(Running::ours(pid, State::read(&s.paths.state)))
    } else if tunnel::openssh_alive(&s.paths, &profile.tunnel_host) {
        Some(Running {
            kind: "openssh",
            pid: None,
            phase: None,
            since: None,
            server: None,
            error: None,
            brokers: None,
            renewal: None,
            refused: None,
        })
    } else {
        None
    };
    let forwards = probe_all(s, &profile).await;
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

/// Every port the tunnel should serve, tried at once as its clients would, in order: the
/// endpoint's (as the running tunnel lists them, with their brokers, else as the profile
/// records them), then the forwards.
async fn probe_all(s: &Settings, profile: &Profile) -> Vec<ForwardStatus> {
    let tls = ProfileTls::from_identity(&crate::profile::files::identity(&s.paths.dir));
    let endpoint: Vec<ForwardRecord> = State::read(&s.paths.state)
        .map(|st| st.endpoint)
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| recorded_endpoint(profile));
    let all = endpoint
        .iter()
        .map(|f| (f, Kind::Endpoint))
        .chain(profile.forwards.iter().map(|f| {
            let kind = match &profile.mysql {
                Some(m) if m.port.get() == f.local_port && m.host == f.remote_host => Kind::Mysql,
                _ => Kind::Kafka,
            };
            (f, kind)
        }));
    let user = profile
        .mysql
        .as_ref()
        .map(|m| m.user.to_string())
        .unwrap_or_default();
    let local = !profile.endpoint.is_direct();
    let mut probes = tokio::task::JoinSet::new();
    for (i, (f, kind)) in all.enumerate() {
        let (f, tls, dir, user) = (f.clone(), tls.clone(), s.paths.dir.clone(), user.clone());
        probes.spawn(async move {
            let listening = probe::kafka::listening(f.local_port).await;
            let handshake = match (listening, kind) {
                (false, _) => {
                    Outcome::fail(format!("nothing listens on 127.0.0.1:{}", f.local_port))
                }
                (true, kind) => handshake(&f, kind, local, &user, &tls, &dir).await,
            };
            let status = ForwardStatus {
                forward: f,
                kind,
                listening,
                handshake,
            };
            (i, status)
        });
    }
    let mut forwards: Vec<(usize, ForwardStatus)> = probes.join_all().await;
    forwards.sort_by_key(|(i, _)| *i);
    forwards.into_iter().map(|(_, f)| f).collect()
}

/// What a listening port answers, asked as its clients ask it.
async fn handshake(
    f: &ForwardRecord,
    kind: Kind,
    local: bool,
    user: &str,
    tls: &ProfileTls,
    dir: &std::path::Path,
) -> Outcome {
    let host = f.remote_host.as_str();
    match kind {
        Kind::Kafka => probe::kafka::api_versions(f.local_port, host, tls, PROBE_TIMEOUT).await,
        Kind::Endpoint => probe::kafka::endpoint(f.local_port, PROBE_TIMEOUT).await,
        Kind::Mysql if local => probe::mysql::login_plain(f.local_port, user, PROBE_TIMEOUT).await,
        Kind::Mysql => {
            let id = crate::profile::files::identity(dir);
            probe::mysql::login(f.local_port, host, user, &id, PROBE_TIMEOUT).await
        }
    }
}

/// The local endpoint's ports as `profile.json` records them (bootstrap first).
fn recorded_endpoint(p: &Profile) -> Vec<ForwardRecord> {
    let Endpoint::Local {
        bootstrap_port,
        brokers,
    } = &p.endpoint
    else {
        return Vec::new();
    };
    let Some(first) = p.brokers.first() else {
        return Vec::new();
    };
    let mut out = vec![ForwardRecord {
        local_port: *bootstrap_port,
        remote_host: first.host.clone(),
        remote_port: first.port,
        purpose: "Kafka bootstrap, local endpoint".to_owned(),
    }];
    for lb in brokers {
        if let Some(b) = p.brokers.iter().find(|b| b.id == lb.id) {
            out.push(ForwardRecord {
                local_port: lb.port,
                remote_host: b.host.clone(),
                remote_port: b.port,
                purpose: format!("Kafka broker {}, local endpoint", b.id),
            });
        }
    }
    out
}

fn status_text(r: &StatusReport) -> String {
    let mut out = match &r.tunnel {
        None => format!("tunnel `{}`: not running\n", r.profile),
        Some(t) if t.kind == "openssh" => {
            format!("tunnel `{}`: OpenSSH (control socket answers)\n", r.profile)
        }
        Some(t) => running_lines(&r.profile, t),
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

/// The lines about our own running tunnel: its process, the brokers it watches, the
/// certificate it renews, the connections it refused.
fn running_lines(profile: &str, t: &Running) -> String {
    let mut line = format!("tunnel `{profile}`: shiqi-connect");
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
    if let Some(b) = &t.brokers {
        line.push_str(&format!("brokers checked {}", b.checked));
        if let Some(e) = &b.error {
            line.push_str(&format!(" (no answer: {e})"));
        }
        line.push('\n');
        if let Some(change) = &b.last_change {
            line.push_str(&format!("last change {change}\n"));
        }
        for n in &b.not_serving {
            line.push_str(&format!("note: {n}\n"));
        }
    }
    if let Some(r) = &t.renewal {
        line.push_str(&format!(
            "certificate valid until {}, renewed by the tunnel from {}\n",
            r.not_after, r.due
        ));
        if let Some(last) = &r.last {
            line.push_str(&format!("last renewal: {last}\n"));
        }
        if let Some(e) = &r.error {
            line.push_str(&format!(
                "renewal failing ({} attempts, retrying at {}): {e}\n",
                r.attempts,
                r.retry_at.as_deref().unwrap_or("?")
            ));
            if let Some(h) = &r.hint {
                line.push_str(&format!("hint: {h}\n"));
            }
        }
    }
    if let Some(r) = &t.refused {
        line.push_str(&format!(
            "refused {} connection(s) from other accounts to the local endpoint",
            r.count
        ));
        if let Some(last) = &r.last {
            line.push_str(&format!(" (last: {last})"));
        }
        line.push('\n');
    }
    line
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;
    use crate::text::{HOSTILE, HOSTILE_SHOWN, has_raw_controls};

    #[tokio::test]
    async fn the_state_files_error_and_a_servers_words_are_shown_escaped() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The background process wrote what the agent's stderr said.
        let path = dir.path().join("tunnel.state.json");
        State {
            pid: 42,
            phase: Phase::Reconnecting,
            since: time::macros::datetime!(2026-10-10 08:00 UTC),
            server: format!("u@{HOSTILE}:22"),
            generation: 1,
            forwards: vec![],
            error: Some(format!("agent: {HOSTILE}")),
            hint: None,
            problems: vec![],
            brokers: None,
            endpoint: vec![],
            renewal: None,
            refused: None,
        }
        .write(&path)
        .expect("write");
        // A MySQL that refuses us in its own words.
        let port = crate::probe::fake_server(probe::mysql::err_packet(HOSTILE), 1);
        let handshake = probe::mysql::login(
            port,
            "localhost",
            "saige",
            &crate::profile::files::identity(dir.path()),
            PROBE_TIMEOUT,
        )
        .await;
        let report = StatusReport {
            profile: "saige".to_owned(),
            tunnel: Some(Running::ours(42, State::read(&path))),
            forwards: vec![ForwardStatus {
                forward: ForwardRecord {
                    local_port: port,
                    remote_host: "127.0.0.1".parse().expect("host"),
                    remote_port: shiqi_ca::Port::try_from(3306).expect("port"),
                    purpose: "MySQL".to_owned(),
                },
                kind: Kind::Mysql,
                listening: true,
                handshake,
            }],
            ok: false,
        };
        let text = status_text(&report);
        assert!(!has_raw_controls(&text), "{text:?}");
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.contains(&format!("(last error: agent: {HOSTILE_SHOWN})")),
            "{text}"
        );
        assert!(
            text.contains(&format!("through u@{HOSTILE_SHOWN}:22")),
            "{text}"
        );
        assert!(
            text.lines()
                .nth(1)
                .is_some_and(|l| l.contains(HOSTILE_SHOWN)),
            "{text}"
        );

        let json = serde_json::to_string_pretty(&report).expect("json");
        assert!(
            !has_raw_controls(&json) && !json.contains("\\u001b"),
            "{json}"
        );
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        for shown in [
            &v["tunnel"]["error"],
            &v["forwards"][0]["handshake"]["detail"],
        ] {
            let shown = shown.as_str().unwrap_or_default();
            assert!(
                shown.contains(HOSTILE_SHOWN) && !has_raw_controls(shown),
                "{shown:?}"
            );
        }
    }
}
