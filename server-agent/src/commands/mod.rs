//! One module per subcommand. Each resolves its inputs, acts, and prints its one answer.

pub mod brokers;
pub mod crl;
pub mod docs;
pub mod enroll;
pub mod init;
pub mod kafka_user;
pub mod list;
pub mod mysql_user;
pub mod provision;
pub mod revoke;
pub mod serve;
pub mod server_cert;
pub mod sign;
pub mod unblock;

use std::io::Write as _;

/// Prints a JSON document on stdout (the only thing a command writes there).
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    // As an io::Error, so that a reader that went away (`| head`) is recognised as one.
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// Prints text on stdout.
pub(crate) fn print_text(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    Ok(())
}
