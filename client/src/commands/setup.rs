//! `shiqi-connect setup NAME`: key and CSR here, certificate and MySQL user from the server over
//! one SSH connection, then the whole profile written at once. Settles every setting (and asks
//! its questions) first, then runs the steps and shows each outcome.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use shiqi_ca::ProfileName;
use shiqi_ca::key::KeyType;
use shiqi_ca::keystore::P12Format;

use crate::agent::AgentCommand;
use crate::cli::{GlobalArgs, SetupArgs};
use crate::error::{Error, InputError};
pub(crate) use crate::ops::setup::Settings;
use crate::printer::Printer;
use crate::profile::{Profile, Roots, files, tilde};
use crate::prompt::Prompter;
use crate::ssh::Session;
use crate::ssh::config::{self, Env, Target};
use crate::ssh::include::{self, IncludeChange};
use crate::ssh::known_hosts::HostKeyOutcome;
use crate::steps::{keygen, write};

/// Turns flags (and answers) into settings.
///
/// # Errors
/// A missing `--server` without a terminal, or an invalid value.
pub(crate) fn resolve(
    args: &SetupArgs,
    global: &GlobalArgs,
    prompter: &Prompter,
) -> Result<Settings, Error> {
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
        None => prompter.server().ok_or(Error::Input(InputError::Missing {
            what: "server",
            flag: "--server HOST",
            env: "SHIQI_SERVER",
        }))?,
    };
    let destination = destination_text.parse()?;
    if args.key_type == KeyType::Rsa4096 {
        // The issue offers five types; RSA-4096 is slow everywhere and buys nothing here.
        return Err(Error::Input(InputError::InvalidValue {
            what: "key type",
            given: args.key_type.to_string(),
            why: "use p256, p384, ed25519, rsa2048 or rsa3072",
        }));
    }
    let tunnel_host = args.tunnel_host.trim().to_owned();
    if tunnel_host.is_empty()
        || !tunnel_host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        || tunnel_host.starts_with('-')
    {
        return Err(Error::Input(InputError::InvalidValue {
            what: "tunnel host name",
            given: tunnel_host.chars().take(64).collect(),
            why: "an ssh `Host` name here uses only letters, digits, `.`, `_` and `-`",
        }));
    }
    if let Some(span) = args.lifetime {
        shiqi_ca::issue::Lifetime::Client
            .check(span)
            .map_err(|source| Error::Ca {
                what: "use that --lifetime",
                source,
            })?;
    }
    Ok(Settings {
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
        endpoint: args.endpoint.endpoint.unwrap_or_default(),
        endpoint_port: args.endpoint.endpoint_port,
        allow_local_infile: args.allow_local_infile,
        lifetime: args.lifetime,
    })
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Runs `setup`; Ctrl-C cancels cleanly (the staging folder is removed on the way out).
///
/// # Errors
/// The failing step's error, with context naming the step.
pub(crate) async fn run(
    args: &SetupArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let prompter = Prompter::new(global.yes);
    let settings = resolve(args, global, &prompter)?;
    tokio::select! {
        res = execute(&settings, &prompter, printer) => res,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted before setup finished"),
    }
}

/// The steps, in order.
///
/// # Errors
/// The failing step's error, with context naming the step.
pub(crate) async fn execute(
    s: &Settings,
    prompter: &Prompter,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    // Checked again: `execute` may be called without `resolve` (tests).
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

    let session = connect(s, &target, prompter, printer).await?;
    let enrolled = crate::ops::setup::enroll(s, &session, &target, &generated, printer).await;
    session.close().await;
    let profile = enrolled?;

    if s.install_ssh_include {
        add_include(s, printer)?;
    }
    print_next(s, &profile, printer);
    let out = if s.json {
        profile.to_json()
    } else {
        format!("{}\n", s.profile_dir().display())
    };
    super::print_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Logs in (asking about an unknown host key on a terminal) and says how.
async fn connect(
    s: &Settings,
    target: &Target,
    prompter: &Prompter,
    printer: &Printer,
) -> anyhow::Result<Session> {
    let step = printer.step(&format!("connect to {}", target.host));
    let session = super::connect(s.accept_new_host_key, target, prompter, printer)
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
    Ok(session)
}

/// `--install-ssh-include`: the profile's ssh_config included at the top of ~/.ssh/config.
fn add_include(s: &Settings, printer: &Printer) -> anyhow::Result<()> {
    let step = printer.step("add the Include line to ~/.ssh/config");
    let included = tilde(&s.profile_dir().join(files::SSH_CONFIG), &s.home);
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
    Ok(())
}

/// The commands to try next, for the services the profile has.
fn print_next(s: &Settings, profile: &Profile, printer: &Printer) {
    let dir = s.profile_dir();
    let cfg = tilde(&dir.join(files::SSH_CONFIG), &s.home);
    printer.info("");
    printer.next(
        "next: start the tunnel with",
        &format!("shiqi-connect tunnel up {}", s.name),
    );
    // OpenSSH can forward, but it cannot be the local endpoint.
    if profile.endpoint.is_direct() || profile.brokers.is_empty() {
        printer.next(
            "  or with OpenSSH:",
            &format!("ssh -fN -F {cfg} {}", s.tunnel_host),
        );
    }
    if !profile.brokers.is_empty() {
        printer.next(
            "then Kafka:",
            &format!(
                "kcat -F {} -L",
                tilde(&dir.join(files::LIBRDKAFKA_CONF), &s.home)
            ),
        );
    }
    if profile.mysql.is_some() {
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
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn settle(argv: &[&str]) -> Result<Settings, Error> {
        // Never the real ~/.shiqi: an existing profile there would change the outcome.
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path().to_string_lossy().into_owned();
        let mut full = vec!["shiqi-connect", "--home", &root, "setup"];
        full.extend_from_slice(argv);
        let cli = Cli::try_parse_from(full).expect("parses");
        let Command::Setup(args) = &cli.command else {
            panic!("not setup");
        };
        resolve(args, &cli.global, &Prompter::never())
    }

    #[test]
    fn a_missing_server_without_a_terminal_names_the_flag() {
        let e = settle(&["saige", "--yes"]).expect_err("missing");
        assert_eq!(e.to_string(), "no server given");
        assert_eq!(
            e.hint().as_deref(),
            Some("pass `--server HOST` or set `SHIQI_SERVER`")
        );
    }

    #[test]
    fn refuses_bad_values_before_any_work() {
        let e = settle(&["Saige", "--server", "h"]).expect_err("name");
        assert!(
            e.hint().is_some_and(|h| h.contains("lowercase letter")),
            "{e}"
        );
        assert!(settle(&["saige", "--server=-oProxyCommand=x"]).is_err());
        assert!(settle(&["saige", "--server", "h", "--tunnel-host", "a b"]).is_err());
        assert!(settle(&["saige", "--server", "h", "--key-type", "rsa4096"]).is_err());
        assert!(settle(&["saige", "--server", "h", "--agent-command", ""]).is_err());
    }

    #[test]
    fn settles_defaults() {
        let s = settle(&["saige", "--server", "ssh://dev@vm:2222", "--p12-legacy"]).expect("ok");
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
        let e = resolve(args, &cli.global, &Prompter::never()).expect_err("exists");
        assert!(
            matches!(e, Error::Profile(crate::error::ProfileError::Exists { .. })),
            "{e}"
        );
        assert_eq!(
            e.hint().as_deref(),
            Some(
                "pass `--force` to replace it, or pick another name than `saige`; to renew its \
                 certificate: `shiqi-connect renew saige`"
            )
        );
    }
}
