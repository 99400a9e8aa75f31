//! `tunnel up`: refresh the broker list, renew a certificate about to expire, start the
//! background process (or OpenSSH with `--openssh`) and show the forwards.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use shiqi_ca::protocol::Broker;
use time::OffsetDateTime;

use crate::agent::{self, AgentCommand};
use crate::cli::{EndpointArgs, EndpointMode};
use crate::error::{AgentError, Error, InputError, TunnelError};
use crate::printer::Printer;
use crate::profile::lock::PATIENCE;
use crate::profile::plan::choose_endpoint;
use crate::profile::{Endpoint, ForwardRecord, Profile};
use crate::tunnel::{self, State, Targets};

use super::{Settings, arrow, rfc3339};

/// How long `up` waits for a running tunnel to pick up a changed broker list.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

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
pub(crate) async fn up(
    s: &Settings,
    openssh: bool,
    check_every: u64,
    endpoint: &EndpointArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let mut profile = Profile::load(&s.paths.dir)?;
    // Every refusal before anything is stopped or rewritten.
    let switch = plan_switch(&profile, endpoint)?;
    refuse_openssh(s, &profile, openssh, switch.as_ref())?;
    let openssh_running = tunnel::openssh_alive(&s.paths, &profile.tunnel_host);
    if openssh_running && switch.is_some() {
        anyhow::bail!(
            "the OpenSSH tunnel of `{}` is running; stop it first (`shiqi-connect tunnel down \
             {}`), then switch the endpoint",
            s.name,
            s.name
        );
    }
    if let Some(planned) = switch {
        profile = apply_switch(s, &profile, planned, printer).await?;
    }
    if openssh_running {
        printer.info(&format!(
            "the OpenSSH tunnel of `{}` is already running (control socket `{}`)",
            s.name,
            s.show(&s.paths.control_socket)
        ));
        print_up(
            s,
            "openssh",
            None,
            true,
            &profile.forwards,
            &Changes::default(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let running = tunnel::running(&s.paths.pid, &s.root, &s.name);
    let (profile, changes) = refresh_or_keep(s, profile, openssh, running, printer).await?;
    if profile.forwards.is_empty() && (profile.endpoint.is_direct() || profile.brokers.is_empty()) {
        anyhow::bail!(
            "profile `{}` has nothing to forward: the server reported no Kafka brokers and no MySQL",
            s.name
        );
    }
    match running {
        Some(pid) => already_running(s, pid, &profile, &changes, printer).await,
        None => start(s, &profile, openssh, check_every, &changes, printer).await,
    }
}

/// The forwards `up` added and removed, shown with the tunnel's.
#[derive(Default)]
struct Changes {
    added: Vec<ForwardRecord>,
    removed: Vec<ForwardRecord>,
    /// The profile was rewritten (brokers or forwards).
    written: bool,
}

/// `--openssh` where it cannot work: on Windows, or for a profile with the local endpoint.
fn refuse_openssh(
    s: &Settings,
    profile: &Profile,
    openssh: bool,
    switch: Option<&(Endpoint, Option<String>)>,
) -> Result<(), Error> {
    let local = switch.map_or(!profile.endpoint.is_direct(), |(e, _)| !e.is_direct());
    if openssh && !crate::os::OPENSSH_BACKGROUND {
        return Err(Error::Input(InputError::InvalidValue {
            what: "--openssh",
            given: "Windows' OpenSSH".to_owned(),
            why: "it cannot fork into the background (`ssh -f`) or be stopped through a control \
                  socket: drop --openssh (the built-in tunnel runs in the background), or run \
                  `ssh -N -F ssh_config HOST` in a window of its own",
        }));
    }
    if openssh && local {
        return Err(Error::Input(InputError::InvalidValue {
            what: "--openssh",
            given: format!("profile `{}` uses the local endpoint", s.name),
            why: "OpenSSH cannot speak Kafka for the clients: drop --openssh, or add \
                  --endpoint direct (when every broker advertises localhost on a port of its \
                  own)",
        }));
    }
    Ok(())
}

/// Asks the server for its brokers over a short session of our own, so the forwards match the
/// cluster as it is now (a broker added since setup gets its forward). A running tunnel is
/// kept as it is when the server cannot be asked.
async fn refresh_or_keep(
    s: &Settings,
    profile: Profile,
    openssh: bool,
    running: Option<u32>,
    printer: &Printer,
) -> anyhow::Result<(Profile, Changes)> {
    match refresh_profile(s, &profile, openssh, printer).await {
        Ok(Some(plan)) => Ok((
            plan.profile,
            Changes {
                added: plan.added,
                removed: plan.removed,
                written: true,
            },
        )),
        Ok(None) => Ok((profile, Changes::default())),
        Err(e) if running.is_some() => {
            printer.warn(&format!(
                "cannot ask the server for its brokers, keeping the running tunnel as it is: {}",
                chain(&e)
            ));
            Ok((profile, Changes::default()))
        }
        Err(e) => Err(e.context(format!("cannot log in to `{}`", profile.server.destination))),
    }
}

/// A tunnel already runs: it re-reads a changed profile, and `up` shows its forwards.
async fn already_running(
    s: &Settings,
    pid: u32,
    profile: &Profile,
    changes: &Changes,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    // The local endpoint also takes new broker addresses and ports from the profile.
    let moved = !changes.added.is_empty() || !changes.removed.is_empty();
    if moved || (changes.written && !profile.endpoint.is_direct()) {
        reload(s, pid, printer).await?;
    }
    printer.info(&format!(
        "the tunnel of `{}` is already running (pid {pid}); log `{}`",
        s.name,
        s.show(&s.paths.log)
    ));
    let shown = State::read(&s.paths.state).map_or_else(
        || profile.forwards.clone(),
        |st| [st.endpoint, st.forwards].concat(),
    );
    print_up(s, "shiqi-connect", Some(pid), true, &shown, changes)?;
    Ok(ExitCode::SUCCESS)
}

/// Starts the tunnel (the built-in one, or OpenSSH), its ports checked first.
async fn start(
    s: &Settings,
    profile: &Profile,
    openssh: bool,
    check_every: u64,
    changes: &Changes,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    // A stale pid file (the process is gone, or the pid now belongs to something else).
    tunnel::remove_stale(&s.paths.pid);
    // Checked here for a quick, clear refusal; the background process checks again by binding.
    for f in &profile.forwards {
        tunnel::check_free(f.local_port)
            .with_context(|| format!("cannot forward {}", f.purpose))?;
    }
    for (port, what) in endpoint_ports(profile) {
        tunnel::check_free(port)
            .with_context(|| format!("cannot listen for {what} (move it with --endpoint-port)"))?;
    }
    if openssh {
        let step = printer.step("start OpenSSH");
        tunnel::start_openssh(&s.paths, &profile.tunnel_host)?;
        step.done(&format!(
            "`ssh -fN -F {} {}`",
            s.show(&s.paths.ssh_config),
            profile.tunnel_host
        ));
        print_up(s, "openssh", None, false, &profile.forwards, changes)?;
        return Ok(ExitCode::SUCCESS);
    }
    let step = printer.step("start the tunnel");
    let st = tunnel::start_daemon(&s.paths, &s.root, &s.name, s.verbose, check_every).await?;
    step.done(&format!(
        "pid {}, through {}, log `{}`",
        st.pid,
        st.server,
        s.show(&s.paths.log)
    ));
    let shown = [st.endpoint, st.forwards].concat();
    print_up(s, "shiqi-connect", Some(st.pid), false, &shown, changes)?;
    Ok(ExitCode::SUCCESS)
}

/// What `--endpoint` / `--endpoint-port` ask for, when it differs from the profile: the new
/// endpoint and a note on why (auto). Pure: nothing is stopped or written.
fn plan_switch(
    profile: &Profile,
    args: &EndpointArgs,
) -> anyhow::Result<Option<(Endpoint, Option<String>)>> {
    // Unlike setup's, an absent `--endpoint` keeps the profile's mode: a port alone moves a
    // local endpoint, and a direct profile has none to move.
    let mode = match args.endpoint {
        Some(mode) => mode,
        None if args.endpoint_port.is_none() || profile.endpoint.is_direct() => return Ok(None),
        None => EndpointMode::Local,
    };
    let (endpoint, note) = choose_endpoint(
        mode,
        args.endpoint_port,
        &profile.endpoint,
        &profile.brokers,
        profile.mysql.as_ref(),
    )
    .context("cannot switch the Kafka endpoint")?;
    Ok((endpoint != profile.endpoint).then_some((endpoint, note)))
}

/// Switches the profile to the planned endpoint, stopping a running tunnel first (its
/// listeners change), and rewrites its files.
async fn apply_switch(
    s: &Settings,
    profile: &Profile,
    (endpoint, note): (Endpoint, Option<String>),
    printer: &Printer,
) -> anyhow::Result<Profile> {
    if let Some(note) = note {
        printer.note(&note);
    }
    if let Some(pid) = tunnel::running(&s.paths.pid, &s.root, &s.name) {
        let step = printer.step("stop the running tunnel (its listeners change)");
        tunnel::stop(pid, Duration::from_secs(5)).await?;
        step.done(&format!("pid {pid} stopped"));
    }
    let what = if profile.mysql.is_some() {
        "Kafka and MySQL"
    } else {
        "Kafka"
    };
    let step = printer.step(&format!(
        "switch {what} to the {} endpoint",
        endpoint.mode()
    ));
    let alias = Targets::resolve(profile, &s.home)
        .ok()
        .and_then(|t| t.first.host_key_alias.clone());
    let plan = tunnel::switch_endpoint(endpoint, &s.paths.dir, alias.as_deref(), PATIENCE)
        .with_context(|| format!("cannot update profile `{}`", s.name))?;
    let mysql = if profile.mysql.is_some() {
        ", my.cnf"
    } else {
        ""
    };
    step.done(&match &plan.profile.endpoint {
        Endpoint::Local { bootstrap_port, .. } => format!(
            "bootstrap 127.0.0.1:{bootstrap_port}; client.properties, librdkafka.conf{mysql} \
             now plaintext to the endpoint"
        ),
        Endpoint::Direct => format!(
            "client.properties, librdkafka.conf{mysql} now TLS with the certificate through \
             the forwards"
        ),
    });
    Ok(plan.profile)
}

/// The local endpoint's ports, with what each is for.
fn endpoint_ports(p: &Profile) -> Vec<(u16, String)> {
    match &p.endpoint {
        Endpoint::Direct => Vec::new(),
        Endpoint::Local {
            bootstrap_port,
            brokers,
        } => std::iter::once((*bootstrap_port, "the Kafka bootstrap port".to_owned()))
            .chain(
                brokers
                    .iter()
                    .map(|b| (b.port, format!("Kafka broker {}'s port", b.id))),
            )
            .collect(),
    }
}

/// Logs in, asks for the brokers and rewrites `ssh_config` and `profile.json` when they
/// changed. `Ok(None)`: unchanged, or the agent could not list them (warned; the recorded
/// brokers stay).
async fn refresh_profile(
    s: &Settings,
    profile: &Profile,
    openssh: bool,
    printer: &Printer,
) -> anyhow::Result<Option<tunnel::Plan>> {
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

    let step = printer.wait("ask the server for its brokers");
    let listed = ask_brokers(&session, s, profile, openssh, printer).await;
    session.close().await;
    let brokers = match listed {
        Ok(b) => b,
        // An answer that does not parse is not a cluster that is down: the server said
        // something hostile or broken, so no tunnel starts on its word or on old facts.
        Err(
            e @ (Error::Agent(AgentError::Field { .. })
            | Error::Agent(AgentError::Reply { .. })
            | Error::Agent(AgentError::ProtocolVersion { .. })),
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
    let alias = targets.first.host_key_alias.as_deref();
    let (plan, written) = apply_brokers(s, alias, brokers, printer)?;
    let count = plan.profile.brokers.len();
    if !written {
        step.done(&format!("{count} brokers, unchanged"));
        return Ok(None);
    }
    step.done(&format!(
        "{count} brokers{}; `ssh_config` and `profile.json` rewritten",
        plan.forward_changes()
    ));
    Ok(Some(plan))
}

/// The agent's broker list, with a warning for each broker that does not serve.
async fn ask_brokers(
    session: &crate::ssh::Session,
    s: &Settings,
    profile: &Profile,
    openssh: bool,
    printer: &Printer,
) -> Result<Vec<Broker>, Error> {
    let agent = AgentCommand::new(&profile.server.agent_command)?;
    let brokers = agent::brokers(session, &agent).await?;
    let missing = crate::steps::verify::not_serving(session, &s.paths.dir, &brokers).await;
    for line in &missing {
        printer.warn(line);
    }
    if openssh && !missing.is_empty() {
        printer.warn(
            "OpenSSH's forwards cannot change while it runs: run `shiqi-connect tunnel up` \
             without --openssh to have a returning broker's forward added by itself",
        );
    }
    Ok(brokers)
}

/// Plans the forwards for `brokers` against profile.json as it is under the profile's lock
/// (the tunnel's renewal may have replaced the certificate since it was read) and rewrites the
/// profile when they changed (`true`).
fn apply_brokers(
    s: &Settings,
    alias: Option<&str>,
    brokers: Vec<Broker>,
    printer: &Printer,
) -> anyhow::Result<(tunnel::Plan, bool)> {
    let (plan, written) = tunnel::apply_brokers(&s.paths.dir, alias, PATIENCE, |fresh| {
        tunnel::plan_brokers(fresh, brokers)
    })
    .with_context(|| format!("cannot update profile `{}` for this cluster", s.name))?;
    for w in &plan.warnings {
        printer.warn(w);
    }
    Ok((plan, written))
}

/// Renews the certificate when it is due; a failure is a warning (the tunnel itself only needs
/// the SSH key). `Some(profile)` when it was renewed.
async fn renew_on_connect(
    session: &crate::ssh::Session,
    s: &Settings,
    profile: &Profile,
    printer: &Printer,
) -> Option<Profile> {
    use crate::ops::renew::{self, RenewOutcome};
    if !renew::is_due(&profile.certificate, OffsetDateTime::now_utc()) {
        return None;
    }
    let step = printer.wait("renew the certificate (less than a third of its lifetime is left)");
    let patience = Some(PATIENCE);
    match renew::renew_if_due(session, &s.paths.dir, &s.name, patience).await {
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
    tunnel::send(pid, crate::os::control::Request::Reload)?;
    let deadline = Instant::now() + RELOAD_TIMEOUT;
    loop {
        if let Some(st) = State::read(&s.paths.state).filter(|st| st.generation > before) {
            if let Some(first) = st.problems.first() {
                return Err(Error::Tunnel(TunnelError::Failed {
                    why: first.clone(),
                    hint: None,
                    log: s.paths.log.clone(),
                })
                .into());
            }
            step.done(&format!("{} forwards", st.forwards.len()));
            return Ok(());
        }
        if Instant::now() >= deadline || !tunnel::alive(pid) {
            return Err(Error::Tunnel(TunnelError::Failed {
                why: format!(
                    "the running tunnel (pid {pid}) did not pick up the new brokers within {}s",
                    RELOAD_TIMEOUT.as_secs()
                ),
                hint: Some(format!(
                    "restart it: `shiqi-connect tunnel down {0}` then `shiqi-connect tunnel up {0}`",
                    s.name
                )),
                log: s.paths.log.clone(),
            })
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
    changes: &Changes,
) -> anyhow::Result<()> {
    let out = if s.json {
        let report = UpReport {
            profile: s.name.as_str(),
            kind,
            pid,
            already_running,
            forwards,
            added: &changes.added,
            removed: &changes.removed,
            log: (kind == "shiqi-connect").then(|| s.paths.log.display().to_string()),
        };
        let mut j = serde_json::to_string_pretty(&report).unwrap_or_default();
        j.push('\n');
        j
    } else {
        forward_lines(forwards)
    };
    crate::commands::print_stdout(&out)
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

fn chain(e: &anyhow::Error) -> String {
    e.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_forwards_in_columns() {
        let p = crate::profile::tests::sample();
        let (records, _) =
            crate::profile::plan::forwards(&p.brokers, p.mysql.as_ref(), &p.endpoint).expect("ok");
        insta::assert_snapshot!(forward_lines(&records), @r"
        127.0.0.1:19094 -> localhost:19094  Kafka broker 1 (advertised localhost:19094)
        127.0.0.1:29094 -> localhost:29094  Kafka broker 2 (advertised localhost:29094)
        127.0.0.1:39094 -> localhost:39094  Kafka broker 3 (advertised localhost:39094)
        127.0.0.1:3306 -> 127.0.0.1:3306    MySQL (on the server's 127.0.0.1:3306)
        ");
    }
}
