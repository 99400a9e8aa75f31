//! Every call to the server's `shiqi-ca-agent`, over an open SSH session: `provision` (CSR on
//! stdin → certificate, server facts, Kafka ACLs, MySQL user), `sign --replaces`, `brokers` and
//! `revoke`. Each
//! command line is built from validated types only; each answer is parsed into strict types
//! ([`shiqi_ca::protocol::decode`]) and checked against the request before anyone uses it; a
//! refusal becomes one [`Error`] carrying the agent's own `error:` and `hint:` lines.

use std::time::Duration;

use shiqi_ca::cert::Cert;
use shiqi_ca::crl::Reason;
use shiqi_ca::key::PrivateKey;
use shiqi_ca::protocol::{
    Broker, BrokersResponse, KafkaUserResponse, MysqlUserResponse, PROTOCOL_VERSION,
    ProvisionResponse, Request, RevokeResponse, SignResponse, VersionResponse,
};
use shiqi_ca::{ProfileName, Serial, Span};

use crate::error::{AgentError, Error, InputError};
use crate::ssh::{Output, Session};
use shiqi_ca::protocol::RequestKind;

/// Replies larger than this are not a certificate: refuse them instead of buffering them.
const MAX_REPLY: usize = 1024 * 1024;
/// The agent asks the Kafka cluster for its brokers (10 s timeout by default) before answering.
const AGENT_TIMEOUT: Duration = Duration::from_secs(90);

/// How to start the agent on the server: a shell command prefix, `shiqi-ca-agent` by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AgentCommand(String);

impl AgentCommand {
    /// Takes the admin's `--agent-command`, e.g. `/opt/shiqi/bin/shiqi-ca-agent` or
    /// `sudo -n -u shiqi shiqi-ca-agent`. It is passed to the remote shell as written.
    ///
    /// # Errors
    /// When it is empty or spans lines.
    pub(crate) fn new(s: &str) -> Result<Self, Error> {
        let s = s.trim();
        if s.is_empty() || s.chars().any(char::is_control) {
            return Err(Error::Input(InputError::InvalidValue {
                what: "agent command",
                given: s.chars().take(100).collect(),
                why: "it must be one non-empty line",
            }));
        }
        Ok(Self(s.to_owned()))
    }

    /// The command as configured.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The shell command line for `request`: this prefix, then the request's words, each a
    /// validated name, serial, key id or reason, so a safe shell word by construction.
    fn line(&self, request: &Request) -> String {
        format!("{} {}", self.0, request.to_argv().join(" "))
    }
}

/// What `revoke` revokes.
pub(crate) use shiqi_ca::protocol::RevokeTarget as Revocation;

impl Default for AgentCommand {
    fn default() -> Self {
        Self("shiqi-ca-agent".to_owned())
    }
}

/// A certificate the server issued, checked against the key and name it was asked for.
#[derive(Debug)]
pub(crate) struct Signed {
    /// The agent's reply.
    pub(crate) response: SignResponse,
    /// Leaf then chain, PEM: `client.crt` and the keystore's chain.
    pub(crate) chain_pem: String,
}

/// What `provision` brought back: the certificate, checked, and the accounts made for it.
#[derive(Debug)]
pub(crate) struct Provisioned {
    /// The certificate and the server's facts.
    pub(crate) signed: Signed,
    /// The principal's ACLs, when the facts name a Kafka cluster.
    pub(crate) kafka: Option<KafkaUserResponse>,
    /// The MySQL account, when the facts name a MySQL server.
    pub(crate) mysql: Option<MysqlUserResponse>,
}

/// Sends the CSR to `agent provision --name NAME`, which signs it, grants the Kafka ACLs and
/// creates the MySQL user in one request, and checks what comes back.
///
/// # Errors
/// [`AgentError::NotInstalled`], [`AgentError::TooOld`], [`AgentError::Refused`] (nothing was
/// issued), [`AgentError::Unfinished`] (a certificate was issued, a later step failed),
/// [`AgentError::Reply`], [`AgentError::ProtocolVersion`], [`AgentError::CertMismatch`], or an SSH error.
#[tracing::instrument(skip_all, fields(profile = %name))]
pub(crate) async fn provision(
    session: &Session,
    agent: &AgentCommand,
    name: &ProfileName,
    lifetime: Option<Span>,
    csr_pem: &str,
    key: &PrivateKey,
) -> Result<Provisioned, Error> {
    tracing::debug!(bytes = csr_pem.len(), "sending CSR to shiqi-ca-agent");
    let out = session
        .exec(
            &agent.line(&Request::Provision {
                name: name.clone(),
                lifetime,
            }),
            csr_pem.as_bytes(),
            MAX_REPLY,
            AGENT_TIMEOUT,
        )
        .await?;
    // A failure after signing still prints the answer so far: a certificate exists.
    if matches!(out.status, Some(s) if s != 0)
        && let Ok(partial) = shiqi_ca::protocol::decode::<ProvisionResponse>(&out.stdout)
    {
        let (message, agent_hint) = read_stderr(&String::from_utf8_lossy(&out.stderr));
        return Err(Error::Agent(AgentError::Unfinished {
            serial: partial.certificate.serial.to_hex(),
            message: message.unwrap_or_default(),
            agent_hint,
        }));
    }
    let stdout = successful(RequestKind::Provision, agent, out)?;
    let response: ProvisionResponse = parse_reply(RequestKind::Provision, &stdout)?;
    let signed = check_sign_response(RequestKind::Provision, response.certificate, name, key)?;
    let field = |field: &str, why: String| {
        Error::Agent(AgentError::Field {
            op: RequestKind::Provision,
            field: field.to_owned(),
            why,
        })
    };
    if let Some(m) = &response.mysql
        && &m.user != name
    {
        return Err(field(
            "mysql.user",
            format!("`{}` is not the requested name `{name}`", m.user),
        ));
    }
    let principal = format!("User:{name}");
    if let Some(k) = &response.kafka
        && k.principal.as_str() != principal
    {
        return Err(field(
            "kafka.principal",
            format!("`{}` is not `{principal}`", k.principal),
        ));
    }
    Ok(Provisioned {
        signed,
        kafka: response.kafka,
        mysql: response.mysql,
    })
}

/// Sends the CSR to `agent sign --name NAME --replaces OLD` (`rotate`, `renew`) and checks the
/// certificate that comes back: the agent checks that `old` is a client certificate of `name`
/// and records the rotation in its audit log.
///
/// # Errors
/// [`AgentError::NotInstalled`], [`AgentError::Refused`], [`AgentError::Reply`],
/// [`AgentError::ProtocolVersion`], [`AgentError::CertMismatch`], or an SSH error.
#[tracing::instrument(skip_all, fields(profile = %name, replaces = %old))]
pub(crate) async fn sign_replacing(
    session: &Session,
    agent: &AgentCommand,
    name: &ProfileName,
    lifetime: Option<Span>,
    csr_pem: &str,
    key: &PrivateKey,
    old: &Serial,
) -> Result<Signed, Error> {
    let out = session
        .exec(
            &agent.line(&Request::Sign {
                name: name.clone(),
                replaces: Some(old.clone()),
                lifetime,
            }),
            csr_pem.as_bytes(),
            MAX_REPLY,
            AGENT_TIMEOUT,
        )
        .await?;
    let stdout = successful(RequestKind::Sign, agent, out)?;
    let response: SignResponse = parse_reply(RequestKind::Sign, &stdout)?;
    check_sign_response(RequestKind::Sign, response, name, key)
}

/// A `sign` reply kept from an earlier attempt (a renewal's pending certificate), checked as
/// when it arrived: it still parses, names `name` and certifies `key`.
///
/// # Errors
/// As [`sign_replacing`]'s reply checks.
pub(crate) fn signed_from_kept(
    name: &ProfileName,
    key: &PrivateKey,
    reply: &str,
) -> Result<Signed, Error> {
    let response: SignResponse = parse_reply(RequestKind::Sign, reply.as_bytes())?;
    check_sign_response(RequestKind::Sign, response, name, key)
}

/// What [`revoke`] learned: the agent's answer, and its error if it could not finish (MySQL or
/// Kafka unreachable: the revocation is recorded and in the CRL all the same).
#[derive(Debug)]
pub(crate) struct Revoked {
    /// The agent's answer.
    pub(crate) response: RevokeResponse,
    /// The agent's `error:` line when it exited non-zero after revoking.
    pub(crate) incomplete: Option<String>,
}

/// Runs `agent revoke …` for `what` with `reason`.
///
/// # Errors
/// As [`sign_replacing`]; an agent that revoked but could not make it effective everywhere is not an
/// error (see [`Revoked::incomplete`]).
#[tracing::instrument(skip_all)]
pub(crate) async fn revoke(
    session: &Session,
    agent: &AgentCommand,
    what: &Revocation,
    reason: Reason,
) -> Result<Revoked, Error> {
    let out = session
        .exec(
            &agent.line(&Request::Revoke {
                target: what.clone(),
                reason,
            }),
            b"",
            MAX_REPLY,
            AGENT_TIMEOUT,
        )
        .await?;
    let partial = match out.status {
        Some(0) => None,
        // Exit 2 with a JSON answer: revoked, but MySQL or Kafka could not be reached.
        Some(_) if shiqi_ca::protocol::decode::<RevokeResponse>(&out.stdout).is_ok() => Some(
            read_stderr(&String::from_utf8_lossy(&out.stderr))
                .0
                .unwrap_or_default(),
        ),
        _ => None,
    };
    let stdout = match partial {
        Some(_) => out.stdout,
        None => successful(RequestKind::Revoke, agent, out)?,
    };
    let response: RevokeResponse = parse_reply(RequestKind::Revoke, &stdout)?;
    Ok(Revoked {
        response,
        incomplete: partial,
    })
}

/// Asks the agent for every broker's advertised address (it asks the cluster).
///
/// # Errors
/// As [`sign_replacing`], e.g. [`AgentError::Refused`] when Kafka is down.
#[tracing::instrument(skip_all)]
pub(crate) async fn brokers(session: &Session, agent: &AgentCommand) -> Result<Vec<Broker>, Error> {
    let out = session
        .exec(
            &agent.line(&Request::Brokers),
            b"",
            MAX_REPLY,
            AGENT_TIMEOUT,
        )
        .await?;
    let stdout = successful(RequestKind::Brokers, agent, out)?;
    let reply: BrokersResponse = parse_reply(RequestKind::Brokers, &stdout)?;
    if reply.version != PROTOCOL_VERSION {
        return Err(Error::Agent(AgentError::ProtocolVersion {
            found: reply.version,
            expected: PROTOCOL_VERSION,
        }));
    }
    tracing::debug!(brokers = reply.kafka.brokers.len(), "broker list");
    Ok(reply.kafka.brokers)
}

/// How long `version` may take: it asks nothing beyond the agent itself.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Asks the agent for its build and the protocol it speaks, whatever that protocol is.
///
/// # Errors
/// [`AgentError::TooOld`] for an agent that predates `version`, [`AgentError::Reply`] for a
/// reply that does not parse, or as [`brokers`].
#[tracing::instrument(skip_all)]
pub(crate) async fn version(
    session: &Session,
    agent: &AgentCommand,
) -> Result<VersionResponse, Error> {
    let out = session
        .exec(
            &agent.line(&Request::Version),
            b"",
            MAX_REPLY,
            VERSION_TIMEOUT,
        )
        .await?;
    let stdout = successful(RequestKind::Version, agent, out)?;
    shiqi_ca::protocol::decode_version(&stdout).map_err(|e| {
        Error::Agent(AgentError::Reply {
            op: RequestKind::Version,
            why: e.to_string(),
        })
    })
}

/// Turns a finished remote command into its stdout, or the error its status and stderr name.
fn successful(op: RequestKind, agent: &AgentCommand, out: Output) -> Result<Vec<u8>, Error> {
    match out.status {
        Some(0) => Ok(out.stdout),
        // POSIX shells exit 127 for "command not found" and 126 for "not executable".
        Some(127) => Err(Error::Agent(AgentError::NotInstalled {
            command: agent.as_str().to_owned(),
        })),
        None if out.signal.is_none() => Err(Error::Agent(AgentError::Vanished { op })),
        status => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            // clap's words, whether the agent ran from a shell or through `serve`.
            if stderr.contains(&format!("unrecognized subcommand '{}'", op.subcommand())) {
                return Err(Error::Agent(AgentError::TooOld { op }));
            }
            let (message, agent_hint) = read_stderr(&stderr);
            let message = match (message, &out.signal, status) {
                (Some(m), _, _) => m,
                (None, Some(sig), _) => format!("it was killed by signal {sig}"),
                (None, None, s) => format!(
                    "it exited with status {} and printed no error",
                    s.unwrap_or_default()
                ),
            };
            Err(Error::Agent(AgentError::Refused {
                op,
                status: status.unwrap_or(255),
                message,
                agent_hint,
            }))
        }
    }
}

/// The agent prints `error: …` and `hint: …` lines (design.md); older or foreign tools print
/// something else, so fall back to the last non-empty line.
fn read_stderr(stderr: &str) -> (Option<String>, Option<String>) {
    let clip = |s: &str| s.trim().chars().take(300).collect::<String>();
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let error = lines
        .iter()
        .find_map(|l| l.strip_prefix("error:"))
        .or_else(|| lines.last().copied())
        .map(clip);
    let hint = lines.iter().find_map(|l| l.strip_prefix("hint:")).map(clip);
    (error, hint)
}

/// Parses an agent reply through [`shiqi_ca::protocol::decode`]: every field into its strict
/// type, or one error naming the field.
fn parse_reply<T: serde::de::DeserializeOwned>(op: RequestKind, stdout: &[u8]) -> Result<T, Error> {
    shiqi_ca::protocol::decode(stdout).map_err(|e| match e {
        shiqi_ca::Error::Reply { field, why } if field == "." => {
            Error::Agent(AgentError::Reply { op, why })
        }
        shiqi_ca::Error::Reply { field, why } => Error::Agent(AgentError::Field { op, field, why }),
        shiqi_ca::Error::ReplyVersion { found, expected } => {
            Error::Agent(AgentError::ProtocolVersion { found, expected })
        }
        other => Error::Agent(AgentError::Reply {
            op,
            why: other.to_string(),
        }),
    })
}

fn check_sign_response(
    op: RequestKind,
    response: SignResponse,
    name: &ProfileName,
    key: &PrivateKey,
) -> Result<Signed, Error> {
    let mismatch = |why: String| Error::Agent(AgentError::CertMismatch { why });
    if response.version != PROTOCOL_VERSION {
        return Err(Error::Agent(AgentError::ProtocolVersion {
            found: response.version,
            expected: PROTOCOL_VERSION,
        }));
    }
    if &response.name != name {
        return Err(mismatch(format!(
            "it was issued for `{}`, not `{name}`",
            response.name
        )));
    }
    // The user the server will create is the profile's name, exactly: it reaches my.cnf.
    if let Some(m) = &response.facts.mysql
        && &m.user != name
    {
        return Err(Error::Agent(AgentError::Field {
            op,
            field: "facts.mysql.user".to_owned(),
            why: format!("`{}` is not the requested name `{name}`", m.user),
        }));
    }
    let ca_err = |what| move |source| Error::Ca { what, source };
    let cert = Cert::from_pem(response.certificate_pem.as_str())
        .map_err(ca_err("read the certificate"))?;
    let ca = Cert::from_pem(response.ca_pem.as_str()).map_err(ca_err("read the CA certificate"))?;
    if !cert.matches_key(key) {
        return Err(mismatch(
            "it certifies another public key than the CSR's".to_owned(),
        ));
    }
    if cert.common_name() != Some(name.as_str()) {
        return Err(mismatch(format!(
            "its subject is `{}`",
            shiqi_ca::text::one_line(cert.subject(), 120)
        )));
    }
    if cert.serial() != &response.serial {
        return Err(mismatch(format!(
            "its serial `{}` differs from the reply's `{}`",
            cert.serial(),
            response.serial
        )));
    }
    let issuer = match response.chain_pem.first() {
        Some(pem) => {
            Cert::from_pem(pem.as_str()).map_err(ca_err("read the issuing certificate"))?
        }
        None => ca.clone(),
    };
    if !cert.is_signed_by(&issuer) {
        return Err(mismatch(
            "it is not signed by the chain the server sent".to_owned(),
        ));
    }
    let mut chain_pem = ensure_newline(response.certificate_pem.as_str());
    for c in &response.chain_pem {
        chain_pem.push_str(&ensure_newline(c.as_str()));
    }
    if response.chain_pem.is_empty() {
        chain_pem.push_str(&ensure_newline(response.ca_pem.as_str()));
    }
    Ok(Signed {
        response,
        chain_pem,
    })
}

fn ensure_newline(pem: &str) -> String {
    let mut s = pem.trim_end().to_owned();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(status: Option<u32>, stderr: &str) -> Output {
        Output {
            status,
            stderr: stderr.as_bytes().to_vec(),
            stdout: b"{}".to_vec(),
            signal: None,
        }
    }

    #[test]
    fn reads_agent_failures() {
        let a = AgentCommand::default();
        assert!(successful(RequestKind::Sign, &a, out(Some(0), "")).is_ok());

        let e = successful(
            RequestKind::Sign,
            &a,
            out(Some(127), "sh: shiqi-ca-agent: not found"),
        )
        .expect_err("127");
        assert_eq!(
            e.to_string(),
            "`shiqi-ca-agent` is not installed on the server (not on PATH)"
        );

        let e = successful(
            RequestKind::Sign,
            &a,
            out(
                Some(2),
                "error: CSR subject `bob` does not match profile `saige`\nhint: use CN=saige\n",
            ),
        )
        .expect_err("refused");
        assert_eq!(
            e.to_string(),
            "the server's agent refused the CSR: CSR subject `bob` does not match profile `saige`"
        );
        assert_eq!(e.hint().as_deref(), Some("use CN=saige"));

        let e = successful(RequestKind::Sign, &a, out(None, "")).expect_err("gone");
        assert!(
            matches!(e, Error::Agent(AgentError::Vanished { .. })),
            "{e}"
        );

        // An agent from before `provision`, run from a shell and through `serve`.
        for stderr in [
            "error: unrecognized subcommand 'provision'\n\nUsage: shiqi-ca-agent <COMMAND>\n",
            "error: cannot parse the request: unrecognized subcommand 'provision'\n",
        ] {
            let e = successful(RequestKind::Provision, &a, out(Some(2), stderr)).expect_err("old");
            assert!(matches!(e, Error::Agent(AgentError::TooOld { .. })), "{e}");
            assert!(e.hint().is_some_and(|h| h.contains("same version")), "{e}");
        }

        let e = successful(RequestKind::Provision, &a, out(Some(1), "")).expect_err("silent");
        assert!(
            e.to_string()
                .ends_with("it exited with status 1 and printed no error"),
            "{e}"
        );
    }

    #[test]
    fn refuses_other_protocol_versions_and_junk() {
        let e = parse_reply::<MysqlUserResponse>(RequestKind::Provision, br#"{"version":7}"#)
            .expect_err("version");
        assert!(matches!(
            e,
            Error::Agent(AgentError::ProtocolVersion {
                found: 7,
                expected: 1
            })
        ));
        let e =
            parse_reply::<MysqlUserResponse>(RequestKind::Provision, b"Welcome to the server!\n{")
                .expect_err("junk");
        assert!(e.to_string().contains("not JSON"), "{e}");
    }

    #[test]
    fn builds_command_lines_from_validated_names() {
        let name: ProfileName = "saige".parse().expect("name");
        let a = AgentCommand::new(" /opt/shiqi/bin/shiqi-ca-agent ").expect("valid");
        assert_eq!(
            a.line(&Request::Provision {
                name: name.clone(),
                lifetime: None
            }),
            "/opt/shiqi/bin/shiqi-ca-agent provision --name saige"
        );
        assert!(AgentCommand::new("a\nb").is_err() && AgentCommand::new("  ").is_err());
        let serial: Serial = "0a1b".parse().expect("serial");
        let d = AgentCommand::default();
        assert_eq!(
            d.line(&Request::Sign {
                name: name.clone(),
                replaces: Some(serial.clone()),
                lifetime: "1h".parse().ok(),
            }),
            "shiqi-ca-agent sign --name saige --replaces 0a1b --lifetime 1h"
        );
        assert_eq!(
            d.line(&Request::Revoke {
                target: Revocation::Serial(serial),
                reason: Reason::Superseded
            }),
            "shiqi-ca-agent revoke 0a1b --reason superseded"
        );
        assert_eq!(
            d.line(&Request::Revoke {
                target: Revocation::Name(name),
                reason: Reason::KeyCompromise
            }),
            "shiqi-ca-agent revoke --name saige --reason key-compromise"
        );
        assert_eq!(d.line(&Request::Brokers), "shiqi-ca-agent brokers --json");
    }
}
