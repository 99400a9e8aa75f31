//! `revoke SERIAL | --name NAME [--key KEY] [--reason R]`: revocation that locks the door
//! ([`crate::ops::revoke`]: the inventory, the CRL, then MySQL and Kafka).
//!
//! Every step's outcome is in the JSON answer; if MySQL or Kafka could not be reached the answer
//! is still printed and the command exits 2, and running it again finishes the job (every step
//! is idempotent).

use shiqi_ca::crl::{Reason, parse_reason};
use shiqi_ca::protocol::RevokeTarget;

use crate::cli::RevokeArgs;
use crate::error::AgentError;
use crate::ops::revoke;
use crate::state::Context;

/// Revokes, prints a `RevokeResponse`, and writes one audit line per certificate.
pub fn run(ctx: &Context, args: &RevokeArgs) -> anyhow::Result<()> {
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
