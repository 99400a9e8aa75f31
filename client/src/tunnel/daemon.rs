//! The background process (`shiqi-connect tunnel run NAME`, started by `tunnel up`): binds every
//! forward on 127.0.0.1, logs in, and keeps the connection up. When it drops, the listeners stay
//! bound and it reconnects with backoff (0.5 s, 1 s, 2 s, 4 s, then every 5 s), so a cut
//! connection is back within seconds and clients only retry. SIGHUP re-reads `profile.json`
//! (added or removed brokers); SIGTERM closes the connection and exits.
//!
//! It follows the cluster while it runs: after every (re)connect and every `check_every`, it
//! asks the cluster which brokers are registered (`DescribeCluster`, through its own forwards
//! with the profile's certificate: no agent request), binds a forward for each serving broker
//! that has none, rewrites `profile.json` and `ssh_config`, and logs the change. Forwards of
//! brokers that left stay until the next start: clients may still dial what they were told.
//!
//! It reports through `tunnel.state.json` and logs through `tracing` to its stderr, which is
//! `tunnel.log`: connects, disconnects and errors, never key material or passwords.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiqi_ca::ProfileName;
use shiqi_ca::protocol::MysqlFacts;
use time::OffsetDateTime;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::error::{Error, ProfileError, TunnelError};
use crate::ops::renew;
use crate::os::control::{Listener, Request};
use crate::probe::kafka::Registered;
use crate::probe::{self, ProfileTls};
use crate::profile::{ForwardRecord, Profile};
use crate::ssh::Session;
use crate::tunnel::endpoint::{self, LocalEndpoint, Role, Upstream};
use crate::tunnel::forward::{self, Link, Shared};
use crate::tunnel::live::Live;
use crate::tunnel::login::Targets;
use crate::tunnel::refresh;
use crate::tunnel::state::{self, BrokersCheck, Phase, State};
use crate::tunnel::{Paths, ports, process};

/// The first pause before reconnecting, doubled after each failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest pause between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often the connection is checked for having closed (a forward that finds it dead pokes
/// the supervisor at once).
const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How long one look at the cluster's brokers may take.
const BROKERS_TIMEOUT: Duration = Duration::from_secs(6);
/// How often the certificate is checked against the wall clock: a laptop that slept past the
/// renewal point (the monotonic clock stops in suspend) or a daemon that was stopped renews
/// within this of waking.
const RENEW_CHECK: Duration = Duration::from_secs(20);
/// The first pause after a failed renewal, doubled after each failure.
const RENEW_FIRST_BACKOFF: Duration = Duration::from_secs(60);
/// The longest pause between renewal attempts, and at most a twentieth of the certificate's
/// lifetime: a 10-minute certificate is retried every 30 s at worst, so a server that was down
/// at the due time is renewed within that of coming back, before or after the expiry.
const RENEW_MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// The shortest pause between renewal attempts however short the lifetime.
const RENEW_MIN_BACKOFF: Duration = Duration::from_secs(5);
/// For tests only: with `SECS`, the certificate is checked every `SECS` and a failed renewal is
/// retried after `SECS`, without backoff, so the e2e can watch ten failed attempts in a minute.
const RENEW_RETRY_ENV: &str = "SHIQI_RENEW_RETRY_SECS";

/// What the background process needs, settled by the command.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// `$SHIQI_HOME`.
    pub(crate) root: PathBuf,
    /// `$HOME`, for resolving the server like ssh does.
    pub(crate) home: PathBuf,
    /// The profile.
    pub(crate) name: ProfileName,
    /// How often to ask the cluster for its brokers besides after each connect; zero: only then.
    pub(crate) check_every: Duration,
}

/// Runs the tunnel until SIGTERM or SIGINT.
///
/// # Errors
/// Only while starting: the profile cannot be read, a port is taken ([`TunnelError::PortInUse`]), or
/// the first login fails. Once up, failures are logged and retried, never returned.
pub(crate) async fn run(opts: &Options) -> Result<(), Error> {
    let paths = Paths::new(&opts.root, &opts.name);
    let me = std::process::id();
    if let Some(pid) = process::running(&paths.pid, &opts.root, &opts.name).filter(|p| *p != me) {
        return Err(Error::Tunnel(TunnelError::Running {
            name: opts.name.to_string(),
            pid,
        }));
    }
    let profile = Profile::load(&paths.dir)?;
    let targets = Targets::resolve(&profile, &opts.home)?;
    tracing::info!(
        profile = %opts.name,
        server = %targets.server(),
        forwards = profile.forwards.len(),
        "starting"
    );
    // Bind everything before logging in: a taken port is the commonest failure and needs no
    // server to find out. The pid and state files are written only once every port is ours,
    // so of two racing starts the one that loses the ports never touches the winner's files.
    let mut bound = Vec::new();
    for f in &profile.forwards {
        bound.push((f.clone(), ports::bind(f.local_port)?));
    }
    let endpoint_bound = LocalEndpoint::bind(&profile.endpoint)?;
    process::write_pid(&paths.pid)?;
    let st = State {
        pid: me,
        phase: Phase::Starting,
        since: OffsetDateTime::now_utc(),
        server: targets.server(),
        generation: 0,
        forwards: profile.forwards.clone(),
        error: None,
        hint: None,
        problems: vec![],
        brokers: None,
        endpoint: vec![],
        renewal: None,
        refused: None,
    };
    st.write(&paths.state)?;
    let session = targets.connect().await?;
    log_connected(&session, &st.server);

    let (tx, rx) = watch::channel(Some(Link {
        generation: 1,
        session: Arc::new(session),
    }));
    let live = Live::new();
    live.connection(1);
    let shared = Shared {
        link: rx,
        lost: Arc::new(Notify::new()),
        prohibited: Arc::new(Notify::new()),
        live: live.clone(),
    };
    let endpoint = endpoint_bound.map(|l| {
        let max = usize::try_from(profile.endpoint_options.max_connections).unwrap_or(1);
        LocalEndpoint::start(paths.dir.clone(), l, &profile.brokers, shared.clone(), max)
    });
    let mut listeners = BTreeMap::new();
    for (f, l) in bound {
        let task = serve_forward(l, &f, &shared, endpoint.as_ref(), profile.mysql.as_ref());
        listeners.insert(f.local_port, (f, task));
    }
    let answer = {
        let live = live.clone();
        // Plain numbers and strings: serializing cannot fail.
        Arc::new(move || serde_json::to_vec(&live.snapshot()).unwrap_or_default())
    };
    let signals = Listener::new(&paths.live, answer).map_err(|source| Error::Io {
        action: "install signal handlers for",
        path: paths.pid.clone(),
        source,
    })?;
    let mut d = Daemon {
        paths,
        targets,
        state: st,
        tx,
        shared,
        listeners,
        generation: 1,
        signals,
        check_every: opts.check_every,
        endpoint,
        renew: RenewSchedule::new(),
        last_login: Some(Instant::now()),
    };
    d.state.endpoint = d.endpoint_records();
    // The first look at the cluster before `up` is told: `tunnel status` right after shows it.
    d.check_brokers().await;
    d.state.phase = Phase::Up;
    d.state.since = OffsetDateTime::now_utc();
    d.save();
    tracing::info!("tunnel up");
    d.supervise().await;
    d.stop().await;
    Ok(())
}

enum Event {
    Stop,
    Reload,
    Lost,
    CheckBrokers,
    NewBroker,
    CheckRenewal,
    /// The local endpoint refused a connection from another account.
    Refused,
    /// sshd refused a channel as prohibited (its `permitopen` may have grown since the login).
    Prohibited,
}

/// The shortest time between two logins made because sshd refused a channel: a target that
/// stays forbidden costs one login per this, not one per client connection.
const RELOGIN_AFTER_REFUSAL: Duration = Duration::from_secs(15);

struct Daemon {
    paths: Paths,
    targets: Targets,
    state: State,
    tx: watch::Sender<Option<Link>>,
    shared: Shared,
    listeners: BTreeMap<u16, (ForwardRecord, JoinHandle<()>)>,
    generation: u64,
    signals: Listener,
    check_every: Duration,
    endpoint: Option<Arc<LocalEndpoint>>,
    renew: RenewSchedule,
    /// When the current connection's login was made by [`Daemon::renew_link`] (or at start).
    last_login: Option<Instant>,
}

/// [`renew::renew_if_due`] polled on a blocking-pool thread, over the tunnel's connection. The
/// daemon's one thread serves every forward and the local endpoint: a renewal's key, PKCS#12
/// stores, files and logins run there stalled them for as long as it took (the soak: records due
/// in a 0.6-0.9 s renewal were acknowledged only after it, up to 454 ms late). The process's one
/// runtime still drives its sockets and timers (`Handle::block_on`); only the polling, where the
/// CPU work is, moves. No waiting for the profile's lock: the next check tries again.
async fn renew_off_thread(
    session: Arc<crate::ssh::Session>,
    dir: &std::path::Path,
    name: &shiqi_ca::ProfileName,
) -> Result<renew::RenewOutcome, Error> {
    let (dir, name) = (dir.to_path_buf(), name.clone());
    let runtime = tokio::runtime::Handle::current();
    let path = dir.clone();
    tokio::task::spawn_blocking(move || {
        runtime.block_on(renew::renew_if_due(&session, &dir, &name, None))
    })
    .await
    .unwrap_or_else(|e| {
        Err(Error::Io {
            action: "renew the certificate in",
            path,
            source: std::io::Error::other(format!("the renewal stopped: {e}")),
        })
    })
}

/// When the daemon renews, and its backoff after failures.
struct RenewSchedule {
    /// Added to the due time, the same for the daemon's life: laptops that set up together do
    /// not all renew in the same second.
    jitter: time::Duration,
    /// No attempt before this (monotonic), after a failure.
    not_before: Instant,
    /// The next pause after a failure.
    backoff: Duration,
    /// How often the clock is checked ([`RENEW_CHECK`]).
    check: Duration,
    /// The first and the longest pause after a failure.
    first_backoff: Duration,
    max_backoff: Duration,
}

impl RenewSchedule {
    fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        // A random number without a crate: std seeds each RandomState from the OS.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let jitter = time::Duration::seconds(i64::try_from(random % 600).unwrap_or_default());
        let fixed = std::env::var(RENEW_RETRY_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|secs| *secs > 0)
            .map(Duration::from_secs);
        if let Some(every) = fixed {
            tracing::warn!("{RENEW_RETRY_ENV}: renewal checked and retried every {every:?}");
        }
        Self {
            jitter: if fixed.is_some() {
                time::Duration::ZERO
            } else {
                jitter
            },
            not_before: Instant::now(),
            backoff: fixed.unwrap_or(RENEW_FIRST_BACKOFF),
            check: fixed.unwrap_or(RENEW_CHECK),
            first_backoff: fixed.unwrap_or(RENEW_FIRST_BACKOFF),
            max_backoff: fixed.unwrap_or(RENEW_MAX_BACKOFF),
        }
    }

    /// When `cert` is due, jitter included (at most a thirtieth of its lifetime: a 1-day
    /// certificate still renews with hours to spare).
    fn due(&self, cert: &crate::profile::Certificate) -> OffsetDateTime {
        // The lifetime signed for, as `due_from` counts it (not the agent's backdating).
        let lifetime = cert.not_after - cert.not_before - shiqi_ca::issue::BACKDATE;
        let jitter = self.jitter.min(lifetime / 30).max(time::Duration::ZERO);
        renew::due_from(cert) + jitter
    }

    /// The pause before the next attempt after a failure: the backoff, at most a twentieth of
    /// `cert`'s lifetime (see [`RENEW_MAX_BACKOFF`]).
    fn pause(&self, cert: &crate::profile::Certificate) -> Duration {
        let signed = cert.not_after - cert.not_before - shiqi_ca::issue::BACKDATE;
        let twentieth = Duration::try_from(signed / 20).unwrap_or(RENEW_MIN_BACKOFF);
        self.backoff
            .min(twentieth.max(RENEW_MIN_BACKOFF))
            .min(self.max_backoff)
    }
}

impl Daemon {
    async fn supervise(&mut self) {
        // Deadlines, not sleeps made anew on each pass: a shorter timer (or any other event)
        // must not keep pushing a longer one back.
        let every = self.check_every;
        let mut next_check = tokio::time::Instant::now() + every;
        // The certificate at once: a tunnel started at login after a night finds it expired.
        let mut next_renewal = tokio::time::Instant::now();
        loop {
            let link = self.tx.borrow().clone();
            let lost = self.shared.lost.clone();
            let new_broker = self.endpoint.as_ref().map(|ep| ep.new_broker());
            let refused = self.endpoint.as_ref().map(|ep| ep.gate().changed());
            let prohibited = self.shared.prohibited.clone();
            let s = &mut self.signals;
            let event = tokio::select! {
                r = s.next() => match r {
                    Request::Stop => Event::Stop,
                    Request::Reload => Event::Reload,
                },
                () = until_lost(link, lost) => Event::Lost,
                () = tokio::time::sleep_until(next_check), if !every.is_zero() => Event::CheckBrokers,
                () = notified(new_broker) => Event::NewBroker,
                () = notified(refused) => Event::Refused,
                () = prohibited.notified() => Event::Prohibited,
                () = tokio::time::sleep_until(next_renewal) => Event::CheckRenewal,
            };
            match event {
                Event::CheckBrokers => next_check = tokio::time::Instant::now() + every,
                Event::CheckRenewal => {
                    next_renewal = tokio::time::Instant::now() + self.renew.check;
                }
                _ => {}
            }
            match event {
                Event::Stop => return,
                Event::Reload => self.reload().await,
                Event::CheckBrokers => self.check_brokers().await,
                Event::NewBroker => {
                    self.renew_link().await;
                    self.check_brokers().await;
                }
                Event::CheckRenewal => self.check_renewal().await,
                Event::Refused => self.note_refused(),
                Event::Prohibited => {
                    if self
                        .last_login
                        .is_none_or(|at| at.elapsed() >= RELOGIN_AFTER_REFUSAL)
                    {
                        tracing::info!(
                            "the server refused a forward: logging in again, in case it allows \
                             it since (enroll --sync)"
                        );
                        self.renew_link().await;
                    }
                }
                Event::Lost => {
                    if !self.reconnect().await {
                        return;
                    }
                    // A laptop that slept past the due time wakes to a lost connection: renew
                    // on the new one at once rather than at the next check.
                    self.check_renewal().await;
                    self.check_brokers().await;
                }
            }
        }
    }

    /// Puts the endpoint's refusals of other accounts in the state file (`tunnel status`).
    fn note_refused(&mut self) {
        let Some(ep) = &self.endpoint else { return };
        let r = ep.gate().refused();
        self.state.refused = Some(state::Refused {
            count: r.count,
            last: r.last,
        });
        self.save();
    }

    /// Reconnects until it works; `false` when told to stop meanwhile.
    async fn reconnect(&mut self) -> bool {
        self.tx.send_replace(None);
        tracing::warn!(server = %self.state.server, "connection lost; reconnecting");
        self.state.phase = Phase::Reconnecting;
        self.state.since = OffsetDateTime::now_utc();
        self.state.error = Some("the SSH connection was lost".to_owned());
        self.state.hint = None;
        self.save();
        let started = Instant::now();
        let mut delay = FIRST_BACKOFF;
        for attempt in 1u64.. {
            let s = &mut self.signals;
            let go = tokio::select! {
                () = s.stopped() => false,
                () = tokio::time::sleep(delay) => true,
            };
            if !go {
                return false;
            }
            let s = &mut self.signals;
            let res = tokio::select! {
                () = s.stopped() => None,
                r = self.targets.connect() => Some(r),
            };
            match res {
                None => return false,
                Some(Ok(session)) => {
                    log_connected(&session, &self.state.server);
                    self.generation += 1;
                    self.shared.live.connection(self.generation);
                    self.shared.live.reconnected();
                    self.tx.send_replace(Some(Link {
                        generation: self.generation,
                        session: Arc::new(session),
                    }));
                    tracing::info!(
                        attempts = attempt,
                        "reconnected after {:.1}s",
                        started.elapsed().as_secs_f64()
                    );
                    self.state.phase = Phase::Up;
                    self.state.since = OffsetDateTime::now_utc();
                    self.state.error = None;
                    self.save();
                    return true;
                }
                Some(Err(e)) => {
                    let line = one_line(&e);
                    tracing::warn!(attempt, "reconnect failed: {line}");
                    self.state.error = Some(line);
                    self.state.hint = e.hint();
                    self.save();
                    delay = (delay * 2).min(MAX_BACKOFF);
                }
            }
        }
        false
    }

    /// Re-reads `profile.json` and makes the listeners match its forwards (and the local
    /// endpoint know its brokers: `tunnel up` records what the agent listed).
    async fn reload(&mut self) {
        tracing::info!("reloading the profile");
        let mut problems = Vec::new();
        let mut added = false;
        match Profile::load(&self.paths.dir) {
            Err(e) => problems.push(one_line(&e)),
            Ok(profile) => {
                if let Some(ep) = &self.endpoint {
                    ep.adopt(&profile.endpoint, &profile.brokers);
                }
                let wanted = profile.forwards;
                let stale: Vec<u16> = self
                    .listeners
                    .iter()
                    .filter(|(_, (f, _))| !wanted.contains(f))
                    .map(|(p, _)| *p)
                    .collect();
                for port in stale {
                    if let Some((f, task)) = self.listeners.remove(&port) {
                        task.abort();
                        // Awaited so the port is free again before a changed forward rebinds it.
                        let _ = task.await;
                        tracing::info!("stopped forwarding 127.0.0.1:{port} ({})", f.purpose);
                    }
                }
                for f in wanted {
                    if self.listeners.contains_key(&f.local_port) {
                        continue;
                    }
                    match ports::bind(f.local_port) {
                        Ok(l) => {
                            added = true;
                            let task = serve_forward(
                                l,
                                &f,
                                &self.shared,
                                self.endpoint.as_ref(),
                                profile.mysql.as_ref(),
                            );
                            self.listeners.insert(f.local_port, (f, task));
                        }
                        Err(e) => {
                            let line = one_line(&e);
                            tracing::warn!("cannot add a forward: {line}");
                            problems.push(line);
                        }
                    }
                }
            }
        }
        self.state.forwards = self.listeners.values().map(|(f, _)| f.clone()).collect();
        self.state.problems = problems;
        self.state.generation += 1;
        self.save();
        if added {
            self.renew_link().await;
        }
    }

    /// A fresh login beside the current connection, which new channels then use: sshd applies
    /// an `authorized_keys` line's `permitopen` when a key logs in, so a target the server
    /// allowed since (`enroll --sync` after a broker joined) is reachable only on a new
    /// connection. The old one serves its open channels until they end, so nothing is cut.
    async fn renew_link(&mut self) {
        if self.tx.borrow().is_none() {
            // Reconnecting already: the next connection is a fresh login anyway.
            return;
        }
        match self.targets.connect().await {
            Ok(session) => {
                log_connected(&session, &self.state.server);
                self.generation += 1;
                self.shared.live.connection(self.generation);
                self.tx.send_replace(Some(Link {
                    generation: self.generation,
                    session: Arc::new(session),
                }));
                self.last_login = Some(Instant::now());
                tracing::info!("logged in again for the new forwards");
            }
            Err(e) => tracing::warn!(
                "cannot log in again for the new forwards (they work after the next \
                 reconnect): {}",
                one_line(&e)
            ),
        }
    }

    /// Asks the cluster which brokers are registered, through the first broker forward that
    /// answers, with the profile's certificate (read afresh: a renewal replaces it); gives each
    /// serving broker without a forward one, and records what it found in the state file.
    async fn check_brokers(&mut self) {
        if let Some(ep) = self.endpoint.clone() {
            self.check_through_endpoint(&ep).await;
            return;
        }
        let now = OffsetDateTime::now_utc();
        let mut check = self.new_check(now);
        match self.ask_registered().await {
            Err(why) => {
                tracing::warn!("cannot ask the cluster for its brokers: {why}");
                check.error = Some(why);
            }
            Ok((profile, registered)) => {
                let known: Vec<(i32, String)> = profile
                    .brokers
                    .iter()
                    .map(|b| (b.id, format!("{}:{}", b.host, b.port)))
                    .collect();
                check.not_serving = registered.not_serving_of(&known);
                let was = self.state.brokers.as_ref().map(|b| &b.not_serving);
                if was != Some(&check.not_serving) {
                    for line in &check.not_serving {
                        tracing::warn!("{line}");
                    }
                }
                match self.follow(&profile, registered.serving) {
                    Ok(Some(what)) => {
                        tracing::info!("the cluster's brokers changed: {what}");
                        check.last_change = Some(format!("{}: {what}", shiqi_ca::text::utc(now)));
                        self.state.brokers = Some(check);
                        // Binds the new forwards from the rewritten profile, and saves.
                        self.reload().await;
                        return;
                    }
                    Ok(None) => {}
                    Err(why) => {
                        tracing::warn!("cannot follow the cluster's brokers: {why}");
                        check.error = Some(why);
                    }
                }
            }
        }
        self.state.brokers = Some(check);
        self.save();
    }

    /// Renews the certificate when it is due (read from `profile.json` each time: a `renew`
    /// or `rotate` run by hand moves it), over the tunnel's own connection, as `renew` does:
    /// the new certificate logs in, the profile is swapped, the old serial is revoked. The
    /// local endpoint presents it on every connection from then on; clients already connected
    /// keep theirs. A failure is retried with backoff (1 min doubling to 1 h) and shown in the
    /// state file with the time left; a failing renewal signs at most
    /// [`renew::MAX_SIGNED`] certificates (see [`renew::renew_if_due`]), and says when it
    /// stopped.
    async fn check_renewal(&mut self) {
        let Ok(profile) = Profile::load(&self.paths.dir) else {
            return;
        };
        let now = OffsetDateTime::now_utc();
        let due = self.renew.due(&profile.certificate);
        let mut shown = self.state.renewal.clone().unwrap_or(state::Renewal {
            not_after: profile.certificate.not_after,
            due,
            last: None,
            error: None,
            hint: None,
            retry_at: None,
            attempts: 0,
            renewed: 0,
            last_run: None,
        });
        if shown.not_after != profile.certificate.not_after {
            // Renewed by other means (`renew`, `rotate`): past failures no longer apply.
            shown.error = None;
            shown.hint = None;
            shown.retry_at = None;
            shown.attempts = 0;
            self.renew.backoff = self.renew.first_backoff;
            self.renew.not_before = Instant::now();
        }
        shown.not_after = profile.certificate.not_after;
        shown.due = due;
        if now < due || Instant::now() < self.renew.not_before {
            if self.state.renewal.as_ref() != Some(&shown) {
                self.state.renewal = Some(shown);
                self.save();
            }
            return;
        }
        let Some(link) = self.tx.borrow().clone() else {
            // Reconnecting: the next check, once connected, renews.
            return;
        };
        tracing::info!(
            serial = %profile.certificate.serial,
            "renewing the certificate (valid until {})",
            shiqi_ca::text::utc(profile.certificate.not_after)
        );
        let started = Instant::now();
        let outcome = renew_off_thread(link.session.clone(), &self.paths.dir, &profile.name).await;
        if matches!(outcome, Ok(renew::RenewOutcome::Renewed(_))) {
            shown.renewed += 1;
            shown.last_run = Some(state::RenewalRun {
                started: now,
                took_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            });
        }
        match outcome {
            Ok(renew::RenewOutcome::Renewed(r)) => {
                let what = format!(
                    "serial {} → {} at {}, valid until {}{}",
                    r.old.serial,
                    r.profile.certificate.serial,
                    shiqi_ca::text::utc(now),
                    shiqi_ca::text::utc(r.profile.certificate.not_after),
                    if r.revoked.is_some() {
                        "; the old one is revoked"
                    } else {
                        ""
                    }
                );
                tracing::info!("renewed: {what}");
                shown.last = Some(what);
                shown.error = None;
                shown.hint = None;
                shown.retry_at = None;
                shown.attempts = 0;
                shown.not_after = r.profile.certificate.not_after;
                shown.due = self.renew.due(&r.profile.certificate);
                self.renew.backoff = self.renew.first_backoff;
            }
            Ok(renew::RenewOutcome::NotDue { .. }) => {}
            Err(Error::Profile(ProfileError::Busy { .. })) => {
                // A `rotate` or `renew` run by hand has the profile: not a failure.
                tracing::info!("the profile is busy (a rotation by hand?); renewing later");
                return;
            }
            Err(e) => {
                let why = one_line(&e);
                let left = profile.certificate.not_after - now;
                shown.attempts += 1;
                tracing::warn!(
                    attempt = shown.attempts,
                    "cannot renew the certificate ({}), retrying in {}s: {why}",
                    if left.is_negative() {
                        format!("expired {} ago", crate::clock::span(left))
                    } else {
                        format!("{} left", crate::clock::span(left))
                    },
                    self.renew.pause(&profile.certificate).as_secs()
                );
                shown.error = Some(why);
                shown.hint = e.hint();
                let pause = self.renew.pause(&profile.certificate);
                shown.retry_at = Some(now + time::Duration::try_from(pause).unwrap_or_default());
                self.renew.not_before = Instant::now() + pause;
                self.renew.backoff = (pause * 2).min(self.renew.max_backoff);
            }
        }
        self.state.renewal = Some(shown);
        self.save();
    }

    /// The local endpoint's look at the cluster: `DescribeCluster` through its own bootstrap
    /// port, whose answer gives every broker a port as any answer does; what it learned goes
    /// into `profile.json` (the endpoint's ports and the brokers' advertised addresses).
    async fn check_through_endpoint(&mut self, ep: &Arc<LocalEndpoint>) {
        let now = OffsetDateTime::now_utc();
        let mut check = self.new_check(now);
        let bootstrap = ep.listening().first().map(|(_, port, _)| *port);
        let asked = match bootstrap {
            Some(port) => probe::kafka::registered_plain(port, BROKERS_TIMEOUT)
                .await
                .and_then(Registered::parse),
            None => Err("the local endpoint has no bootstrap port".to_owned()),
        };
        match asked {
            Err(why) => {
                tracing::warn!("cannot ask the cluster for its brokers: {why}");
                check.error = Some(why);
            }
            Ok(registered) => {
                let known: Vec<(i32, String)> = ep
                    .listening()
                    .into_iter()
                    .filter_map(|(role, _, upstream)| match (role, upstream) {
                        (Role::Broker(id), Some(u)) => Some((id, format!("{}:{}", u.host, u.port))),
                        _ => None,
                    })
                    .collect();
                check.not_serving = registered.not_serving_of(&known);
                let was = self.state.brokers.as_ref().map(|b| &b.not_serving);
                if was != Some(&check.not_serving) {
                    for line in &check.not_serving {
                        tracing::warn!("{line}");
                    }
                }
            }
        }
        if let Some((endpoint, brokers)) = ep.take_changes() {
            match refresh::write_endpoint(&self.paths.dir, endpoint, brokers) {
                Ok(what) => {
                    tracing::info!("the cluster's brokers changed: {what}");
                    check.last_change = Some(format!("{}: {what}", shiqi_ca::text::utc(now)));
                }
                Err(e) => {
                    // Written at the next look at the cluster.
                    ep.keep_changes();
                    let why = one_line(&e);
                    tracing::warn!("cannot record the endpoint's brokers yet: {why}");
                    check.error = Some(why);
                }
            }
        }
        self.state.endpoint = self.endpoint_records();
        self.state.brokers = Some(check);
        self.save();
    }

    /// A fresh look at the cluster, keeping the last change it made.
    fn new_check(&self, now: OffsetDateTime) -> BrokersCheck {
        BrokersCheck {
            checked: now,
            error: None,
            not_serving: Vec::new(),
            last_change: self
                .state
                .brokers
                .as_ref()
                .and_then(|b| b.last_change.clone()),
        }
    }

    /// The endpoint's ports as the state file lists them.
    fn endpoint_records(&self) -> Vec<ForwardRecord> {
        self.endpoint
            .as_ref()
            .map(|ep| endpoint_records(ep))
            .unwrap_or_default()
    }

    /// `DescribeCluster` through the tunnel's own listener of each broker in turn.
    async fn ask_registered(&self) -> Result<(Profile, Registered), String> {
        let profile = Profile::load(&self.paths.dir).map_err(|e| one_line(&e))?;
        let tls = ProfileTls::from_identity(&crate::profile::files::identity(&self.paths.dir));
        let mut last = "the profile forwards no broker".to_owned();
        for b in &profile.brokers {
            let forward = profile
                .forwards
                .iter()
                .find(|f| f.remote_host == b.host && f.remote_port == b.port)
                .filter(|f| self.listeners.contains_key(&f.local_port));
            let Some(f) = forward else { continue };
            let asked =
                probe::kafka::registered(f.local_port, b.host.as_str(), &tls, BROKERS_TIMEOUT)
                    .await
                    .and_then(Registered::parse);
            match asked {
                Ok(registered) => return Ok((profile, registered)),
                Err(why) => last = format!("broker {}: {why}", b.id),
            }
        }
        Err(last)
    }

    /// Rewrites the profile for `serving` when it changes anything; what changed, in words.
    fn follow(
        &self,
        profile: &Profile,
        serving: Vec<shiqi_ca::protocol::Broker>,
    ) -> Result<Option<String>, String> {
        if !refresh::plan_keeping(profile, serving.clone())
            .map_err(|e| one_line(&e))?
            .changed(profile)
        {
            return Ok(None);
        }
        // Planned again under the profile's lock, from profile.json as it is then (a renewal
        // may have replaced the certificate since `profile` was read); busy: the next look
        // tries again.
        let alias = self.targets.first.host_key_alias.as_deref();
        let (plan, written) = refresh::apply(&self.paths.dir, alias, Duration::ZERO, |fresh| {
            refresh::plan_keeping(fresh, serving)
        })
        .map_err(|e| one_line(&e))?;
        if !written {
            return Ok(None);
        }
        let what = format!(
            "{} brokers serving{}",
            plan.profile.brokers.len(),
            plan.forward_changes()
        );
        Ok(Some(what))
    }

    async fn stop(&mut self) {
        tracing::info!("stopping");
        if let Some(ep) = self.endpoint.take() {
            ep.stop();
        }
        for (_, (_, task)) in std::mem::take(&mut self.listeners) {
            task.abort();
        }
        if let Some(link) = self.tx.send_replace(None) {
            let bye = link.session.handle().disconnect(
                russh::Disconnect::ByApplication,
                "tunnel stopped",
                "en",
            );
            let _ = tokio::time::timeout(Duration::from_secs(2), bye).await;
        }
        if process::read_pid(&self.paths.pid) == Some(self.state.pid) {
            state::remove(&self.paths.pid);
            state::remove(&self.paths.state);
        }
        tracing::info!("stopped");
    }

    fn save(&self) {
        self.shared.live.state(&self.state);
        if let Err(e) = self.state.write(&self.paths.state) {
            tracing::warn!("cannot write the state file: {}", one_line(&e));
        }
    }
}

/// Returns when `notify` fires; never without one.
async fn notified(notify: Option<Arc<Notify>>) {
    match notify {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

/// Returns once the connection has closed (checked every [`CHECK_EVERY`], or at once when a
/// forward pokes `lost`).
async fn until_lost(link: Option<Link>, lost: Arc<Notify>) {
    let Some(link) = link else { return };
    while !link.session.handle().is_closed() {
        tokio::select! {
            () = lost.notified() => {}
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}

/// Serves one forward: bytes as they are, or (with the local endpoint) MySQL through the
/// endpoint, which does the TLS part of the login for clients that have no SSL settings.
fn serve_forward(
    listener: tokio::net::TcpListener,
    f: &ForwardRecord,
    shared: &Shared,
    endpoint: Option<&Arc<LocalEndpoint>>,
    mysql: Option<&MysqlFacts>,
) -> JoinHandle<()> {
    tracing::info!(
        "forwarding 127.0.0.1:{} -> {}:{} ({})",
        f.local_port,
        f.remote_host,
        f.remote_port,
        f.purpose
    );
    let is_mysql = mysql.is_some_and(|m| m.host == f.remote_host && m.port == f.remote_port);
    match endpoint {
        Some(ep) if is_mysql => {
            let upstream = Upstream {
                host: f.remote_host.clone(),
                port: f.remote_port,
            };
            tokio::spawn(endpoint::mysql::serve(listener, upstream, ep.clone()))
        }
        _ => tokio::spawn(forward::serve(listener, f.clone(), shared.clone())),
    }
}

/// The endpoint's ports as forward records: the bootstrap port (its target: the first broker
/// it tries), then one per broker.
fn endpoint_records(ep: &LocalEndpoint) -> Vec<ForwardRecord> {
    let listening = ep.listening();
    let first = listening.iter().find_map(|(_, _, u)| u.clone());
    listening
        .into_iter()
        .filter_map(|(role, port, upstream)| {
            let (upstream, purpose) = match role {
                Role::Bootstrap => (
                    first.clone()?,
                    "Kafka bootstrap, local endpoint (plaintext here; TLS to any broker)"
                        .to_owned(),
                ),
                Role::Broker(id) => {
                    let u = upstream?;
                    let purpose = format!(
                        "Kafka broker {id}, local endpoint (advertised {}:{})",
                        u.host, u.port
                    );
                    (u, purpose)
                }
            };
            Some(ForwardRecord {
                local_port: port,
                remote_host: upstream.host,
                remote_port: upstream.port,
                purpose,
            })
        })
        .collect()
}

fn log_connected(session: &Session, server: &str) {
    tracing::info!(
        %server,
        key = %session.auth().used,
        known_hosts = %session.host_key().file().display(),
        "connected"
    );
}

/// The error and its causes on one line, as the state file and the log carry it.
pub(crate) fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    line
}
