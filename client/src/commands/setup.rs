//! `shiqi-connect setup NAME`: key and CSR here, certificate and MySQL user from the server over
//! one SSH connection, then the whole profile written at once. Settles every setting (and asks
//! its questions) first, then runs the steps and shows each outcome.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use shiqi_ca::key::KeyType;
use shiqi_ca::keystore::P12Format;
use shiqi_ca::protocol::{KafkaUserResponse, MissingFact};
use shiqi_ca::{ProfileName, Secret};
use time::OffsetDateTime;

use crate::agent::{self, AgentCommand, Signed};
use crate::cli::{GlobalArgs, SetupArgs};
use crate::error::Error;
use crate::printer::Printer;
use crate::profile::{self, Profile, Roots, files, tilde};
use crate::prompt::Prompter;
use crate::ssh::Session;
use crate::ssh::config::{self, Env, Target};
use crate::ssh::destination::Destination;
use crate::ssh::include::{self, IncludeChange};
use crate::ssh::known_hosts::HostKeyOutcome;
use crate::steps::write::{Installed, ProfileFile};
use crate::steps::{journal, keygen, write};
use crate::tunnel::plan;

/// Everything `setup` needs, settled before any step runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The profile name.
    pub name: ProfileName,
    /// `--server` as given.
    pub destination_text: String,
    /// `--server`, parsed.
    pub destination: Destination,
    /// `--key-type`.
    pub key_type: KeyType,
    /// `--p12-legacy`.
    pub p12_format: P12Format,
    /// `--accept-new-host-key`.
    pub accept_new_host_key: bool,
    /// `--agent-command`.
    pub agent: AgentCommand,
    /// `--tunnel-host`.
    pub tunnel_host: String,
    /// `--force`.
    pub force: bool,
    /// `--install-ssh-include`.
    pub install_ssh_include: bool,
    /// `$HOME`.
    pub home: PathBuf,
    /// `$SHIQI_HOME` (default `~/.shiqi`).
    pub shiqi_home: PathBuf,
    /// `--known-hosts`.
    pub known_hosts: Option<PathBuf>,
    /// `--jump`, checked.
    pub jump: Option<String>,
    /// `--json`: print `profile.json` on stdout instead of the profile path.
    pub json: bool,
    /// `--endpoint` (`None`: auto) and `--endpoint-port`.
    pub endpoint: (Option<bool>, Option<u16>),
    /// `--allow-local-infile`.
    pub allow_local_infile: bool,
}

impl Settings {
    /// Turns flags (and answers) into settings.
    ///
    /// # Errors
    /// A missing `--server` without a terminal, or an invalid value.
    pub fn resolve(
        args: &SetupArgs,
        global: &GlobalArgs,
        prompter: &Prompter,
    ) -> Result<Self, Error> {
        let Roots {
            root: shiqi_home,
            home,
        } = Roots::resolve(global.shiqi_home.as_deref())?;
        // Parsed here rather than by clap so the error carries the naming rule as a hint.
        let name: ProfileName = args.name.parse().map_err(|source| Error::Ca {
            what: "use that profile name",
            source,
        })?;
        // Before any question or work: a second run must not cost a certificate (or an answer)
        // to learn that the profile exists.
        write::check_free(&shiqi_home, &name, args.force)?;
        let destination_text = match args
            .server
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            Some(s) => s.to_owned(),
            None => prompter.server().ok_or(Error::Missing {
                what: "server",
                flag: "--server HOST",
                env: "SHIQI_SERVER",
            })?,
        };
        let destination = destination_text.parse()?;
        if args.key_type == KeyType::Rsa4096 {
            // The issue offers five types; RSA-4096 is slow everywhere and buys nothing here.
            return Err(Error::InvalidValue {
                what: "key type",
                given: args.key_type.to_string(),
                why: "use p256, p384, ed25519, rsa2048 or rsa3072",
            });
        }
        let tunnel_host = args.tunnel_host.trim().to_owned();
        if tunnel_host.is_empty()
            || !tunnel_host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            || tunnel_host.starts_with('-')
        {
            return Err(Error::InvalidValue {
                what: "tunnel host name",
                given: tunnel_host.chars().take(64).collect(),
                why: "an ssh `Host` name here uses only letters, digits, `.`, `_` and `-`",
            });
        }
        Ok(Self {
            name,
            destination_text,
            destination,
            key_type: args.key_type,
            p12_format: if args.p12_legacy {
                P12Format::Legacy
            } else {
                P12Format::Modern
            },
            accept_new_host_key: args.accept_new_host_key,
            agent: AgentCommand::new(&args.agent_command)?,
            tunnel_host,
            force: args.force,
            install_ssh_include: args.install_ssh_include,
            shiqi_home,
            home,
            known_hosts: args.known_hosts.as_deref().map(absolute),
            jump: config::check_jump(args.jump.as_deref())?,
            json: global.json,
            endpoint: args.endpoint.wanted(),
            allow_local_infile: args.allow_local_infile,
        })
    }

    fn profile_dir(&self) -> PathBuf {
        profile::dir(&self.shiqi_home, &self.name)
    }

    fn show(&self, p: &Path) -> String {
        tilde(p, &self.home)
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Runs `setup`; Ctrl-C cancels cleanly (the staging folder is removed on the way out).
///
/// # Errors
/// The failing step's error, with context naming the step.
pub async fn run(
    args: &SetupArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let prompter = Prompter::new(global.yes);
    let settings = Settings::resolve(args, global, &prompter)?;
    tokio::select! {
        res = execute(&settings, &prompter, printer) => res,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted before setup finished"),
    }
}

/// The steps, in order.
///
/// # Errors
/// The failing step's error, with context naming the step.
pub async fn execute(
    s: &Settings,
    prompter: &Prompter,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let dir = s.profile_dir();
    // Checked again: `execute` may be called without `Settings::resolve` (tests).
    write::check_free(&s.shiqi_home, &s.name, s.force)?;

    let step = printer.step("resolve the server");
    let env = Env::from_process(s.home.clone(), s.known_hosts.clone()).with_jump(s.jump.as_deref());
    let target = config::resolve(&s.destination, &env)
        .with_context(|| format!("cannot resolve `{}`", s.destination_text))?;
    step.done(&format!(
        "{}@{}:{} (via {})",
        target.user, target.host, target.port, target.resolved_by
    ));

    let step = printer.step("generate the key and CSR");
    let generated =
        keygen::keygen(&s.name, s.key_type).context("cannot make the key on this machine")?;
    step.done(&format!("{} key, CN={}", s.key_type, s.name));

    let step = printer.step(&format!("connect to {}", target.host));
    let session = super::connect(s.accept_new_host_key, &target, prompter, printer)
        .await
        .map_err(|e| e.for_profile(s.name.as_str()))
        .with_context(|| format!("cannot log in to `{}`", s.destination_text))?;
    let host_key = match session.host_key() {
        HostKeyOutcome::Known(f) => format!("host key known in `{}`", s.show(f)),
        HostKeyOutcome::Learned(f) => format!("host key added to `{}`", s.show(f)),
    };
    let with_cert = session
        .auth()
        .certificate
        .as_ref()
        .map(|c| format!(" and its {c}"))
        .unwrap_or_default();
    step.done(&format!(
        "{host_key}; logged in as {} with {}{with_cert}",
        target.user,
        session.auth().used
    ));
    for n in &session.auth().notes {
        printer.note(n);
    }

    // A run of this name that died (SIGKILL, power) may have left a certificate behind: its key
    // is journaled, and its certificate is revoked before this run asks for another.
    let lock = crate::profile::lock::lock(&s.shiqi_home, &s.name)?;
    let replaced = if s.force {
        journal::profile_key(&dir)
    } else {
        None
    };
    let swept = journal::settle(&lock, &session, &s.agent, &s.name, replaced.as_ref(), false)
        .await
        .context("cannot revoke the certificate of an unfinished earlier run")?;
    if swept > 0 {
        printer.note(&format!(
            "revoked {swept} certificate(s) of `{}` that an unfinished earlier run left",
            s.name
        ));
    }
    // Journaled before the agent signs: whatever happens next, the next run can find them.
    lock.add(&generated.key.key_id())?;
    if let Some(old) = &replaced {
        lock.add(old)?;
    }
    let provisioned = provision(s, &session, &target, &generated, printer).await;
    // An agent that refused to sign issued nothing for the new key: there is nothing to revoke,
    // and asking would only be refused again (a `user` key may not revoke another name).
    if let Err(e) = &provisioned
        && journal::signing_refused(e)
    {
        lock.forget(&generated.key.key_id())?;
    }
    // Success: the replaced profile's certificate goes. Failure: the new one goes (its key is
    // not in any profile). Best effort; what is left stays journaled for the next run.
    let keep = match &provisioned {
        Ok(_) => Some(generated.key.key_id()),
        Err(_) => replaced.clone(),
    };
    if let Err(e) = journal::settle(&lock, &session, &s.agent, &s.name, keep.as_ref(), true).await {
        printer.warn(&format!(
            "could not revoke a certificate this run no longer needs ({e}); the next setup or rotate of `{}` will",
            s.name
        ));
    }
    session.close().await;
    let profile = provisioned?;
    let (brokers, mysql) = (&profile.brokers, &profile.mysql);

    if s.install_ssh_include {
        let step = printer.step("add the Include line to ~/.ssh/config");
        let included = tilde(&dir.join(files::SSH_CONFIG), &s.home);
        let change = include::install_include(
            &s.home.join(".ssh/config"),
            &included,
            &format!(
                "added by `shiqi-connect setup {}`: the tunnel `{}`",
                s.name, s.tunnel_host
            ),
        )
        .context("cannot update ~/.ssh/config")?;
        step.done(match change {
            IncludeChange::AlreadyThere => "already there",
            IncludeChange::Added => "added at the top",
            IncludeChange::Moved => {
                "moved to the top (below a Host block it applied to that host only)"
            }
        });
    }

    let cfg = tilde(&dir.join(files::SSH_CONFIG), &s.home);
    printer.info("");
    printer.next(
        "next: start the tunnel with",
        &format!("shiqi-connect tunnel up {}", s.name),
    );
    // OpenSSH can forward, but it cannot be the local endpoint.
    if profile.endpoint.is_direct() || brokers.is_empty() {
        printer.next(
            "  or with OpenSSH:",
            &format!("ssh -fN -F {cfg} {}", s.tunnel_host),
        );
    }
    if !brokers.is_empty() {
        printer.next(
            "then Kafka:",
            &format!(
                "kcat -F {} -L",
                tilde(&dir.join(files::LIBRDKAFKA_CONF), &s.home)
            ),
        );
    }
    if mysql.is_some() {
        printer.next(
            "then MySQL:",
            // The full path: shells do not expand `~` after `=`.
            &format!(
                "mysql --defaults-file={}",
                dir.join(files::MY_CNF).display()
            ),
        );
    }
    printer.next(
        "DataGrip: see",
        &tilde(&dir.join(files::DATAGRIP_MD), &s.home),
    );

    let out = if s.json {
        profile.to_json()
    } else {
        format!("{}\n", dir.display())
    };
    super::print_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Steps 2-4 over the open session: the certificate, the Kafka ACLs, the MySQL user, the files.
async fn provision(
    s: &Settings,
    session: &Session,
    target: &Target,
    generated: &keygen::KeyAndCsr,
    printer: &Printer,
) -> anyhow::Result<Profile> {
    let dir = s.profile_dir();
    // One request: the agent signs, grants the ACLs and creates the MySQL user in one process.
    let step = printer.step("get a certificate, Kafka permissions and MySQL user from the agent");
    let agent::Provisioned {
        signed,
        kafka: granted,
        mysql: user,
    } = agent::provision(
        session,
        &s.agent,
        &s.name,
        &generated.csr_pem,
        &generated.key,
    )
    .await
    .with_context(|| format!("cannot provision `{}` on the server", s.name))?;
    step.done(&format!(
        "serial {}, valid until {}",
        signed.response.serial,
        date(signed.response.not_after)
    ));
    for MissingFact { fact, reason } in &signed.response.facts.missing {
        printer.warn(&format!("the server could not tell `{fact}`: {reason}"));
    }

    let facts = &signed.response.facts;
    let brokers = facts
        .kafka
        .as_ref()
        .map(|k| k.brokers.clone())
        .unwrap_or_default();
    let (endpoint, note) = plan::choose_endpoint(
        s.endpoint.0,
        s.endpoint.1,
        &profile::Endpoint::Direct,
        &brokers,
        facts.mysql.as_ref(),
    )
    .context("cannot plan the tunnel for this cluster")?;
    if let Some(note) = note {
        printer.note(&note);
    }
    if let Some(why) = (!endpoint.is_direct())
        .then(crate::os::port_owner::peer_check_unavailable)
        .flatten()
    {
        printer.warn(&format!(
            "the local endpoint acts as `{}` for whoever reaches 127.0.0.1 ({why}); on a \
             shared machine use `--endpoint direct`",
            s.name
        ));
    }
    let (forwards, warnings) = plan::forwards(&brokers, facts.mysql.as_ref(), &endpoint)
        .context("cannot plan the tunnel for this cluster")?;
    for w in &warnings {
        printer.warn(w);
    }
    // The agent answers each service its facts name; an answer without one is not complete.
    let incomplete = |field: &str| Error::AgentField {
        op: shiqi_ca::protocol::RequestKind::Provision,
        field: field.to_owned(),
        why: "missing, though the server's facts name that service".to_owned(),
    };
    match (&facts.kafka, granted) {
        (Some(kafka), Some(granted)) => printer
            .step("grant the Kafka permissions")
            .done(&kafka_summary(&granted, kafka.brokers.len())),
        (Some(_), None) => return Err(incomplete("kafka").into()),
        (None, _) => printer
            .warn("no Kafka brokers known: client.properties and librdkafka.conf are not written"),
    }
    let mysql = match (&facts.mysql, user) {
        (Some(m), Some(user)) => {
            printer.step("set up the MySQL user").done(&format!(
                "'{}'@'{}' {} (REQUIRE SUBJECT '{}')",
                user.user,
                user.host,
                if user.created { "created" } else { "updated" },
                user.subject
            ));
            let mut m = m.clone();
            m.user = user.user;
            Some(m)
        }
        (Some(_), None) => return Err(incomplete("mysql").into()),
        (None, _) => {
            printer.warn("the server has no MySQL configured: my.cnf is not written");
            None
        }
    };
    let known_hosts = session.host_key().file().to_path_buf();
    let key_used = session.auth().used.clone();

    let step = printer.step(&format!("write the profile to {}", s.show(&dir)));
    let created = OffsetDateTime::now_utc();
    let profile = Profile {
        version: profile::PROFILE_VERSION,
        name: s.name.clone(),
        created,
        server: profile::Server {
            destination: s.destination_text.clone(),
            user: target.user.clone(),
            host: target.host.clone(),
            port: target.port,
            known_hosts: known_hosts.clone(),
            ssh_key: key_used.clone(),
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
            serial: signed.response.serial.clone(),
            not_before: signed.response.not_before,
            not_after: signed.response.not_after,
            key_type: generated.key.key_type(),
        },
        brokers: brokers.clone(),
        mysql: mysql.clone(),
        tunnel_host: s.tunnel_host.clone(),
        forwards: forwards.clone(),
        p12_format: s.p12_format,
        endpoint,
        endpoint_options: profile::EndpointOptions {
            allow_local_infile: s.allow_local_infile,
            ..profile::EndpointOptions::default()
        },
    };
    let files = profile_files(s, target, &generated.key, &signed, &profile, &forwards)
        .context("cannot build the profile files")?;
    let count = files.len();
    let installed = write::install(&s.shiqi_home, &s.name, &files, s.force)
        .with_context(|| format!("cannot write profile `{}`", s.name))?;
    step.done(&format!(
        "{count} files, {}",
        match installed {
            Installed::Created(_) => "new",
            Installed::Replaced(_) => "replaced the old profile",
        }
    ));
    for line in crate::steps::verify::not_serving(session, &dir, &profile.brokers).await {
        printer.warn(&line);
    }

    Ok(profile)
}

fn profile_files(
    s: &Settings,
    target: &Target,
    key: &shiqi_ca::key::PrivateKey,
    signed: &Signed,
    profile: &Profile,
    forwards: &[crate::profile::ForwardRecord],
) -> Result<Vec<ProfileFile>, Error> {
    crate::steps::profile_files::build(&crate::steps::profile_files::Inputs {
        dir: &s.profile_dir(),
        target,
        key,
        signed,
        profile,
        forwards,
        password: &Secret::random_password(),
    })
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn resolve(argv: &[&str]) -> Result<Settings, Error> {
        // Never the real ~/.shiqi: an existing profile there would change the outcome.
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path().to_string_lossy().into_owned();
        let mut full = vec!["shiqi-connect", "--home", &root, "setup"];
        full.extend_from_slice(argv);
        let cli = Cli::try_parse_from(full).expect("parses");
        let Command::Setup(args) = &cli.command else {
            panic!("not setup");
        };
        Settings::resolve(args, &cli.global, &Prompter::never())
    }

    #[test]
    fn a_missing_server_without_a_terminal_names_the_flag() {
        let e = resolve(&["saige", "--yes"]).expect_err("missing");
        assert_eq!(e.to_string(), "no server given");
        assert_eq!(
            e.hint().as_deref(),
            Some("pass `--server HOST` or set `SHIQI_SERVER`")
        );
    }

    #[test]
    fn refuses_bad_values_before_any_work() {
        let e = resolve(&["Saige", "--server", "h"]).expect_err("name");
        assert!(
            e.hint().is_some_and(|h| h.contains("lowercase letter")),
            "{e}"
        );
        assert!(resolve(&["saige", "--server=-oProxyCommand=x"]).is_err());
        assert!(resolve(&["saige", "--server", "h", "--tunnel-host", "a b"]).is_err());
        assert!(resolve(&["saige", "--server", "h", "--key-type", "rsa4096"]).is_err());
        assert!(resolve(&["saige", "--server", "h", "--agent-command", ""]).is_err());
    }

    #[test]
    fn settles_defaults() {
        let s = resolve(&["saige", "--server", "ssh://dev@vm:2222", "--p12-legacy"]).expect("ok");
        assert_eq!(s.destination.port, Some(2222));
        assert_eq!(s.p12_format, P12Format::Legacy);
        assert_eq!(s.key_type, KeyType::EcdsaP256);
        assert_eq!(s.tunnel_host, "shiqi-tunnel");
        assert_eq!(s.agent.as_str(), "shiqi-ca-agent");
        assert!(s.profile_dir().ends_with("saige"));
    }

    #[test]
    fn an_existing_profile_is_refused_before_any_question() {
        let root = tempfile::tempdir().expect("tempdir");
        crate::fsutil::create_private_dir(&root.path().join("saige")).expect("mkdir");
        let home = root.path().to_string_lossy().into_owned();
        let cli = Cli::try_parse_from(["shiqi-connect", "--home", &home, "setup", "saige"])
            .expect("parses");
        let Command::Setup(args) = &cli.command else {
            panic!("not setup");
        };
        let e = Settings::resolve(args, &cli.global, &Prompter::never()).expect_err("exists");
        assert!(matches!(e, Error::ProfileExists { .. }), "{e}");
        assert_eq!(
            e.hint().as_deref(),
            Some(
                "pass `--force` to replace it, or pick another name than `saige`; to renew its \
                 certificate: `shiqi-connect renew saige`"
            )
        );
    }
}
