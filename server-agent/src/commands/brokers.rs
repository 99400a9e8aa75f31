//! `brokers`: every broker's advertised address, from the cluster itself.

use shiqi_ca::protocol::{self, BrokersResponse, PROTOCOL_VERSION};

use crate::error::AgentError;
use crate::handler::Handler;
use crate::state::Context;

/// `brokers`.
#[derive(Debug, clap::Args)]
pub(crate) struct BrokersArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Handler for BrokersArgs {
    fn action(&self) -> &'static str {
        "brokers"
    }

    fn user_may(&self, _ctx: &Context, _name: &str) -> Result<bool, AgentError> {
        Ok(true)
    }

    fn wire(&self) -> Option<Result<protocol::Request, String>> {
        self.json.then_some(Ok(protocol::Request::Brokers))
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Asks the cluster and prints a table or JSON.
pub(crate) fn run(ctx: &Context, args: &BrokersArgs) -> anyhow::Result<()> {
    let ca = ctx.ca()?;
    let kafka = crate::kafka::brokers(&crate::kafka::Admin::connect(ctx, &ca)?)?;
    if args.json {
        return crate::commands::print_json(&BrokersResponse {
            version: PROTOCOL_VERSION,
            kafka,
        });
    }
    let mut text = format!("{:>6}  ADVERTISED\n", "ID");
    for b in &kafka.brokers {
        text.push_str(&format!("{:>6}  {}:{}\n", b.id, b.host, b.port));
    }
    crate::commands::print_text(&text)
}
