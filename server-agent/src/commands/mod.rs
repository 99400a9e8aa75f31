//! One module per subcommand, and [`Command`], the list of them. Each module holds its
//! arguments (clap), its facts and its run ([`Handler`]): it resolves its inputs, calls the
//! operations it needs ([`crate::ops`]), and prints its one answer; no command calls another.
//!
//! A new request is its module here and one variant of [`Command`] (with its arm in
//! [`Command::handler`]); a request the laptop sends is also a variant of the shared
//! [`protocol::Request`], its words, and its reply type in `shiqi_ca::protocol`.

pub(crate) mod backup;
pub(crate) mod brokers;
pub(crate) mod check;
pub(crate) mod crl;
pub(crate) mod docs;
pub(crate) mod enroll;
pub(crate) mod init;
pub(crate) mod install;
pub(crate) mod kafka_user;
pub(crate) mod list;
pub(crate) mod mysql_user;
pub(crate) mod provision;
pub(crate) mod revoke;
pub(crate) mod serve;
pub(crate) mod server_cert;
pub(crate) mod sign;
pub(crate) mod unblock;
pub(crate) mod version;

use std::io::{Read as _, Write as _};

use shiqi_ca::error::CsrRefusal;
use shiqi_ca::policy::MAX_CSR_BYTES;
use shiqi_ca::protocol;

use crate::error::AgentError;
use crate::handler::Handler;

/// The agent's commands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Create the private CA in the state directory (refuses to overwrite one).
    Init(init::InitArgs),
    /// Issue a server certificate and write what that server needs (keystores, config fragment).
    ServerCert(server_cert::ServerCertArgs),
    /// Sign one PEM CSR read from stdin; answer with one JSON document on stdout.
    Sign(sign::SignArgs),
    /// Create or update the certificate-only MySQL user for NAME (idempotent).
    MysqlUser(mysql_user::MysqlUserArgs),
    /// `sign`, `kafka-user` and `mysql-user` for NAME in one request (what `shiqi-connect setup`
    /// sends): the CSR on stdin, one JSON document with all three answers on stdout.
    Provision(provision::ProvisionArgs),
    /// Give Kafka principal `User:NAME` the ACLs of `[kafka] grants` (idempotent), or delete
    /// all of its ACLs with `--revoke`.
    KafkaUser(kafka_user::KafkaUserArgs),
    /// List every Kafka broker's advertised host:port, from the cluster's metadata.
    Brokers(brokers::BrokersArgs),
    /// Print this agent's build and the protocol it speaks with `shiqi-connect` (what the
    /// laptop's doctor asks, to tell a laptop and an agent that need the same release).
    Version(version::VersionArgs),
    /// List the issued certificates.
    List(list::ListArgs),
    /// Revoke a certificate (by serial) or every valid client certificate of a name, publish the
    /// new CRL, and make it effective on MySQL and Kafka.
    Revoke(revoke::RevokeArgs),
    /// Write a new CRL now, or with `--refresh` only when it is due (for cron or a systemd
    /// timer: "nothing to do" exits 0).
    Crl(crl::CrlArgs),
    /// Enroll a person's SSH key with a name and a role and install its `authorized_keys` line;
    /// or `--list`, `--remove FINGERPRINT`, `--sync`.
    Enroll(enroll::EnrollArgs),
    /// Set up this server, as root: the agent's account and CA, the sshd block for it, MariaDB's
    /// TLS and the agent's admin account, the brokers' certificate and settings, a daily CRL
    /// timer, the first admin. Changes only what differs; `--dry-run` changes nothing.
    Install(Box<crate::install::InstallArgs>),
    /// The server's doctor: try each broker and MySQL with a throwaway certificate from this CA
    /// (refused without one, accepted with it, denied without ACLs, its CN as principal, refused
    /// once revoked, with the seconds that took), and check MariaDB's TLS settings, the sshd
    /// block, the state directory and the CRL. One line per finding with the fix.
    Check(check::CheckArgs),
    /// Lift the block a `revoke --name NAME` put on NAME, so that it can be signed again.
    Unblock(unblock::UnblockArgs),
    /// Write the CA (key, certificate, inventory, agent.toml) to one file encrypted to a
    /// passphrase (age, scrypt), for `restore` on a new server. Local only.
    Backup(backup::BackupArgs),
    /// Put a backup's CA into an empty state directory (refused where a CA exists unless
    /// `--force`); the CRL number skips ahead. Local only.
    Restore(backup::RestoreArgs),
    /// Answer one request from `SSH_ORIGINAL_COMMAND` for the enrolled key KEY: what sshd runs
    /// through the forced command that `enroll` installs. Not for people.
    Serve(serve::ServeArgs),
    /// Print a completion script for a shell (bash, zsh, fish, powershell, elvish). Needs no
    /// state directory; not a request.
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), or write one page per command into DIR
    /// (`shiqi-ca-agent.1`, `shiqi-ca-agent-sign.1`, …). Needs no state directory; not a request.
    Man(docs::ManArgs),
    /// Print the systemd units `install` writes (the daily `crl --refresh`) for the default
    /// account and state directory, or write them into DIR: for a package. Needs no state
    /// directory; not a request.
    Units(docs::UnitsArgs),
}

impl Command {
    /// The command's facts and its run.
    pub(crate) fn handler(&self) -> &dyn Handler {
        match self {
            Self::Init(a) => a,
            Self::ServerCert(a) => a,
            Self::Sign(a) => a,
            Self::MysqlUser(a) => a,
            Self::Provision(a) => a,
            Self::KafkaUser(a) => a,
            Self::Brokers(a) => a,
            Self::Version(a) => a,
            Self::List(a) => a,
            Self::Revoke(a) => a,
            Self::Crl(a) => a,
            Self::Enroll(a) => a,
            Self::Install(a) => a.as_ref(),
            Self::Check(a) => a,
            Self::Unblock(a) => a,
            Self::Backup(a) => a,
            Self::Restore(a) => a,
            Self::Serve(a) => a,
            Self::Completions(a) => a,
            Self::Man(a) => a,
            Self::Units(a) => a,
        }
    }
}

/// The laptop's side of the contract: the commands it sends, as the shared
/// [`protocol::Request`] ([`Handler::wire`]). Any other command (or option the laptop never
/// sends, such as `--no-kafka`) is not a laptop request.
impl TryFrom<&Command> for protocol::Request {
    type Error = String;

    fn try_from(command: &Command) -> Result<Self, String> {
        command
            .handler()
            .wire()
            .unwrap_or_else(|| Err("not a request the laptop sends".to_owned()))
    }
}

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

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use shiqi_ca::crl::Reason;
    use shiqi_ca::protocol::{Request as Wire, RevokeTarget};

    use super::*;

    /// What the audit log and a refusal say of each command (the texts `access` and `serve`
    /// showed before the facts moved into each command's module).
    #[test]
    fn every_command_names_itself_for_the_audit_log_and_a_refusal() {
        let own = "(only on the server, as the agent's account)";
        let here = "(run it on the server itself)";
        for (line, action, target, describe) in [
            ("init", "init", "", "`init`".to_owned()),
            (
                "server-cert kafka-broker --kind kafka --san localhost --out /tmp/x",
                "server-cert",
                "kafka-broker",
                "`server-cert kafka-broker`".to_owned(),
            ),
            (
                "sign --name bob",
                "sign",
                "bob",
                "a certificate for `bob`".to_owned(),
            ),
            (
                "mysql-user bob",
                "mysql-user",
                "bob",
                "the MySQL user `bob`".to_owned(),
            ),
            (
                "provision --name bob",
                "provision",
                "bob",
                "a certificate for `bob`".to_owned(),
            ),
            (
                "kafka-user bob",
                "kafka-user",
                "bob",
                "the Kafka ACLs of `bob`".to_owned(),
            ),
            (
                "kafka-user bob --revoke",
                "kafka-user-revoke",
                "bob",
                "deleting the Kafka ACLs of `bob`".to_owned(),
            ),
            ("brokers", "brokers", "", "`brokers`".to_owned()),
            ("version --json", "version", "", "`version`".to_owned()),
            ("list", "list", "", "`list`".to_owned()),
            (
                "revoke --name bob",
                "revoke",
                "bob",
                "revoking `bob`".to_owned(),
            ),
            (
                "revoke 0a1b",
                "revoke",
                "0a1b",
                "revoking serial `0a1b`".to_owned(),
            ),
            ("crl --refresh", "crl", "", "`crl`".to_owned()),
            ("check", "check", "", "`check`".to_owned()),
            ("install --dry-run", "install", "", "`install`".to_owned()),
            ("enroll --list", "enroll", "", "`enroll`".to_owned()),
            (
                "enroll bob --ssh-key /tmp/k.pub --role user",
                "enroll",
                "bob",
                "`enroll`".to_owned(),
            ),
            ("unblock bob", "unblock", "bob", "`unblock bob`".to_owned()),
            (
                "backup --out /tmp/b --passphrase-file -",
                "backup",
                "",
                format!("`backup` {own}"),
            ),
            (
                "restore /tmp/b --passphrase-file -",
                "restore",
                "",
                format!("`restore` {own}"),
            ),
            (
                "serve --key SHA256:x",
                "serve",
                "",
                "`serve` inside a request".to_owned(),
            ),
            (
                "completions bash",
                "completions",
                "",
                format!("`completions` {here}"),
            ),
            ("man", "man", "", format!("`man` {here}")),
        ] {
            let words = std::iter::once("shiqi-ca-agent").chain(line.split_whitespace());
            let parsed = serve::Request::try_parse_from(words).unwrap_or_else(|e| panic!("{e}"));
            let handler = parsed.command.handler();
            assert_eq!(
                (
                    handler.action(),
                    handler.target().as_str(),
                    handler.describe()
                ),
                (action, target, describe),
                "{line}"
            );
        }
    }

    /// Every request the laptop can send parses here to the same request: the laptop's words
    /// and the agent's options cannot drift apart.
    #[test]
    fn every_laptop_request_means_the_same_on_the_agent() {
        let name: shiqi_ca::ProfileName = "saige".parse().expect("name");
        let serial: shiqi_ca::Serial = "0a1b".parse().expect("serial");
        let key: shiqi_ca::KeyId = "ab".repeat(32).parse().expect("key id");
        let requests = [
            Wire::Provision {
                name: name.clone(),
                lifetime: None,
            },
            Wire::Provision {
                name: name.clone(),
                lifetime: "1h".parse().ok(),
            },
            Wire::Sign {
                name: name.clone(),
                replaces: None,
                lifetime: None,
            },
            Wire::Sign {
                name: name.clone(),
                replaces: Some(serial.clone()),
                lifetime: "10m".parse().ok(),
            },
            Wire::Brokers,
            Wire::Version,
            Wire::Revoke {
                target: RevokeTarget::Serial(serial),
                reason: Reason::Superseded,
            },
            Wire::Revoke {
                target: RevokeTarget::Name(name.clone()),
                reason: Reason::KeyCompromise,
            },
            Wire::Revoke {
                target: RevokeTarget::Key(name, key),
                reason: Reason::Unspecified,
            },
        ];
        for wire in requests {
            let argv = wire.to_argv();
            let parsed = serve::Request::try_parse_from(
                std::iter::once("shiqi-ca-agent".to_owned()).chain(argv.clone()),
            )
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let back = Wire::try_from(&parsed.command).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            assert_eq!(back, wire, "{argv:?}");
        }
        let admin_only =
            serve::Request::try_parse_from(["shiqi-ca-agent", "list", "--json"]).expect("list");
        assert!(Wire::try_from(&admin_only.command).is_err());
    }
}
