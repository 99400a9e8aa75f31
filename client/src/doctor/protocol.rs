//! Protocols: what each forwarded port really speaks (TLS, plaintext Kafka, MySQL), and whether
//! each Kafka config's `security.protocol` matches. A Java client with `PLAINTEXT` against a TLS
//! listener does not fail with a protocol error: it reads the broker's TLS alert `15 03 03 00`
//! as a 352,518,912-byte response size and dies with `OutOfMemoryError` (KAFKA-4090, open since
//! 2016), so this check names that as the cause before the client ever runs. The local
//! endpoint's ports speak plaintext Kafka on purpose (the tunnel does the TLS): `PLAINTEXT` is
//! right there, and TLS is what fails. Its MySQL port likewise greets without TLS (the endpoint
//! does the TLS with the certificate upstream): TLS offered there means something else answers.

use std::io::Read as _;

use crate::doctor::configs::{ConfigFile, Kind};
use crate::doctor::forwards::{self, Service, Tunnel};
use crate::doctor::{CheckId, Context, Finding, Findings, Probes, Status, lint, needs};
use crate::probe::kafka_wire;
use crate::probe::speaks::{self as probe, Speaks};
use crate::text::quote;

/// A config's `security.protocol`, upper-cased, and where it came from.
pub(crate) struct Declared {
    pub(crate) protocol: String,
    /// `None`: not set, so the client's default.
    pub(crate) line: Option<usize>,
}

pub(crate) fn declared(file: &ConfigFile) -> Declared {
    match file.get("security.protocol") {
        Some(e) => Declared {
            protocol: e
                .value
                .as_deref()
                .unwrap_or_default()
                .trim()
                .to_ascii_uppercase(),
            line: Some(e.line),
        },
        None => Declared {
            protocol: "PLAINTEXT".to_owned(),
            line: None,
        },
    }
}

/// `host:port` pairs of a `bootstrap.servers` value.
pub(crate) fn bootstrap(value: &str) -> Vec<(String, u16)> {
    value
        .split(',')
        .map(str::trim)
        .filter_map(|hp| {
            let hp = hp.rsplit_once("://").map_or(hp, |(_, r)| r);
            let (h, p) = hp.rsplit_once(':')?;
            Some((h.trim_matches(['[', ']']).to_owned(), p.parse().ok()?))
        })
        .collect()
}

/// A problem `protocol` found: how bad, what, and the fix.
type Problem = (Status, String, String);

/// `protocol`.
pub(crate) fn check(ctx: &Context, st: &mut Findings, tunnel: &Tunnel, probes: &mut Probes) {
    if ctx.profile.is_err() {
        st.push(Finding::skip(CheckId::Protocol, "no profile"));
        return;
    }
    let reachable: Vec<Service> = forwards::services(ctx)
        .into_iter()
        .filter(|t| tunnel.carries(t.port))
        .collect();
    if reachable.is_empty() {
        st.push(Finding::skip(CheckId::Protocol, needs(CheckId::Tunnel)));
        return;
    }
    let mut found = Vec::new();
    let mut problems: Vec<Problem> = Vec::new();

    // What each port speaks.
    for t in &reachable {
        let speaks = probes.probe("127.0.0.1", t.port, t.kafka, &t.host);
        if t.endpoint && !t.kafka {
            endpoint_mysql(ctx, t, &speaks, &mut found, &mut problems);
            continue;
        }
        problems.extend(port_problem(t, &speaks));
        found.push(format!("{} {}", t.port, speaks.describe()));
    }

    // What each Kafka config says, against what its bootstrap ports speak.
    let kafka = Reached {
        reachable: &reachable,
        tunnel,
    };
    for file in ctx.configs.iter().filter(|c| c.kind != Kind::Mysql) {
        compare_kafka(ctx, file, &kafka, probes, &mut found, &mut problems);
    }
    for file in ctx.configs.iter().filter(|c| c.kind == Kind::Mysql) {
        compare_mysql(ctx, file, &mut found, &mut problems);
    }
    st.push(verdict(&found, &problems));
}

/// The `protocol` line: `ok` with what each port speaks, or the problems and their fixes.
fn verdict(found: &[String], problems: &[Problem]) -> Finding {
    let Some(worst) = problems.iter().map(|(s, _, _)| *s).max() else {
        return Finding::ok(CheckId::Protocol, found.join("; "));
    };
    let what = problems
        .iter()
        .map(|(_, w, _)| w.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let fix = problems
        .iter()
        .map(|(_, _, f)| f.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    if worst == Status::Fail {
        Finding::fail(CheckId::Protocol, what, fix)
    } else {
        Finding::warn(CheckId::Protocol, what, fix)
    }
}

/// What is wrong with what a forwarded port speaks, if anything.
fn port_problem(t: &Service, speaks: &Speaks) -> Option<Problem> {
    match (speaks, t.kafka) {
        (s, true) if s.is_tls() || *s == Speaks::PlainKafka => None,
        (Speaks::Mysql { tls: true, .. }, false) => None,
        (
            Speaks::Mysql {
                tls: false,
                version,
                ..
            },
            false,
        ) => Some((
            Status::Fail,
            format!(
                "MySQL on port {} ({version}) offers no TLS, so no certificate login can work",
                t.port
            ),
            "the server's admin must turn TLS on in mysqld (`shiqi-ca-agent server-cert \
             mariadb --kind mysql …` writes `mysqld.cnf`)"
                .to_owned(),
        )),
        (Speaks::Closed, _) => Some((
            Status::Fail,
            format!(
                "port {} ({}): the tunnel accepts, but the server side closes at once: {} is \
                 down, or the forward's target is wrong",
                t.port, t.what, t.what
            ),
            format!(
                "on the server, check that {} listens on `{}:{}` (`shiqi-ca-agent brokers` lists \
                 the brokers); then compare the `LocalForward` target in `ssh_config`",
                t.what, t.host, t.port
            ),
        )),
        (other, _) => Some((
            Status::Fail,
            format!(
                "port {} ({}) speaks {}, not {}",
                t.port,
                t.what,
                other.describe(),
                if t.kafka { "Kafka" } else { "MySQL" }
            ),
            "check the `LocalForward` for it in `ssh_config`: another service answers there"
                .to_owned(),
        )),
    }
}

/// The ports the tunnel carries, for the configs' bootstrap servers.
struct Reached<'a> {
    reachable: &'a [Service],
    tunnel: &'a Tunnel,
}

fn compare_kafka(
    ctx: &Context,
    file: &ConfigFile,
    at: &Reached,
    probes: &mut Probes,
    found: &mut Vec<String>,
    problems: &mut Vec<Problem>,
) {
    let name = file.name();
    let d = declared(file);
    let Some((host, port, s)) = bootstrap_speaks(file, at, probes)
        .into_iter()
        .find(|(_, _, s)| s.is_tls() || *s == Speaks::PlainKafka)
    else {
        return;
    };
    let port_tls = s.is_tls();
    let wants_tls = d.protocol.ends_with("SSL");
    let where_ = match d.line {
        Some(l) => format!("`{name}` line {l} says `security.protocol={}`", d.protocol),
        None => format!("`{name}` sets no `security.protocol`, so the client uses `PLAINTEXT`"),
    };
    let key_fix = if file.kind == Kind::Java {
        "SSL"
    } else {
        "ssl"
    };
    if port_tls == wants_tls {
        if port_tls && d.protocol.starts_with("SASL") {
            problems.push((
                Status::Warn,
                format!(
                    "{where_}: port {port} speaks TLS, but the brokers log clients in by \
                     certificate (`SSL`), not SASL"
                ),
                format!(
                    "set `security.protocol={key_fix}` in `{}` unless this listener really is \
                     SASL",
                    ctx.show(&file.path)
                ),
            ));
        }
        found.push(format!("`{name}` {}: matches", d.protocol));
        return;
    }
    // A typo'd key is the cause, and `lint` already fails on it: say so here without failing
    // twice for one fault.
    if d.line.is_none()
        && let Some(typo) = lint::near_miss(file, "security.protocol")
    {
        problems.push((
            Status::Warn,
            format!(
                "{where_} (line {} spells it `{}`), against port {port} which speaks TLS",
                typo.line, typo.key
            ),
            format!("fix the key name (see `lint` for `{name}`)"),
        ));
        return;
    }
    let endpoint = at
        .reachable
        .iter()
        .any(|t| t.port == port && t.endpoint && t.kafka);
    problems.push(mismatch(
        ctx,
        file,
        &where_,
        (&host, port),
        port_tls,
        endpoint,
    ));
}

/// What each of a Kafka config's bootstrap servers speaks (the tunnel's Kafka ports when it
/// names none that answer).
fn bootstrap_speaks(
    file: &ConfigFile,
    at: &Reached,
    probes: &mut Probes,
) -> Vec<(String, u16, Speaks)> {
    let servers: Vec<(String, u16)> = file
        .get("bootstrap.servers")
        .or_else(|| file.get("metadata.broker.list"))
        .and_then(|e| e.value.as_deref())
        .map(bootstrap)
        .unwrap_or_default();
    let mut speaks: Vec<(String, u16, Speaks)> = Vec::new();
    for (host, port) in servers {
        let s = match at.reachable.iter().find(|t| t.port == port && t.kafka) {
            Some(t) => probes.probe("127.0.0.1", port, true, &t.host),
            None if at.tunnel.broken.contains(&port) => continue,
            None => probes.probe(&host, port, true, &host),
        };
        speaks.push((host, port, s));
    }
    if speaks.is_empty() {
        for t in at.reachable.iter().filter(|t| t.kafka) {
            let s = probes.probe("127.0.0.1", t.port, true, &t.host);
            speaks.push((t.host.clone(), t.port, s));
        }
    }
    speaks
}

/// A config whose `security.protocol` (`where_` says what it says) does not match what
/// `host:port` speaks (TLS when `port_tls`; `endpoint`: the local endpoint's port).
fn mismatch(
    ctx: &Context,
    file: &ConfigFile,
    where_: &str,
    (host, port): (&str, u16),
    port_tls: bool,
    endpoint: bool,
) -> Problem {
    let shown = ctx.show(&file.path);
    let java = file.kind == Kind::Java;
    let key_fix = if java { "SSL" } else { "ssl" };
    if port_tls {
        let consequence = if java {
            java_oom(host, port)
        } else {
            "librdkafka fails with \"Disconnected while requesting ApiVersion: might be caused by \
             incorrect security.protocol configuration (connecting to a SSL listener?)\""
                .to_owned()
        };
        (
            Status::Fail,
            format!("{where_}, but port {port} speaks TLS: {consequence}"),
            format!("set `security.protocol={key_fix}` in `{shown}`"),
        )
    } else if endpoint {
        (
            Status::Fail,
            format!(
                "{where_}, but port {port} is the tunnel's local endpoint, which speaks \
                 plaintext Kafka and does the TLS itself: the client's TLS handshake fails"
            ),
            format!(
                "set `security.protocol={}` in `{shown}` (the endpoint uses the profile's \
                 certificate; the client needs no keystore), or go back to TLS from the client: \
                 `shiqi-connect tunnel up {} --endpoint direct`",
                if java { "PLAINTEXT" } else { "plaintext" },
                ctx.profile
                    .as_ref()
                    .map(|p| p.name.to_string())
                    .unwrap_or_default()
            ),
        )
    } else {
        (
            Status::Fail,
            format!("{where_}, but port {port} speaks plaintext Kafka: the TLS handshake fails"),
            format!(
                "this is not the shiqi cluster's TLS listener; point `bootstrap.servers` in \
                 `{shown}` at the tunnel's ports, or set `security.protocol=PLAINTEXT` for a \
                 plaintext cluster"
            ),
        )
    }
}

/// The KAFKA-4090 explanation, with the broker's real answer to a plaintext request.
pub(crate) fn java_oom(host: &str, port: u16) -> String {
    let reply = probe::kafka_plaintext(host, port).ok();
    let evidence = match &reply {
        Some(r) if r.first() == Some(&0x15) => {
            let size = kafka_wire::frame_size(r).unwrap_or(0);
            format!(
                "the broker answers a plaintext request with the TLS alert `{}`, whose first \
                 four bytes a Java client reads as a {size}-byte ({} MiB) response size",
                probe::hex(r),
                size >> 20
            )
        }
        _ => "a Java client reads the broker's TLS alert (`15 03 03 00 …`) as a ~336 MiB \
              response size"
            .to_owned(),
    };
    format!(
        "{evidence}, so it dies with `java.lang.OutOfMemoryError: Java heap space` instead of a \
         protocol error (KAFKA-4090)"
    )
}

/// The local endpoint's MySQL port: the server's greeting without `CLIENT_SSL`, as the endpoint
/// passes it on (it does the TLS upstream with the certificate, for clients with no SSL
/// settings). TLS offered here is a greeting that did not come through the endpoint.
fn endpoint_mysql(
    ctx: &Context,
    t: &Service,
    speaks: &Speaks,
    found: &mut Vec<String>,
    problems: &mut Vec<(Status, String, String)>,
) {
    let (port, name) = (t.port, ctx.name());
    let log_fix = format!(
        "`{}` says what the endpoint met on its way to MySQL; then restart it: `shiqi-connect \
         tunnel up {name}`",
        ctx.tunnel_log()
    );
    let (what, fix) = match speaks {
        Speaks::Mysql {
            tls: false,
            version,
            ..
        } => {
            found.push(format!(
                "{port} MySQL protocol ({version}), no TLS: the local endpoint's greeting (it \
                 does the TLS to the server)"
            ));
            return;
        }
        Speaks::Mysql {
            tls: true, version, ..
        } => (
            format!(
                "port {port} (MySQL) offers TLS ({version}): the server's own greeting, not the \
                 local endpoint's, so the profile's `my.cnf` (no certificate) gets \
                 \"Access denied\""
            ),
            format!(
                "restart the tunnel so that its endpoint serves MySQL: `shiqi-connect tunnel \
                 down {name}`, then `shiqi-connect tunnel up {name}`"
            ),
        ),
        // An `ERR` in place of the greeting: the endpoint's refusal, or the server's.
        Speaks::Other(first) if first.first() == Some(&0xff) => {
            let why = greeting_error(port)
                .unwrap_or_else(|| format!("an error packet (first bytes {})", probe::hex(first)));
            let fix = if why.contains("offers no TLS") {
                "the server's admin must turn TLS on in mysqld (`shiqi-ca-agent server-cert \
                 mariadb --kind mysql …` writes `mysqld.cnf`)"
                    .to_owned()
            } else if why.contains("shiqi-connect tunnel:") {
                log_fix
            } else {
                "the server's MySQL refuses the tunnel's connections (its words say why): its \
                 admin must let them in"
                    .to_owned()
            };
            (
                format!("port {port} (MySQL) answers with an error instead of a greeting: {why}"),
                fix,
            )
        }
        other => (
            format!(
                "port {port} (MySQL) speaks {}, not the local endpoint's MySQL greeting",
                other.describe()
            ),
            log_fix,
        ),
    };
    problems.push((Status::Fail, what, fix));
}

/// The text of the `ERR` packet a port sends in place of a greeting, read on a connection of
/// its own (the probe keeps only its first bytes).
fn greeting_error(port: u16) -> Option<String> {
    let mut sock = probe::connect("127.0.0.1", port, probe::TIMEOUT).ok()?;
    let mut header = [0u8; 4];
    sock.read_exact(&mut header).ok()?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0u8; len.min(4096)];
    sock.read_exact(&mut payload).ok()?;
    // 0xff, a two-byte code, then (after a greeting only) `#` and a five-byte SQL state.
    let text = payload.strip_prefix(&[0xff])?.get(2..)?;
    let text = match text.strip_prefix(b"#") {
        Some(rest) => rest.get(5..)?,
        None => text,
    };
    Some(quote(&String::from_utf8_lossy(text)))
}

fn compare_mysql(
    ctx: &Context,
    file: &ConfigFile,
    found: &mut Vec<String>,
    problems: &mut Vec<(Status, String, String)>,
) {
    let name = file.name();
    // Through the local endpoint the client speaks plaintext, so TLS off is right; TLS
    // settings are `lint`'s line.
    if lint::to_endpoint(ctx, file) {
        if lint::mysql_tls_wanted(file).is_empty() {
            found.push(format!("`{name}` plaintext to the local endpoint: matches"));
        }
        return;
    }
    if let Some(e) = lint::mysql_tls_disabled(file) {
        problems.push((
            Status::Fail,
            format!(
                "`{name}` line {} (`{}`) turns TLS off, but the account requires a \
                 certificate: the server answers \"Access denied\"",
                e.line, e.key
            ),
            format!("remove line {} of `{name}`", e.line),
        ));
        return;
    }
    found.push(format!("`{name}` TLS: matches"));
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;
    use crate::doctor::testing::{
        FakeMysql, context, fake_endpoint, fake_mysql, local_configs, local_my_cnf,
        local_mysql_profile, local_profile, running_tunnel, running_tunnel_with_mysql,
    };

    /// The `protocol` line for a local-mode profile whose endpoint runs, after `tunnel`.
    /// `java` replaces `client.properties` (given the bootstrap port); `extra` is `--config`.
    async fn local(java: Option<fn(u16) -> String>, extra: Option<&str>) -> Finding {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "127.0.0.1");
        running_tunnel(dir.path(), &ports, None);
        let [(jn, mut jt), (rn, rt)] = local_configs(ports[0]);
        if let Some(make) = java {
            jt = make(ports[0]);
        }
        let all = [(jn, jt.as_str()), (rn, rt.as_str())];
        let mut ctx = context(dir.path(), &local_profile(&ports), &[], &all);
        if let Some(text) = extra {
            let path = dir.path().join("app.properties");
            crate::fsutil::write_private(&path, text.as_bytes()).expect("write");
            ctx.configs.push(ConfigFile::load(&path));
        }
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = forwards::check(&ctx, &mut st, forwards::Needs::default(), &mut probes).await;
        check(&ctx, &mut st, &tunnel, &mut probes);
        st.checks
            .into_iter()
            .find(|c| c.check == CheckId::Protocol)
            .expect("protocol line")
    }

    #[tokio::test]
    async fn plaintext_to_the_local_endpoint_matches() {
        let c = local(None, None).await;
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(
            c.found.ends_with(
                "plaintext Kafka; `client.properties` PLAINTEXT: matches; `librdkafka.conf` \
                 PLAINTEXT: matches"
            ),
            "{c:?}"
        );
    }

    #[tokio::test]
    async fn tls_to_the_local_endpoint_fails_and_says_why() {
        // A direct-mode file's protocol left in place after switching to the local endpoint.
        let java = |port| format!("bootstrap.servers=127.0.0.1:{port}\nsecurity.protocol=SSL\n");
        let c = local(Some(java), None).await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found
                .contains("`client.properties` line 2 says `security.protocol=SSL`, but port")
                && c.found.contains(
                    "is the tunnel's local endpoint, which speaks plaintext Kafka and does the TLS \
                 itself: the client's TLS handshake fails"
                ),
            "{c:?}"
        );
        let fix = c.fix.as_deref().unwrap_or_default();
        assert!(
            fix.starts_with("set `security.protocol=PLAINTEXT` in `")
                && fix.ends_with(
                    "client.properties` (the endpoint uses the profile's certificate; the \
                     client needs no keystore), or go back to TLS from the client: \
                     `shiqi-connect tunnel up saige --endpoint direct`"
                ),
            "{fix}"
        );
    }

    #[tokio::test]
    async fn plaintext_to_a_tls_port_still_fails_in_local_mode() {
        // KAFKA-4090 is not the endpoint's business: a config aimed at a TLS listener is flagged.
        let tls = crate::probe::fake_server(vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28], 4);
        let c = local(
            None,
            Some(&format!(
                "bootstrap.servers=127.0.0.1:{tls}\nsecurity.protocol=PLAINTEXT\n"
            )),
        )
        .await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found.contains(&format!(
                "`app.properties` line 2 says `security.protocol=PLAINTEXT`, but port {tls} \
                 speaks TLS"
            )) && c.found.contains("OutOfMemoryError"),
            "{c:?}"
        );
        assert!(
            c.fix
                .as_deref()
                .is_some_and(|f| f.starts_with("set `security.protocol=SSL` in `")),
            "{c:?}"
        );
    }

    /// The `protocol` line for a local-mode profile whose endpoint serves MySQL as `how`, with
    /// `my.cnf` holding `cnf`; and the MySQL port.
    async fn local_mysql(how: FakeMysql, cnf: &str) -> (Finding, u16) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "127.0.0.1");
        let db = fake_mysql(how);
        running_tunnel_with_mysql(dir.path(), &ports, db);
        let text = format!("{}{cnf}", local_my_cnf(db));
        let files = [(crate::profile::files::MY_CNF, text.as_str())];
        let ctx = context(dir.path(), &local_mysql_profile(&ports, db), &[], &files);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = forwards::check(&ctx, &mut st, forwards::Needs::default(), &mut probes).await;
        check(&ctx, &mut st, &tunnel, &mut probes);
        let c = st.checks.into_iter().find(|c| c.check == CheckId::Protocol);
        (c.expect("protocol line"), db)
    }

    #[tokio::test]
    async fn the_endpoint_greets_for_mysql_without_tls_and_my_cnf_goes_plaintext() {
        // TLS off in `my.cnf` is right through the endpoint (direct mode fails on it).
        let (c, db) = local_mysql(FakeMysql::Plain, "skip-ssl\n").await;
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(
            c.found.ends_with(&format!(
                "{db} MySQL protocol (10.11.6-MariaDB), no TLS: the local endpoint's greeting \
                 (it does the TLS to the server); `my.cnf` plaintext to the local endpoint: \
                 matches"
            )),
            "{c:?}"
        );
    }

    #[tokio::test]
    async fn tls_on_the_endpoints_mysql_port_is_the_servers_greeting() {
        let (c, db) = local_mysql(FakeMysql::Tls, "").await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert_eq!(
            c.found.as_str(),
            format!(
                "port {db} (MySQL) offers TLS (10.11.6-MariaDB): the server's own greeting, not \
                 the local endpoint's, so the profile's `my.cnf` (no certificate) gets \
                 \"Access denied\""
            )
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "restart the tunnel so that its endpoint serves MySQL: `shiqi-connect tunnel \
                 down saige`, then `shiqi-connect tunnel up saige`"
            )
        );
    }

    #[tokio::test]
    async fn the_endpoints_error_in_place_of_a_greeting_is_quoted_with_its_fix() {
        let no_tls = "shiqi-connect tunnel: MySQL at db.shiqi.invalid:3306: the server offers \
                      no TLS; the endpoint never sends a login in the clear";
        let (c, db) = local_mysql(FakeMysql::NoGreeting(no_tls), "").await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert_eq!(
            c.found.as_str(),
            format!("port {db} (MySQL) answers with an error instead of a greeting: {no_tls}")
        );
        assert!(
            c.fix
                .as_deref()
                .is_some_and(|f| f.starts_with("the server's admin must turn TLS on in mysqld")),
            "{c:?}"
        );

        let down = "shiqi-connect tunnel: the tunnel cannot reach MySQL at \
                    db.shiqi.invalid:3306 on the server";
        let (c, _) = local_mysql(FakeMysql::NoGreeting(down), "").await;
        assert!(c.found.ends_with(down), "{c:?}");
        assert!(
            c.fix.as_deref().is_some_and(|f| f.ends_with(
                "tunnel.log` says what the endpoint met on its way to MySQL; then restart it: \
                 `shiqi-connect tunnel up saige`"
            )),
            "{c:?}"
        );
    }

    #[test]
    fn direct_mode_still_fails_a_my_cnf_that_turns_tls_off() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = local_mysql_profile(&[9092], 3306);
        p.endpoint = crate::profile::Endpoint::Direct;
        let text = format!("{}skip-ssl\n", local_my_cnf(3306));
        let files = [(crate::profile::files::MY_CNF, text.as_str())];
        let ctx = context(dir.path(), &p, &[], &files);
        let (mut found, mut problems) = (Vec::new(), Vec::new());
        compare_mysql(&ctx, &ctx.configs[0], &mut found, &mut problems);
        assert!(found.is_empty(), "{found:?}");
        assert!(
            problems[0]
                .1
                .starts_with("`my.cnf` line 5 (`skip-ssl`) turns TLS off"),
            "{problems:?}"
        );
    }

    #[test]
    fn reads_bootstrap_servers() {
        assert_eq!(
            bootstrap("localhost:19094, [::1]:29094,SSL://h:3,bad"),
            [
                ("localhost".to_owned(), 19094),
                ("::1".to_owned(), 29094),
                ("h".to_owned(), 3)
            ]
        );
    }

    #[test]
    fn an_unset_protocol_is_plaintext() {
        let f = ConfigFile::parse(Kind::Java, "bootstrap.servers=localhost:1\n");
        let d = declared(&f);
        assert_eq!((d.protocol.as_str(), d.line), ("PLAINTEXT", None));
        let f = ConfigFile::parse(Kind::Librdkafka, "security.protocol=ssl\n");
        assert_eq!(declared(&f).protocol, "SSL");
    }
}
