//! `serve --key FINGERPRINT`: what sshd runs for an enrolled key (the forced command `enroll`
//! installs). The request is `SSH_ORIGINAL_COMMAND`, exactly as `shiqi-connect` sends it
//! (`shiqi-ca-agent sign --name bob`); it is split into words without a shell, must start with
//! the agent's name, and is parsed with none of the global options, so the state directory,
//! config and identity stay those of the forced command. No shell, no other program.

use clap::Parser as _;

use shiqi_ca::inventory::access::Enrollment;

use crate::access::{self, Caller};
use crate::audit;
use crate::commands::Command;
use crate::error::AgentError;
use crate::handler::{Audience, Handler};
use crate::state::Context;

/// `serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The fingerprint of the key sshd authenticated (`SHA256:…`), written by `enroll`.
    #[arg(
        long,
        value_name = "FINGERPRINT",
        required_unless_present = "principal"
    )]
    pub(crate) key: Option<String>,
    /// The certificate principal sshd authenticated (its `AuthorizedPrincipalsFile` line),
    /// written by `enroll --ssh-principal`.
    #[arg(long, value_name = "PRINCIPAL", conflicts_with = "key")]
    pub(crate) principal: Option<String>,
}

impl Handler for ServeArgs {
    fn action(&self) -> &'static str {
        "serve"
    }

    fn describe(&self) -> String {
        "`serve` inside a request".to_owned()
    }

    fn audience(&self) -> Audience {
        Audience::Nobody
    }

    /// `authorize` refuses it before this point; never run one request inside another.
    fn run(&self, _ctx: &Context) -> anyhow::Result<()> {
        Err(AgentError::Request {
            why: "`serve` cannot run inside a request".to_owned(),
        }
        .into())
    }
}

/// A request as a person's key sends it: one command, none of the global options (the state
/// directory and config are the forced command's, never the caller's).
#[derive(Debug, clap::Parser)]
#[command(
    name = "shiqi-ca-agent",
    version,
    about = "The shiqi CA agent (through SSH)"
)]
pub(crate) struct Request {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The program name a request must start with (any path to it: `--agent-command` may name one).
const AGENT: &str = "shiqi-ca-agent";

/// What the request turned out to be.
#[derive(Debug)]
enum Parsed {
    /// A command to authorize and run.
    Command(Command),
    /// `--help` or `--version`: text to print, nothing to do.
    Text(String),
}

/// The key id of the certificate sshd authenticated, from the file `ExposeAuthInfo yes` names
/// in `SSH_USER_AUTH` (`publickey TYPE-cert-v01@openssh.com BASE64`); `None` without it. sshd
/// writes that file, so what it says is sshd's word, not the caller's.
fn certificate_key_id() -> Option<String> {
    let path = std::env::var_os("SSH_USER_AUTH")?;
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("publickey ")?;
        let cert = ssh_key::Certificate::from_openssh(rest.trim()).ok()?;
        Some(shiqi_ca::text::one_line(cert.key_id(), 100))
    })
}

/// Looks the key up, parses the request, checks the role and runs it.
pub(crate) fn run(ctx: &mut Context, args: ServeArgs) -> anyhow::Result<()> {
    // The identity sshd authenticated: a key's fingerprint, or a certificate's principal.
    let fingerprint = match (&args.key, &args.principal) {
        (_, Some(p)) => format!("{}{}", Enrollment::PRINCIPAL, p.trim()),
        (Some(k), None) => k.trim().to_owned(),
        (None, None) => String::new(),
    };
    ctx.caller = match ctx.inventory()?.enrollment(&fingerprint)? {
        Some(key) => Caller::Key(key),
        None => Caller::Unenrolled { fingerprint },
    };
    if args.principal.is_some() {
        ctx.certificate_key_id = certificate_key_id();
    }
    let request = std::env::var("SSH_ORIGINAL_COMMAND").ok();
    // Charged before anything else, refusals included: a flood is refused cheaply.
    if let Err(e) = crate::limits::charge_request(ctx, &ctx.caller) {
        audit::record(
            ctx,
            &audit::Entry {
                action: "serve",
                name: "",
                serial: None,
                outcome: "refused",
                reason: Some(e.to_string()),
            },
        );
        return Err(e.into());
    }
    let parsed = parse(request.as_deref());
    let checked = match &parsed {
        Ok(Parsed::Command(c)) => access::authorize(ctx, &ctx.caller, c.handler()),
        Ok(Parsed::Text(_)) => match &ctx.caller {
            Caller::Unenrolled { fingerprint } => Err(AgentError::NotEnrolled {
                key: fingerprint.clone(),
            }),
            _ => Ok(()),
        },
        Err(_) => Ok(()),
    };
    let refusal = match (parsed, checked) {
        (Ok(Parsed::Command(command)), Ok(())) => return crate::dispatch(ctx, &command),
        (Ok(Parsed::Text(text)), Ok(())) => return crate::commands::print_text(&text),
        (Ok(Parsed::Command(command)), Err(e)) => {
            let handler = command.handler();
            ((handler.action(), handler.target()), e)
        }
        (Ok(Parsed::Text(_)), Err(e)) | (Err(e), _) => (("serve", String::new()), e),
    };
    let ((action, name), e) = refusal;
    let shown: String = request
        .as_deref()
        .unwrap_or("(none: a shell)")
        .chars()
        .take(200)
        .collect();
    audit::record(
        ctx,
        &audit::Entry {
            action,
            name: &name,
            serial: None,
            outcome: "refused",
            reason: Some(format!("{e}; request: {shown}")),
        },
    );
    Err(e.into())
}

/// Splits and parses `SSH_ORIGINAL_COMMAND`.
fn parse(request: Option<&str>) -> Result<Parsed, AgentError> {
    let refuse = |why: String| AgentError::Request { why };
    let Some(request) = request.filter(|r| !r.trim().is_empty()) else {
        return Err(refuse(
            "no request: this account answers agent requests only and gives no shell".to_owned(),
        ));
    };
    let words = shlex::split(request)
        .ok_or_else(|| refuse("the request has unbalanced quotes".to_owned()))?;
    let first = words.first().map(String::as_str).unwrap_or_default();
    let program = first.rsplit('/').next().unwrap_or_default();
    if program != AGENT {
        return Err(refuse(format!(
            "the request must run `{AGENT}`, not `{}`",
            first.chars().take(64).collect::<String>()
        )));
    }
    match Request::try_parse_from(&words) {
        Ok(r) => Ok(Parsed::Command(r.command)),
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp
            | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                Ok(Parsed::Text(e.render().to_string()))
            }
            _ => {
                let text = e.render().to_string();
                let line = text
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ");
                Err(refuse(format!("cannot parse the request: {line}")))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(request: &str) -> Result<Command, String> {
        match parse(Some(request)) {
            Ok(Parsed::Command(c)) => Ok(c),
            Ok(Parsed::Text(t)) => Err(format!("text: {t}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn requests_are_agent_commands_without_global_options() {
        assert!(matches!(
            command("shiqi-ca-agent sign --name bob"),
            Ok(Command::Sign(a)) if a.name == "bob"
        ));
        assert!(matches!(
            command("/opt/shiqi/bin/shiqi-ca-agent brokers --json"),
            Ok(Command::Brokers(_))
        ));
        for (request, why) in [
            ("", "no request"),
            ("   ", "no request"),
            (
                "cat /var/lib/shiqi-ca/ca.key",
                "must run `shiqi-ca-agent`, not `cat`",
            ),
            (
                "USER=saige shiqi-ca-agent sign --name saige",
                "not `USER=saige`",
            ),
            ("sh -c 'shiqi-ca-agent list'", "not `sh`"),
            (
                "shiqi-ca-agent --state-dir /tmp/mine sign --name bob",
                "--state-dir",
            ),
            (
                "shiqi-ca-agent sign --name bob --config /tmp/a.toml",
                "--config",
            ),
            ("shiqi-ca-agent sign --name 'bob", "unbalanced quotes"),
            (
                "shiqi-ca-agent sign --name bob; cat /etc/passwd",
                "cannot parse",
            ),
        ] {
            let err = command(request).expect_err(request);
            assert!(err.contains(why), "{request:?}: {err}");
        }
        assert!(parse(None).is_err());
    }

    #[test]
    fn help_and_version_are_text() {
        assert!(matches!(
            parse(Some("shiqi-ca-agent --version")),
            Ok(Parsed::Text(t)) if t.starts_with("shiqi-ca-agent ")
        ));
    }
}
