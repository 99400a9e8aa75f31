//! The server's `shiqi-ca-agent`: missing, refusing, or answering what this client does not accept
//! (every reply is parsed into strict types; a field that does not parse refuses the whole reply).

use shiqi_ca::protocol::RequestKind;

/// The server's agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A remote command exited 127: the shell did not find it.
    #[error("`{command}` is not installed on the server (not on PATH)")]
    NotInstalled {
        /// The agent command as sent.
        command: String,
    },

    /// The agent exited non-zero.
    #[error("{}: {message}", op.refusal())]
    Refused {
        /// Which subcommand.
        op: RequestKind,
        /// Its exit status.
        status: u32,
        /// Its `error:` line (or the last stderr line).
        message: String,
        /// Its `hint:` line, if it printed one.
        agent_hint: Option<String>,
    },

    /// `provision` issued a certificate, then granting the Kafka ACLs or creating the MySQL user
    /// failed (the run revokes the certificate on its way out).
    #[error("the server's agent issued certificate {serial}, then failed: {message}")]
    Unfinished {
        /// The issued certificate's serial.
        serial: String,
        /// The agent's `error:` line.
        message: String,
        /// Its `hint:` line, if it printed one.
        agent_hint: Option<String>,
    },

    /// The agent does not know a subcommand this client sends: it is an older version.
    #[error("the server's `shiqi-ca-agent` is older than this shiqi-connect: it has no `{}`", op.subcommand())]
    TooOld {
        /// The subcommand it does not know.
        op: RequestKind,
    },

    /// The channel closed without an exit status: the connection or the agent died.
    #[error("the connection closed before `shiqi-ca-agent {}` finished", op.subcommand())]
    Vanished {
        /// Which subcommand.
        op: RequestKind,
    },

    /// The agent's output is not what this client understands.
    #[error("unexpected reply from `shiqi-ca-agent {}`: {why}", op.subcommand())]
    Reply {
        /// Which subcommand.
        op: RequestKind,
        /// What is wrong with it.
        why: String,
    },

    /// A field of the agent's reply that does not parse into its strict type (a host that is
    /// not a host name, a newline in a name): the whole reply is refused.
    #[error("the server's `shiqi-ca-agent {}` sent an invalid `{field}`: {why}", op.subcommand())]
    Field {
        /// Which subcommand.
        op: RequestKind,
        /// Where in the reply (`facts.kafka.brokers[1].host`).
        field: String,
        /// What is wrong with it (the value escaped).
        why: String,
    },

    /// The agent speaks another protocol version.
    #[error("the server's agent speaks protocol version {found}, this client speaks {expected}")]
    ProtocolVersion {
        /// The version in the reply.
        found: u32,
        /// [`shiqi_ca::protocol::PROTOCOL_VERSION`].
        expected: u32,
    },

    /// The certificate the agent returned does not fit the request.
    #[error("the certificate returned by the server does not fit the request: {why}")]
    CertMismatch {
        /// What does not fit.
        why: String,
    },
}

impl AgentError {
    /// One next step for the user (see [`super::Error::hint`]).
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            Self::NotInstalled { .. } => "install `shiqi-ca-agent` on the server's PATH, or \
                pass `--agent-command /path/to/shiqi-ca-agent` (env `SHIQI_AGENT_COMMAND`)"
                .to_owned(),
            Self::Refused { agent_hint: Some(h), .. }
            | Self::Unfinished { agent_hint: Some(h), .. } => h.clone(),
            Self::Unfinished { .. } => "fix what the error names on the server (or ask its admin), then run setup again: this certificate is revoked".to_owned(),
            Self::TooOld { .. } => "install the same version of shiqi-ca-agent on the server as this shiqi-connect (`shiqi-connect --version`)".to_owned(),
            Self::Refused { .. } => {
                "the server's admin can read the agent's audit log for details".to_owned()
            }
            Self::Vanished { .. } => {
                "check that the server is up (sshd, disk, memory), then run setup again".to_owned()
            }
            Self::Field { op, .. } => format!(
                "nothing was written; the server's agent or its agent.toml produced this value: run `shiqi-ca-agent {}` on the server and fix the value (or find who changed it)",
                op.subcommand()
            ),
            Self::Reply { .. } | Self::ProtocolVersion { .. } => {
                "install the same shiqi-connect version on the laptop and the server".to_owned()
            }
            Self::CertMismatch { .. } => {
                "this is a bug or a misconfigured agent; report it with `-v` output".to_owned()
            }

        })
    }
}
