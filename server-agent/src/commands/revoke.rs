//! `revoke SERIAL | --name NAME [--key KEY] [--reason R]`: revocation that locks the door
//! ([`crate::ops::revoke`]: the inventory, the CRL, then MySQL and Kafka).
//!
//! Every step's outcome is in the JSON answer; if MySQL or Kafka could not be reached the answer
//! is still printed and the command exits 2, and running it again finishes the job (every step
//! is idempotent).

use shiqi_ca::crl::{Reason, parse_reason};
use shiqi_ca::inventory::CertKind;
use shiqi_ca::protocol::{self, RevokeTarget};
use shiqi_ca::{ProfileName, Serial};

use crate::error::AgentError;
use crate::handler::{self, Handler};
use crate::ops::revoke;
use crate::state::Context;

/// `revoke`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["serial", "name"]))]
pub(crate) struct RevokeArgs {
    /// The serial (hex, as `list` prints it) of the certificate to revoke.
    pub(crate) serial: Option<String>,
    /// Revoke every valid client certificate of NAME instead.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// With `--name`: only the certificates of NAME for this public key (the SHA-256 of its
    /// SubjectPublicKeyInfo, hex). Finding none is not an error: the laptop uses this to
    /// revoke a certificate whose setup never finished.
    #[arg(long, requires = "name")]
    pub(crate) key: Option<String>,
    /// Why: unspecified, key-compromise, ca-compromise, affiliation-changed, superseded,
    /// cessation-of-operation or certificate-hold.
    #[arg(long, default_value = "unspecified")]
    pub(crate) reason: String,
}

impl Handler for RevokeArgs {
    fn action(&self) -> &'static str {
        "revoke"
    }

    fn target(&self) -> String {
        let raw = self.name.as_deref().or(self.serial.as_deref());
        raw.map(str::trim).unwrap_or_default().to_owned()
    }

    fn describe(&self) -> String {
        match (&self.serial, &self.name) {
            (_, Some(name)) => format!("revoking `{name}`"),
            (Some(serial), None) => format!("revoking serial `{serial}`"),
            (None, None) => "`revoke`".to_owned(),
        }
    }

    fn user_may(&self, ctx: &Context, name: &str) -> Result<bool, AgentError> {
        match (&self.serial, &self.name) {
            (_, Some(own)) => Ok(own.trim() == name),
            (Some(serial), None) => own_serial(ctx, name, serial),
            (None, None) => Ok(false),
        }
    }

    fn locked_name(&self, ctx: &Context) -> anyhow::Result<Option<ProfileName>> {
        match (&self.name, &self.serial) {
            (Some(name), _) => Ok(handler::name(name)),
            // A serial's certificate names whose grants its revocation may end.
            (None, Some(serial)) => {
                let Ok(serial) = serial.trim().parse::<Serial>() else {
                    return Ok(None);
                };
                let record = ctx.inventory()?.by_serial(&serial)?;
                Ok(record.and_then(|r| handler::name(&r.name)))
            }
            (None, None) => Ok(None),
        }
    }

    fn wire(&self) -> Option<Result<protocol::Request, String>> {
        let target = || {
            Ok(match (&self.serial, &self.name, &self.key) {
                (Some(s), None, None) => RevokeTarget::Serial(handler::parsed("serial", s)?),
                (None, Some(n), None) => RevokeTarget::Name(handler::parsed("name", n)?),
                (None, Some(n), Some(k)) => {
                    RevokeTarget::Key(handler::parsed("name", n)?, handler::parsed("key", k)?)
                }
                _ => return Err("revoke takes a serial or --name [--key]".to_owned()),
            })
        };
        let request = || {
            Ok(protocol::Request::Revoke {
                target: target()?,
                reason: handler::parsed("reason", &self.reason)?,
            })
        };
        Some(request())
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Revokes, prints a `RevokeResponse`, and writes one audit line per certificate.
pub(crate) fn run(ctx: &Context, args: &RevokeArgs) -> anyhow::Result<()> {
    let result = parse(args).and_then(|(target, reason)| revoke::revoke(ctx, &target, reason));
    let asked = args
        .name
        .as_deref()
        .or(args.serial.as_deref())
        .unwrap_or_default();
    revoke::record(ctx, asked, args.serial.as_deref(), &result);
    let response = result?;
    let failures = revoke::failures(&response);
    crate::commands::print_json(&response)?;
    if failures.is_empty() {
        return Ok(());
    }
    Err(AgentError::RevokeIncomplete {
        name: response.name.to_string(),
        crl_number: response.crl.number,
        why: failures.join("; "),
    }
    .into())
}

/// Whether `serial` is a client certificate of `name` (an unknown or malformed serial is not).
fn own_serial(ctx: &Context, name: &str, serial: &str) -> Result<bool, AgentError> {
    let Ok(serial) = serial.trim().parse::<Serial>() else {
        return Ok(false);
    };
    let record = ctx.inventory()?.by_serial(&serial)?;
    Ok(record.is_some_and(|r| r.kind == CertKind::Client && r.name == name))
}

/// What the arguments ask to revoke, and why. clap lets through a serial, or a name with or
/// without a key.
fn parse(args: &RevokeArgs) -> anyhow::Result<(RevokeTarget, Reason)> {
    let reason = parse_reason(args.reason.trim())?;
    if let Some(serial) = &args.serial {
        return Ok((RevokeTarget::Serial(serial.trim().parse()?), reason));
    }
    let name = args.name.as_deref().unwrap_or_default().parse()?;
    let target = match &args.key {
        Some(key) => RevokeTarget::Key(name, key.parse()?),
        None => RevokeTarget::Name(name),
    };
    Ok((target, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(serial: Option<&str>, name: Option<&str>, key: Option<&str>) -> RevokeArgs {
        RevokeArgs {
            serial: serial.map(str::to_owned),
            name: name.map(str::to_owned),
            key: key.map(str::to_owned),
            reason: " superseded ".to_owned(),
        }
    }

    #[test]
    fn arguments_become_one_target() -> Result<(), Box<dyn std::error::Error>> {
        let key = "ab".repeat(32);
        let (target, reason) = parse(&args(Some(" 0A1b "), None, None))?;
        assert_eq!(target, RevokeTarget::Serial("0a1b".parse()?));
        assert_eq!(reason, Reason::Superseded);
        let (target, _) = parse(&args(None, Some("saige"), None))?;
        assert_eq!(target, RevokeTarget::Name("saige".parse()?));
        let (target, _) = parse(&args(None, Some("saige"), Some(&key)))?;
        assert_eq!(target, RevokeTarget::Key("saige".parse()?, key.parse()?));
        for bad in [
            args(None, Some("Bad Name"), None),
            args(Some("zz"), None, None),
            args(None, Some("saige"), Some("ab")),
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
        Ok(())
    }
}
