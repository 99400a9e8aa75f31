//! `brokers`: every broker's advertised address, from the cluster itself.

use shiqi_ca::protocol::{BrokersResponse, PROTOCOL_VERSION};

use crate::cli::BrokersArgs;
use crate::state::Context;

/// Asks the cluster and prints a table or JSON.
pub fn run(ctx: &Context, args: BrokersArgs) -> anyhow::Result<()> {
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
