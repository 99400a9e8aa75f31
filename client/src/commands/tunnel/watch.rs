//! `tunnel status NAME --watch`: the running tunnel's figures, asked once a second over its
//! control channel (`os::control::ask_live`; the daemon counts, nothing here parses its log):
//! per port the connections and bytes/s each way, the local endpoint's clients with their
//! requests, the brokers and their last change, the certificate and its renewal, the SSH
//! connection's count and reconnects, then the last lines of `tunnel.log`.
//!
//! On a terminal the frame is redrawn in place on the alternate screen, which Ctrl-C leaves;
//! piped, one line per second; with `--json`, the daemon's answer, one object per line. It
//! follows the tunnel through restarts: a stopped tunnel is waited for, not an error. Every
//! string that came from elsewhere (broker names, errors, log lines) goes through [`Escaped`].

use std::io::{IsTerminal as _, Read as _, Seek as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use time::OffsetDateTime;

use crate::profile::{Certificate, ForwardRecord, Profile};
use crate::text::Escaped;
use crate::tunnel::{self, PortFigures, Snapshot};

use super::{Settings, arrow};

/// How often the tunnel is asked.
const EVERY: Duration = Duration::from_secs(1);
/// Lines of `tunnel.log` shown under the figures.
const LOG_LINES: usize = 6;
/// The most of `tunnel.log`'s end read for them.
const LOG_TAIL: u64 = 16 * 1024;

/// What one look at the tunnel found.
enum Seen {
    /// No tunnel of ours runs for the profile.
    NotRunning,
    /// It is still logging in (its channel comes up once it has).
    Starting { pid: u32 },
    /// It runs but did not answer (an older build, or stuck).
    Silent { pid: u32, why: String },
    /// Its figures.
    Live { pid: u32, snap: Box<Snapshot> },
}

/// Watches until Ctrl-C, until stdout is closed, or after `count` looks; exit 0.
///
/// # Errors
/// When the profile cannot be read.
pub(crate) async fn watch(s: &Settings, count: Option<u64>) -> anyhow::Result<ExitCode> {
    // A missing or unreadable profile is the user's error, said once, not redrawn forever.
    Profile::load(&s.paths.dir)?;
    let mode = if s.json {
        Mode::Json
    } else if std::io::stdout().is_terminal() {
        Mode::Screen
    } else {
        Mode::Lines
    };
    // `--count`: the last frame stays on the screen, as `top -n` leaves it.
    let _screen = (mode == Mode::Screen && count.is_none()).then(AltScreen::enter);
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut prev: Option<(u32, Snapshot)> = None;
    let mut last_plain = String::new();
    let mut cert = Cert::default();
    for _ in 0..count.unwrap_or(u64::MAX) {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut stop => break,
        }
        let seen = tokio::select! {
            seen = look(s) => seen,
            _ = &mut stop => break,
        };
        let now = OffsetDateTime::now_utc();
        let out = match (&seen, mode) {
            (seen, Mode::Json) => json_line(s, seen),
            (Seen::Live { pid, snap }, Mode::Screen) => {
                let earlier = prev.as_ref().filter(|(p, _)| p == pid).map(|(_, s)| s);
                let view = View {
                    name: s.name.as_str(),
                    pid: *pid,
                    snap,
                    prev: earlier,
                    cert: cert.of(s, snap),
                    now,
                };
                frame(&screen_lines(&view, &log_tail(&s.paths.log)))
            }
            (Seen::Live { pid, snap }, Mode::Lines) => {
                let earlier = prev.as_ref().filter(|(p, _)| p == pid).map(|(_, s)| s);
                format!("{}\n", plain_line(snap, earlier, now))
            }
            (other, Mode::Screen) => frame(&[absent(s, other)]),
            (other, Mode::Lines) => {
                // Said once while it lasts, not every second.
                let line = absent(s, other);
                if line == last_plain {
                    String::new()
                } else {
                    last_plain.clone_from(&line);
                    format!("{} {line}\n", clock(now))
                }
            }
        };
        if let Seen::Live { .. } = seen {
            last_plain.clear();
        }
        if !write_out(&out) {
            break;
        }
        prev = match seen {
            Seen::Live { pid, snap } => Some((pid, *snap)),
            _ => None,
        };
    }
    Ok(ExitCode::SUCCESS)
}

/// The profile's certificate, read again only when the tunnel says it renewed it (its
/// `not_after` changed), not once a second.
#[derive(Default)]
struct Cert {
    read_for: Option<Option<OffsetDateTime>>,
    certificate: Option<Certificate>,
}

impl Cert {
    fn of(&mut self, s: &Settings, snap: &Snapshot) -> Option<&Certificate> {
        let renewed = snap
            .state
            .as_ref()
            .and_then(|st| st.renewal.as_ref())
            .map(|r| r.not_after);
        if self.read_for != Some(renewed) {
            self.certificate = Profile::load(&s.paths.dir).ok().map(|p| p.certificate);
            self.read_for = Some(renewed);
        }
        self.certificate.as_ref()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Screen,
    Lines,
    Json,
}

/// Asks the profile's running tunnel for its figures.
async fn look(s: &Settings) -> Seen {
    let Some(pid) = tunnel::running(&s.paths.pid, &s.root, &s.name) else {
        return Seen::NotRunning;
    };
    match crate::os::control::ask_live(pid, &s.paths.live).await {
        Err(_)
            if tunnel::State::read(&s.paths.state)
                .is_some_and(|st| st.pid == pid && st.phase == tunnel::Phase::Starting) =>
        {
            Seen::Starting { pid }
        }
        Err(e) => Seen::Silent {
            pid,
            why: e.to_string(),
        },
        Ok(bytes) => match serde_json::from_slice::<Snapshot>(&bytes) {
            Ok(snap) => Seen::Live {
                pid,
                snap: Box::new(snap),
            },
            Err(e) => Seen::Silent {
                pid,
                why: format!("its answer does not parse ({e})"),
            },
        },
    }
}

/// The one line shown while there are no figures.
fn absent(s: &Settings, seen: &Seen) -> String {
    let name = s.name.as_str();
    match seen {
        Seen::NotRunning | Seen::Live { .. } => format!(
            "tunnel `{name}`: not running; waiting for it (start it: `shiqi-connect tunnel up \
             {name}`)"
        ),
        Seen::Starting { pid } => {
            format!("tunnel `{name}` (pid {pid}) is starting: logging in to the server")
        }
        Seen::Silent { pid, why } => format!(
            "tunnel `{name}` (pid {pid}) does not answer: {}; a tunnel started by an older \
             build has no live figures (`shiqi-connect tunnel down {name}`, then `tunnel up \
             {name}`)",
            Escaped::new(why)
        ),
    }
}

/// One JSON object: the daemon's answer (its text from elsewhere escaped, as every `--json` of
/// ours holds it) with the profile and pid, or why there is none.
fn json_line(s: &Settings, seen: &Seen) -> String {
    let (pid, snap, why) = match seen {
        Seen::NotRunning => (None, None, None),
        Seen::Starting { pid } => (Some(*pid), None, Some("starting".to_owned())),
        Seen::Silent { pid, why } => (Some(*pid), None, Some(Escaped::new(why).to_string())),
        Seen::Live { pid, snap } => (Some(*pid), Some(escaped(snap)), None),
    };
    let value = serde_json::json!({
        "profile": s.name.as_str(),
        "running": pid.is_some(),
        "pid": pid,
        "live": snap,
        "error": why,
    });
    format!("{value}\n")
}

/// `snap` with every string that came from the network or another process escaped.
fn escaped(snap: &Snapshot) -> Snapshot {
    let e = |t: &str| Escaped::new(t).to_string();
    let o = |t: &Option<String>| t.as_deref().map(e);
    let mut snap = snap.clone();
    for c in &mut snap.clients {
        c.peer = e(&c.peer);
        c.broker = o(&c.broker);
    }
    if let Some(st) = &mut snap.state {
        st.server = e(&st.server);
        st.error = o(&st.error);
        st.hint = o(&st.hint);
        st.problems = st.problems.iter().map(|p| e(p)).collect();
        if let Some(b) = &mut st.brokers {
            b.error = o(&b.error);
            b.not_serving = b.not_serving.iter().map(|l| e(l)).collect();
            b.last_change = o(&b.last_change);
        }
        if let Some(r) = &mut st.renewal {
            r.last = o(&r.last);
            r.error = o(&r.error);
            r.hint = o(&r.hint);
        }
        if let Some(r) = &mut st.refused {
            r.last = o(&r.last);
        }
    }
    snap
}

/// Writes to stdout; `false` once nobody reads it.
fn write_out(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

/// The alternate screen with the cursor hidden, left (and the cursor shown) when dropped.
struct AltScreen;

impl AltScreen {
    fn enter() -> Self {
        write_out("\x1b[?1049h\x1b[?25l");
        Self
    }
}

impl Drop for AltScreen {
    fn drop(&mut self) {
        write_out("\x1b[?25h\x1b[?1049l");
    }
}

/// `lines` drawn from the top-left corner, each cut to the terminal's width, the rest of the
/// screen cleared.
fn frame(lines: &[String]) -> String {
    let (rows, cols) = console::Term::stdout().size();
    let mut out = String::from("\x1b[H");
    for line in lines.iter().take(usize::from(rows.max(2)) - 1) {
        out.push_str(&console::truncate_str(line, usize::from(cols), "…"));
        out.push_str("\x1b[K\n");
    }
    out.push_str("\x1b[J");
    out
}

/// Everything one frame shows.
struct View<'a> {
    name: &'a str,
    pid: u32,
    snap: &'a Snapshot,
    /// The answer a second earlier, from the same tunnel: the rates are the differences.
    prev: Option<&'a Snapshot>,
    cert: Option<&'a Certificate>,
    now: OffsetDateTime,
}

impl View<'_> {
    /// Bytes per second between the previous answer and this one.
    fn rate(&self, now: u64, before: impl Fn(&Snapshot) -> Option<u64>) -> Option<f64> {
        rate(self.snap, self.prev, now, before)
    }
}

/// Bytes per second from `prev` to `snap` of a count that is `now` in `snap` and `before(prev)`
/// in `prev`; `None` without an earlier answer of the same tunnel to compare.
fn rate(
    snap: &Snapshot,
    prev: Option<&Snapshot>,
    now: u64,
    before: impl Fn(&Snapshot) -> Option<u64>,
) -> Option<f64> {
    let prev = prev?;
    let ms = snap.uptime_ms.checked_sub(prev.uptime_ms)?;
    let was = before(prev)?;
    (ms > 0).then(|| now.saturating_sub(was) as f64 * 1000.0 / ms as f64)
}

/// The full frame: the tunnel, the certificate, the brokers, every port, the endpoint's
/// clients, the log's last lines.
fn screen_lines(v: &View<'_>, log: &[Escaped]) -> Vec<String> {
    let st = v.snap.state.as_ref();
    let mut lines = Vec::new();
    let mut head = format!("tunnel `{}` · pid {}", v.name, v.pid);
    if let Some(st) = st {
        head.push_str(&format!(
            " · {} since {} · {}",
            st.phase,
            clock(st.since),
            Escaped::new(&st.server)
        ));
    }
    head.push_str(&format!(
        " · SSH connection {} · {} reconnect{}",
        v.snap.connections,
        v.snap.reconnects,
        if v.snap.reconnects == 1 { "" } else { "s" }
    ));
    lines.push(head);
    if let Some(error) = st.and_then(|st| st.error.as_deref()) {
        lines.push(format!("  last error: {}", Escaped::new(error)));
    }
    lines.push(certificate_line(v));
    if let Some(r) = st.and_then(|st| st.renewal.as_ref())
        && let Some(error) = &r.error
    {
        lines.push(format!(
            "  renewal failing ({} attempt{}): {}",
            r.attempts,
            if r.attempts == 1 { "" } else { "s" },
            Escaped::new(error)
        ));
    }
    lines.push(brokers_line(v));
    if let Some(refused) = st.and_then(|st| st.refused.as_ref()) {
        lines.push(format!(
            "refused {} connection{} of other accounts{}",
            refused.count,
            if refused.count == 1 { "" } else { "s" },
            refused
                .last
                .as_deref()
                .map(|l| format!(" (last: {})", Escaped::new(l)))
                .unwrap_or_default()
        ));
    }
    lines.push(String::new());
    lines.extend(port_lines(v));
    if !v.snap.clients.is_empty() {
        lines.push(String::new());
        lines.extend(client_lines(v));
    }
    lines.push(String::new());
    lines.push("tunnel.log:".to_owned());
    lines.extend(log.iter().map(|l| format!("  {l}")));
    lines.push(String::new());
    lines.push(format!(
        "{} · every {}s · Ctrl-C to quit",
        clock(v.now),
        EVERY.as_secs()
    ));
    lines
}

fn certificate_line(v: &View<'_>) -> String {
    let renewal = v.snap.state.as_ref().and_then(|st| st.renewal.as_ref());
    let mut line = String::from("certificate");
    if let Some(c) = v.cert {
        line.push_str(&format!(" serial {}", c.serial));
    }
    let end = renewal.map(|r| r.not_after).or(v.cert.map(|c| c.not_after));
    if let Some(end) = end {
        line.push_str(&format!(
            " · ends {} ({})",
            shiqi_ca::text::utc(end),
            until(v.now, end)
        ));
    }
    match renewal {
        Some(r) => {
            line.push_str(&format!(
                " · renews {} ({})",
                shiqi_ca::text::utc(r.due),
                until(v.now, r.due)
            ));
            if r.renewed > 0 {
                line.push_str(&format!(" · renewed {} time(s) by this tunnel", r.renewed));
            }
        }
        None => line.push_str(" · renewal not checked yet"),
    }
    line
}

fn brokers_line(v: &View<'_>) -> String {
    let Some(b) = v.snap.state.as_ref().and_then(|st| st.brokers.as_ref()) else {
        return "brokers: not asked yet".to_owned();
    };
    let mut line = format!("brokers: asked {}", clock(b.checked));
    if let Some(error) = &b.error {
        line.push_str(&format!(" · no answer: {}", Escaped::new(error)));
    }
    for n in &b.not_serving {
        line.push_str(&format!(" · {}", Escaped::new(n)));
    }
    match &b.last_change {
        Some(change) => line.push_str(&format!(" · last change {}", Escaped::new(change))),
        None => line.push_str(" · no change since the start"),
    }
    line
}

/// One row per port the tunnel serves (the endpoint's first), then any other port counted.
fn port_lines(v: &View<'_>) -> Vec<String> {
    let st = v.snap.state.as_ref();
    let records: Vec<&ForwardRecord> = st
        .map(|st| st.endpoint.iter().chain(&st.forwards).collect())
        .unwrap_or_default();
    let figures = |port: u16| v.snap.ports.iter().find(|p| p.port == port);
    let zero = |port| PortFigures {
        port,
        open: 0,
        total: 0,
        up: 0,
        down: 0,
    };
    let mut rows: Vec<(String, PortFigures)> = Vec::new();
    for f in &records {
        let fig = figures(f.local_port)
            .cloned()
            .unwrap_or_else(|| zero(f.local_port));
        rows.push((format!("{} ({})", arrow(f), Escaped::new(&f.purpose)), fig));
    }
    for p in &v.snap.ports {
        if !records.iter().any(|f| f.local_port == p.port) {
            rows.push((format!("127.0.0.1:{}", p.port), p.clone()));
        }
    }
    let mut lines = vec![format!(
        "{:>5} {:>6} {:>11} {:>11} {:>9} {:>9}  PORT",
        "OPEN", "CONNS", "UP/s", "DOWN/s", "UP", "DOWN"
    )];
    for (label, fig) in rows {
        let before = |s: &Snapshot, pick: fn(&PortFigures) -> u64| {
            s.ports
                .iter()
                .find(|p| p.port == fig.port)
                .map(pick)
                .or(Some(0))
        };
        let up = v.rate(fig.up, |s| before(s, |p| p.up));
        let down = v.rate(fig.down, |s| before(s, |p| p.down));
        lines.push(format!(
            "{:>5} {:>6} {:>11} {:>11} {:>9} {:>9}  {label}",
            fig.open,
            fig.total,
            per_second(up),
            per_second(down),
            bytes(fig.up),
            bytes(fig.down)
        ));
    }
    lines
}

/// One row per connected client of the local endpoint.
fn client_lines(v: &View<'_>) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<21} {:>5} {:>8} {:>11} {:>11}  BROKER · REQUESTS",
        "ENDPOINT CLIENT", "PORT", "SINCE", "UP/s", "DOWN/s"
    )];
    for c in &v.snap.clients {
        let before = |s: &Snapshot, up: bool| {
            s.clients
                .iter()
                .find(|o| o.peer == c.peer && o.port == c.port)
                .map(|o| if up { o.up } else { o.down })
        };
        let up = v.rate(c.up, |s| before(s, true));
        let down = v.rate(c.down, |s| before(s, false));
        let mut mix: Vec<(&String, &u64)> = c.requests.iter().collect();
        mix.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mix: Vec<String> = mix
            .iter()
            .map(|(api, n)| format!("{} {n}", Escaped::new(api)))
            .collect();
        lines.push(format!(
            "{:<21} {:>5} {:>8} {:>11} {:>11}  {} · {}",
            Escaped::new(&c.peer),
            c.port,
            clock(c.since),
            per_second(up),
            per_second(down),
            c.broker
                .as_deref()
                .map_or_else(|| Escaped::new("(connecting)"), Escaped::new),
            if mix.is_empty() {
                "none yet".to_owned()
            } else {
                mix.join(", ")
            }
        ));
    }
    lines
}

/// The piped form: one line per second with the totals and each busy port.
fn plain_line(snap: &Snapshot, prev: Option<&Snapshot>, now: OffsetDateTime) -> String {
    let phase = snap
        .state
        .as_ref()
        .map_or_else(|| "starting".to_owned(), |st| st.phase.to_string());
    let total = |s: &Snapshot, pick: fn(&PortFigures) -> u64| s.ports.iter().map(pick).sum();
    let up = rate(snap, prev, total(snap, |p| p.up), |s| {
        Some(total(s, |p| p.up))
    });
    let down = rate(snap, prev, total(snap, |p| p.down), |s| {
        Some(total(s, |p| p.down))
    });
    let open: u64 = snap.ports.iter().map(|p| p.open).sum();
    let mut line = format!(
        "{} {phase} connection={} reconnects={} open={open} up={} down={} endpoint_clients={}",
        clock(now),
        snap.connections,
        snap.reconnects,
        per_second(up),
        per_second(down),
        snap.clients.len()
    );
    let busy: Vec<String> = snap
        .ports
        .iter()
        .filter(|p| p.open > 0)
        .map(|p| format!("{}:{}", p.port, p.open))
        .collect();
    if !busy.is_empty() {
        line.push_str(&format!(" ports={}", busy.join(",")));
    }
    if let Some(change) = snap
        .state
        .as_ref()
        .and_then(|st| st.brokers.as_ref())
        .and_then(|b| b.last_change.as_deref())
    {
        line.push_str(&format!(" brokers_changed=\"{}\"", Escaped::new(change)));
    }
    line
}

/// The last [`LOG_LINES`] lines of the log, escaped; none when it cannot be read.
fn log_tail(path: &std::path::Path) -> Vec<Escaped> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return vec![];
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if file
        .seek(std::io::SeekFrom::Start(len.saturating_sub(LOG_TAIL)))
        .is_err()
    {
        return vec![];
    }
    let mut tail = Vec::new();
    if file.take(LOG_TAIL).read_to_end(&mut tail).is_err() {
        return vec![];
    }
    let text = String::from_utf8_lossy(&tail);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    // The first line may be cut by the seek: only whole ones, unless the file is that short.
    let whole = if len > LOG_TAIL {
        &lines[1.min(lines.len())..]
    } else {
        &lines[..]
    };
    whole[whole.len().saturating_sub(LOG_LINES)..]
        .iter()
        .map(|l| Escaped::new(l))
        .collect()
}

/// `HH:MM:SS` in UTC.
fn clock(t: OffsetDateTime) -> String {
    crate::clock::time_of_day(t)
}

/// `in 3 hours`, or `2 minutes ago`.
fn until(now: OffsetDateTime, then: OffsetDateTime) -> String {
    let d = then - now;
    if d.is_negative() {
        format!("{} ago", crate::clock::span(d))
    } else {
        format!("in {}", crate::clock::span(d))
    }
}

/// A byte count with a binary unit.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A rate, or `-` before there are two answers to compare.
fn per_second(rate: Option<f64>) -> String {
    rate.map_or_else(
        || "-".to_owned(),
        |r| format!("{}/s", bytes(r.round() as u64)),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use time::macros::datetime;

    use super::*;
    use crate::tunnel::{BrokersCheck, ClientFigures, Phase, State};

    fn record(port: u16, host: &str, purpose: &str) -> ForwardRecord {
        ForwardRecord {
            local_port: port,
            remote_host: host.parse().expect("host"),
            remote_port: shiqi_ca::Port::try_from(9093).expect("port"),
            purpose: purpose.to_owned(),
        }
    }

    fn snapshot(uptime_ms: u64, up: u64, down: u64) -> Snapshot {
        let mut requests = BTreeMap::new();
        requests.insert("Produce".to_owned(), 40);
        requests.insert("Metadata".to_owned(), 2);
        Snapshot {
            uptime_ms,
            connections: 3,
            reconnects: 1,
            ports: vec![PortFigures {
                port: 19093,
                open: 1,
                total: 4,
                up,
                down,
            }],
            clients: vec![ClientFigures {
                peer: "127.0.0.1:50111".to_owned(),
                port: 19093,
                since: datetime!(2026-12-07 17:00:05 UTC),
                broker: Some("kafka-2.internal\u{1b}[31m:9093".to_owned()),
                up,
                down,
                requests,
            }],
            state: Some(State {
                pid: 42,
                phase: Phase::Up,
                since: datetime!(2026-12-07 17:00:00 UTC),
                server: "shiqi-dev@10.231.0.1:22".to_owned(),
                generation: 1,
                forwards: vec![record(3306, "127.0.0.1", "MySQL")],
                error: None,
                hint: None,
                problems: vec![],
                brokers: Some(BrokersCheck {
                    checked: datetime!(2026-12-07 17:01:00 UTC),
                    error: None,
                    not_serving: vec![],
                    last_change: Some("2026-12-07 17:00:30 UTC: broker 3 left".to_owned()),
                }),
                endpoint: vec![record(19093, "kafka-2.internal", "Kafka broker 2")],
                renewal: None,
                refused: None,
            }),
        }
    }

    #[test]
    fn a_frame_shows_rates_between_two_answers_and_escapes_what_came_from_elsewhere() {
        let before = snapshot(10_000, 1000, 5000);
        let now = snapshot(12_000, 3048, 5000 + 2 * 1024 * 1024);
        let view = View {
            name: "saige",
            pid: 42,
            snap: &now,
            prev: Some(&before),
            cert: None,
            now: datetime!(2026-12-07 17:02:00 UTC),
        };
        let lines = screen_lines(&view, &[Escaped::new("INFO tunnel up\u{7}")]);
        let text = lines.join("\n");
        assert!(
            lines[0].starts_with("tunnel `saige` · pid 42 · up since 17:00:00"),
            "{text}"
        );
        assert!(
            lines[0].ends_with("SSH connection 3 · 1 reconnect"),
            "{text}"
        );
        assert!(
            text.contains("last change 2026-12-07 17:00:30 UTC: broker 3 left"),
            "{text}"
        );
        let port = lines
            .iter()
            .find(|l| l.contains("127.0.0.1:19093 -> kafka-2.internal:9093"))
            .expect("the endpoint port's row");
        // 2048 bytes up and 2 MiB down over 2 s.
        assert!(
            port.contains("1.0 KiB/s") && port.contains("1.0 MiB/s"),
            "{port}"
        );
        assert!(
            text.contains("127.0.0.1:3306 -> 127.0.0.1:9093 (MySQL)"),
            "{text}"
        );
        let client = lines
            .iter()
            .find(|l| l.starts_with("127.0.0.1:50111"))
            .expect("the client's row");
        assert!(client.ends_with("Produce 40, Metadata 2"), "{client}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(
            text.contains("\\u{1b}[31m") || text.contains("\\e[31m"),
            "{text}"
        );
        // The first answer has nothing to compare with.
        let first = View { prev: None, ..view };
        let lines = screen_lines(&first, &[]);
        assert!(
            lines.iter().any(|l| l.contains("        -           -")),
            "{lines:?}"
        );
    }

    #[test]
    fn json_holds_the_text_from_elsewhere_escaped() {
        let mut snap = snapshot(1000, 1, 2);
        if let Some(st) = &mut snap.state {
            st.error = Some("refused\u{1b}]0;owned\u{7}".to_owned());
        }
        let out = escaped(&snap);
        let text = serde_json::to_string(&out).expect("json");
        assert!(
            !text.contains("\\u001b") && !text.contains("\\u0007"),
            "{text}"
        );
        assert!(
            out.clients[0]
                .broker
                .as_deref()
                .is_some_and(|b| b.contains("\\u{1b}")),
            "{text}"
        );
        // Numbers and the rest pass as they are.
        assert_eq!(
            (out.ports.clone(), out.connections),
            (snap.ports.clone(), 3)
        );
    }

    #[test]
    fn the_piped_line_sums_every_port() {
        let line = plain_line(
            &snapshot(2000, 4096, 8192),
            Some(&snapshot(1000, 0, 0)),
            datetime!(2026-12-07 17:02:00 UTC),
        );
        assert_eq!(
            line,
            "17:02:00 up connection=3 reconnects=1 open=1 up=4.0 KiB/s down=8.0 KiB/s \
             endpoint_clients=1 ports=19093:1 brokers_changed=\"2026-12-07 17:00:30 UTC: broker \
             3 left\""
        );
    }

    #[test]
    fn times_and_sizes_read_as_people_write_them() {
        let now = datetime!(2026-12-07 17:00:00 UTC);
        assert_eq!(until(now, datetime!(2026-12-07 20:05:00 UTC)), "in 3 hours");
        assert_eq!(
            until(now, datetime!(2026-12-07 16:58:00 UTC)),
            "2 minutes ago"
        );
        assert_eq!(until(now, datetime!(2026-12-09 18:00:00 UTC)), "in 2 days");
        assert_eq!(clock(datetime!(2026-12-07 07:05:09 +2)), "05:05:09");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(per_second(None), "-");
    }

    #[test]
    fn the_log_tail_is_whole_lines_escaped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tunnel.log");
        assert!(log_tail(&path).is_empty());
        let mut text = "x".repeat(usize::try_from(LOG_TAIL).expect("fits"));
        for i in 0..10 {
            text.push_str(&format!("\nline {i} \u{1b}]0;title\u{7}"));
        }
        crate::fsutil::write_private(&path, text.as_bytes()).expect("write");
        let tail = log_tail(&path);
        assert_eq!(tail.len(), LOG_LINES);
        assert!(tail[0].starts_with("line 4 "), "{tail:?}");
        assert!(tail.iter().all(|l| !l.contains('\u{1b}')), "{tail:?}");
    }
}
