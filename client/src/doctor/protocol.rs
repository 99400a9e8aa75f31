//! Protocols: what each forwarded port really speaks (TLS, plaintext Kafka, MySQL), and whether
//! each Kafka config's `security.protocol` matches. A Java client with `PLAINTEXT` against a TLS
//! listener does not fail with a protocol error: it reads the broker's TLS alert `15 03 03 00`
//! as a 352,518,912-byte response size and dies with `OutOfMemoryError` (KAFKA-4090, open since
//! 2016), so this check names that as the cause before the client ever runs. The local
//! endpoint's ports speak plaintext Kafka on purpose (the tunnel does the TLS): `PLAINTEXT` is
//! right there, and TLS is what fails.

use crate::doctor::configs::{ConfigFile, Kind};
use crate::doctor::forwards::{self, Service};
use crate::doctor::{CheckId, Context, Finding, Findings, Status, lint, needs};
use crate::probe::kafka_wire;
use crate::probe::speaks::{self as probe, Speaks};

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
pub fn bootstrap(value: &str) -> Vec<(String, u16)> {
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

fn probe_port(st: &mut Findings, host: &str, port: u16, kafka: bool, sni: &str) -> Speaks {
    let key = (host.to_owned(), port);
    if let Some(s) = st.probes.get(&key) {
        return s.clone();
    }
    let s = if kafka {
        probe::kafka(host, port, sni)
    } else {
        probe::mysql(host, port, sni)
    };
    st.probes.insert(key, s.clone());
    s
}

/// `protocol`.
pub fn check(ctx: &Context, st: &mut Findings) {
    if ctx.profile.is_err() {
        st.push(Finding::skip(CheckId::Protocol, "no profile"));
        return;
    }
    let targets = forwards::services(ctx);
    let reachable: Vec<Service> = targets
        .iter()
        .filter(|t| st.answering.contains(&t.port) && !st.tunnel_broken.contains(&t.port))
        .cloned()
        .collect();
    if reachable.is_empty() {
        st.push(Finding::skip(CheckId::Protocol, needs(CheckId::Tunnel)));
        return;
    }
    let mut found = Vec::new();
    let mut problems: Vec<(Status, String, String)> = Vec::new();

    // What each port speaks.
    for t in &reachable {
        let speaks = probe_port(st, "127.0.0.1", t.port, t.kafka, &t.host);
        match (&speaks, t.kafka) {
            (s, true) if s.is_tls() || *s == Speaks::PlainKafka => {}
            (Speaks::Mysql { tls: true, .. }, false) => {}
            (
                Speaks::Mysql {
                    tls: false,
                    version,
                    ..
                },
                false,
            ) => problems.push((
                Status::Fail,
                format!(
                    "MySQL on port {} ({version}) offers no TLS, so no certificate login can work",
                    t.port
                ),
                "the server's admin must turn TLS on in mysqld (`shiqi-ca-agent server-cert \
                 mariadb --kind mysql …` writes `mysqld.cnf`)"
                    .to_owned(),
            )),
            (Speaks::Closed, _) => problems.push((
                Status::Fail,
                format!(
                    "port {} ({}): the tunnel accepts, but the server side closes at once: {} \
                     is down, or the forward's target is wrong",
                    t.port, t.what, t.what
                ),
                format!(
                    "on the server, check that {} listens on `{}:{}` (`shiqi-ca-agent brokers` \
                     lists the brokers); then compare the `LocalForward` target in `ssh_config`",
                    t.what, t.host, t.port
                ),
            )),
            (other, _) => problems.push((
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
        found.push(format!("{} {}", t.port, speaks.describe()));
    }

    // What each Kafka config says, against what its bootstrap ports speak.
    for file in ctx.configs.iter().filter(|c| c.kind != Kind::Mysql) {
        compare_kafka(ctx, st, file, &reachable, &mut found, &mut problems);
    }
    for file in ctx.configs.iter().filter(|c| c.kind == Kind::Mysql) {
        compare_mysql(file, &mut found, &mut problems);
    }

    let worst = problems.iter().map(|(s, _, _)| *s).max();
    st.push(match worst {
        None => Finding::ok(CheckId::Protocol, found.join("; ")),
        Some(s) => {
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
            if s == Status::Fail {
                Finding::fail(CheckId::Protocol, what, fix)
            } else {
                Finding::warn(CheckId::Protocol, what, fix)
            }
        }
    });
}

fn compare_kafka(
    ctx: &Context,
    st: &mut Findings,
    file: &ConfigFile,
    reachable: &[Service],
    found: &mut Vec<String>,
    problems: &mut Vec<(Status, String, String)>,
) {
    let name = file.name();
    let shown = ctx.show(&file.path);
    let d = declared(file);
    let java = file.kind == Kind::Java;
    // The ports this config dials first; the profile's forwards when it names none we know.
    let servers: Vec<(String, u16)> = file
        .get("bootstrap.servers")
        .or_else(|| file.get("metadata.broker.list"))
        .and_then(|e| e.value.as_deref())
        .map(bootstrap)
        .unwrap_or_default();
    let mut speaks: Vec<(String, u16, Speaks)> = Vec::new();
    for (host, port) in servers {
        let s = match reachable.iter().find(|t| t.port == port && t.kafka) {
            Some(t) => probe_port(st, "127.0.0.1", port, true, &t.host),
            None if st.tunnel_broken.contains(&port) => continue,
            None => probe_port(st, &host, port, true, &host),
        };
        speaks.push((host, port, s));
    }
    if speaks.is_empty() {
        for t in reachable.iter().filter(|t| t.kafka) {
            let s = probe_port(st, "127.0.0.1", t.port, true, &t.host);
            speaks.push((t.host.clone(), t.port, s));
        }
    }
    let Some((host, port, s)) = speaks
        .iter()
        .find(|(_, _, s)| s.is_tls() || *s == Speaks::PlainKafka)
        .cloned()
    else {
        return;
    };
    let port_tls = s.is_tls();
    let wants_tls = d.protocol.ends_with("SSL");
    let where_ = match d.line {
        Some(l) => format!("`{name}` line {l} says `security.protocol={}`", d.protocol),
        None => format!("`{name}` sets no `security.protocol`, so the client uses `PLAINTEXT`"),
    };
    let key_fix = if java { "SSL" } else { "ssl" };
    if port_tls == wants_tls {
        if port_tls && d.protocol.starts_with("SASL") {
            problems.push((
                Status::Warn,
                format!(
                    "{where_}: port {port} speaks TLS, but the brokers log clients in by \
                     certificate (`SSL`), not SASL"
                ),
                format!("set `security.protocol={key_fix}` in `{shown}` unless this listener really is SASL"),
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
    if port_tls {
        let consequence = if java {
            java_oom(&host, port)
        } else {
            "librdkafka fails with \"Disconnected while requesting ApiVersion: might be caused by \
             incorrect security.protocol configuration (connecting to a SSL listener?)\""
                .to_owned()
        };
        problems.push((
            Status::Fail,
            format!("{where_}, but port {port} speaks TLS: {consequence}"),
            format!("set `security.protocol={key_fix}` in `{shown}`"),
        ));
    } else if reachable.iter().any(|t| t.port == port && t.endpoint) {
        let name = ctx
            .profile
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_default();
        problems.push((
            Status::Fail,
            format!(
                "{where_}, but port {port} is the tunnel's local endpoint, which speaks \
                 plaintext Kafka and does the TLS itself: the client's TLS handshake fails"
            ),
            format!(
                "set `security.protocol={}` in `{shown}` (the endpoint uses the profile's \
                 certificate; the client needs no keystore), or go back to TLS from the client: \
                 `shiqi-connect tunnel up {name} --endpoint direct`",
                if java { "PLAINTEXT" } else { "plaintext" }
            ),
        ));
    } else {
        problems.push((
            Status::Fail,
            format!("{where_}, but port {port} speaks plaintext Kafka: the TLS handshake fails"),
            format!(
                "this is not the shiqi cluster's TLS listener; point `bootstrap.servers` in \
                 `{shown}` at the tunnel's ports, or set `security.protocol=PLAINTEXT` for a \
                 plaintext cluster"
            ),
        ));
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

fn compare_mysql(
    file: &ConfigFile,
    found: &mut Vec<String>,
    problems: &mut Vec<(Status, String, String)>,
) {
    let name = file.name();
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
    use crate::doctor::tests::{
        context, fake_endpoint, local_configs, local_profile, running_tunnel,
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
        forwards::check(&ctx, &mut st).await;
        check(&ctx, &mut st);
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
