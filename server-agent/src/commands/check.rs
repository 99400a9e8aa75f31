//! `check [--json] [--no-revocation]`: the server's doctor (see [`crate::check`]). Exits 2 when
//! any finding failed.

use crate::check::{self, Options, Status};
use crate::error::AgentError;
use crate::handler::Handler;
use crate::state::Context;

/// `check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Do not revoke the throwaway certificate and time the servers' refusal (quicker; the
    /// revocation checks are then skipped).
    #[arg(long)]
    pub(crate) no_revocation: bool,
}

impl Handler for CheckArgs {
    fn action(&self) -> &'static str {
        "check"
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Runs `check`.
pub(crate) fn run(ctx: &Context, args: &CheckArgs) -> anyhow::Result<()> {
    // As root it would ask sshd about root's settings, read the CA as nobody else can and
    // leave root-owned files in the account's state: the agent's checks are the account's.
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::MetadataExt as _;
        let owner = std::fs::metadata(&ctx.dir)
            .ok()
            .and_then(|m| nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(m.uid())).ok())
            .flatten()
            .filter(|u| !u.uid.is_root())
            .map_or_else(|| "ACCOUNT".to_owned(), |u| u.name);
        return Err(AgentError::Local {
            why: format!(
                "check runs as the agent's account, not root (it checks what sshd gives that \
                 account and reads its CA): sudo -u {owner} shiqi-ca-agent --state-dir {} check",
                ctx.dir.display()
            ),
        }
        .into());
    }
    let progress = crate::progress::Progress::start(args.json, "check");
    let findings = check::run(
        ctx,
        Options {
            revocation: !args.no_revocation,
        },
        &progress,
    );
    drop(progress);
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
