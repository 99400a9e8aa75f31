//! One module per subcommand. Each resolves its inputs, calls the operations it needs
//! ([`crate::ops`]), and prints its one answer; no command calls another.

pub mod backup;
pub mod brokers;
pub mod check;
pub mod crl;
pub mod docs;
pub mod enroll;
pub mod init;
pub mod install;
pub mod kafka_user;
pub mod list;
pub mod mysql_user;
pub mod provision;
pub mod revoke;
pub mod serve;
pub mod server_cert;
pub mod sign;
pub mod unblock;
pub mod version;

use std::io::{Read as _, Write as _};

use shiqi_ca::error::CsrRefusal;
use shiqi_ca::policy::MAX_CSR_BYTES;

use crate::error::AgentError;

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

/// Reads one PEM CSR from stdin, refusing more than a CSR can be.
pub(crate) fn read_csr() -> anyhow::Result<Vec<u8>> {
    let mut csr = Vec::new();
    std::io::stdin()
        .take(MAX_CSR_BYTES as u64 + 1)
        .read_to_end(&mut csr)
        .map_err(AgentError::Stdin)?;
    if csr.len() > MAX_CSR_BYTES {
        return Err(shiqi_ca::Error::CsrRefused {
            reason: CsrRefusal::TooLarge,
        }
        .into());
    }
    Ok(csr)
}
