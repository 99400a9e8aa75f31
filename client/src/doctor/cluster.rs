//! Any cluster a config points at, with no profile: `doctor --config FILE` and `doctor
//! --bootstrap HOST:PORT` contact what the file names, read-only and with bounded timeouts, the
//! way its client would (seed: wasted-weekend-on-kafka).
//!
//! - `cluster.bootstrap`: each bootstrap server, at every address it resolves to, and what it
//!   speaks (a ClientHello, a plaintext `ApiVersions`) against the file's `security.protocol`:
//!   PLAINTEXT against TLS is the Java client's `OutOfMemoryError` (KAFKA-4090).
//! - `cluster.brokers`: with credentials that work, the cluster's `Metadata`, then every
//!   advertised broker from here: does its name resolve, to the same place the bootstrap
//!   answered from (a name that resolves elsewhere, or to this machine's own address, is the
//!   hairpin of the journal), does it answer, does its certificate carry the name.
//! - `cluster.mysql`: an option file's server: TLS offered, and the certificate login.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use shiqi_ca::Secret;
use shiqi_ca::cert::Cert;

use crate::doctor::configs::{ConfigFile, Kind};
use crate::doctor::protocol::{self, bootstrap, declared};
use crate::doctor::{CheckId, Context, Finding, Findings, JVM_DNS_NOTE};
use crate::probe::kafka_wire::AdvertisedBroker;
use crate::probe::speaks::{self as probe, Speaks};
use crate::probe::tls::ProfileTls;

/// How long the metadata request and the MySQL login may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What one Kafka client config (or a bare `--bootstrap`) says.
struct Client {
    /// The file name, or `--bootstrap`.
    label: String,
    /// The file, as the user would write it (`~`), for fixes.
    shown: String,
    /// Java or librdkafka (`None`: no file).
    kind: Option<Kind>,
    /// `security.protocol` as the client will use it (`None`: no file to say).
    protocol: Option<String>,
    /// The line that says it (`None`: the default).
    line: Option<usize>,
    /// Bootstrap servers.
    servers: Vec<(String, u16)>,
    /// The TLS identity the file names, or why there is none usable.
    tls: Result<ProfileTls, String>,
}

impl Client {
    fn wants_tls(&self) -> Option<bool> {
        self.protocol.as_deref().map(|p| p.ends_with("SSL"))
    }

    /// `security.protocol=SSL` as this client spells it.
    fn ssl_line(&self) -> &'static str {
        match self.kind {
            Some(Kind::Librdkafka) => "security.protocol=ssl",
            _ => "security.protocol=SSL",
        }
    }
}

/// `cluster.*`: only when no profile is checked (a profile's own checks go through its tunnel).
pub(crate) async fn check(ctx: &Context, st: &mut Findings, extra_bootstrap: &[String]) {
    if ctx.dir.is_some() {
        return;
    }
    let mut clients: Vec<Client> = ctx
        .configs
        .iter()
        .filter(|c| c.kind != Kind::Mysql && c.unreadable.is_none())
        .map(|f| from_file(ctx, f))
        .collect();
    for b in extra_bootstrap {
        clients.push(Client {
            label: "--bootstrap".to_owned(),
            shown: "your client config".to_owned(),
            kind: None,
            protocol: None,
            line: None,
            servers: bootstrap(b),
            tls: Err("`--bootstrap` gives no client certificate".to_owned()),
        });
    }
    for client in &clients {
        let answered = bootstrap_check(st, client);
        match answered {
            Some(at) => brokers_check(st, client, &at).await,
            None => st.push(
                Finding::skip(
                    CheckId::ClusterBrokers,
                    "needs a bootstrap server that speaks what the client expects",
                )
                .about(&client.label),
            ),
        }
    }
    for file in ctx
        .configs
        .iter()
        .filter(|c| c.kind == Kind::Mysql && c.unreadable.is_none())
    {
        mysql_check(ctx, st, file).await;
    }
}

fn from_file(ctx: &Context, file: &ConfigFile) -> Client {
    let d = declared(file);
    let servers = file
        .get("bootstrap.servers")
        .or_else(|| file.get("metadata.broker.list"))
        .and_then(|e| e.value.as_deref())
        .map(bootstrap)
        .unwrap_or_default();
    Client {
        label: file.name(),
        shown: ctx.show(&file.path),
        kind: Some(file.kind),
        protocol: Some(d.protocol),
        line: d.line,
        servers,
        tls: credentials(file),
    }
}

fn value<'a>(file: &'a ConfigFile, key: &str) -> Option<&'a str> {
    file.get(key)
        .and_then(|e| e.value.as_deref())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The client identity a config names: PEM files (librdkafka) or PKCS#12 stores (both).
fn credentials(file: &ConfigFile) -> Result<ProfileTls, String> {
    let name = file.name();
    let pem = (
        value(file, "ssl.ca.location"),
        value(file, "ssl.certificate.location"),
        value(file, "ssl.key.location"),
    );
    if let (Some(ca), Some(cert), Some(key)) = pem {
        return Ok(ProfileTls::from_pem_files(
            Path::new(ca),
            Path::new(cert),
            Path::new(key),
        ));
    }
    let Some(keystore) = value(file, "ssl.keystore.location") else {
        return Err(format!("`{name}` names no client certificate"));
    };
    let (keys, _) = open_store(keystore, value(file, "ssl.keystore.password"))?;
    let roots = match (
        value(file, "ssl.truststore.location"),
        value(file, "ssl.ca.location"),
    ) {
        (Some(trust), _) => open_store(trust, value(file, "ssl.truststore.password"))?.1,
        (None, Some(ca)) => {
            let text = std::fs::read_to_string(ca).map_err(|e| format!("`{ca}`: {e}"))?;
            shiqi_ca::cert::pem_blocks(&text, "CERTIFICATE").map_err(|e| format!("`{ca}`: {e}"))?
        }
        (None, None) => {
            return Err(format!(
                "`{name}` names no truststore, so the Java client trusts only the JVM's public \
                 CAs; a private CA's brokers fail its handshake"
            ));
        }
    };
    let (chain, key) = keys;
    let Some(key) = key else {
        return Err(format!("`{keystore}` holds no private key"));
    };
    Ok(ProfileTls::from_der(roots, chain, key.expose().clone()))
}

type Stores = ((Vec<Vec<u8>>, Option<Secret<Vec<u8>>>), Vec<Vec<u8>>);

/// A PKCS#12 store's key chain and trusted certificates.
fn open_store(path: &str, password: Option<&str>) -> Result<Stores, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("`{path}`: {e}"))?;
    let password = Secret::new(password.unwrap_or_default().to_owned());
    let m = shiqi_ca::keystore::material(&bytes, &password).map_err(|e| {
        format!(
            "`{path}`: {e} (doctor reads PKCS#12 stores; convert a JKS one with `keytool \
             -importkeystore -srckeystore {path} -destkeystore store.p12 -deststoretype pkcs12`)"
        )
    })?;
    Ok(((m.chain, m.key), m.trusted))
}

/// Where a bootstrap server answered, and how.
struct Answered {
    host: String,
    port: u16,
    addr: SocketAddr,
    tls: bool,
}

/// `cluster.bootstrap`, one line per server. Returns the first server that speaks what the
/// client expects.
fn bootstrap_check(st: &mut Findings, c: &Client) -> Option<Answered> {
    if c.servers.is_empty() {
        st.push(
            Finding::fail(
                CheckId::ClusterBootstrap,
                format!("`{}` names no `bootstrap.servers`", c.label),
                format!("add `bootstrap.servers=HOST:PORT` to `{}`", c.shown),
            )
            .about(&c.label),
        );
        return None;
    }
    let mut first = None;
    for (host, port) in &c.servers {
        let (finding, answered) = one_server(c, host, *port);
        st.push(finding.about(format!("{} {host}:{port}", c.label)));
        if first.is_none() {
            first = answered;
        }
    }
    first
}

fn one_server(c: &Client, host: &str, port: u16) -> (Finding, Option<Answered>) {
    let id = CheckId::ClusterBootstrap;
    let addrs = match resolve(host, port) {
        Ok(a) => a,
        Err(why) => {
            return (
                Finding::fail(
                    id,
                    format!("`{host}` does not resolve on this machine: {why}"),
                    format!(
                        "check the name in `bootstrap.servers` of `{}`, or add it to /etc/hosts",
                        c.shown
                    ),
                )
                .note(JVM_DNS_NOTE),
                None,
            );
        }
    };
    let heard: Vec<(SocketAddr, Speaks)> = addrs
        .iter()
        .map(|a| (*a, probe::kafka(&a.ip().to_string(), port, host)))
        .collect();
    let talking: Vec<&(SocketAddr, Speaks)> = heard
        .iter()
        .filter(|(_, s)| s.is_tls() || *s == Speaks::PlainKafka)
        .collect();
    let all = heard
        .iter()
        .map(|(a, s)| format!("{} {}", a.ip(), s.describe()))
        .collect::<Vec<_>>()
        .join("; ");
    let Some((addr, speaks)) = talking.first().map(|(a, s)| (*a, s.clone())) else {
        return (
            Finding::fail(
                id,
                format!("no Kafka at `{host}:{port}`: {all}"),
                format!(
                    "check that a broker listens there (its `listeners`), and that the address \
                     in `{}` is the one clients use (a tunnel must be up first)",
                    c.shown
                ),
            ),
            None,
        );
    };
    let answered = Answered {
        host: host.to_owned(),
        port,
        addr,
        tls: speaks.is_tls(),
    };
    let partial = if talking.len() < heard.len() {
        format!(" (only some of its addresses answer: {all})")
    } else {
        String::new()
    };
    judge_server(c, answered, &speaks, &partial)
}

/// `cluster.bootstrap` for a server that speaks Kafka (`speaks`), against what the client
/// expects; the server again when it does.
fn judge_server(
    c: &Client,
    answered: Answered,
    speaks: &Speaks,
    partial: &str,
) -> (Finding, Option<Answered>) {
    let id = CheckId::ClusterBootstrap;
    let (addr, port, port_tls) = (answered.addr, answered.port, answered.tls);
    let said = match (c.line, &c.protocol) {
        (Some(l), Some(p)) => format!("`{}` line {l} says `security.protocol={p}`", c.label),
        (None, Some(_)) => format!(
            "`{}` sets no `security.protocol`, so the client uses `PLAINTEXT`",
            c.label
        ),
        (_, None) => String::new(),
    };
    match c.wants_tls() {
        None => {
            let need = if port_tls {
                "clients need `security.protocol=SSL` and a client certificate"
            } else {
                "clients need `security.protocol=PLAINTEXT`"
            };
            (
                Finding::ok(
                    id,
                    format!("{} speaks {}{partial}: {need}", addr, speaks.describe()),
                ),
                Some(answered),
            )
        }
        Some(wants) if wants == port_tls => (
            Finding::ok(
                id,
                format!(
                    "{addr} speaks {}, as `security.protocol={}` expects{partial}",
                    speaks.describe(),
                    c.protocol.as_deref().unwrap_or_default()
                ),
            ),
            Some(answered),
        ),
        Some(false) => {
            let consequence = if c.kind == Some(Kind::Librdkafka) {
                "librdkafka fails with \"Disconnected while requesting ApiVersion: might be \
                 caused by incorrect security.protocol configuration (connecting to a SSL \
                 listener?)\""
                    .to_owned()
            } else {
                protocol::java_oom(&addr.ip().to_string(), port)
            };
            (
                Finding::fail(
                    id,
                    format!("{said}, but {addr} speaks TLS: {consequence}"),
                    format!("add the line `{}` to `{}`", c.ssl_line(), c.shown),
                ),
                None,
            )
        }
        Some(true) => (
            Finding::fail(
                id,
                format!(
                    "{said}, but {addr} is a plaintext listener: the client's TLS handshake gets \
                     a Kafka answer instead and fails (\"SSL handshake failed\" in Java, \"SSL \
                     handshake failed: … wrong version number\" in librdkafka)"
                ),
                format!(
                    "point `bootstrap.servers` in `{}` at the brokers' SSL listener (the \
                     broker's `listeners` setting names each port's protocol), or use \
                     `security.protocol=PLAINTEXT` if this cluster has no TLS",
                    c.shown
                ),
            ),
            None,
        ),
    }
}

fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    let mut addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .collect();
    addrs.dedup();
    if addrs.is_empty() {
        return Err("no address".to_owned());
    }
    Ok(addrs)
}

/// `cluster.brokers`: the cluster's metadata, then each advertised broker from here.
async fn brokers_check(st: &mut Findings, c: &Client, at: &Answered) {
    let id = CheckId::ClusterBrokers;
    let tls = if at.tls {
        match &c.tls {
            Ok(t) => Some(t),
            Err(why) => {
                st.push(
                    Finding::skip(
                        id,
                        format!("the brokers require a client certificate, and {why}"),
                    )
                    .about(&c.label),
                );
                return;
            }
        }
    } else {
        None
    };
    let brokers = match crate::probe::kafka::metadata_at(at.addr, &at.host, tls, TIMEOUT).await {
        Ok(b) => b,
        Err(why) => {
            st.push(
                Finding::fail(
                    id,
                    format!(
                        "`{}:{}` ({}) did not answer Metadata: {why}",
                        at.host, at.port, at.addr
                    ),
                    format!(
                        "check the client certificate, key and truststore that `{}` names",
                        c.shown
                    ),
                )
                .about(&c.label),
            );
            return;
        }
    };
    let mine = crate::os::addresses::local();
    for b in &brokers {
        let subject = format!("{} broker {} {}:{}", c.label, b.id, b.host, b.port);
        st.push(one_broker(at, b, &mine).about(subject));
    }
}

/// The host and port a broker advertises, when they are usable.
fn advertised(b: &AdvertisedBroker) -> Result<(shiqi_ca::Host, u16), Finding> {
    let id = CheckId::ClusterBrokers;
    let Ok(port) = u16::try_from(b.port) else {
        return Err(Finding::fail(
            id,
            format!("broker {} advertises port {}", b.id, b.port),
            format!("fix `advertised.listeners` on broker {}", b.id),
        ));
    };
    // Every fix pastes the host into /etc/hosts, a command or a certificate request: only a
    // strict DNS name or IP may go there (the cluster is plaintext, so anyone on the path can
    // advertise `evil\n1.2.3.4 bank.com`).
    match b.host.parse::<shiqi_ca::Host>() {
        Ok(h) => Ok((h, port)),
        Err(e) => Err(Finding::fail(
            id,
            format!("broker {} advertises an unusable host: {e}", b.id),
            format!(
                "set broker {}'s `advertised.listeners` to a DNS name or an IP address; doctor \
                 suggests nothing to paste for a host that is neither",
                b.id
            ),
        )),
    }
}

/// Whether `host`, resolving to `ips`, leads somewhere else than where the bootstrap answered
/// (`answered_ip`), and how; `mine` are this machine's own addresses.
fn hairpin(
    host: &shiqi_ca::Host,
    ips: &[IpAddr],
    answered_ip: IpAddr,
    mine: &[IpAddr],
) -> Option<String> {
    let shown: Vec<String> = ips.iter().map(ToString::to_string).collect();
    let shown = shown.join(", ");
    if answered_ip.is_loopback() && !ips.iter().any(IpAddr::is_loopback) {
        Some(format!(
            "the bootstrap answered on this machine ({answered_ip}, a tunnel), but `{}` \
             resolves to {shown}: the client leaves the tunnel for this broker",
            host
        ))
    } else if let Some(own) = ips.iter().find(|ip| !ip.is_loopback() && mine.contains(ip)) {
        Some(format!(
            "`{}` resolves to {own}, this machine's own address: the client connects back to \
             this machine (a hairpin through its own public address), not to the broker",
            host
        ))
    } else if !ips.contains(&answered_ip)
        && ips.iter().all(|ip| ip.is_ipv4() != answered_ip.is_ipv4())
    {
        Some(format!(
            "`{}` resolves only to {shown}, another address family than {answered_ip}, where the \
             bootstrap answered",
            host
        ))
    } else {
        None
    }
}

/// A broker's certificate (`leaf`) that does not name the host it advertises.
fn name_not_covered(b: &AdvertisedBroker, host: &shiqi_ca::Host, leaf: &[u8]) -> Option<Finding> {
    let cert = Cert::from_der(leaf).ok()?;
    if cert.covers_host(host.as_str()) {
        return None;
    }
    let names: Vec<String> = cert
        .dns_names()
        .iter()
        .cloned()
        .chain(cert.ip_addresses().iter().map(ToString::to_string))
        .collect();
    Some(Finding::fail(
        CheckId::ClusterBrokers,
        format!(
            "broker {}'s certificate names {}, not `{}`: Java clients check the advertised name \
             (`ssl.endpoint.identification.algorithm=https`) and refuse it",
            b.id,
            names.join(", "),
            host
        ),
        format!(
            "issue the broker certificate with `--san {}` (`shiqi-ca-agent server-cert … --san \
             {}`), or advertise a name it carries",
            host, host
        ),
    ))
}

/// A broker whose advertised `host:port` does not resolve here (`why`).
fn unresolved(
    at: &Answered,
    b: &AdvertisedBroker,
    (host, port): (&shiqi_ca::Host, u16),
    why: &str,
) -> Finding {
    let answered_ip = at.addr.ip();
    Finding::fail(
        CheckId::ClusterBrokers,
        format!(
            "broker {} advertises `{}:{port}`, which does not resolve on this machine ({why}): \
             clients find the cluster through `{}`, then fail on every request this broker \
             leads",
            b.id, host, at.host
        ),
        format!(
            "on this machine, add `{answered_ip} {host}` to /etc/hosts if {answered_ip} reaches \
             that broker (a tunnel: forward its port too); or set broker {}'s \
             `advertised.listeners` to a name clients resolve",
            b.id
        ),
    )
    .note(JVM_DNS_NOTE)
}

fn one_broker(at: &Answered, b: &AdvertisedBroker, mine: &[IpAddr]) -> Finding {
    let id = CheckId::ClusterBrokers;
    let (host, port) = match advertised(b) {
        Ok(hp) => hp,
        Err(f) => return f,
    };
    let answered_ip = at.addr.ip();
    let hosts_line = format!("{answered_ip} {host}");
    let addrs = match resolve(host.as_str(), port) {
        Ok(a) => a,
        Err(why) => return unresolved(at, b, (&host, port), &why),
    };
    let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
    // The place: the bootstrap answered on this machine (a tunnel) or elsewhere.
    let hairpin = hairpin(&host, &ips, answered_ip, mine);
    let probe_at = |ip: &IpAddr| {
        if at.tls {
            probe::tls(&ip.to_string(), port, host.as_str())
        } else {
            probe::kafka(&ip.to_string(), port, host.as_str())
        }
    };
    let heard: Vec<(IpAddr, Speaks)> = ips.iter().map(|ip| (*ip, probe_at(ip))).collect();
    let fix_place = format!(
        "make `{}` resolve here to where the broker is reached ({answered_ip}, like the \
         bootstrap): `{hosts_line}` in this machine's /etc/hosts; or give broker {} an \
         `advertised.listeners` name that resolves to the same place on the server and here",
        host, b.id
    );
    let Some((ip, speaks)) = heard
        .iter()
        .find(|(_, s)| s.is_tls() || *s == Speaks::PlainKafka)
    else {
        let why = heard
            .iter()
            .map(|(ip, s)| format!("{ip} {}", s.describe()))
            .collect::<Vec<_>>()
            .join("; ");
        let found = match &hairpin {
            Some(h) => format!(
                "broker {} at `{}:{port}` does not answer ({why}): {h}",
                b.id, host
            ),
            None => format!(
                "broker {} at `{}:{port}` does not answer: {why}",
                b.id, host
            ),
        };
        return Finding::fail(id, found, fix_place).note(JVM_DNS_NOTE);
    };
    if at.tls
        && let Some(leaf) = speaks.leaf()
        && let Some(wrong) = name_not_covered(b, &host, leaf)
    {
        return wrong;
    }
    let found = format!(
        "broker {} `{}:{port}` → {ip}: {}{}",
        b.id,
        host,
        speaks.describe(),
        if at.tls {
            ", certificate covers the name"
        } else {
            ""
        }
    );
    match hairpin {
        Some(h) => Finding::warn(id, format!("{found}; but {h}"), fix_place).note(JVM_DNS_NOTE),
        None => Finding::ok(id, found),
    }
}

/// `cluster.mysql`: the server an option file names: TLS, then the certificate login.
async fn mysql_check(ctx: &Context, st: &mut Findings, file: &ConfigFile) {
    let id = CheckId::ClusterMysql;
    let label = file.name();
    let host = value(file, "host").unwrap_or("localhost").to_owned();
    let port: u16 = value(file, "port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(3306);
    let tcp = value(file, "protocol").is_some_and(|p| p.eq_ignore_ascii_case("tcp"));
    if host == "localhost" && !tcp {
        st.push(
            Finding::warn(
                id,
                format!(
                    "`{label}` says `host=localhost`, which the mysql client takes as its Unix \
                     socket, not TCP: a tunnel's port is never used"
                ),
                format!("set `host=127.0.0.1` in `{}`", ctx.show(&file.path)),
            )
            .about(&label),
        );
        return;
    }
    let speaks = probe::mysql(&host, port, &host);
    let finding = match &speaks {
        Speaks::Mysql {
            tls: false,
            version,
            ..
        } => Finding::fail(
            id,
            format!(
                "MySQL at `{host}:{port}` ({version}) offers no TLS: no certificate login can work"
            ),
            "the server's admin must turn TLS on in mysqld (`ssl_cert`, `ssl_key`, `ssl_ca`)",
        ),
        Speaks::Mysql { tls: true, .. } => login(file, &host, port, &speaks).await,
        other => Finding::fail(
            id,
            format!("no MySQL at `{host}:{port}`: {}", other.describe()),
            format!(
                "check `host` and `port` in `{}` (a tunnel must be up first)",
                ctx.show(&file.path)
            ),
        ),
    };
    st.push(finding.about(label));
}

async fn login(file: &ConfigFile, host: &str, port: u16, speaks: &Speaks) -> Finding {
    let id = CheckId::ClusterMysql;
    let offered = format!("MySQL at `{host}:{port}`: {}", speaks.describe());
    let (Some(ca), Some(cert), Some(key)) = (
        value(file, "ssl-ca").or_else(|| value(file, "ssl_ca")),
        value(file, "ssl-cert").or_else(|| value(file, "ssl_cert")),
        value(file, "ssl-key").or_else(|| value(file, "ssl_key")),
    ) else {
        return Finding::ok(
            id,
            format!("{offered}; the file names no client certificate, so no login was tried"),
        );
    };
    let user = value(file, "user").unwrap_or_default();
    let files = crate::probe::mysql::Files {
        ca: &PathBuf::from(ca),
        cert: &PathBuf::from(cert),
        key: &PathBuf::from(key),
    };
    // The server's certificate names the server as it sees itself; the option file's host
    // may be a tunnel's 127.0.0.1, so the name checked is the certificate's own.
    let name = speaks
        .leaf()
        .and_then(|l| Cert::from_der(l).ok())
        .and_then(|c| c.dns_names().first().cloned())
        .unwrap_or_else(|| host.to_owned());
    match crate::probe::mysql::current_user_at(host, port, &name, user, &files, TIMEOUT).await {
        Ok(who) => Finding::ok(
            id,
            format!("{offered}; certificate login as `{user}`: `SELECT CURRENT_USER()` = `{who}`"),
        ),
        Err(why) => Finding::fail(
            id,
            format!("{offered}; the certificate login as `{user}` failed: {why}"),
            format!(
                "the server needs an account `{user}` that requires this certificate's subject \
                 and issuer (`SHOW CREATE USER` on the server shows what it requires)"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use shiqi_ca::issue::{Ca, Validity};
    use shiqi_ca::key::{KeyType, PrivateKey};
    use shiqi_ca::keystore::{P12Format, keystore, truststore};

    use super::*;

    /// A Java config naming real PKCS#12 stores made by a throwaway CA, with `extra` lines.
    fn java_config(dir: &Path, password: &str, extra: &str) -> ConfigFile {
        let now = time::OffsetDateTime::now_utc();
        let ca = Ca::create(
            KeyType::EcdsaP256,
            "test CA",
            Validity::starting_now(now, time::Duration::days(2)),
        )
        .expect("CA");
        let key = PrivateKey::generate(KeyType::EcdsaP256).expect("key");
        let serial = shiqi_ca::Serial::random();
        let cert = ca
            .issue_for_key(
                "saige",
                &key,
                &serial,
                Validity::starting_now(now, time::Duration::days(1)),
            )
            .expect("cert");
        let secret = Secret::new("right".to_owned());
        let ks = keystore(&key, &cert.pem(), "client", &secret, P12Format::Modern).expect("ks");
        let ts = truststore(&ca.cert().pem(), "ca", &secret, P12Format::Modern).expect("ts");
        let (ks_path, ts_path) = (dir.join("k.p12"), dir.join("t.p12"));
        crate::fsutil::write_private(&ks_path, &ks).expect("write");
        crate::fsutil::write_private(&ts_path, &ts).expect("write");
        let text = format!(
            "bootstrap.servers=localhost:9092\nsecurity.protocol=SSL\n\
             ssl.keystore.location={}\nssl.keystore.password={password}\n{extra}",
            crate::os::files::portable(&ks_path)
        )
        .replace("TRUST", &crate::os::files::portable(&ts_path));
        ConfigFile::parse(Kind::Java, &text)
    }

    #[test]
    fn a_java_config_gives_its_identity_or_says_what_is_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let trust = "ssl.truststore.location=TRUST\nssl.truststore.password=right\n";
        let ok = java_config(dir.path(), "right", trust);
        assert!(credentials(&ok).is_ok_and(|t| t.config().is_ok()));

        let why = |f: &ConfigFile| credentials(f).err().unwrap_or_default();
        assert!(why(&java_config(dir.path(), "right", "")).contains("names no truststore"));
        assert!(why(&java_config(dir.path(), "wrong", trust)).contains("password"));
        let bare = ConfigFile::parse(Kind::Java, "bootstrap.servers=localhost:9092\n");
        assert!(why(&bare).contains("names no client certificate"));
    }

    #[test]
    fn an_invalid_advertised_host_gets_no_line_to_paste() {
        // A plaintext bootstrap answered on this machine; nothing listens on the broker port.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        let at = Answered {
            host: "127.0.0.1".to_owned(),
            port,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            tls: false,
        };
        let broker = |host: &str| AdvertisedBroker {
            id: 1,
            host: host.to_owned(),
            port: i32::from(port),
        };
        let shown = |f: &Finding| crate::commands::doctor::line(f, false);

        // A valid name that does not answer: the fix names the /etc/hosts line.
        let f = one_broker(&at, &broker("localhost"), &[]);
        let fix = f.fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains("`127.0.0.1 localhost` in this machine's /etc/hosts"),
            "{fix}"
        );

        for (host, escaped) in [
            ("evil\n1.2.3.4 bank.com", "`evil\\n1.2.3.4 bank.com`"),
            ("a b", "`a b`"),
            ("x\u{1b}]0;t\u{7}", "`x\\u{1b}]0;t\\u{7}`"),
        ] {
            let f = one_broker(&at, &broker(host), &[]);
            let text = shown(&f);
            assert_eq!(f.status, crate::doctor::Status::Fail, "{text}");
            assert!(f.found.contains("advertises an unusable host"), "{text}");
            assert!(f.found.contains(escaped), "{text}");
            let fix = f.fix.as_deref().unwrap_or_default();
            assert!(
                !fix.contains("/etc/hosts") && !fix.contains("--san"),
                "{text}"
            );
            assert!(!fix.contains("bank.com") && !fix.contains("a b"), "{text}");
            assert!(!crate::text::has_raw_controls(&text), "{text:?}");
            assert_eq!(text.lines().count(), 2, "{text}");
        }
    }

    #[test]
    fn a_config_says_what_it_expects_in_its_clients_spelling() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = Context::load(&crate::doctor::Inputs {
            home: dir.path().to_owned(),
            profile_dir: None,
            configs: Vec::new(),
            bootstrap: Vec::new(),
        });
        let java = ConfigFile::parse(Kind::Java, "bootstrap.servers=a:1, b:2\n");
        let c = from_file(&ctx, &java);
        assert_eq!(c.servers, [("a".to_owned(), 1), ("b".to_owned(), 2)]);
        assert_eq!((c.protocol.as_deref(), c.line), (Some("PLAINTEXT"), None));
        assert_eq!(
            (c.wants_tls(), c.ssl_line()),
            (Some(false), "security.protocol=SSL")
        );
        let rd = ConfigFile::parse(
            Kind::Librdkafka,
            "metadata.broker.list=h:3\nsecurity.protocol=ssl\n",
        );
        let c = from_file(&ctx, &rd);
        assert_eq!(
            (c.wants_tls(), c.ssl_line(), c.line),
            (Some(true), "security.protocol=ssl", Some(2))
        );
    }
}
