//! The tunnel: every advertised broker (from `profile.json`) and MySQL has a `LocalForward` in
//! `ssh_config`, and its local port answers. After bootstrap a Kafka client dials every broker
//! at its advertised address, so one missing forward breaks the client on that broker only
//! (seed: kafka-day-journal, the one-port tunnel that hung on broker 2); brokers that share a
//! port cannot each have one, which only the local endpoint gets around. With the local
//! endpoint the tunnel listens for Kafka itself (bootstrap and one port per broker, no
//! `LocalForward`): each of its ports must answer as Kafka and name only local ports. It serves
//! MySQL too (no `LocalForward` either): its port must be the tunnel's, not another server's;
//! what it greets with is `protocol`'s to judge.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::doctor::tunnel_config::TunnelConfig;
use crate::doctor::{CheckId, Context, Finding, Findings, Probes, Status, cert, server};
use crate::probe::speaks::{self as probe, Speaks};
use crate::probe::{Outcome, kafka};
use crate::profile::{Endpoint, files as pf};
use crate::text::Escaped;
use crate::tunnel::State;

/// How long a local port may take to accept.
const CONNECT: Duration = Duration::from_secs(2);
/// How long the local endpoint may take to answer through to a broker.
const ENDPOINT: Duration = Duration::from_secs(6);

/// One thing the tunnel must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Service {
    /// `broker 2`, `MySQL`, `Kafka bootstrap`.
    pub(crate) what: String,
    /// The advertised (or server-side) host; empty for an endpoint port that leads to no one
    /// known broker (the bootstrap port, a broker the profile does not list yet).
    pub(crate) host: String,
    /// The local port (for a forward, the same on both ends).
    pub(crate) port: u16,
    /// Whether it is Kafka.
    pub(crate) kafka: bool,
    /// A port the tunnel's local endpoint serves, with no `LocalForward`: plaintext Kafka, or
    /// plaintext MySQL whose TLS the endpoint does.
    pub(crate) endpoint: bool,
}

/// Everything the tunnel should serve: brokers by id (direct), or the local endpoint's
/// bootstrap then broker ports; then MySQL.
pub(crate) fn services(ctx: &Context) -> Vec<Service> {
    let Ok(p) = &ctx.profile else {
        return Vec::new();
    };
    let mut brokers = p.brokers.clone();
    brokers.sort_by_key(|b| b.id);
    let mut out: Vec<Service> = match &p.endpoint {
        Endpoint::Direct => brokers
            .iter()
            .map(|b| Service {
                what: format!("broker {}", b.id),
                host: b.host.to_string(),
                port: b.port.get(),
                kafka: true,
                endpoint: false,
            })
            .collect(),
        Endpoint::Local {
            bootstrap_port,
            brokers: local,
        } => {
            let mut local = local.clone();
            local.sort();
            let bootstrap = Service {
                what: "Kafka bootstrap".to_owned(),
                host: String::new(),
                port: *bootstrap_port,
                kafka: true,
                endpoint: true,
            };
            std::iter::once(bootstrap)
                .chain(local.iter().map(|l| {
                    Service {
                        what: format!("broker {}", l.id),
                        host: brokers
                            .iter()
                            .find(|b| b.id == l.id)
                            .map(|b| b.host.to_string())
                            .unwrap_or_default(),
                        port: l.port,
                        kafka: true,
                        endpoint: true,
                    }
                }))
                .collect()
        }
    };
    if let Some(m) = &p.mysql {
        out.push(Service {
            what: "MySQL".to_owned(),
            host: m.host.to_string(),
            port: m.port.get(),
            kafka: false,
            endpoint: !p.endpoint.is_direct(),
        });
    }
    out
}

/// `shiqi-connect tunnel up NAME`, when there is a profile.
fn tunnel_up(ctx: &Context) -> Option<String> {
    let name = ctx.profile.as_ref().ok()?.name.to_string();
    Some(format!("shiqi-connect tunnel up {name}"))
}

/// How to (re)start the tunnel.
pub(crate) fn start_hint(ctx: &Context) -> String {
    let openssh = format!("`{}`", ctx.tunnel_command());
    match tunnel_up(ctx) {
        // OpenSSH forwards ports; it cannot speak Kafka for the clients.
        Some(up) if ctx.local_endpoint() => {
            format!("start the tunnel: `{up}` (OpenSSH cannot serve the local endpoint)")
        }
        Some(up) => format!("start the tunnel: `{up}` (or with OpenSSH: {openssh})"),
        None => format!("start the tunnel: {openssh}"),
    }
}

fn restart_hint(ctx: &Context) -> String {
    let cfg = ctx
        .path(pf::SSH_CONFIG)
        .map(|p| ctx.show(&p))
        .unwrap_or_default();
    let host = ctx
        .profile
        .as_ref()
        .map(|p| p.tunnel_host.clone())
        .unwrap_or_default();
    format!(
        "then restart the tunnel: `ssh -F {cfg} -O exit {host}` and `{}`",
        ctx.tunnel_command()
    )
}

/// The profile's tunnel process as its state file says, when that process is alive: only it
/// serves the local endpoint (another program on 9092 would be a different Kafka).
pub(crate) fn running_tunnel(ctx: &Context) -> Option<State> {
    let state = State::read(&ctx.path(crate::tunnel::STATE)?)?;
    crate::os::process::alive(state.pid).then_some(state)
}

/// Ports that more than one direct service needs: one `LocalForward` reaches one of them only.
fn shared_ports(targets: &[Service]) -> BTreeMap<u16, Vec<&Service>> {
    let mut by_port: BTreeMap<u16, Vec<&Service>> = BTreeMap::new();
    for t in targets.iter().filter(|t| !t.endpoint) {
        by_port.entry(t.port).or_default().push(t);
    }
    by_port.retain(|_, ts| ts.len() > 1);
    by_port
}

/// [`kafka::endpoint`] on each port at once (each waits on a broker through the tunnel).
async fn probe_endpoint(ports: Vec<u16>) -> BTreeMap<u16, Outcome> {
    let mut probes = tokio::task::JoinSet::new();
    for port in ports {
        probes.spawn(async move { (port, kafka::endpoint(port, ENDPOINT).await) });
    }
    probes.join_all().await.into_iter().collect()
}

fn ports_of(list: &[&Service]) -> String {
    list.iter()
        .map(|t| format!("{} ({})", t.port, t.what))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `tunnel` needs from earlier checks: whether SSH or the certificate keeps the tunnel from
/// working, so that its line is the one failure.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Needs {
    /// The `ssh.*` lines.
    pub(crate) ssh: server::Ssh,
    /// The `cert.*` lines.
    pub(crate) cert: cert::Certificate,
}

impl Needs {
    /// The first SSH check that failed: the tunnel cannot start.
    fn ssh_blocker(&self) -> Option<CheckId> {
        self.ssh.blocker()
    }

    /// The first check that failed of those a running local endpoint needs to reach the
    /// brokers (the login, then the certificate).
    fn endpoint_blocker(&self) -> Option<CheckId> {
        self.ssh.login.or(self.cert.failed)
    }
}

/// What `tunnel` found about the local ports, for the checks after it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tunnel {
    /// Local ports that accept a connection.
    pub(crate) answering: BTreeSet<u16>,
    /// Local ports the tunnel should serve but does not (no forward, nothing listening, or an
    /// endpoint port that does not answer as Kafka).
    pub(crate) broken: BTreeSet<u16>,
}

impl Tunnel {
    /// Whether the tunnel carries `port`: something answers there, and it is the tunnel's.
    pub(crate) fn carries(&self, port: u16) -> bool {
        self.answering.contains(&port) && !self.broken.contains(&port)
    }
}

/// `tunnel`.
pub(crate) async fn check(
    ctx: &Context,
    st: &mut Findings,
    needs: Needs,
    probes: &mut Probes,
) -> Tunnel {
    let targets = services(ctx);
    // Every line says how Kafka goes, so a fix reads in the right mode.
    let mode = Mode(ctx.kafka_mode());
    let cfg = match (&ctx.profile, &ctx.ssh_config) {
        (Err(why), _) => {
            st.push(Finding::skip(CheckId::Tunnel, format!("no profile: {why}")));
            return Tunnel::default();
        }
        (Ok(_), Err(why)) => {
            st.push(unreadable_config(ctx, &mode, why));
            return Tunnel {
                answering: BTreeSet::new(),
                broken: targets.iter().map(|t| t.port).collect(),
            };
        }
        (Ok(_), Ok(c)) => c,
    };
    if targets.is_empty() {
        st.push(Finding::skip(
            CheckId::Tunnel,
            "the profile has no brokers and no MySQL",
        ));
        return Tunnel::default();
    }
    let survey = Survey::take(ctx, &targets).await;
    let sorted = Sorted::new(&targets, &survey, cfg, probes);
    st.push(with_login_item(
        ctx,
        verdict(ctx, cfg, &survey, &sorted, needs, &mode),
    ));
    Tunnel {
        answering: survey.listening,
        broken: sorted.broken,
    }
}

/// The `tunnel` line with what starts it at login (`tunnel up --at-login`): a note, and at
/// least a warning when the system's manager says that item failed.
fn with_login_item(ctx: &Context, mut line: Finding) -> Finding {
    let Some(item) = ctx
        .profile
        .as_ref()
        .ok()
        .and_then(|p| crate::tunnel::at_login(&ctx.home, &p.name))
    else {
        return line;
    };
    match &item.failing {
        None => line.note(format!(
            "started at login by the {} `{}`",
            item.kind, item.location
        )),
        Some(why) => {
            line = line.note(format!(
                "the {} `{}` that starts it at login is failing: {why}",
                item.kind, item.location
            ));
            if line.status == Status::Ok {
                line.status = Status::Warn;
                line.fix = Some(Escaped::from(format!(
                    "see `systemctl --user status {}` and `tunnel.log`; then `{}`",
                    crate::os::login_item::label(
                        ctx.profile
                            .as_ref()
                            .map(|p| p.name.as_str())
                            .unwrap_or_default()
                    ),
                    ctx.tunnel_command()
                )));
            }
            line
        }
    }
}

/// How Kafka goes, said first on every `tunnel` line.
struct Mode(Option<String>);

impl Mode {
    fn said(&self, found: String) -> String {
        match &self.0 {
            Some(m) => format!("{m}; {found}"),
            None => found,
        }
    }
}

/// The line when the tunnel's `ssh_config` cannot be read.
fn unreadable_config(ctx: &Context, mode: &Mode, why: &str) -> Finding {
    let missing = ctx.path(pf::SSH_CONFIG).is_some_and(|p| !p.exists());
    if missing {
        Finding::skip(
            CheckId::Tunnel,
            mode.said(format!("`{}` is missing (see `files`)", pf::SSH_CONFIG)),
        )
    } else {
        Finding::fail(
            CheckId::Tunnel,
            mode.said(why.to_owned()),
            format!("rebuild the profile: `{}`", ctx.setup_again()),
        )
    }
}

/// What the local ports do: which answer, whose they are, and what the endpoint's say.
struct Survey {
    /// Ports that accept a connection.
    listening: BTreeSet<u16>,
    /// The profile's running tunnel, as its state file says.
    tunnel: Option<State>,
    /// The endpoint's Kafka ports, and (local mode) MySQL among the tunnel's forwards.
    served: BTreeSet<u16>,
    /// What the endpoint's Kafka ports answered.
    outcomes: BTreeMap<u16, Outcome>,
}

impl Survey {
    async fn take(ctx: &Context, targets: &[Service]) -> Self {
        let listening: BTreeSet<u16> = targets
            .iter()
            .map(|t| t.port)
            .filter(|p| probe::connect("127.0.0.1", *p, CONNECT).is_ok())
            .collect();
        let tunnel = running_tunnel(ctx);
        let served: BTreeSet<u16> = tunnel
            .iter()
            .flat_map(|s| s.endpoint.iter().chain(&s.forwards).map(|f| f.local_port))
            .collect();
        let endpoint_ports: Vec<u16> = targets
            .iter()
            .filter(|t| {
                t.endpoint && t.kafka && listening.contains(&t.port) && served.contains(&t.port)
            })
            .map(|t| t.port)
            .collect();
        let outcomes = probe_endpoint(endpoint_ports).await;
        Self {
            listening,
            tunnel,
            served,
            outcomes,
        }
    }
}

/// The services sorted by what is wrong with them, or right.
#[derive(Default)]
struct Sorted<'a> {
    /// Direct services with no `LocalForward`.
    missing: Vec<&'a Service>,
    /// Direct services whose forward binds beyond loopback, and its line.
    wide: Vec<(&'a Service, usize)>,
    /// Ports where nothing listens.
    silent: Vec<&'a Service>,
    /// Endpoint ports held by something other than this profile's tunnel (Kafka or MySQL).
    foreign: Vec<&'a Service>,
    /// Endpoint Kafka ports that accept but do not answer as they should, and why.
    refused: Vec<(&'a Service, String)>,
    /// Ports that more than one direct service needs.
    shared: BTreeMap<u16, Vec<&'a Service>>,
    /// Forwards that answer, described.
    good: Vec<String>,
    /// Endpoint Kafka ports that answer as they should.
    good_endpoint: Vec<&'a Service>,
    /// The endpoint's MySQL port, described.
    good_mysql: Vec<String>,
    /// Ports the tunnel should serve but does not.
    broken: BTreeSet<u16>,
}

impl<'a> Sorted<'a> {
    fn new(targets: &'a [Service], s: &Survey, cfg: &TunnelConfig, probes: &mut Probes) -> Self {
        let mut out = Self {
            shared: shared_ports(targets),
            ..Self::default()
        };
        for t in targets {
            if t.endpoint {
                out.endpoint(t, s, probes);
            } else if out.shared.contains_key(&t.port) {
                out.broken.insert(t.port);
            } else {
                out.forward(t, s.listening.contains(&t.port), cfg);
            }
        }
        out
    }

    /// A port the local endpoint serves.
    fn endpoint(&mut self, t: &'a Service, s: &Survey, probes: &mut Probes) {
        let ours = s.served.contains(&t.port);
        match s.outcomes.get(&t.port) {
            _ if !s.listening.contains(&t.port) => self.silent.push(t),
            _ if !ours => self.foreign.push(t),
            // The tunnel's own port: its greeting is `protocol`'s to judge.
            _ if !t.kafka => {
                self.good_mysql.push(format!(
                    "the endpoint serves MySQL on {} (TLS with the certificate to `{}`)",
                    t.port,
                    shiqi_render::hostport(&t.host, t.port)
                ));
                return;
            }
            Some(o) if o.ok => {
                self.good_endpoint.push(t);
                probes.insert("127.0.0.1", t.port, Speaks::PlainKafka);
                return;
            }
            o => {
                let why = o.map(|o| o.detail.to_string()).unwrap_or_default();
                self.refused.push((t, why));
            }
        }
        self.broken.insert(t.port);
    }

    /// A port with a `LocalForward` of its own (direct mode, or MySQL).
    fn forward(&mut self, t: &'a Service, answers: bool, cfg: &TunnelConfig) {
        let forward = cfg.forward(t.port);
        match forward {
            None => self.missing.push(t),
            Some(f) if !f.binds_loopback() => self.wide.push((t, f.line)),
            Some(_) if !answers => self.silent.push(t),
            Some(f) => self.good.push(format!(
                "{} ({}, to `{}:{}`)",
                t.port, t.what, f.host, f.host_port
            )),
        }
        if forward.is_none() || !answers {
            self.broken.insert(t.port);
        }
    }

    /// Nothing wrong but (maybe) silent or refusing ports.
    fn only_down(&self, cfg: &TunnelConfig) -> bool {
        self.missing.is_empty()
            && self.wide.is_empty()
            && self.foreign.is_empty()
            && self.shared.is_empty()
            && cfg.problems.is_empty()
    }

    /// Whether any port of the tunnel answers as it should.
    fn any_good(&self) -> bool {
        !self.good.is_empty() || !self.good_endpoint.is_empty() || !self.good_mysql.is_empty()
    }
}

/// The `tunnel` line.
fn verdict(
    ctx: &Context,
    cfg: &TunnelConfig,
    survey: &Survey,
    s: &Sorted,
    needs: Needs,
    mode: &Mode,
) -> Finding {
    let only_down = s.only_down(cfg);
    if only_down && s.silent.is_empty() && s.refused.is_empty() {
        return Finding::ok(CheckId::Tunnel, mode.said(all_good(s)));
    }
    if only_down && let Some(why) = blocked(s, needs) {
        return Finding::skip(CheckId::Tunnel, mode.said(why));
    }
    let mut lines = Lines::default();
    lines.shared(ctx, &s.shared);
    lines.missing(ctx, cfg, &s.missing);
    lines.wide(ctx, cfg, &s.wide);
    if !s.silent.is_empty() {
        lines.push(
            format!(
                "nothing listens on 127.0.0.1 port {}: the tunnel is not running",
                ports_of(&s.silent)
            ),
            start_hint(ctx),
        );
    }
    lines.foreign(ctx, &s.foreign);
    lines.refused(ctx, survey.tunnel.as_ref(), &s.refused);
    let shown = ctx.show(&cfg.path);
    lines
        .found
        .extend(cfg.problems.iter().map(|p| format!("`{shown}` {p}")));
    if !cfg.problems.is_empty() {
        lines
            .fixes
            .push(format!("rebuild the profile: `{}`", ctx.setup_again()));
    }
    Finding::fail(
        CheckId::Tunnel,
        mode.said(lines.found.join("; ")),
        lines.fixes.join("; "),
    )
}

/// The `ok` line: what answers, and how.
fn all_good(s: &Sorted) -> String {
    let mut found = Vec::new();
    if !s.good_endpoint.is_empty() {
        found.push(format!(
            "the endpoint answers ApiVersions on {}, and its Metadata names only local ports",
            ports_of(&s.good_endpoint)
        ));
    }
    let serves_endpoint = !s.good_endpoint.is_empty() || !s.good_mysql.is_empty();
    found.extend(s.good_mysql.iter().cloned());
    if let Some(why) = serves_endpoint
        .then(crate::os::port_owner::peer_check_unavailable)
        .flatten()
    {
        found.push(format!(
            "it serves every account of this machine ({why}; on a shared machine use \
             `--endpoint direct`)"
        ));
    }
    if !s.good.is_empty() {
        found.push(format!(
            "{} forwards answer on 127.0.0.1: {}",
            s.good.len(),
            s.good.join(", ")
        ));
    }
    found.join("; ")
}

/// Nothing listens (or the endpoint cannot get through) and SSH or the certificate fails: the
/// tunnel cannot work yet, and that line already names the fault. The `skip` reason, if so.
fn blocked(s: &Sorted, needs: Needs) -> Option<String> {
    let ssh_blocker = needs.ssh_blocker();
    let endpoint_blocker = needs.endpoint_blocker();
    let silent_blocked = s.silent.is_empty() || (!s.any_good() && ssh_blocker.is_some());
    let refused_blocked = s.refused.is_empty() || endpoint_blocker.is_some();
    if !(silent_blocked && refused_blocked) {
        return None;
    }
    let id = if s.silent.is_empty() {
        endpoint_blocker
    } else {
        ssh_blocker
    }?;
    Some(if s.refused.is_empty() {
        format!(
            "nothing listens, and the tunnel cannot start until `{}` passes",
            id.as_str()
        )
    } else {
        let ports: Vec<&Service> = s.refused.iter().map(|(t, _)| *t).collect();
        format!(
            "the local endpoint listens on {} but cannot get through to the brokers until `{}` \
             passes",
            ports_of(&ports),
            id.as_str()
        )
    })
}

/// The `fail` line's findings and fixes, in order.
#[derive(Default)]
struct Lines {
    found: Vec<String>,
    fixes: Vec<String>,
}

impl Lines {
    fn push(&mut self, found: String, fix: String) {
        self.found.push(found);
        self.fixes.push(fix);
    }

    fn shared(&mut self, ctx: &Context, shared: &BTreeMap<u16, Vec<&Service>>) {
        if shared.is_empty() {
            return;
        }
        for (port, ts) in shared {
            let who: Vec<&str> = ts.iter().map(|t| t.what.as_str()).collect();
            let at: Vec<String> = ts
                .iter()
                .map(|t| format!("`{}`", shiqi_render::hostport(&t.host, t.port)))
                .collect();
            self.found.push(format!(
                "{} all need port {port} ({}): one local port forwards to one of them only, so \
                 a direct Kafka client cannot reach the others",
                who.join(", "),
                at.join(", ")
            ));
        }
        self.fixes.push(format!(
            "{} (the tunnel then speaks Kafka for the clients, with a local port of its own for \
             each broker, whatever the brokers advertise)",
            ctx.use_local_endpoint()
        ));
    }

    fn missing(&mut self, ctx: &Context, cfg: &TunnelConfig, missing: &[&Service]) {
        if missing.is_empty() {
            return;
        }
        let shown = ctx.show(&cfg.path);
        let list: Vec<String> = missing
            .iter()
            .map(|t| format!("{} (`{}:{}`)", t.what, t.host, t.port))
            .collect();
        let lines: Vec<String> = missing
            .iter()
            .map(|t| {
                let host = if t.host.contains(':') {
                    format!("[{}]", t.host)
                } else {
                    t.host.clone()
                };
                format!("`LocalForward 127.0.0.1:{} {host}:{}`", t.port, t.port)
            })
            .collect();
        self.push(
            format!(
                "`{shown}` has no `LocalForward` for {}: a Kafka client that reaches the cluster \
                 still fails on that broker, at its advertised address",
                list.join(", ")
            ),
            format!(
                "add {} to the `Host` block of `{shown}` (or rebuild the profile: `{}`), {}",
                lines.join(" and "),
                ctx.setup_again(),
                restart_hint(ctx)
            ),
        );
    }

    fn wide(&mut self, ctx: &Context, cfg: &TunnelConfig, wide: &[(&Service, usize)]) {
        if wide.is_empty() {
            return;
        }
        let list: Vec<String> = wide
            .iter()
            .map(|(t, line)| format!("{} (line {line})", t.what))
            .collect();
        self.push(
            format!(
                "forwards bind beyond loopback for {}: other machines could use your \
                 certificate's access",
                list.join(", ")
            ),
            format!(
                "bind them to `127.0.0.1:PORT` in `{}`, {}",
                ctx.show(&cfg.path),
                restart_hint(ctx)
            ),
        );
    }

    /// Endpoint ports something else holds: Kafka's, then MySQL's, after a line naming other
    /// accounts among the holders, which pose as the endpoint to this profile's clients
    /// (issue 42).
    fn foreign(&mut self, ctx: &Context, foreign: &[&Service]) {
        let mut squatters = Vec::new();
        let held: Vec<(bool, String)> = foreign
            .iter()
            .map(|t| {
                let shown = match crate::tunnel::owner_of(t.port) {
                    Some(owner) => {
                        if let Some(who) = owner.other_account() {
                            squatters.push(format!("{} ({who})", t.port));
                        }
                        format!("{} ({}; held by {owner})", t.port, t.what)
                    }
                    None => format!("{} ({})", t.port, t.what),
                };
                (t.kafka, shown)
            })
            .collect();
        if !squatters.is_empty() {
            self.found.push(format!(
                "another account holds the local endpoint's port {}: to this profile's clients \
                 it is the endpoint (it gets the records they produce, can feed them its own, \
                 and as MySQL can ask them for local files)",
                squatters.join(", ")
            ));
        }
        let name = ctx
            .profile
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_default();
        for kafka in [true, false] {
            let list: Vec<&str> = held
                .iter()
                .filter(|(k, _)| *k == kafka)
                .map(|(_, s)| s.as_str())
                .collect();
            if list.is_empty() {
                continue;
            }
            // On MySQL's port, most often a MySQL server of this machine's own.
            let (clients, instead, fix) = if kafka {
                (
                    "Kafka clients",
                    "the cluster",
                    format!(
                        "stop it, or move the endpoint to free ports: `shiqi-connect tunnel up \
                         {name} --endpoint-port PORT`"
                    ),
                )
            } else {
                (
                    "mysql clients",
                    "the server's MySQL",
                    format!(
                        "stop it (the endpoint serves MySQL on the server's own port), then `{}`",
                        tunnel_up(ctx).unwrap_or_default()
                    ),
                )
            };
            self.push(
                format!(
                    "something other than this profile's tunnel listens on 127.0.0.1 port {}: \
                     the profile's {clients} would talk to it instead of {instead}",
                    list.join(", ")
                ),
                fix,
            );
        }
    }

    fn refused(&mut self, ctx: &Context, tunnel: Option<&State>, refused: &[(&Service, String)]) {
        if refused.is_empty() {
            return;
        }
        let list: Vec<String> = refused
            .iter()
            .map(|(t, why)| format!("{} ({}): {why}", t.port, t.what))
            .collect();
        let last = tunnel
            .and_then(|s| s.error.as_deref())
            .map(|e| format!(" (the tunnel's last error: {e})"))
            .unwrap_or_default();
        self.push(
            format!(
                "the local endpoint accepts but does not answer as Kafka on 127.0.0.1 port \
                 {}{last}",
                list.join("; ")
            ),
            format!(
                "`{}` says what the endpoint met on its way to the brokers (a broker that \
                 refused the certificate or whose certificate does not name it, a broker that \
                 is down); then restart it: `{}`",
                ctx.tunnel_log(),
                tunnel_up(ctx).unwrap_or_default()
            ),
        );
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::doctor::testing::{
        FakeMysql, context as load, fake_endpoint, fake_mysql, local_mysql_profile, local_profile,
        running_tunnel, running_tunnel_with_mysql,
    };
    use crate::doctor::{Inputs, Status};
    use crate::profile::tests::sample;

    fn free_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }

    /// A profile with brokers 1 and 2 on `ports`, no MySQL, and `forwards` in its ssh_config.
    fn context(dir: &std::path::Path, ports: [u16; 2], forwards: &[u16]) -> Context {
        let mut p = sample();
        p.mysql = None;
        for (b, port) in p.brokers.iter_mut().zip(ports) {
            b.port = shiqi_ca::Port::try_from(port).expect("port");
        }
        p.brokers.truncate(2);
        p.write_fixture(dir);
        let mut cfg = String::from("Host shiqi-tunnel\n    HostName 10.231.0.1\n");
        for f in forwards {
            cfg.push_str(&format!("    LocalForward 127.0.0.1:{f} localhost:{f}\n"));
        }
        crate::fsutil::write_private(&dir.join(pf::SSH_CONFIG), cfg.as_bytes())
            .expect("ssh_config");
        Context::load(&Inputs {
            home: dir.to_path_buf(),
            profile_dir: Some(dir.to_path_buf()),
            configs: Vec::new(),
            bootstrap: Vec::new(),
        })
    }

    #[tokio::test]
    // Seed: kafka-day-journal, one-port tunnel hangs on broker 2
    async fn a_missing_forward_names_the_broker_and_the_line_to_add() {
        let dir = tempfile::tempdir().expect("tempdir");
        let up = TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = up.local_addr().expect("addr").port();
        let b = free_port();
        let ctx = context(dir.path(), [a, b], &[a]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found
                .contains(&format!("no `LocalForward` for broker 2 (`localhost:{b}`)")),
            "{c:?}"
        );
        let fix = c.fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains(&format!("`LocalForward 127.0.0.1:{b} localhost:{b}`")),
            "{fix}"
        );
        assert!(tunnel.answering.contains(&a) && tunnel.broken.contains(&b));
        assert!(!tunnel.broken.contains(&a));
    }

    #[tokio::test]
    async fn nothing_listening_is_a_tunnel_that_is_not_running_unless_ssh_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (free_port(), free_port());
        let ctx = context(dir.path(), [a, b], &[a, b]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        check(&ctx, &mut st, Needs::default(), &mut probes).await;
        assert_eq!(st.checks[0].status, Status::Fail);
        assert!(st.checks[0].found.contains("the tunnel is not running"));
        assert!(
            st.checks[0]
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("start the tunnel"))
        );

        let mut st = Findings::default();
        st.push(Finding::fail(CheckId::SshLogin, "refused", "add the key"));
        let needs = Needs {
            ssh: server::Ssh {
                login: Some(CheckId::SshLogin),
                config_key: false,
            },
            ..Needs::default()
        };
        let tunnel = check(&ctx, &mut st, needs, &mut Probes::default()).await;
        assert_eq!(st.checks[1].status, Status::Skip, "{:?}", st.checks[1]);
        assert!(st.checks[1].found.contains("`ssh.login`"));
        assert!(tunnel.broken.contains(&a));
    }

    #[tokio::test]
    async fn direct_mode_is_named_on_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let up = [
            TcpListener::bind("127.0.0.1:0").expect("bind"),
            TcpListener::bind("127.0.0.1:0").expect("bind"),
        ];
        let [a, b] = up.each_ref().map(|l| l.local_addr().expect("addr").port());
        let ctx = context(dir.path(), [a, b], &[a, b]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(
            c.found.starts_with(
                "Kafka: direct (clients do TLS to each broker's forward); 2 forwards answer on \
                 127.0.0.1: "
            ),
            "{c:?}"
        );
    }

    #[tokio::test]
    async fn brokers_on_one_port_need_the_local_endpoint() {
        // The multi-host shape: every broker on 9093 of its own name. One forward reaches one.
        let dir = tempfile::tempdir().expect("tempdir");
        let up = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = up.local_addr().expect("addr").port();
        let mut p = sample();
        p.mysql = None;
        for b in &mut p.brokers {
            b.host = format!("broker-{}.kafka.invalid", b.id)
                .parse()
                .expect("host");
            b.port = shiqi_ca::Port::try_from(port).expect("port");
        }
        let ctx = load(dir.path(), &p, &[(port, "broker-1.kafka.invalid")], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert_eq!(
            c.found.as_str(),
            format!(
                "Kafka: direct (clients do TLS to each broker's forward); broker 1, broker 2, \
                 broker 3 all need port {port} (`broker-1.kafka.invalid:{port}`, \
                 `broker-2.kafka.invalid:{port}`, `broker-3.kafka.invalid:{port}`): one local \
                 port forwards to one of them only, so a direct Kafka client cannot reach the \
                 others"
            )
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "use the local endpoint: `shiqi-connect tunnel up saige --endpoint local` (the \
                 tunnel then speaks Kafka for the clients, with a local port of its own for \
                 each broker, whatever the brokers advertise)"
            )
        );
        assert!(tunnel.broken.contains(&port));
    }

    /// What the `tunnel` line adds where the OS cannot say who connects (Windows, when its
    /// lookup fails).
    fn peer_note() -> String {
        crate::os::port_owner::peer_check_unavailable()
            .map(|why| {
                format!(
                    "; it serves every account of this machine ({why}; on a shared machine use \
                     `--endpoint direct`)"
                )
            })
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn local_mode_checks_the_endpoint_and_expects_no_kafka_forwards() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(3, "127.0.0.1");
        running_tunnel(dir.path(), &ports, None);
        let ctx = load(dir.path(), &local_profile(&ports), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert_eq!(
            c.found.as_str(),
            format!(
                "Kafka: local endpoint on 127.0.0.1:{} (the tunnel does the TLS to each broker); \
                 the endpoint answers ApiVersions on {} (Kafka bootstrap), {} (broker 1), {} \
                 (broker 2), and its Metadata names only local ports{}",
                ports[0],
                ports[0],
                ports[1],
                ports[2],
                peer_note()
            )
        );
        assert!(tunnel.broken.is_empty());
        for p in &ports {
            assert_eq!(probes.get("127.0.0.1", *p), Some(&Speaks::PlainKafka));
        }
    }

    #[tokio::test]
    async fn local_mode_expects_the_tunnel_to_serve_mysql_without_a_forward() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "127.0.0.1");
        let db = fake_mysql(FakeMysql::Plain);
        running_tunnel_with_mysql(dir.path(), &ports, db);
        let ctx = load(dir.path(), &local_mysql_profile(&ports, db), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(
            c.found.ends_with(&format!(
                "; the endpoint serves MySQL on {db} (TLS with the certificate to \
                 `db.shiqi.invalid:{db}`){}",
                peer_note()
            )),
            "{c:?}"
        );
        assert!(tunnel.broken.is_empty() && tunnel.answering.contains(&db));

        // Another MySQL on the port (the tunnel's state does not list it): not the profile's.
        running_tunnel(dir.path(), &ports, None);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found.contains(&format!(
                "something other than this profile's tunnel listens on 127.0.0.1 port {db} \
                 (MySQL"
            )) && c.found.ends_with(
                "the profile's mysql clients would talk to it instead of the server's MySQL"
            ),
            "{c:?}"
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "stop it (the endpoint serves MySQL on the server's own port), then \
                 `shiqi-connect tunnel up saige`"
            )
        );
        assert!(tunnel.broken.contains(&db));
    }

    #[tokio::test]
    async fn a_local_endpoint_that_is_not_running_is_started_with_tunnel_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = [free_port(), free_port(), free_port()];
        let ctx = load(dir.path(), &local_profile(&ports), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found.ends_with(&format!(
                "nothing listens on 127.0.0.1 port {} (Kafka bootstrap), {} (broker 1), {} \
                 (broker 2): the tunnel is not running",
                ports[0], ports[1], ports[2]
            )),
            "{c:?}"
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "start the tunnel: `shiqi-connect tunnel up saige` (OpenSSH cannot serve the \
                 local endpoint)"
            )
        );
        assert!(ports.iter().all(|p| tunnel.broken.contains(p)));

        // The tunnel cannot start while SSH fails: that line is the one failure.
        let mut st = Findings::default();
        st.push(Finding::fail(CheckId::SshReach, "timeout", "check the VPN"));
        let needs = Needs {
            ssh: server::Ssh {
                login: Some(CheckId::SshReach),
                config_key: false,
            },
            ..Needs::default()
        };
        check(&ctx, &mut st, needs, &mut Probes::default()).await;
        assert_eq!(st.checks[1].status, Status::Skip, "{:?}", st.checks[1]);
        assert!(st.checks[1].found.contains("until `ssh.reach` passes"));
    }

    #[tokio::test]
    async fn another_kafka_on_the_endpoint_port_is_not_the_tunnel() {
        // A local Kafka on 9092 answers like the endpoint; the state file says whose port it is.
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "127.0.0.1");
        let ctx = load(dir.path(), &local_profile(&ports), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found.contains(&format!(
                "something other than this profile's tunnel listens on 127.0.0.1 port {} (Kafka \
                 bootstrap",
                ports[0]
            )),
            "{c:?}"
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "stop it, or move the endpoint to free ports: `shiqi-connect tunnel up saige \
                 --endpoint-port PORT`"
            )
        );
        assert!(tunnel.broken.contains(&ports[0]));
    }

    #[tokio::test]
    async fn an_endpoint_that_names_brokers_outside_fails_unless_the_certificate_did() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "broker-1.kafka.invalid");
        running_tunnel(dir.path(), &ports, Some("reconnecting"));
        let ctx = load(dir.path(), &local_profile(&ports), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = check(&ctx, &mut st, Needs::default(), &mut probes).await;
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found.contains(&format!(
                "the local endpoint accepts but does not answer as Kafka on 127.0.0.1 port {} \
                 (Kafka bootstrap): Metadata names addresses outside the endpoint: broker 1 at \
                 broker-1.kafka.invalid:{}",
                ports[0], ports[1]
            )),
            "{c:?}"
        );
        assert!(
            c.found.ends_with("(the tunnel's last error: reconnecting)"),
            "{c:?}"
        );
        let fix = c.fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains("tunnel.log` says what the endpoint met on its way to the brokers"),
            "{fix}"
        );
        assert!(
            fix.ends_with("restart it: `shiqi-connect tunnel up saige`"),
            "{fix}"
        );
        assert!(ports.iter().all(|p| tunnel.broken.contains(p)));

        // An expired certificate is why: `cert.valid` is the one failure.
        let mut st = Findings::default();
        st.push(Finding::fail(CheckId::CertValid, "expired", "rotate"));
        let needs = Needs {
            cert: cert::Certificate {
                failed: Some(CheckId::CertValid),
                unreadable: false,
            },
            ..Needs::default()
        };
        check(&ctx, &mut st, needs, &mut Probes::default()).await;
        assert_eq!(st.checks[1].status, Status::Skip, "{:?}", st.checks[1]);
        assert!(
            st.checks[1]
                .found
                .ends_with("cannot get through to the brokers until `cert.valid` passes"),
            "{:?}",
            st.checks[1]
        );
    }
}
