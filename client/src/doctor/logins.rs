//! Real logins with the profile's certificate, through the tunnel ([`crate::probe`]): Kafka
//! `Metadata` for no topics (needs no ACL) from the advertised brokers, or from the tunnel's
//! local endpoint (which logs in for the client), and `SELECT CURRENT_USER()` (with the
//! certificate, or in plaintext through the local endpoint, which logs in with it), each
//! verifying the server's name as a client would. Each is skipped when something it needs failed
//! earlier, so the earlier line stays the one failure.

use std::path::PathBuf;
use std::time::Duration;

use shiqi_ca::protocol::Broker;

use crate::doctor::addresses::Addresses;
use crate::doctor::cert::Certificate;
use crate::doctor::forwards::{self, Tunnel};
use crate::doctor::{CheckId, Context, Finding, Findings, Probes, Status, needs};
use crate::probe::kafka_wire::AdvertisedBroker;
use crate::probe::speaks::Speaks;
use crate::probe::{self, ProfileTls};
use crate::profile::{Endpoint, files as pf};

/// How long each login may take.
const TIMEOUT: Duration = Duration::from_secs(15);

/// What the logins need from earlier checks.
#[derive(Clone, Debug, Default)]
pub(crate) struct Earlier {
    /// `cert.*`.
    pub(crate) cert: Certificate,
    /// `tunnel`.
    pub(crate) tunnel: Tunnel,
    /// `addresses.*`.
    pub(crate) addresses: Addresses,
    /// What the ports speak (`tunnel`, `addresses.names`, `protocol`).
    pub(crate) probes: Probes,
}

/// `login.*`.
pub(crate) async fn check(ctx: &Context, st: &mut Findings, earlier: &Earlier) {
    st.push(kafka(ctx, earlier).await);
    st.push(mysql(ctx, earlier).await);
}

/// Why a login with the certificate cannot work yet, if it cannot.
fn certificate_blocker(cert: &Certificate) -> Option<String> {
    if let Some(id) = cert.failed {
        return Some(needs(id));
    }
    cert.unreadable
        .then(|| "the certificate could not be read (see `cert.valid`)".to_owned())
}

fn path(ctx: &Context, file: &str) -> PathBuf {
    ctx.path(file).unwrap_or_else(|| PathBuf::from(file))
}

async fn kafka(ctx: &Context, earlier: &Earlier) -> Finding {
    let id = CheckId::LoginKafka;
    let Ok(profile) = &ctx.profile else {
        return Finding::skip(id, "no profile");
    };
    if profile.brokers.is_empty() {
        return Finding::skip(id, "the profile has no brokers");
    }
    if let Some(why) = certificate_blocker(&earlier.cert) {
        return Finding::skip(id, why);
    }
    if let Endpoint::Local { bootstrap_port, .. } = &profile.endpoint {
        return through_endpoint(ctx, &earlier.tunnel, *bootstrap_port).await;
    }
    let targets: Vec<_> = forwards::services(ctx)
        .into_iter()
        .filter(|t| t.kafka)
        .collect();
    if let Some(why) = direct_blocker(&targets, earlier) {
        return Finding::skip(id, why);
    }
    let bootstrap = profile
        .brokers
        .iter()
        .map(|b| format!("{}:{}", b.host, b.port))
        .collect::<Vec<_>>()
        .join(",");
    let Some(dir) = &ctx.dir else {
        return Finding::skip(id, "no profile");
    };
    let tls = ProfileTls::from_identity(&crate::profile::files::identity(dir));
    let mut failure = None;
    for b in &profile.brokers {
        match probe::kafka::metadata(b.host.as_str(), b.port.get(), &tls, TIMEOUT).await {
            Ok(advertised) => {
                return match brokers(advertised) {
                    Ok(mut got) => {
                        got.sort();
                        let found =
                            compare_brokers(ctx, &profile.brokers, &got, profile.name.as_str());
                        note_not_serving(found, &profile.brokers, &tls).await
                    }
                    Err(why) => Finding::fail(
                        id,
                        format!("metadata from `{}:{}`: {why}", b.host, b.port),
                        "the cluster's `advertised.listeners` must name hosts and ports a \
                         client can use",
                    ),
                };
            }
            Err(why) => {
                failure.get_or_insert(why);
            }
        }
    }
    let why = failure.unwrap_or_default();
    Finding::fail(
        id,
        format!(
            "metadata from `{bootstrap}` with `{}` failed: {why}",
            pf::CLIENT_CRT
        ),
        kafka_fix(&why, ctx),
    )
}

/// Why a direct Kafka login cannot work yet, if it cannot: a broken forward, a name that goes
/// around the tunnel, a port without TLS or a certificate without the name.
fn direct_blocker(targets: &[forwards::Service], earlier: &Earlier) -> Option<String> {
    if targets
        .iter()
        .any(|t| earlier.tunnel.broken.contains(&t.port))
    {
        return Some(needs(CheckId::Tunnel));
    }
    let bypassed = &earlier.addresses.bypassed;
    if !bypassed.is_empty() {
        return Some(format!(
            "a Kafka client would go around the tunnel for `{}` ({})",
            bypassed.iter().cloned().collect::<Vec<_>>().join("`, `"),
            needs(CheckId::AddressResolve)
        ));
    }
    let not_tls = targets.iter().any(|t| {
        !earlier
            .probes
            .get("127.0.0.1", t.port)
            .is_some_and(Speaks::is_tls)
    });
    if not_tls {
        return Some("not every broker port speaks TLS (see `protocol`)".to_owned());
    }
    targets
        .iter()
        .any(|t| earlier.addresses.mismatched.contains(&t.port))
        .then(|| needs(CheckId::AddressNames))
}

/// The local endpoint logs in with the certificate for the client: metadata asked of it in the
/// clear is the login a client of the profile makes.
async fn through_endpoint(ctx: &Context, tunnel: &Tunnel, port: u16) -> Finding {
    let id = CheckId::LoginKafka;
    // A client that bootstraps goes on to every broker's port, as in direct mode.
    let ports = forwards::services(ctx)
        .into_iter()
        .filter(|t| t.endpoint && t.kafka);
    if ports
        .map(|t| t.port)
        .chain([port])
        .any(|p| tunnel.broken.contains(&p))
    {
        return Finding::skip(id, needs(CheckId::Tunnel));
    }
    let name = ctx
        .profile
        .as_ref()
        .map(|p| p.name.to_string())
        .unwrap_or_default();
    let outcome = probe::kafka::endpoint(port, TIMEOUT).await;
    if !outcome.ok {
        let log = ctx.show(&path(ctx, crate::tunnel::LOG));
        return Finding::fail(
            id,
            format!(
                "metadata through the local endpoint on 127.0.0.1:{port} failed: {}",
                outcome.detail
            ),
            format!(
                "`{log}` says what the endpoint met on its way to the brokers; `shiqi-connect \
                 tunnel status {name}` probes each of its ports"
            ),
        );
    }
    let found = Finding::ok(
        id,
        format!(
            "metadata as `User:{name}` through the local endpoint on 127.0.0.1:{port}: {}",
            outcome.detail
        ),
    );
    // Brokers registered but not serving, as the direct check says them (Kafka 4.0+).
    let asked = probe::kafka::registered_plain(port, TIMEOUT)
        .await
        .and_then(probe::kafka::Registered::parse);
    match asked {
        Ok(r) if !r.fenced.is_empty() => {
            let lines: Vec<String> = r
                .fenced
                .iter()
                .map(|b| format!("broker {} is registered but not serving now", b.id))
                .collect();
            Finding::warn(
                id,
                format!("{}; but {}", found.found, lines.join("; ")),
                "start it again (a client that needs its partitions waits until then; the \
                 endpoint reaches it as soon as it serves)",
            )
        }
        _ => found,
    }
}

fn kafka_fix(why: &str, ctx: &Context) -> String {
    let conf = path(ctx, pf::LIBRDKAFKA_CONF);
    let debug = format!(
        "`kcat -F {} -L -d security,broker` shows the handshake",
        ctx.show(&conf)
    );
    // rustls's words (probe::kafka): the brokers' chain, or the brokers' verdict on ours.
    if why.contains("invalid peer certificate") {
        format!(
            "the brokers' certificates are not signed by `{}`: the server's CA changed; \
             rebuild the profile (`{}`); {debug}",
            pf::CA_CRT,
            ctx.setup_again()
        )
    } else if why.contains("alert") || why.contains("refused the client certificate") {
        format!(
            "the brokers refused the client certificate (their truststore must hold the CA that \
             signed `{}`); {debug}",
            pf::CLIENT_CRT
        )
    } else {
        debug
    }
}

/// The cluster's word, shown and compared: parsed into strict types like the agent's answer.
fn brokers(advertised: Vec<AdvertisedBroker>) -> Result<Vec<Broker>, String> {
    advertised
        .into_iter()
        .map(|b| {
            let refuse = |e: shiqi_ca::Error| format!("broker {} advertises {e}", b.id);
            let port = u16::try_from(b.port)
                .map_err(|_| shiqi_ca::Error::InvalidPort {
                    port: b.port.into(),
                })
                .and_then(shiqi_ca::Port::try_from)
                .map_err(refuse)?;
            Ok(Broker {
                id: b.id,
                host: b.host.parse().map_err(refuse)?,
                port,
            })
        })
        .collect()
}

/// An `ok` metadata check turned into a warning naming each broker that is registered but not
/// serving (`DescribeCluster` through the tunnel): the metadata leaves it out, so nothing else
/// says a rolling restart is under way or a broker died. A cluster that cannot tell (Kafka
/// before 4.0) keeps the finding as it is.
async fn note_not_serving(found: Finding, brokers: &[Broker], tls: &ProfileTls) -> Finding {
    if found.status != Status::Ok {
        return found;
    }
    for b in brokers {
        let asked = probe::kafka::registered(b.port.get(), b.host.as_str(), tls, TIMEOUT)
            .await
            .and_then(probe::kafka::Registered::parse);
        let Ok(registered) = asked else { continue };
        let lines = registered.not_serving();
        if lines.is_empty() {
            return found;
        }
        return Finding::warn(
            CheckId::LoginKafka,
            format!("{}; but {}", found.found, lines.join("; ")),
            "start it again (a client that needs its partitions waits until then); OpenSSH's \
             tunnel (`tunnel up --openssh`) cannot add its forward while it runs",
        );
    }
    found
}

fn compare_brokers(ctx: &Context, want: &[Broker], got: &[Broker], name: &str) -> Finding {
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
        return Finding::ok(id, found);
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
    Finding::warn(
        id,
        format!("{found}; {}", what.join("; ")),
        format!(
            "refresh the broker list and the tunnel's forwards: `{}`",
            ctx.setup_again()
        ),
    )
}

async fn mysql(ctx: &Context, earlier: &Earlier) -> Finding {
    let id = CheckId::LoginMysql;
    let Ok(profile) = &ctx.profile else {
        return Finding::skip(id, "no profile");
    };
    let Some(m) = &profile.mysql else {
        return Finding::skip(id, "the profile has no MySQL");
    };
    if let Some(why) = certificate_blocker(&earlier.cert) {
        return Finding::skip(id, why);
    }
    if earlier.tunnel.broken.contains(&m.port.get()) {
        return Finding::skip(id, needs(CheckId::Tunnel));
    }
    let probed = earlier.probes.get("127.0.0.1", m.port.get());
    if let Some(port) = ctx.mysql_endpoint() {
        // The endpoint greets without TLS and logs in with the certificate itself.
        if !matches!(probed, Some(Speaks::Mysql { tls: false, .. })) {
            return Finding::skip(
                id,
                "the local endpoint's MySQL port does not greet as it should (see `protocol`)",
            );
        }
        return match probe::mysql::current_user_plain(port, m.user.as_str(), TIMEOUT).await {
            Ok(who) => Finding::ok(
                id,
                format!(
                    "`SELECT CURRENT_USER()` through the local endpoint on 127.0.0.1:{port} \
                     (plaintext here; the endpoint logs in with the certificate): `{who}`"
                ),
            ),
            Err(why) => Finding::fail(
                id,
                format!(
                    "MySQL login as `{}` through the local endpoint on 127.0.0.1:{port} failed: \
                     {why}",
                    m.user
                ),
                mysql_fix(ctx, &why, true),
            ),
        };
    }
    match probed {
        Some(Speaks::Mysql { tls: true, .. }) => {}
        _ => return Finding::skip(id, "the MySQL port does not offer TLS (see `protocol`)"),
    }
    if earlier.addresses.mismatched.contains(&m.port.get()) {
        return Finding::skip(id, needs(CheckId::AddressNames));
    }
    let Some(dir) = &ctx.dir else {
        return Finding::skip(id, "no profile");
    };
    let files = crate::profile::files::identity(dir);
    let login = probe::mysql::current_user(
        m.port.get(),
        m.host.as_str(),
        m.user.as_str(),
        &files,
        TIMEOUT,
    );
    match login.await {
        Ok(who) => Finding::ok(
            id,
            format!("`SELECT CURRENT_USER()` through the tunnel with the certificate: `{who}`"),
        ),
        Err(why) => Finding::fail(
            id,
            format!(
                "MySQL login as `{}` on 127.0.0.1:{} failed: {why}",
                m.user, m.port
            ),
            mysql_fix(ctx, &why, false),
        ),
    }
}

/// The fix for a failed MySQL login, from the driver's, the server's or (`local`) the
/// endpoint's words (`shiqi-connect tunnel: …`).
fn mysql_fix(ctx: &Context, why: &str, local: bool) -> String {
    let shown = ctx.show(&path(ctx, pf::MY_CNF));
    if local && why.contains("refused the profile's certificate") {
        // In date and signed by `ca.crt` (`cert.*` passed, or this did not run): revoked.
        format!(
            "get a new certificate: `{}` (the server refuses this one: revoked, or not from \
             its CA)",
            ctx.renew_command()
        )
    } else if why.contains("Access denied") {
        format!(
            "the server has no account for this certificate: the admin runs `shiqi-ca-agent \
             mysql-user {}` on the server (or rebuild the profile: `{}`)",
            ctx.name(),
            ctx.setup_again()
        )
    } else if why.starts_with("no answer within") {
        "check the server's MariaDB (`systemctl status mariadb`) and the tunnel".to_owned()
    } else if local && why.contains("shiqi-connect tunnel:") {
        format!(
            "`{}` says what the endpoint met on its way to MySQL; `shiqi-connect tunnel status \
             {}` probes it",
            ctx.tunnel_log(),
            ctx.name()
        )
    } else {
        format!(
            "`mysql --defaults-file={shown} -e 'SELECT CURRENT_USER()'` shows the same with the \
             client's own words"
        )
    }
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

    /// Findings in which the certificate passed and the tunnel check ran, and what the
    /// logins get from them.
    async fn after_tunnel(ctx: &Context) -> (Findings, Earlier) {
        let mut st = Findings::default();
        st.push(Finding::ok(CheckId::CertValid, "valid"));
        let mut earlier = Earlier::default();
        earlier.tunnel = forwards::check(
            ctx,
            &mut st,
            forwards::Needs::default(),
            &mut earlier.probes,
        )
        .await;
        (st, earlier)
    }

    #[tokio::test]
    async fn local_mode_logs_in_through_the_endpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(3, "127.0.0.1");
        running_tunnel(dir.path(), &ports, None);
        let ctx = context(dir.path(), &local_profile(&ports), &[], &[]);
        let (_, earlier) = after_tunnel(&ctx).await;
        let c = kafka(&ctx, &earlier).await;
        assert_eq!(
            (c.check, c.status),
            (CheckId::LoginKafka, Status::Ok),
            "{c:?}"
        );
        assert_eq!(
            c.found.as_str(),
            format!(
                "metadata as `User:saige` through the local endpoint on 127.0.0.1:{}: answers \
                 ApiVersions (1 APIs); Metadata names only local ports ({}, {})",
                ports[0], ports[1], ports[2]
            )
        );
    }

    #[tokio::test]
    async fn local_mode_login_waits_for_the_tunnel() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "broker-1.kafka.invalid");
        running_tunnel(dir.path(), &ports, None);
        let ctx = context(dir.path(), &local_profile(&ports), &[], &[]);
        let (st, earlier) = after_tunnel(&ctx).await;
        assert!(st.failed(CheckId::Tunnel));
        let c = kafka(&ctx, &earlier).await;
        assert_eq!(c.status, Status::Skip, "{c:?}");
        assert_eq!(c.found.as_str(), "needs `tunnel` to pass first");

        // Asked anyway, the endpoint's answer is the failure, with where to look.
        let c = through_endpoint(&ctx, &Tunnel::default(), ports[0]).await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found
                .contains("Metadata names addresses outside the endpoint: broker 1 at"),
            "{c:?}"
        );
        assert!(
            c.fix.as_deref().is_some_and(|f| f.ends_with(
                "tunnel.log` says what the endpoint met on its way to the brokers; \
                 `shiqi-connect tunnel status saige` probes each of its ports"
            )),
            "{c:?}"
        );
    }

    /// `login.mysql` for a local-mode profile whose endpoint serves MySQL as `how`, after
    /// `tunnel` and `protocol`; and the MySQL port.
    async fn mysql_through_the_endpoint(how: FakeMysql) -> (Finding, u16) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports = fake_endpoint(2, "127.0.0.1");
        let db = fake_mysql(how);
        running_tunnel_with_mysql(dir.path(), &ports, db);
        let ctx = context(dir.path(), &local_mysql_profile(&ports, db), &[], &[]);
        let (mut st, mut earlier) = after_tunnel(&ctx).await;
        crate::doctor::protocol::check(&ctx, &mut st, &earlier.tunnel, &mut earlier.probes);
        (mysql(&ctx, &earlier).await, db)
    }

    #[tokio::test]
    async fn local_mode_logs_in_to_mysql_in_plaintext_through_the_endpoint() {
        let (c, db) = mysql_through_the_endpoint(FakeMysql::Plain).await;
        assert_eq!(
            (c.check, c.status),
            (CheckId::LoginMysql, Status::Ok),
            "{c:?}"
        );
        assert_eq!(
            c.found.as_str(),
            format!(
                "`SELECT CURRENT_USER()` through the local endpoint on 127.0.0.1:{db} \
                 (plaintext here; the endpoint logs in with the certificate): `saige@%`"
            )
        );
    }

    #[tokio::test]
    async fn the_endpoint_refusing_the_certificate_asks_for_a_new_one() {
        let revoked = "shiqi-connect tunnel: the server refused the profile's certificate \
                       (CertificateRevoked): revoked, expired or from another CA";
        let (c, db) = mysql_through_the_endpoint(FakeMysql::Refuses(revoked)).await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert_eq!(
            c.found.as_str(),
            format!(
                "MySQL login as `saige` through the local endpoint on 127.0.0.1:{db} failed: \
                 login failed: Server error: `ERROR 1045 (28000): {revoked}'"
            )
        );
        assert_eq!(
            c.fix.as_deref(),
            Some(
                "get a new certificate: `shiqi-connect rotate saige` (the server refuses this \
                 one: revoked, or not from its CA)"
            )
        );

        // The server's own refusal, relayed: no account for the certificate.
        let denied = "Access denied for user 'saige'@'localhost'";
        let (c, _) = mysql_through_the_endpoint(FakeMysql::Refuses(denied)).await;
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.fix.as_deref().is_some_and(|f| f.starts_with(
                "the server has no account for this certificate: the admin runs \
                 `shiqi-ca-agent mysql-user saige` on the server"
            )),
            "{c:?}"
        );
    }

    #[tokio::test]
    async fn a_tls_greeting_on_the_endpoint_port_is_not_logged_into() {
        let (c, _) = mysql_through_the_endpoint(FakeMysql::Tls).await;
        assert_eq!(c.status, Status::Skip, "{c:?}");
        assert_eq!(
            c.found.as_str(),
            "the local endpoint's MySQL port does not greet as it should (see `protocol`)"
        );
    }

    #[test]
    fn endpoint_words_map_to_fixes_in_local_mode_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = context(dir.path(), &local_mysql_profile(&[9092], 3306), &[], &[]);
        let why = "login failed: ERROR 1105 (HY000): shiqi-connect tunnel: the tunnel cannot \
                   reach MySQL at db.shiqi.invalid:3306 on the server";
        let fix = mysql_fix(&ctx, why, true);
        assert!(
            fix.ends_with(
                "tunnel.log` says what the endpoint met on its way to MySQL; `shiqi-connect \
                 tunnel status saige` probes it"
            ),
            "{fix}"
        );
        // Direct mode keeps its fixes: the client's own words.
        for why in [why, "the server refused the profile's certificate"] {
            assert!(
                mysql_fix(&ctx, why, false).starts_with("`mysql --defaults-file="),
                "{why}"
            );
        }
    }
}
