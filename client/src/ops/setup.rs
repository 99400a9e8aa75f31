//! `setup`'s enrolment over one open SSH session: under the name's lock and journal, the
//! agent signs the key made here and sets up the Kafka ACLs and the MySQL user in one request;
//! the tunnel is planned for the cluster it names; the whole profile is written at once.

use std::path::{Path, PathBuf};

use anyhow::Context;
use shiqi_ca::key::KeyType;
use shiqi_ca::keystore::P12Format;
use shiqi_ca::protocol::{Broker, KafkaUserResponse, MissingFact, MysqlFacts, SignResponse};
use shiqi_ca::{ProfileName, Secret, Span};
use time::OffsetDateTime;

use super::Report;
use crate::agent::{self, AgentCommand};
use crate::error::{AgentError, Error};
use crate::profile::plan;
use crate::profile::{self, Endpoint, ForwardRecord, Profile, tilde};
use crate::ssh::Session;
use crate::ssh::config::Target;
use crate::ssh::destination::Destination;
use crate::steps::write::{self, Installed};
use crate::steps::{journal, keygen, profile_files, verify};

/// Everything `setup` needs, settled (flags read, questions answered) before any step runs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The profile name.
    pub(crate) name: ProfileName,
    /// `--server` as given.
    pub(crate) destination_text: String,
    /// `--server`, parsed.
    pub(crate) destination: Destination,
    /// `--key-type`.
    pub(crate) key_type: KeyType,
    /// `--p12-legacy`.
    pub(crate) p12_format: P12Format,
    /// `--accept-new-host-key`.
    pub(crate) accept_new_host_key: bool,
    /// `--agent-command`.
    pub(crate) agent: AgentCommand,
    /// `--tunnel-host`.
    pub(crate) tunnel_host: String,
    /// `--force`.
    pub(crate) force: bool,
    /// `--install-ssh-include`.
    pub(crate) install_ssh_include: bool,
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// `$SHIQI_HOME` (default `~/.shiqi`).
    pub(crate) shiqi_home: PathBuf,
    /// `--known-hosts`.
    pub(crate) known_hosts: Option<PathBuf>,
    /// `--jump`, checked.
    pub(crate) jump: Option<String>,
    /// `--json`: print `profile.json` on stdout instead of the profile path.
    pub(crate) json: bool,
    /// `--endpoint` (absent: auto).
    pub(crate) endpoint: plan::EndpointMode,
    /// `--endpoint-port`.
    pub(crate) endpoint_port: Option<u16>,
    /// `--allow-local-infile`.
    pub(crate) allow_local_infile: bool,
    /// `--lifetime`.
    pub(crate) lifetime: Option<Span>,
}

impl Settings {
    /// The profile's folder.
    pub(crate) fn profile_dir(&self) -> PathBuf {
        profile::dir(&self.shiqi_home, &self.name)
    }

    /// `p` as the user reads it (`~/…`).
    pub(crate) fn show(&self, p: &Path) -> String {
        tilde(p, &self.home)
    }
}

/// Provisions the profile and writes it, with the key `generated` here, under the name's lock:
/// a run of this name that died (SIGKILL, power) may have left a certificate behind, which is
/// revoked before this run asks for another; the new key (and with `--force` the replaced
/// profile's) is journaled before the agent signs; afterwards the certificate that is nobody's
/// is revoked (the replaced one on success, the new one on failure).
///
/// # Errors
/// The failing step's error, with context naming it.
pub(crate) async fn enroll(
    s: &Settings,
    session: &Session,
    target: &Target,
    generated: &keygen::KeyAndCsr,
    report: &dyn Report,
) -> anyhow::Result<Profile> {
    let lock = profile::lock::lock(&s.shiqi_home, &s.name)?;
    let replaced = if s.force {
        journal::profile_key(&s.profile_dir())
    } else {
        None
    };
    let swept = journal::settle(&lock, session, &s.agent, &s.name, replaced.as_ref(), false)
        .await
        .context("cannot revoke the certificate of an unfinished earlier run")?;
    if swept > 0 {
        report.note(&format!(
            "revoked {swept} certificate(s) of `{}` that an unfinished earlier run left",
            s.name
        ));
    }
    // Journaled before the agent signs: whatever happens next, the next run can find them.
    lock.add(&generated.key.key_id())?;
    if let Some(old) = &replaced {
        lock.add(old)?;
    }
    let provisioned = provision(s, session, target, generated, report).await;
    // An agent that refused to sign issued nothing for the new key: there is nothing to revoke,
    // and asking would only be refused again (a `user` key may not revoke another name).
    if let Err(e) = &provisioned
        && journal::signing_refused(e)
    {
        lock.forget(&generated.key.key_id())?;
    }
    // Best effort; what is left stays journaled for the next run.
    let keep = match &provisioned {
        Ok(_) => Some(generated.key.key_id()),
        Err(_) => replaced.clone(),
    };
    if let Err(e) = journal::settle(&lock, session, &s.agent, &s.name, keep.as_ref(), true).await {
        report.warn(&format!(
            "could not revoke a certificate this run no longer needs ({e}); the next setup or rotate of `{}` will",
            s.name
        ));
    }
    provisioned
}

/// Steps 2-4 over the open session: the certificate, the Kafka ACLs, the MySQL user, the files.
async fn provision(
    s: &Settings,
    session: &Session,
    target: &Target,
    generated: &keygen::KeyAndCsr,
    report: &dyn Report,
) -> anyhow::Result<Profile> {
    let granted = request(s, session, generated, report).await?;
    let facts = &granted.signed.response.facts;
    let brokers = facts
        .kafka
        .as_ref()
        .map(|k| k.brokers.clone())
        .unwrap_or_default();
    let (endpoint, forwards) = plan_tunnel(s, &brokers, facts.mysql.as_ref(), report)?;
    let mysql = accounts(&granted, report)?;
    let dir = s.profile_dir();
    let step = report.step(&format!("write the profile to {}", s.show(&dir)));
    let profile = new_profile(
        s,
        session,
        target,
        generated,
        &granted.signed.response,
        Tunnel {
            brokers,
            mysql,
            endpoint,
            forwards,
        },
    );
    let files = profile_files::build(&profile_files::Inputs {
        dir: &dir,
        target,
        key: &generated.key,
        signed: &granted.signed,
        profile: &profile,
        forwards: &profile.forwards,
        password: &Secret::random_password(),
    })
    .context("cannot build the profile files")?;
    let installed = write::install(&s.shiqi_home, &s.name, &files, s.force)
        .with_context(|| format!("cannot write profile `{}`", s.name))?;
    step.done(&format!(
        "{} files, {}",
        files.len(),
        match installed {
            Installed::Created(_) => "new",
            Installed::Replaced(_) => "replaced the old profile",
        }
    ));
    for line in verify::not_serving(session, &dir, &profile.brokers).await {
        report.warn(&line);
    }
    Ok(profile)
}

/// One request: the agent signs, grants the ACLs and creates the MySQL user in one process.
async fn request(
    s: &Settings,
    session: &Session,
    generated: &keygen::KeyAndCsr,
    report: &dyn Report,
) -> anyhow::Result<agent::Provisioned> {
    let lifetime = match s.lifetime {
        Some(span) => Some(span),
        None => default_lifetime(s, session).await,
    };
    let step = report.wait("get a certificate, Kafka permissions and MySQL user from the agent");
    let granted = agent::provision(
        session,
        &s.agent,
        &s.name,
        lifetime,
        &generated.csr_pem,
        &generated.key,
    )
    .await
    .with_context(|| format!("cannot provision `{}` on the server", s.name))?;
    let response = &granted.signed.response;
    step.done(&format!(
        "serial {}, valid until {} ({})",
        response.serial,
        date(response.not_after),
        crate::clock::lifetime(response.not_before, response.not_after)
    ));
    if let Some(max) = response.capped_at {
        report.warn(&format!(
            "the server signs at most {max} for your key: the certificate lives {max}, not {}",
            lifetime.map_or_else(|| "longer".to_owned(), |l| l.to_string())
        ));
    }
    for MissingFact { fact, reason } in &response.facts.missing {
        report.warn(&format!("the server could not tell `{fact}`: {reason}"));
    }
    Ok(granted)
}

/// The lifetime to ask for without `--lifetime`: the local endpoint's
/// ([`profile::default_lifetime`]) when the profile will use it. `--endpoint auto` decides that
/// from the brokers, so it asks the agent for them first; when they cannot be listed it asks for
/// nothing (the agent's default), as a direct profile does.
async fn default_lifetime(s: &Settings, session: &Session) -> Option<Span> {
    let local = match s.endpoint {
        plan::EndpointMode::Local => true,
        plan::EndpointMode::Direct => false,
        plan::EndpointMode::Auto => {
            let brokers = agent::brokers(session, &s.agent)
                .await
                .inspect_err(|e| tracing::debug!("brokers before signing: {e}"))
                .ok()?;
            let (endpoint, _) = plan::choose_endpoint(
                s.endpoint,
                s.endpoint_port,
                &Endpoint::Direct,
                &brokers,
                None,
            )
            .ok()?;
            !endpoint.is_direct()
        }
    };
    profile::default_lifetime(local)
}

/// The endpoint mode and the forwards for the cluster the server named.
fn plan_tunnel(
    s: &Settings,
    brokers: &[Broker],
    mysql: Option<&MysqlFacts>,
    report: &dyn Report,
) -> anyhow::Result<(Endpoint, Vec<ForwardRecord>)> {
    let (endpoint, note) = plan::choose_endpoint(
        s.endpoint,
        s.endpoint_port,
        &Endpoint::Direct,
        brokers,
        mysql,
    )
    .context("cannot plan the tunnel for this cluster")?;
    if let Some(note) = note {
        report.note(&note);
    }
    if let Some(why) = (!endpoint.is_direct())
        .then(crate::os::port_owner::peer_check_unavailable)
        .flatten()
    {
        report.warn(&format!(
            "the local endpoint acts as `{}` for whoever reaches 127.0.0.1 ({why}); on a \
             shared machine use `--endpoint direct`",
            s.name
        ));
    }
    let (forwards, warnings) = plan::forwards(brokers, mysql, &endpoint)
        .context("cannot plan the tunnel for this cluster")?;
    for w in &warnings {
        report.warn(w);
    }
    Ok((endpoint, forwards))
}

/// What the agent set up for each service the server's facts name (an answer without one is
/// not complete), shown as a step each; the MySQL facts with the account's user.
fn accounts(
    granted: &agent::Provisioned,
    report: &dyn Report,
) -> anyhow::Result<Option<MysqlFacts>> {
    let facts = &granted.signed.response.facts;
    let incomplete = |field: &str| {
        Error::Agent(AgentError::Field {
            op: shiqi_ca::protocol::RequestKind::Provision,
            field: field.to_owned(),
            why: "missing, though the server's facts name that service".to_owned(),
        })
    };
    match (&facts.kafka, &granted.kafka) {
        (Some(kafka), Some(acls)) => report
            .step("grant the Kafka permissions")
            .done(&kafka_summary(acls, kafka.brokers.len())),
        (Some(_), None) => return Err(incomplete("kafka").into()),
        (None, _) => report
            .warn("no Kafka brokers known: client.properties and librdkafka.conf are not written"),
    }
    match (&facts.mysql, &granted.mysql) {
        (Some(m), Some(user)) => {
            report.step("set up the MySQL user").done(&format!(
                "'{}'@'{}' {} (REQUIRE SUBJECT '{}')",
                user.user,
                user.host,
                if user.created { "created" } else { "updated" },
                user.subject
            ));
            let mut m = m.clone();
            m.user = user.user.clone();
            Ok(Some(m))
        }
        (Some(_), None) => Err(incomplete("mysql").into()),
        (None, _) => {
            report.warn("the server has no MySQL configured: my.cnf is not written");
            Ok(None)
        }
    }
}

/// What the tunnel will carry, as planned.
struct Tunnel {
    brokers: Vec<Broker>,
    mysql: Option<MysqlFacts>,
    endpoint: Endpoint,
    forwards: Vec<ForwardRecord>,
}

/// `profile.json` as it will be written: the server as `target` and the session reached it
/// (the key and certificate that logged in, each jump host), the certificate, the tunnel.
fn new_profile(
    s: &Settings,
    session: &Session,
    target: &Target,
    generated: &keygen::KeyAndCsr,
    signed: &SignResponse,
    tunnel: Tunnel,
) -> Profile {
    Profile {
        version: profile::PROFILE_VERSION,
        name: s.name.clone(),
        created: OffsetDateTime::now_utc(),
        server: profile::Server {
            destination: s.destination_text.clone(),
            user: target.user.clone(),
            host: target.host.clone(),
            port: target.port,
            known_hosts: session.host_key().file().to_path_buf(),
            ssh_key: session.auth().used.clone(),
            agent_command: s.agent.as_str().to_owned(),
            certificate_file: session
                .auth()
                .certificate
                .as_ref()
                .and_then(|c| c.file.clone())
                .filter(|f| target.certificate_files.contains(f)),
            jump: s.jump.clone(),
            jumps: target
                .jumps
                .iter()
                .zip(session.jump_outcomes())
                .map(|(hop, (host_key, auth))| profile::JumpHost {
                    host: hop.host.clone(),
                    port: hop.port,
                    user: hop.user.clone(),
                    known_hosts: host_key.file().to_path_buf(),
                    ssh_key: auth.used.clone(),
                })
                .collect(),
        },
        certificate: profile::Certificate {
            serial: signed.serial.clone(),
            not_before: signed.not_before,
            not_after: signed.not_after,
            key_type: generated.key.key_type(),
        },
        brokers: tunnel.brokers,
        mysql: tunnel.mysql,
        tunnel_host: s.tunnel_host.clone(),
        forwards: tunnel.forwards,
        p12_format: s.p12_format,
        endpoint: tunnel.endpoint,
        endpoint_options: profile::EndpointOptions {
            allow_local_infile: s.allow_local_infile,
            ..profile::EndpointOptions::default()
        },
        lifetime: s.lifetime,
    }
}

/// `User:saige on topic app.*, group app.* (6 ACLs, 6 new) across 3 brokers`.
fn kafka_summary(granted: &KafkaUserResponse, brokers: usize) -> String {
    let mut scopes: Vec<String> = granted
        .acls
        .iter()
        .map(|a| {
            let wildcard = if a.pattern.as_str() == "prefixed" {
                "*"
            } else {
                ""
            };
            format!("{} {}{wildcard}", a.resource, a.name)
        })
        .collect();
    scopes.dedup();
    format!(
        "{} on {} ({} ACLs, {} new) across {brokers} brokers",
        granted.principal,
        scopes.join(", "),
        granted.acls.len(),
        granted.created.len(),
    )
}

fn date(t: OffsetDateTime) -> String {
    let d = t.date();
    format!(
        "{d} ({} days)",
        (t - OffsetDateTime::now_utc()).whole_days()
    )
}
