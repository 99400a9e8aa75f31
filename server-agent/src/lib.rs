//! The CA agent: runs on the server, by an admin or by `shiqi-connect` through
//! `ssh server shiqi-ca-agent …`. It reads one request (arguments, and a CSR on stdin for
//! `sign`), answers with one JSON document on stdout, and writes nothing to stdout otherwise.
//!
//! X.509 work is `shiqi-ca`'s; this crate brings the state directory, the config, MySQL
//! (mysql_async) and Kafka (`kafka-protocol` over rustls). No `unsafe`, no C Kafka library.
#![forbid(unsafe_code)]

pub mod access;
pub mod acl;
pub mod audit;
pub mod authorized_keys;
pub mod caller;
pub mod check;
pub mod cli;
pub mod commands;
pub mod config;
pub mod crl;
pub mod error;
pub mod fsutil;
pub mod install;
pub mod kafka;
pub mod limits;
pub mod logging;
pub mod mysql;
pub mod name_lock;
pub mod ops;
pub mod render;
pub mod report;
pub mod sql;
pub mod sshd;
pub mod state;

pub use error::AgentError;

/// Runs one command from the command line: `serve` finds out who asks and what; everything
/// else is run by the local account, which may do everything.
pub fn run(cli: cli::Cli) -> anyhow::Result<()> {
    // Generated from the clap definitions; no state directory needed (packagers run these).
    match &cli.command {
        cli::Command::Completions(args) => return commands::docs::completions(args.shell),
        cli::Command::Man(args) => return commands::docs::man(args.dir.as_deref()),
        // Asked locally, it needs no state either (through `serve` it is a request).
        cli::Command::Version(args) => return commands::version::run(args),
        _ => {}
    }
    // As root, before any state exists: it makes the account that owns the state.
    if let cli::Command::Install(args) = cli.command {
        return commands::install::run(&cli.global.state_dir, args);
    }
    let mut ctx = state::Context::new(&cli.global.state_dir, cli.global.config.as_deref())?;
    match cli.command {
        cli::Command::Serve(args) => commands::serve::run(&mut ctx, args),
        command => {
            access::authorize(&ctx, &ctx.caller, &command)?;
            dispatch(&ctx, command)
        }
    }
}

/// Runs one authorized command, holding the lock of the name it grants or revokes (see
/// [`name_lock`]).
pub(crate) fn dispatch(ctx: &state::Context, command: cli::Command) -> anyhow::Result<()> {
    let _held = match locked_name(ctx, &command)? {
        Some(name) => Some(name_lock::acquire(ctx, &name)?),
        None => None,
    };
    match command {
        cli::Command::Init(args) => commands::init::run(ctx, args),
        cli::Command::ServerCert(args) => commands::server_cert::run(ctx, args),
        cli::Command::Sign(args) => commands::sign::run(ctx, args),
        cli::Command::MysqlUser(args) => commands::mysql_user::run(ctx, args),
        cli::Command::Provision(args) => commands::provision::run(ctx, args),
        cli::Command::KafkaUser(args) => commands::kafka_user::run(ctx, args),
        cli::Command::Brokers(args) => commands::brokers::run(ctx, args),
        cli::Command::Version(args) => commands::version::run(&args),
        cli::Command::List(args) => commands::list::run(ctx, args),
        cli::Command::Revoke(args) => commands::revoke::run(ctx, &args),
        cli::Command::Crl(args) => commands::crl::run(ctx, args),
        cli::Command::Enroll(args) => commands::enroll::run(ctx, args),
        cli::Command::Check(args) => commands::check::run(ctx, args),
        cli::Command::Install(_) => Err(AgentError::Request {
            why: "`install` runs as root on the server itself, not as a request".to_owned(),
        }
        .into()),
        cli::Command::Unblock(args) => commands::unblock::run(ctx, args),
        cli::Command::Backup(args) => commands::backup::backup(ctx, &args),
        cli::Command::Restore(args) => commands::backup::restore(ctx, &args),
        // `authorize` refuses it before this point; never run one request inside another.
        cli::Command::Serve(_) => Err(AgentError::Request {
            why: "`serve` cannot run inside a request".to_owned(),
        }
        .into()),
        // `run` answers these before any state is opened; `authorize` refuses them as requests.
        cli::Command::Completions(_) | cli::Command::Man(_) => Err(AgentError::Request {
            why: "`completions` and `man` are not requests".to_owned(),
        }
        .into()),
    }
}

/// The name whose grants `command` changes. A name that does not parse locks nothing: the
/// command refuses it before it touches any state.
fn locked_name(
    ctx: &state::Context,
    command: &cli::Command,
) -> anyhow::Result<Option<shiqi_ca::ProfileName>> {
    use cli::Command;
    let raw = match command {
        Command::Sign(a) => Some(a.name.as_str()),
        Command::MysqlUser(a) => Some(a.name.as_str()),
        Command::Provision(a) => Some(a.name.as_str()),
        Command::KafkaUser(a) => Some(a.name.as_str()),
        Command::Unblock(a) => Some(a.name.as_str()),
        Command::Revoke(a) => match (&a.name, &a.serial) {
            (Some(name), _) => Some(name.as_str()),
            // A serial's certificate names whose grants its revocation may end.
            (None, Some(serial)) => {
                let Ok(serial) = serial.trim().parse::<shiqi_ca::Serial>() else {
                    return Ok(None);
                };
                let record = ctx.inventory()?.by_serial(&serial)?;
                return Ok(record.and_then(|r| r.name.parse().ok()));
            }
            (None, None) => None,
        },
        _ => None,
    };
    Ok(raw.and_then(|n| n.trim().parse().ok()))
}
