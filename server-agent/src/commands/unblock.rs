//! `unblock NAME`: lifts the block `revoke --name NAME` put on a name (admins only).

use shiqi_ca::ProfileName;

use crate::audit;
use crate::handler::{self, Handler};
use crate::state::Context;

/// `unblock`.
#[derive(Debug, clap::Args)]
pub(crate) struct UnblockArgs {
    /// The name.
    pub(crate) name: String,
}

impl Handler for UnblockArgs {
    fn action(&self) -> &'static str {
        "unblock"
    }

    fn target(&self) -> String {
        self.name.trim().to_owned()
    }

    fn describe(&self) -> String {
        format!("`unblock {}`", self.name)
    }

    fn locked_name(&self, _ctx: &Context) -> anyhow::Result<Option<ProfileName>> {
        Ok(handler::name(&self.name))
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Unblocks and says what it did.
pub(crate) fn run(ctx: &Context, args: &UnblockArgs) -> anyhow::Result<()> {
    let name: ProfileName = args.name.trim().parse()?;
    let lifted = ctx.inventory()?.unblock(name.as_str())?;
    let text = match &lifted {
        Some(b) => format!(
            "unblocked `{name}` (blocked since {} by {}); it can be signed again\n",
            shiqi_ca::text::utc(b.blocked_at),
            b.blocked_by
        ),
        None => format!("`{name}` was not blocked; nothing to do\n"),
    };
    audit::record(
        ctx,
        &audit::Entry {
            action: "unblock",
            name: name.as_str(),
            serial: None,
            outcome: "ok",
            reason: lifted.is_none().then(|| "was not blocked".to_owned()),
        },
    );
    crate::commands::print_text(&text)
}
