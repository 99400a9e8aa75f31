//! Real logins with the profile's certificate, through the tunnel: Kafka metadata (rdkafka, the
//! PEM files as `librdkafka.conf` names them; metadata for no topics needs no ACL) and
//! `SELECT CURRENT_USER()` (mysql_async over rustls, verifying the server's name). Each is
//! skipped when something it needs failed earlier, so the earlier line stays the one failure.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use mysql_async::prelude::Queryable as _;
use mysql_async::{ClientIdentity, Conn, OptsBuilder, SslOpts};
use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::error::KafkaError;
use shiqi_ca::protocol::Broker;

use crate::doctor::probe::Speaks;
use crate::doctor::tunnel;
use crate::doctor::{Check, CheckId, Context, State, Status, needs};
use crate::profile::files as pf;

/// How long each login may take.
const TIMEOUT: Duration = Duration::from_secs(15);

/// `login.*`.
pub async fn check(ctx: &Context, st: &mut State) {
    let kafka = kafka(ctx, st).await;
    st.push(kafka);
    let mysql = mysql(ctx, st).await;
    st.push(mysql);
}

/// Why a login with the certificate cannot work yet, if it cannot.
fn certificate_blocker(st: &State) -> Option<String> {
    if let Some(id) = st.first_failed(&[CheckId::CertValid, CheckId::CertChain, CheckId::CertKey]) {
        return Some(needs(id));
    }
    (st.status(CheckId::CertValid) != Some(Status::Ok)
        && st.status(CheckId::CertValid) != Some(Status::Warn))
    .then(|| "the certificate could not be read (see `cert.valid`)".to_owned())
}

fn path(ctx: &Context, file: &str) -> PathBuf {
    ctx.path(file).unwrap_or_else(|| PathBuf::from(file))
}

async fn kafka(ctx: &Context, st: &State) -> Check {
    let id = CheckId::LoginKafka;
    let Ok(profile) = &ctx.profile else {
        return Check::skip(id, "no profile");
    };
    if profile.brokers.is_empty() {
        return Check::skip(id, "the profile has no brokers");
    }
    if let Some(why) = certificate_blocker(st) {
        return Check::skip(id, why);
    }
    let targets: Vec<_> = tunnel::targets(ctx)
        .into_iter()
        .filter(|t| t.kafka)
        .collect();
    if targets.iter().any(|t| st.tunnel_broken.contains(&t.port)) {
        return Check::skip(id, needs(CheckId::Tunnel));
    }
    if !st.bypassed.is_empty() {
        return Check::skip(
            id,
            format!(
                "a Kafka client would go around the tunnel for `{}` ({})",
                st.bypassed.iter().cloned().collect::<Vec<_>>().join("`, `"),
                needs(CheckId::AddressResolve)
            ),
        );
    }
    let not_tls = targets.iter().any(|t| {
        !st.probes
            .get(&("127.0.0.1".to_owned(), t.port))
            .is_some_and(Speaks::is_tls)
    });
    if not_tls {
        return Check::skip(id, "not every broker port speaks TLS (see `protocol`)");
    }
    if targets.iter().any(|t| st.name_mismatch.contains(&t.port)) {
        return Check::skip(id, needs(CheckId::AddressNames));
    }
    let bootstrap = profile
        .brokers
        .iter()
        .map(|b| format!("{}:{}", b.host, b.port))
        .collect::<Vec<_>>()
        .join(",");
    let (ca, crt, key) = (
        path(ctx, pf::CA_CRT),
        path(ctx, pf::CLIENT_CRT),
        path(ctx, pf::CLIENT_KEY),
    );
    let want = profile.brokers.clone();
    let bs = bootstrap.clone();
    let res = tokio::task::spawn_blocking(move || metadata(&bs, &ca, &crt, &key)).await;
    let res = match res {
        Ok(r) => r,
        Err(e) => Err((e.to_string(), Vec::new())),
    };
    match res {
        Ok(mut got) => {
            got.sort();
            compare_brokers(ctx, &want, &got, profile.name.as_str())
        }
        Err((why, log)) => {
            let said = log.iter().take(3).cloned().collect::<Vec<_>>().join(" | ");
            let fix = kafka_fix(&said, ctx);
            Check::fail(
                id,
                format!(
                    "metadata from `{bootstrap}` with `{}` failed: {why}{}",
                    pf::CLIENT_CRT,
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(" (librdkafka: {said})")
                    }
                ),
                fix,
            )
        }
    }
}

fn kafka_fix(said: &str, ctx: &Context) -> String {
    let conf = path(ctx, pf::LIBRDKAFKA_CONF);
    let debug = format!(
        "`kcat -F {} -L -d security,broker` shows the handshake",
        ctx.show(&conf)
    );
    let s = said.to_ascii_lowercase();
    if s.contains("certificate verify failed") {
        format!(
            "the brokers' certificates are not signed by `{}`: the server's CA changed; \
             rebuild the profile (`{}`); {debug}",
            pf::CA_CRT,
            ctx.setup_again()
        )
    } else if s.contains("alert") || s.contains("ssl handshake failed") {
        format!(
            "the brokers refused the client certificate (their truststore must hold the CA that \
             signed `{}`); {debug}",
            pf::CLIENT_CRT
        )
    } else {
        debug
    }
}

/// librdkafka's log and errors, kept for the report.
#[derive(Default)]
struct Recorder {
    lines: Mutex<Vec<String>>,
}

impl Recorder {
    fn push(&self, line: String) {
        if let Ok(mut l) = self.lines.lock()
            && l.len() < 20
            && !l.contains(&line)
        {
            l.push(line);
        }
    }
}

impl ClientContext for Recorder {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
                | RDKafkaLogLevel::Warning
        ) {
            self.push(format!("{fac}: {message}"));
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Recorder {}

type MetadataResult = Result<Vec<Broker>, (String, Vec<String>)>;

fn metadata(bootstrap: &str, ca: &Path, crt: &Path, key: &Path) -> MetadataResult {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "shiqi-connect-doctor")
        .set("security.protocol", "ssl")
        .set("ssl.ca.location", ca.display().to_string())
        .set("ssl.certificate.location", crt.display().to_string())
        .set("ssl.key.location", key.display().to_string())
        .set("ssl.endpoint.identification.algorithm", "https")
        .set("socket.timeout.ms", "10000")
        .set_log_level(RDKafkaLogLevel::Warning);
    let consumer: BaseConsumer<Recorder> = config
        .create_with_context(Recorder::default())
        .map_err(|e| (e.to_string(), Vec::new()))?;
    let result = consumer.fetch_metadata(None, TIMEOUT);
    let log = consumer
        .context()
        .lines
        .lock()
        .map(|l| l.clone())
        .unwrap_or_default();
    let md = result.map_err(|e| (e.to_string(), log))?;
    md.brokers()
        .iter()
        .map(|b| {
            // The cluster's word, shown and compared: parsed like the agent's.
            let refuse =
                |e: shiqi_ca::Error| (format!("broker {} advertises {e}", b.id()), Vec::new());
            let port = u16::try_from(b.port())
                .map_err(|_| shiqi_ca::Error::InvalidPort {
                    port: b.port().into(),
                })
                .and_then(shiqi_ca::Port::try_from)
                .map_err(refuse)?;
            Ok(Broker {
                id: b.id(),
                host: b.host().parse().map_err(refuse)?,
                port,
            })
        })
        .collect()
}

fn compare_brokers(ctx: &Context, want: &[Broker], got: &[Broker], name: &str) -> Check {
    let id = CheckId::LoginKafka;
    let new: Vec<&Broker> = got.iter().filter(|b| !want.contains(b)).collect();
    let gone: Vec<&Broker> = want.iter().filter(|b| !got.contains(b)).collect();
    let listed = got
        .iter()
        .map(|b| format!("{}={}:{}", b.id, b.host, b.port))
        .collect::<Vec<_>>()
        .join(", ");
    let found = format!(
        "metadata as `User:{name}` through the tunnel: {} brokers ({listed})",
        got.len()
    );
    if new.is_empty() && gone.is_empty() {
        return Check::ok(id, found);
    }
    let mut what = Vec::new();
    if !new.is_empty() {
        what.push(format!(
            "the cluster now also advertises {}, which the tunnel does not forward",
            new.iter()
                .map(|b| format!("broker {} at `{}:{}`", b.id, b.host, b.port))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !gone.is_empty() {
        what.push(format!(
            "the profile's {} {} not in the metadata (down, or removed)",
            gone.iter()
                .map(|b| format!("broker {} (`{}:{}`)", b.id, b.host, b.port))
                .collect::<Vec<_>>()
                .join(", "),
            if gone.len() == 1 { "is" } else { "are" }
        ));
    }
    Check::warn(
        id,
        format!("{found}; {}", what.join("; ")),
        format!(
            "refresh the broker list and the tunnel's forwards: `{}`",
            ctx.setup_again()
        ),
    )
}

async fn mysql(ctx: &Context, st: &State) -> Check {
    let id = CheckId::LoginMysql;
    let Ok(profile) = &ctx.profile else {
        return Check::skip(id, "no profile");
    };
    let Some(m) = &profile.mysql else {
        return Check::skip(id, "the profile has no MySQL");
    };
    if let Some(why) = certificate_blocker(st) {
        return Check::skip(id, why);
    }
    if st.tunnel_broken.contains(&m.port.get()) {
        return Check::skip(id, needs(CheckId::Tunnel));
    }
    match st.probes.get(&("127.0.0.1".to_owned(), m.port.get())) {
        Some(Speaks::Mysql { tls: true, .. }) => {}
        _ => return Check::skip(id, "the MySQL port does not offer TLS (see `protocol`)"),
    }
    if st.name_mismatch.contains(&m.port.get()) {
        return Check::skip(id, needs(CheckId::AddressNames));
    }
    let ssl = SslOpts::default()
        .with_root_certs(vec![path(ctx, pf::CA_CRT).into()])
        .with_disable_built_in_roots(true)
        .with_client_identity(Some(ClientIdentity::new(
            path(ctx, pf::CLIENT_CRT).into(),
            path(ctx, pf::CLIENT_KEY).into(),
        )));
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(m.port.get())
        .user(Some(m.user.to_string()))
        .pass(None::<String>)
        .prefer_socket(false)
        .ssl_opts(ssl);
    let login = async {
        let mut conn = Conn::new(opts).await?;
        let who: Option<String> = conn.query_first("SELECT CURRENT_USER()").await?;
        let _ = conn.disconnect().await;
        Ok::<_, mysql_async::Error>(who.unwrap_or_default())
    };
    let shown = ctx.show(&path(ctx, pf::MY_CNF));
    match tokio::time::timeout(TIMEOUT, login).await {
        Ok(Ok(who)) => Check::ok(
            id,
            format!("`SELECT CURRENT_USER()` through the tunnel with the certificate: `{who}`"),
        ),
        Ok(Err(e)) => {
            let why = e.to_string();
            let fix = if why.contains("Access denied") {
                format!(
                    "the server has no account for this certificate: the admin runs \
                     `shiqi-ca-agent mysql-user {}` on the server (or rebuild the profile: `{}`)",
                    profile.name,
                    ctx.setup_again()
                )
            } else {
                format!(
                    "`mysql --defaults-file={shown} -e 'SELECT CURRENT_USER()'` shows the \
                     same with the client's own words"
                )
            };
            Check::fail(
                id,
                format!(
                    "MySQL login as `{}` on 127.0.0.1:{} failed: {why}",
                    m.user, m.port
                ),
                fix,
            )
        }
        Err(_) => Check::fail(
            id,
            format!(
                "MySQL login on 127.0.0.1:{} took longer than {}s",
                m.port,
                TIMEOUT.as_secs()
            ),
            "check the server's MariaDB (`systemctl status mariadb`) and the tunnel",
        ),
    }
}
