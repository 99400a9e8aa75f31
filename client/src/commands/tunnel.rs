//! `shiqi-connect tunnel up|down|status [NAME]`, and the hidden `tunnel run NAME` that `up`
//! starts in the background. Settles the profile first (NAME may be left out when there is only
//! one), then runs the `tunnel` modules and shows what they found: progress on stderr, the
//! forwards (or `--json`) on stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use shiqi_ca::ProfileName;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::agent::{self, AgentCommand};
use crate::cli::{GlobalArgs, TunnelAction, TunnelArgs};
use crate::error::Error;
use crate::printer::Printer;
use crate::probe::{self, Outcome, ProfileTls};
use crate::profile::{ForwardRecord, Profile, Roots, tilde};
use crate::tunnel::daemon::{self, one_line};
use crate::tunnel::login::Targets;
use crate::tunnel::state::{self, Phase, State};
use crate::tunnel::{Paths, launch, ports, process, refresh};

/// How long `up` waits for a running tunnel to pick up a changed broker list.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one probe of `status` may take; a tunnel that is reconnecting makes clients wait.
const PROBE_TIMEOUT: Duration = Duration::from_secs(6);
/// How long `down` gives the tunnel to close its connection before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long `down` waits for the ports to be free once the tunnel is gone.
const PORTS_FREE_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything a tunnel command needs, settled before anything runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The profile.
    pub name: ProfileName,
    /// `$SHIQI_HOME` (default `~/.shiqi`), absolute.
    pub root: PathBuf,
    /// `$HOME`.
    pub home: PathBuf,
    /// The profile's tunnel files.
    pub paths: Paths,
    /// `--json`.
    pub json: bool,
    /// `-v` count, passed on to the background process.
    pub verbose: u8,
}

impl Settings {
    /// Settles the profile: the one named, or the only one under `$SHIQI_HOME`. `command` names
    /// the verb for the hint when several profiles could be meant.
    ///
    /// # Errors
    /// As [`Roots::pick`], or [`Error::NoHome`].
    pub fn resolve(
        name: Option<&str>,
        command: &'static str,
        global: &GlobalArgs,
    ) -> Result<Self, Error> {
        let roots = Roots::resolve(global.shiqi_home.as_deref())?;
        let name = roots.pick(name, command)?;
        Ok(Self {
            paths: Paths::new(&roots.root, &name),
            name,
            root: roots.root,
            home: roots.home,
            json: global.json,
            verbose: global.verbose,
        })
    }

    fn show(&self, p: &Path) -> String {
        tilde(p, &self.home)
    }
}

/// Runs one tunnel verb.
///
/// # Errors
/// The failing step's error, with context.
pub async fn run(
    args: &TunnelArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    match &args.action {
        TunnelAction::Up(a) => {
            let s = Settings::resolve(a.name.as_deref(), "tunnel up", global)?;
            up(&s, a.openssh, printer).await
        }
        TunnelAction::Down(a) => {
            down(
                &Settings::resolve(a.name.as_deref(), "tunnel down", global)?,
                printer,
            )
            .await
        }
        TunnelAction::Status(a) => {
            status(&Settings::resolve(
                a.name.as_deref(),
                "tunnel status",
                global,
            )?)
            .await
        }
        TunnelAction::Run(a) => {
            run_daemon(&Settings::resolve(a.name.as_deref(), "tunnel run", global)?).await
        }
    }
}

// ---------------------------------------------------------------------------------------------
// up
// ---------------------------------------------------------------------------------------------

/// What `up --json` prints.
#[derive(Serialize)]
struct UpReport<'a> {
    profile: &'a str,
    /// `shiqi-connect` or `openssh`.
    kind: &'static str,
    pid: Option<u32>,
    already_running: bool,
    forwards: &'a [ForwardRecord],
    added: &'a [ForwardRecord],
    removed: &'a [ForwardRecord],
    log: Option<String>,
}

/// `tunnel up`.
///
/// # Errors
/// No login, a taken port, or the background process's own one-line error.
pub async fn up(s: &Settings, openssh: bool, printer: &Printer) -> anyhow::Result<ExitCode> {
    let mut profile = Profile::load(&s.paths.dir)?;
    if launch::openssh_alive(&s.paths, &profile.tunnel_host) {
        printer.info(&format!(
            "the OpenSSH tunnel of `{}` is already running (control socket `{}`)",
            s.name,
            s.show(&s.paths.control_socket)
        ));
        print_up(s, "openssh", None, true, &profile.forwards, &[], &[])?;
        return Ok(ExitCode::SUCCESS);
    }
    let running = process::running(&s.paths.pid, &s.root, &s.name);

    // Ask the server for its brokers over a short session of our own, so the forwards match
    // the cluster as it is now (a broker added since setup gets its forward).
    let mut added = Vec::new();
    let mut removed = Vec::new();
    match refresh_profile(s, &profile, printer).await {
        Ok(Some(plan)) => {
            added = plan.added;
            removed = plan.removed;
            profile = plan.profile;
        }
        Ok(None) => {}
        Err(e) if running.is_some() => printer.warn(&format!(
            "cannot ask the server for its brokers, keeping the running tunnel as it is: {}",
            chain(&e)
        )),
        Err(e) => {
            return Err(e.context(format!("cannot log in to `{}`", profile.server.destination)));
        }
    }
    if profile.forwards.is_empty() {
        anyhow::bail!(
            "profile `{}` has nothing to forward: the server reported no Kafka brokers and no MySQL",
            s.name
        );
    }

    if let Some(pid) = running {
        if !added.is_empty() || !removed.is_empty() {
            reload(s, pid, printer).await?;
        }
        printer.info(&format!(
            "the tunnel of `{}` is already running (pid {pid}); log `{}`",
            s.name,
            s.show(&s.paths.log)
        ));
        print_up(
            s,
            "shiqi-connect",
            Some(pid),
            true,
            &profile.forwards,
            &added,
            &removed,
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    // A stale pid file (the process is gone, or the pid now belongs to something else).
    state::remove(&s.paths.pid);

    // Checked here for a quick, clear refusal; the background process checks again by binding.
    for f in &profile.forwards {
        if ports::is_taken(f.local_port) {
            return Err(Error::PortInUse {
                port: f.local_port,
                owner: ports::owner_of(f.local_port),
            })
            .with_context(|| format!("cannot forward {}", f.purpose));
        }
    }

    if openssh {
        let step = printer.step("start OpenSSH");
        launch::start_openssh(&s.paths, &profile.tunnel_host)?;
        step.done(&format!(
            "`ssh -fN -F {} {}`",
            s.show(&s.paths.ssh_config),
            profile.tunnel_host
        ));
        print_up(
            s,
            "openssh",
            None,
            false,
            &profile.forwards,
            &added,
            &removed,
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let step = printer.step("start the tunnel");
    let st = launch::start_daemon(&s.paths, &s.root, &s.name, s.verbose).await?;
    step.done(&format!(
        "pid {}, through {}, log `{}`",
        st.pid,
        st.server,
        s.show(&s.paths.log)
    ));
    print_up(
        s,
        "shiqi-connect",
        Some(st.pid),
        false,
        &st.forwards,
        &added,
        &removed,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Logs in, asks for the brokers and rewrites `ssh_config` and `profile.json` when they
/// changed. `Ok(None)`: unchanged, or the agent could not list them (warned; the recorded
/// brokers stay).
async fn refresh_profile(
    s: &Settings,
    profile: &Profile,
    printer: &Printer,
) -> anyhow::Result<Option<refresh::Plan>> {
    let step = printer.step(&format!("connect to {}", profile.server.host));
    let targets = Targets::resolve(profile, &s.home)
        .with_context(|| format!("cannot resolve `{}`", profile.server.destination))?;
    let session = targets.connect().await?;
    step.done(&format!(
        "{} with {}",
        targets.server(),
        session.auth().used
    ));

    // Renewal (issue 5): over this session, when less than a third of the lifetime is left. A
    // renewal rewrites profile.json (same forwards), so the plan below starts from the new one.
    let renewed = renew_on_connect(&session, s, profile, printer).await;
    let profile = renewed.as_ref().unwrap_or(profile);

    let step = printer.step("ask the server for its brokers");
    let agent = AgentCommand::new(&profile.server.agent_command)?;
    let listed = agent::brokers(&session, &agent).await;
    session.close().await;
    let brokers = match listed {
        Ok(b) => b,
        // An answer that does not parse is not a cluster that is down: the server said
        // something hostile or broken, so no tunnel starts on its word or on old facts.
        Err(
            e @ (Error::AgentField { .. }
            | Error::AgentReply { .. }
            | Error::ProtocolVersion { .. }),
        ) => {
            return Err(anyhow::Error::new(e).context("refusing the server's broker list"));
        }
        Err(e) => {
            drop(step);
            let e = anyhow::Error::new(e);
            printer.warn(&format!(
                "using the {} brokers recorded in `profile.json`: {}",
                profile.brokers.len(),
                chain(&e)
            ));
            return Ok(None);
        }
    };
    let plan =
        refresh::plan(profile, brokers).context("cannot plan the tunnel for this cluster")?;
    for w in &plan.warnings {
        printer.warn(w);
    }
    if !plan.changed(profile) {
        step.done(&format!(
            "{} brokers, unchanged",
            plan.profile.brokers.len()
        ));
        return Ok(None);
    }
    refresh::write(&plan, &s.paths.dir, targets.first.host_key_alias.as_deref())
        .with_context(|| format!("cannot update profile `{}`", s.name))?;
    let list = |v: &[ForwardRecord]| {
        v.iter()
            .map(|f| format!("127.0.0.1:{} ({})", f.local_port, f.purpose))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut what = format!("{} brokers", plan.profile.brokers.len());
    if !plan.added.is_empty() {
        what.push_str(&format!("; new forward {}", list(&plan.added)));
    }
    if !plan.removed.is_empty() {
        what.push_str(&format!("; dropped {}", list(&plan.removed)));
    }
    what.push_str("; `ssh_config` and `profile.json` rewritten");
    step.done(&what);
    Ok(Some(plan))
}

/// Renews the certificate when it is due; a failure is a warning (the tunnel itself only needs
/// the SSH key). `Some(profile)` when it was renewed.
async fn renew_on_connect(
    session: &crate::ssh::Session,
    s: &Settings,
    profile: &Profile,
    printer: &Printer,
) -> Option<Profile> {
    use crate::steps::renew::{self, RenewOutcome};
    if !renew::is_due(&profile.certificate, OffsetDateTime::now_utc()) {
        return None;
    }
    let step = printer.step("renew the certificate (less than a third of its lifetime is left)");
    match renew::renew_if_due(session, &s.paths.dir, profile).await {
        Ok(RenewOutcome::Renewed(r)) => {
            step.done(&format!(
                "serial {} → {}, valid until {}{}",
                r.old.serial,
                r.profile.certificate.serial,
                rfc3339(r.profile.certificate.not_after),
                if r.revoked.is_some() {
                    "; the old one is revoked"
                } else {
                    ""
                }
            ));
            Some(r.profile)
        }
        Ok(RenewOutcome::NotDue { .. }) => {
            step.done("nothing due");
            None
        }
        Err(e) => {
            drop(step);
            printer.warn(&format!(
                "could not renew the certificate, keeping the current one: {}",
                chain(&anyhow::Error::new(e))
            ));
            None
        }
    }
}

/// Tells a running tunnel to re-read `profile.json`, and waits until it has.
async fn reload(s: &Settings, pid: u32, printer: &Printer) -> anyhow::Result<()> {
    let step = printer.step("update the running tunnel");
    let before = State::read(&s.paths.state).map_or(0, |st| st.generation);
    process::signal(pid, rustix::process::Signal::HUP)?;
    let deadline = Instant::now() + RELOAD_TIMEOUT;
    loop {
        if let Some(st) = State::read(&s.paths.state).filter(|st| st.generation > before) {
            if let Some(first) = st.problems.first() {
                return Err(Error::TunnelFailed {
                    why: first.clone(),
                    hint: None,
                    log: s.paths.log.clone(),
                }
                .into());
            }
            step.done(&format!("{} forwards", st.forwards.len()));
            return Ok(());
        }
        if Instant::now() >= deadline || !process::alive(pid) {
            return Err(Error::TunnelFailed {
                why: format!(
                    "the running tunnel (pid {pid}) did not pick up the new brokers within {}s",
                    RELOAD_TIMEOUT.as_secs()
                ),
                hint: Some(format!(
                    "restart it: `shiqi-connect tunnel down {0}` then `shiqi-connect tunnel up {0}`",
                    s.name
                )),
                log: s.paths.log.clone(),
            }
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn print_up(
    s: &Settings,
    kind: &'static str,
    pid: Option<u32>,
    already_running: bool,
    forwards: &[ForwardRecord],
    added: &[ForwardRecord],
    removed: &[ForwardRecord],
) -> anyhow::Result<()> {
    let out = if s.json {
        let report = UpReport {
            profile: s.name.as_str(),
            kind,
            pid,
            already_running,
            forwards,
            added,
            removed,
            log: (kind == "shiqi-connect").then(|| s.paths.log.display().to_string()),
        };
        let mut j = serde_json::to_string_pretty(&report).unwrap_or_default();
        j.push('\n');
        j
    } else {
        forward_lines(forwards)
    };
    super::print_stdout(&out)
}

fn forward_lines(forwards: &[ForwardRecord]) -> String {
    let width = forwards
        .iter()
        .map(|f| arrow(f).len())
        .max()
        .unwrap_or_default();
    forwards
        .iter()
        .map(|f| format!("{:width$}  {}\n", arrow(f), f.purpose))
        .collect()
}

fn arrow(f: &ForwardRecord) -> String {
    let target = shiqi_ca::HostPort {
        host: f.remote_host.clone(),
        port: f.remote_port,
    };
    format!("127.0.0.1:{} -> {target}", f.local_port)
}

fn chain(e: &anyhow::Error) -> String {
    e.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

// ---------------------------------------------------------------------------------------------
// down
// ---------------------------------------------------------------------------------------------

/// `tunnel down`: stops the built-in tunnel (SIGTERM to the verified pid, wait, SIGKILL after
/// a grace period) and an OpenSSH one (`ssh -O exit`), then checks that every port is free.
///
/// # Errors
/// When the process cannot be signalled or will not exit.
pub async fn down(s: &Settings, printer: &Printer) -> anyhow::Result<ExitCode> {
    let profile = Profile::load(&s.paths.dir)?;
    let mut stopped = Vec::new();
    if let Some(pid) = process::running(&s.paths.pid, &s.root, &s.name) {
        let step = printer.step(&format!("stop the tunnel (pid {pid})"));
        let killed = process::stop(pid, STOP_GRACE)
            .await
            .with_context(|| format!("cannot stop the tunnel of `{}`", s.name))?;
        step.done(if killed {
            "killed (it ignored SIGTERM)"
        } else {
            "stopped"
        });
        stopped.push(format!("shiqi-connect tunnel (pid {pid})"));
    }
    // Whatever a crashed or killed process left behind.
    state::remove(&s.paths.pid);
    state::remove(&s.paths.state);

    if launch::openssh_alive(&s.paths, &profile.tunnel_host) {
        let step = printer.step("stop the OpenSSH tunnel");
        launch::stop_openssh(&s.paths, &profile.tunnel_host)?;
        step.done("stopped");
        stopped.push("OpenSSH tunnel".to_owned());
    }

    if stopped.is_empty() {
        printer.info(&format!("the tunnel of `{}` is not running", s.name));
    }
    // Every port must be free now; a holder that is left is someone else.
    let deadline = Instant::now() + PORTS_FREE_TIMEOUT;
    let mut taken: Vec<&ForwardRecord> = profile.forwards.iter().collect();
    loop {
        taken.retain(|f| ports::is_taken(f.local_port));
        if taken.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for f in &taken {
        printer.warn(&format!(
            "port `127.0.0.1:{}` ({}) is still in use by {}, which is not this profile's tunnel",
            f.local_port,
            f.purpose,
            ports::owner_of(f.local_port).unwrap_or_else(|| "another process".to_owned())
        ));
    }
    if s.json {
        #[derive(Serialize)]
        struct DownReport<'a> {
            profile: &'a str,
            stopped: &'a [String],
            ports_still_in_use: Vec<u16>,
        }
        let mut j = serde_json::to_string_pretty(&DownReport {
            profile: s.name.as_str(),
            stopped: &stopped,
            ports_still_in_use: taken.iter().map(|f| f.local_port).collect(),
        })
        .unwrap_or_default();
        j.push('\n');
        super::print_stdout(&j)?;
    } else {
        for what in &stopped {
            super::print_stdout(&format!("stopped {what}\n"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

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
    super::print_stdout(&out)?;
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

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| t.to_string())
}

// ---------------------------------------------------------------------------------------------
// run (the background process)
// ---------------------------------------------------------------------------------------------

/// `tunnel run NAME`: the tunnel in the foreground. A start-up failure is written to the state
/// file for the waiting `up`, then reported (to stderr, the log) with exit 2.
async fn run_daemon(s: &Settings) -> anyhow::Result<ExitCode> {
    let opts = daemon::Options {
        root: s.root.clone(),
        home: s.home.clone(),
        name: s.name.clone(),
    };
    match daemon::run(&opts).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Another process runs this tunnel: its files are not ours to touch.
        Err(e @ Error::TunnelRunning { .. }) => Err(e.into()),
        Err(e) => {
            let me = std::process::id();
            if process::running(&s.paths.pid, &s.root, &s.name).is_some_and(|p| p != me) {
                // Lost a race to another start: the files are the winner's; the waiting `up`
                // reads this error from the log instead.
                return Err(anyhow::Error::new(e)
                    .context(format!("the tunnel of `{}` cannot start", s.name)));
            }
            let st = State {
                pid: me,
                phase: Phase::Failed,
                since: OffsetDateTime::now_utc(),
                server: String::new(),
                generation: 0,
                forwards: vec![],
                error: Some(one_line(&e)),
                hint: e.hint(),
                problems: vec![],
            };
            if let Err(w) = st.write(&s.paths.state) {
                tracing::warn!("cannot write the state file: {}", one_line(&w));
            }
            if process::read_pid(&s.paths.pid) == Some(me) {
                state::remove(&s.paths.pid);
            }
            Err(anyhow::Error::new(e).context(format!("the tunnel of `{}` cannot start", s.name)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_forwards_in_columns() {
        let p = crate::profile::tests::sample();
        let (f, _) = crate::steps::render::forwards(&p.brokers, p.mysql.as_ref()).expect("ok");
        let records: Vec<ForwardRecord> = f
            .iter()
            .map(crate::steps::render::Forward::record)
            .collect();
        insta::assert_snapshot!(forward_lines(&records), @r"
        127.0.0.1:19094 -> localhost:19094  Kafka broker 1 (advertised localhost:19094)
        127.0.0.1:29094 -> localhost:29094  Kafka broker 2 (advertised localhost:29094)
        127.0.0.1:39094 -> localhost:39094  Kafka broker 3 (advertised localhost:39094)
        127.0.0.1:3306 -> 127.0.0.1:3306    MySQL (on the server's 127.0.0.1:3306)
        ");
    }
}
