//! The CA agent: runs on the server, by an admin or by `shiqi-connect` through
//! `ssh server shiqi-ca-agent …`. It reads one request (arguments, and a CSR on stdin for
//! `sign`), answers with one JSON document on stdout, and writes nothing to stdout otherwise.
//!
//! X.509 work is `shiqi-ca`'s; this crate brings the state directory, the config, MySQL
//! (mysql_async) and Kafka (rdkafka).
//!
//! No `unsafe` except in [`kafka_acl`], which owns librdkafka's ACL FFI.
#![deny(unsafe_code)]

pub mod acl;
pub mod audit;
pub mod cli;
pub mod commands;
pub mod config;
pub mod crl;
pub mod error;
pub mod fsutil;
pub mod kafka;
#[allow(unsafe_code, reason = "librdkafka's ACL API; see the module docs")]
pub mod kafka_acl;
pub mod logging;
pub mod mysql;
pub mod render;
pub mod report;
pub mod sql;
pub mod state;

pub use error::AgentError;

/// Runs one command.
pub fn run(cli: cli::Cli) -> anyhow::Result<()> {
    let ctx = state::Context::new(&cli.global.state_dir, cli.global.config.as_deref())?;
    match cli.command {
        cli::Command::Init(args) => commands::init::run(&ctx, args),
        cli::Command::ServerCert(args) => commands::server_cert::run(&ctx, args),
        cli::Command::Sign(args) => commands::sign::run(&ctx, args),
        cli::Command::MysqlUser(args) => commands::mysql_user::run(&ctx, args),
        cli::Command::KafkaUser(args) => commands::kafka_user::run(&ctx, args),
        cli::Command::Brokers(args) => commands::brokers::run(&ctx, args),
        cli::Command::List(args) => commands::list::run(&ctx, args),
        cli::Command::Revoke(args) => commands::revoke::run(&ctx, args),
        cli::Command::Crl(args) => commands::crl::run(&ctx, args),
    }
}
