//! `check [--json] [--no-revocation]`: the server's doctor (see [`crate::check`]). Exits 2 when
//! any finding failed.

use crate::check::{self, Options, Status};
use crate::cli::CheckArgs;
use crate::error::AgentError;
use crate::state::Context;

/// Runs `check`.
pub fn run(ctx: &Context, args: CheckArgs) -> anyhow::Result<()> {
    let findings = check::run(
        ctx,
        Options {
            revocation: !args.no_revocation,
        },
    );
    if args.json {
        crate::commands::print_json(&findings)?;
    } else {
        crate::commands::print_text(&check::text(&findings))?;
    }
    let failed = findings.iter().filter(|f| f.status == Status::Fail).count();
    if failed > 0 {
        return Err(AgentError::CheckFailed { failed }.into());
    }
    Ok(())
}
