//! The subcommands, and the error report every one of them ends with. `anyhow` is allowed here
//! (and in `main.rs`) only: library modules return [`crate::Error`].

pub(crate) mod completions;
pub(crate) mod datagrip;
pub(crate) mod doctor;
pub(crate) mod jdbc;
pub(crate) mod man;
pub(crate) mod revoke;
pub(crate) mod rotate;
pub(crate) mod setup;
pub(crate) mod status;
pub(crate) mod tunnel;

use std::process::ExitCode;

use crate::cli::{Cli, Command, GlobalArgs, MysqlClientArgs};
use crate::error::{Error, InputError, SshError};
use crate::jdbc::{Driver, Verification};
use crate::mysql_source::{self, Source, Why};
use crate::printer::Printer;
use crate::profile::{Profile, Roots};
use crate::prompt::Prompter;
use crate::ssh::Session;
use crate::ssh::config::Target;
use crate::ssh::known_hosts::HostKeyPolicy;

/// Exit status for errors and bad input (design.md, STYLE §2).
pub const EXIT_ERROR: u8 = 2;

/// The printer the flags ask for.
pub fn printer(global: &GlobalArgs) -> Printer {
    Printer::new(
        global.quiet,
        global.verbose > 0,
        global.no_progress,
        global.color,
    )
}

/// Runs the chosen subcommand.
///
/// # Errors
/// Whatever the subcommand reports; [`report`] prints it.
pub async fn run(cli: Cli, printer: &Printer) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Setup(args) => setup::run(&args, &cli.global, printer).await,
        Command::Tunnel(args) => tunnel::run(&args, &cli.global, printer).await,
        Command::Doctor(args) => doctor::run(&args, &cli.global, printer).await,
        Command::Rotate(args) => rotate::run_rotate(&args, &cli.global, printer).await,
        Command::Renew(args) => rotate::run_renew(&args, &cli.global, printer).await,
        Command::Status(_) => status::run(&cli.global),
        Command::Revoke(args) => revoke::run(&args, &cli.global, printer).await,
        Command::Datagrip(args) => datagrip::run(&args, &cli.global, printer),
        Command::Jdbc(args) => jdbc::run(&args, &cli.global, printer),
        Command::Completions(args) => completions::run(args.shell),
        Command::Man(args) => man::run(args.dir.as_deref()),
    }
}

/// `datagrip` and `jdbc`, settled: the profile's MySQL, the driver and the verification (from
/// the flags, else from what the server shows through the tunnel), each choice noted on stderr.
pub(crate) struct MysqlClient {
    pub(crate) profile: Profile,
    pub(crate) source: Source,
    pub(crate) driver: Driver,
    /// `None` through the local endpoint: the client does no TLS.
    pub(crate) verify: Option<Verification>,
}

impl MysqlClient {
    pub(crate) fn settle(
        args: &MysqlClientArgs,
        global: &GlobalArgs,
        command: &'static str,
        printer: &Printer,
    ) -> anyhow::Result<Self> {
        let roots = Roots::resolve(global.shiqi_home.as_deref())?;
        let name = roots.pick(args.name.as_deref(), command)?;
        let dir = roots.dir(&name);
        let profile = Profile::load(&dir)?;
        let source = Source::of(&profile, &dir)?;
        if source.local && args.verify.is_some() {
            return Err(Error::Input(InputError::InvalidValue {
                what: "--verify",
                given: args.verify.map(|v| v.to_string()).unwrap_or_default(),
                why: "the profile uses the tunnel's local endpoint, which checks the server's \
                      certificate itself and leaves the client no TLS to verify; drop the flag",
            })
            .into());
        }
        let seen = if args.driver.is_some() && (args.verify.is_some() || source.local) {
            mysql_source::Seen::default()
        } else {
            source.look()
        };
        let (driver, why_driver) = mysql_source::driver(args.driver, &seen);
        let verify = (!source.local).then(|| mysql_source::verification(args.verify, &seen));
        // One note on stderr: what was settled, and from what.
        let mut seen_from = Vec::new();
        let mut defaulted = Vec::new();
        let mut unseen = None;
        let mut choices = vec![(
            format!("driver `{driver}` ({})", driver.title()),
            &why_driver,
        )];
        if let Some((v, why)) = &verify {
            choices.push((format!("verification `{v}`"), why));
        }
        for (what, why) in choices {
            match why {
                Why::Given => {}
                Why::Seen(s) => seen_from.push(format!("{what} because {s}")),
                Why::Default(s) => {
                    defaulted.push(what);
                    unseen = Some(s.clone());
                }
            }
        }
        if !seen_from.is_empty() {
            printer.note(&seen_from.join("; "));
        }
        if let Some(unseen) = unseen {
            printer.note(&format!(
                "{unseen}, so {} by default; start the tunnel (`shiqi-connect tunnel up {name}`) \
                 so the server can be asked, or pass `--driver`/`--verify`",
                defaulted.join(" and ")
            ));
        }
        Ok(Self {
            profile,
            source,
            driver,
            verify: verify.map(|(v, _)| v),
        })
    }
}

/// Prints `error: …`, one `  caused by: …` per source, and the hint of the first typed error in
/// the chain that has one.
pub fn report(err: &anyhow::Error, printer: &Printer) {
    let mut chain = err.chain();
    let top = chain.next().map(ToString::to_string).unwrap_or_default();
    let causes: Vec<String> = chain.map(ToString::to_string).collect();
    let hint = err.chain().find_map(|e| {
        e.downcast_ref::<Error>().and_then(Error::hint).or_else(|| {
            e.downcast_ref::<shiqi_ca::Error>()
                .and_then(shiqi_ca::Error::hint)
        })
    });
    printer.error(&top, &causes, hint.as_deref());
}

/// Connects; an unknown host key is shown and asked about on a terminal, then the connection is
/// retried trusting exactly that key.
pub(crate) async fn connect(
    accept_new_host_key: bool,
    target: &Target,
    prompter: &Prompter,
    printer: &Printer,
) -> Result<Session, Error> {
    let policy = if accept_new_host_key {
        HostKeyPolicy::AcceptNew
    } else {
        HostKeyPolicy::Strict
    };
    match Session::connect(target, policy, prompter).await {
        Err(Error::Ssh(SshError::HostKeyUnknown {
            host,
            algorithm,
            fingerprint,
            known_hosts,
        })) if prompter.is_interactive() => {
            let trusted = prompter.trust_host_key(&host, &algorithm, &fingerprint, &known_hosts);
            if !trusted {
                return Err(Error::Ssh(SshError::HostKeyUnknown {
                    host,
                    algorithm,
                    fingerprint,
                    known_hosts,
                }));
            }
            printer.note(&format!(
                "trusting {algorithm} key {fingerprint} for `{host}`"
            ));
            Session::connect(target, HostKeyPolicy::AcceptKey(fingerprint), prompter).await
        }
        other => other,
    }
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
///
/// # Errors
/// When stdout cannot be written for another reason.
pub(crate) fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}
