//! Addresses: each advertised broker host resolves on this machine to where the tunnel listens
//! (127.0.0.1), and each server certificate covers the name its clients check (the Java client
//! verifies the advertised host name). A name that resolves elsewhere sends the client around
//! the tunnel (seed: wasted-weekend-on-kafka, names that resolved differently on each side).
//! With the local endpoint the names are dialled on the server's side only, so resolving them
//! here does not apply; the endpoint verifies each broker's name, so an answer through its port
//! shows that the certificate covers it. It serves MySQL without TLS on 127.0.0.1 and checks the
//! server's certificate itself on every login, so there is no certificate to check here.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

use shiqi_ca::cert::Cert;

use crate::doctor::forwards::{self, Service, Tunnel};
use crate::doctor::{CheckId, Context, Finding, Findings, JVM_DNS_NOTE, Probes, Status, needs};
use crate::probe::speaks as probe;

/// Where a name resolves and what that means for the tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// 127.0.0.1 (and maybe other loopback addresses).
    Tunnel,
    /// 127.0.0.1 and also addresses off this machine: some connections bypass the tunnel.
    Partly(Vec<IpAddr>),
    /// Only addresses that are not the tunnel's.
    Elsewhere(Vec<IpAddr>),
    /// No address at all.
    Unresolved(String),
}

/// Judges the addresses a name resolved to.
pub(crate) fn judge(addrs: &[IpAddr]) -> Resolution {
    let tunnel = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let others: Vec<IpAddr> = addrs.iter().copied().filter(|a| !a.is_loopback()).collect();
    match (addrs.contains(&tunnel), others.is_empty()) {
        (true, true) => Resolution::Tunnel,
        (true, false) => Resolution::Partly(others),
        (false, _) if addrs.is_empty() => Resolution::Unresolved("no address".to_owned()),
        (false, _) => Resolution::Elsewhere(addrs.to_vec()),
    }
}

fn resolve(host: &str, port: u16) -> Resolution {
    match (host, port).to_socket_addrs() {
        Ok(a) => {
            let mut ips: Vec<IpAddr> = a.map(|s| s.ip()).collect();
            ips.dedup();
            judge(&ips)
        }
        Err(e) => Resolution::Unresolved(e.to_string()),
    }
}

fn list(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the address checks found, for the logins.
#[derive(Clone, Debug, Default)]
pub(crate) struct Addresses {
    /// Advertised hosts that do not resolve to the tunnel.
    pub(crate) bypassed: BTreeSet<String>,
    /// Local ports whose server certificate does not cover the name its clients check.
    pub(crate) mismatched: BTreeSet<u16>,
}

/// `addresses.*`.
pub(crate) fn check(
    ctx: &Context,
    st: &mut Findings,
    tunnel: &Tunnel,
    probes: &mut Probes,
) -> Addresses {
    let targets = forwards::services(ctx);
    if ctx.profile.is_err() {
        for id in [CheckId::AddressResolve, CheckId::AddressNames] {
            st.push(Finding::skip(id, "no profile"));
        }
        return Addresses::default();
    }
    let bypassed = if ctx.local_endpoint() {
        st.push(Finding::skip(
            CheckId::AddressResolve,
            "does not apply: with the local endpoint the laptop never dials the advertised \
             names (the tunnel does, on the server's side)",
        ));
        BTreeSet::new()
    } else {
        resolve_check(ctx, st, &targets)
    };
    let mismatched = names_check(ctx, st, &targets, tunnel, &bypassed, probes);
    Addresses {
        bypassed,
        mismatched,
    }
}

/// `addresses.resolve`; returns the hosts that do not resolve to the tunnel.
fn resolve_check(ctx: &Context, st: &mut Findings, targets: &[Service]) -> BTreeSet<String> {
    // One line per host name, naming the brokers that advertise it.
    let mut hosts: BTreeMap<&str, Vec<&Service>> = BTreeMap::new();
    for t in targets.iter().filter(|t| t.kafka) {
        hosts.entry(t.host.as_str()).or_default().push(t);
    }
    if hosts.is_empty() {
        st.push(Finding::skip(
            CheckId::AddressResolve,
            "the profile has no brokers",
        ));
        return BTreeSet::new();
    }
    let mut bypassed = BTreeSet::new();
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let mut fixes = Vec::new();
    let mut worst = Status::Ok;
    for (host, ts) in &hosts {
        let who = ts
            .iter()
            .map(|t| t.what.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let fix = resolve_fix(ctx, host, ts, &who, targets);
        match resolve(host, ts[0].port) {
            Resolution::Tunnel => good.push(format!("`{host}` ({who}) → 127.0.0.1")),
            Resolution::Partly(others) => {
                worst = worst.max(Status::Warn);
                bad.push(format!(
                    "`{host}` ({who}) resolves to 127.0.0.1 but also to {}: connections to \
                     those bypass the tunnel",
                    list(&others)
                ));
                fixes.push(fix);
            }
            Resolution::Elsewhere(ips) => {
                worst = Status::Fail;
                bypassed.insert((*host).to_owned());
                bad.push(format!(
                    "`{host}` ({who}) resolves to {} on this machine, not to the tunnel on \
                     127.0.0.1: after bootstrap a Kafka client dials {who} there, around the \
                     tunnel",
                    list(&ips)
                ));
                fixes.push(fix);
            }
            Resolution::Unresolved(why) => {
                worst = Status::Fail;
                bypassed.insert((*host).to_owned());
                bad.push(format!(
                    "`{host}` ({who}) does not resolve on this machine ({why}): clients cannot \
                     reach {who} after bootstrap"
                ));
                fixes.push(fix);
            }
        }
    }
    // The local endpoint needs nothing of the names on this machine, nor of the server.
    let fix = format!(
        "{} (the tunnel then dials the advertised names on the server's side, so they need not \
         resolve here); or {}",
        ctx.use_local_endpoint(),
        fixes.join("; or ")
    );
    let check = match worst {
        Status::Ok => Finding::ok(CheckId::AddressResolve, good.join(", ")),
        Status::Warn => Finding::warn(CheckId::AddressResolve, bad.join("; "), fix),
        _ => Finding::fail(CheckId::AddressResolve, bad.join("; "), fix),
    };
    st.push(if worst == Status::Ok {
        check
    } else {
        check.note(JVM_DNS_NOTE)
    });
    bypassed
}

/// How to make `host` (advertised by `ts`, named `who`) resolve to the tunnel.
fn resolve_fix(
    ctx: &Context,
    host: &str,
    ts: &[&Service],
    who: &str,
    targets: &[Service],
) -> String {
    // A hosts entry sends the name to 127.0.0.1, where one forward per port leads to one
    // broker only: no help when another service needs the same port.
    let shared = ts.iter().any(|t| {
        targets
            .iter()
            .any(|o| o.port == t.port && o.what != t.what && !o.endpoint)
    });
    let is_ip = host.parse::<IpAddr>().is_ok();
    let hosts_entry = if is_ip || shared {
        String::new()
    } else {
        format!("add `127.0.0.1 {host}` to `/etc/hosts`, or ")
    };
    let listener = if shared {
        "`localhost` on a port of its own".to_owned()
    } else {
        ts.iter()
            .map(|t| format!("`localhost:{}`", t.port))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{hosts_entry}have {who} advertise {listener} (`advertised.listeners` on the server) \
         and rebuild the profile (`{}`)",
        ctx.setup_again()
    )
}

/// The host the MySQL client verifies: `my.cnf`'s `host` (127.0.0.1 as setup writes it).
fn mysql_host(ctx: &Context) -> String {
    ctx.configs
        .iter()
        .filter(|c| c.kind == crate::doctor::configs::Kind::Mysql)
        .find_map(|c| c.get("host").and_then(|e| e.value.clone()))
        .unwrap_or_else(|| "127.0.0.1".to_owned())
}

/// `addresses.names`; returns the local ports whose certificate does not cover the name its
/// clients check.
fn names_check(
    ctx: &Context,
    st: &mut Findings,
    targets: &[Service],
    tunnel: &Tunnel,
    bypassed: &BTreeSet<String>,
    probes: &mut Probes,
) -> BTreeSet<u16> {
    let reachable: Vec<&Service> = targets.iter().filter(|t| tunnel.carries(t.port)).collect();
    if reachable.is_empty() {
        st.push(Finding::skip(CheckId::AddressNames, needs(CheckId::Tunnel)));
        return BTreeSet::new();
    }
    let mut names = Names::new();
    let mut endpoint_mysql = None;
    for t in reachable {
        if t.endpoint && !t.kafka {
            endpoint_mysql = Some(format!(
                "MySQL not checked here: its port is the local endpoint's, which offers no TLS \
                 and verifies the server's certificate itself (signed by `ca.crt`, naming `{}`)",
                t.host
            ));
        } else if t.endpoint {
            // The endpoint checked the broker's certificate against its advertised name (as a
            // Java client does) before it could answer on this port.
            if !t.host.is_empty() {
                names.good.push(format!(
                    "{} covers `{}` (checked by the local endpoint)",
                    t.what, t.host
                ));
            }
        } else {
            names.judge(ctx, t, bypassed, probes);
        }
    }
    if names.good.is_empty() && names.bad.is_empty() {
        st.push(Finding::skip(
            CheckId::AddressNames,
            endpoint_mysql
                .unwrap_or_else(|| "no port showed a certificate (see `protocol`)".to_owned()),
        ));
        return names.mismatched;
    }
    let unchecked: Vec<String> = targets
        .iter()
        .filter(|t| tunnel.broken.contains(&t.port) && !(t.endpoint && t.host.is_empty()))
        .map(|t| t.what.clone())
        .collect();
    let mut found = if names.bad.is_empty() {
        names.good
    } else {
        names.bad
    };
    found.extend(endpoint_mysql);
    if !unchecked.is_empty() {
        found.push(format!(
            "not checked: {} (see `tunnel`)",
            unchecked.join(", ")
        ));
    }
    let found = found.join("; ");
    let fixes = names.fixes.join("; ");
    st.push(match names.worst {
        Status::Ok => Finding::ok(CheckId::AddressNames, found),
        Status::Warn => Finding::warn(CheckId::AddressNames, found, fixes),
        _ => Finding::fail(CheckId::AddressNames, found, fixes),
    });
    names.mismatched
}

/// What `addresses.names` found so far.
struct Names {
    good: Vec<String>,
    bad: Vec<String>,
    fixes: Vec<String>,
    worst: Status,
    /// Local ports whose certificate does not cover the name.
    mismatched: BTreeSet<u16>,
}

impl Names {
    fn new() -> Self {
        Self {
            good: Vec::new(),
            bad: Vec::new(),
            fixes: Vec::new(),
            worst: Status::Ok,
            mismatched: BTreeSet::new(),
        }
    }

    /// The certificate a forwarded port shows, against the name its clients check.
    fn judge(
        &mut self,
        ctx: &Context,
        t: &Service,
        bypassed: &BTreeSet<String>,
        probes: &mut Probes,
    ) {
        let (speaks, name) = if t.kafka {
            (probe::kafka("127.0.0.1", t.port, &t.host), t.host.clone())
        } else {
            let h = mysql_host(ctx);
            (probe::mysql("127.0.0.1", t.port, &h), h)
        };
        let leaf = speaks.leaf().map(Cert::from_der);
        probes.insert("127.0.0.1", t.port, speaks.clone());
        let leaf = match leaf {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                self.worst = Status::Fail;
                self.bad
                    .push(format!("{}'s certificate cannot be read: {e}", t.what));
                self.fixes.push(
                    "ask the server's admin to reissue it with `shiqi-ca-agent server-cert`"
                        .to_owned(),
                );
                return;
            }
            // Not TLS, or no certificate shown: `protocol` says what it is.
            None => return,
        };
        if leaf.covers_host(&name) {
            self.good.push(format!("{} covers `{name}`", t.what));
            return;
        }
        let names: Vec<String> = leaf
            .dns_names()
            .iter()
            .cloned()
            .chain(leaf.ip_addresses().iter().map(ToString::to_string))
            .collect();
        let reissue = reissue(&leaf, t.kafka, &name, &names);
        if t.kafka && bypassed.contains(&t.host) {
            // The name is already wrong on this machine; whether the certificate must cover it
            // depends on how that is fixed (a hosts entry keeps the name, `localhost` does not).
            self.worst = self.worst.max(Status::Warn);
            self.bad.push(format!(
                "{}'s certificate names {} but not `{name}`; it matters if `{name}` is kept \
                 when fixing its address (see `addresses.resolve`)",
                t.what,
                quoted(&names)
            ));
            self.fixes.push(format!(
                "advertising `localhost:{}` fixes both; keeping `{name}` also needs the \
                 certificate reissued with that name: {reissue}",
                t.port
            ));
        } else {
            self.worst = Status::Fail;
            self.mismatched.insert(t.port);
            let client = if t.kafka {
                "the Java client and librdkafka check the advertised name and refuse it \
                 (\"No subject alternative DNS name matching\")"
            } else {
                "`ssl-verify-server-cert` in `my.cnf` makes the client refuse it"
            };
            self.bad.push(format!(
                "{}'s certificate names {} but not `{name}`: {client}",
                t.what,
                quoted(&names)
            ));
            self.fixes
                .push(format!("reissue the certificate with that name: {reissue}"));
        }
    }
}

/// The server's admin's command that reissues `leaf` with `name` besides the `names` it has.
fn reissue(leaf: &Cert, kafka: bool, name: &str, names: &[String]) -> String {
    let kind = if kafka { "kafka" } else { "mysql" };
    format!(
        "`shiqi-ca-agent server-cert {} --kind {kind} --san {name}{}` (by the server's admin)",
        leaf.common_name().unwrap_or("NAME"),
        names
            .iter()
            .map(|n| format!(" --san {n}"))
            .collect::<String>()
    )
}

fn quoted(names: &[String]) -> String {
    if names.is_empty() {
        return "no name at all".to_owned();
    }
    format!("`{}`", names.join("`, `"))
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
mod tests {
    use super::*;
    use crate::doctor::testing::{
        FakeMysql, context, fake_endpoint, fake_mysql, local_mysql_profile, local_profile,
        running_tunnel, running_tunnel_with_mysql,
    };

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn judges_where_a_name_points() {
        assert_eq!(judge(&[ip("127.0.0.1")]), Resolution::Tunnel);
        assert_eq!(judge(&[ip("::1"), ip("127.0.0.1")]), Resolution::Tunnel);
        assert_eq!(
            judge(&[ip("127.0.0.1"), ip("10.0.0.5")]),
            Resolution::Partly(vec![ip("10.0.0.5")])
        );
        // Debian's 127.0.1.1 hostname entry is loopback, but the tunnel is not there.
        assert!(matches!(
            judge(&[ip("127.0.1.1")]),
            Resolution::Elsewhere(_)
        ));
        assert!(matches!(judge(&[ip("::1")]), Resolution::Elsewhere(_)));
        assert!(matches!(judge(&[]), Resolution::Unresolved(_)));
        assert_eq!(resolve("127.0.0.1", 1), Resolution::Tunnel);
    }

    #[tokio::test]
    async fn local_mode_resolves_nothing_here_and_the_endpoint_vouches_for_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(3, "127.0.0.1");
        running_tunnel(dir.path(), &ports, None);
        let ctx = context(dir.path(), &local_profile(&ports), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = forwards::check(&ctx, &mut st, forwards::Needs::default(), &mut probes).await;
        let found = check(&ctx, &mut st, &tunnel, &mut probes);
        let resolve = &st.checks[1];
        assert_eq!(
            (resolve.check, resolve.status),
            (CheckId::AddressResolve, Status::Skip)
        );
        assert_eq!(
            resolve.found.as_str(),
            "does not apply: with the local endpoint the laptop never dials the advertised \
             names (the tunnel does, on the server's side)"
        );
        let names = &st.checks[2];
        assert_eq!(
            (names.check, names.status),
            (CheckId::AddressNames, Status::Ok),
            "{names:?}"
        );
        assert_eq!(
            names.found.as_str(),
            "broker 1 covers `broker-1.kafka.invalid` (checked by the local endpoint); broker 2 \
             covers `broker-2.kafka.invalid` (checked by the local endpoint)"
        );
        assert!(found.bypassed.is_empty());
    }

    #[tokio::test]
    async fn the_endpoints_mysql_port_shows_no_certificate_to_check() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(3, "127.0.0.1");
        let db = fake_mysql(FakeMysql::Plain);
        running_tunnel_with_mysql(dir.path(), &ports, db);
        let ctx = context(dir.path(), &local_mysql_profile(&ports, db), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = forwards::check(&ctx, &mut st, forwards::Needs::default(), &mut probes).await;
        let found = check(&ctx, &mut st, &tunnel, &mut probes);
        let names = &st.checks[2];
        assert_eq!(names.status, Status::Ok, "{names:?}");
        let mysql = "MySQL not checked here: its port is the local endpoint's, which offers no \
                     TLS and verifies the server's certificate itself (signed by `ca.crt`, \
                     naming `db.shiqi.invalid`)";
        assert!(
            names.found.ends_with(&format!(
                "broker 2 covers `broker-2.kafka.invalid` (checked by the local endpoint); \
                 {mysql}"
            )),
            "{names:?}"
        );
        assert!(found.mismatched.is_empty());

        // Nothing else to look at: a skip with the reason.
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(1, "127.0.0.1");
        running_tunnel_with_mysql(dir.path(), &ports, db);
        let ctx = context(dir.path(), &local_mysql_profile(&ports, db), &[], &[]);
        let mut st = Findings::default();
        let mut probes = Probes::default();
        let tunnel = forwards::check(&ctx, &mut st, forwards::Needs::default(), &mut probes).await;
        check(&ctx, &mut st, &tunnel, &mut probes);
        let names = &st.checks[2];
        assert_eq!(
            (names.check, names.status, names.found.as_str()),
            (CheckId::AddressNames, Status::Skip, mysql),
            "{:?}",
            st.checks
        );
    }

    #[test]
    fn direct_names_that_do_not_resolve_point_to_the_local_endpoint() {
        // Brokers on one port: a hosts entry cannot tell them apart, so it is not offered.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = local_profile(&[9092]);
        p.endpoint = crate::profile::Endpoint::Direct;
        let ctx = context(dir.path(), &p, &[], &[]);
        let mut st = Findings::default();
        let found = check(&ctx, &mut st, &Tunnel::default(), &mut Probes::default());
        let c = &st.checks[0];
        assert_eq!(
            (c.check, c.status),
            (CheckId::AddressResolve, Status::Fail),
            "{c:?}"
        );
        let fix = c.fix.as_deref().unwrap_or_default();
        assert!(
            fix.starts_with(
                "use the local endpoint: `shiqi-connect tunnel up saige --endpoint local` (the \
                 tunnel then dials the advertised names on the server's side, so they need not \
                 resolve here); or have broker 1 advertise `localhost` on a port of its own"
            ),
            "{fix}"
        );
        assert!(!fix.contains("/etc/hosts"), "{fix}");
        assert!(found.bypassed.contains("broker-2.kafka.invalid"));

        // Names on ports of their own: a hosts entry still works, after the endpoint.
        p.brokers[1].port = shiqi_ca::Port::try_from(9094).expect("port");
        let ctx = context(dir.path(), &p, &[], &[]);
        let mut st = Findings::default();
        check(&ctx, &mut st, &Tunnel::default(), &mut Probes::default());
        let fix = st.checks[0].fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains(
                "resolve here); or add `127.0.0.1 broker-1.kafka.invalid` to `/etc/hosts`, or \
                 have broker 1 advertise `localhost:9093`"
            ),
            "{fix}"
        );
    }
}
