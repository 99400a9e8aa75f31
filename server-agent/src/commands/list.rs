//! `list`: the inventory as a table or JSON.

use shiqi_ca::inventory::Status;

use crate::cli::ListArgs;
use crate::state::Context;

/// Prints every issued certificate.
pub fn run(ctx: &Context, args: ListArgs) -> anyhow::Result<()> {
    let records = ctx.inventory()?.list()?;
    if args.json {
        return crate::commands::print_json(&records);
    }
    let now = time::OffsetDateTime::now_utc();
    let mut text = format!(
        "{:<32}  {:<20}  {:<7}  {:<20}  STATUS\n",
        "SERIAL", "NAME", "KIND", "NOT AFTER"
    );
    for r in &records {
        let status = match r.status {
            Status::Revoked => "revoked",
            Status::Valid if r.not_after <= now => "expired",
            Status::Valid => "valid",
        };
        let not_after = r
            .not_after
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        text.push_str(&format!(
            "{:<32}  {:<20}  {:<7}  {:<20}  {status}\n",
            r.serial.to_hex(),
            r.name,
            r.kind.as_str(),
            not_after
        ));
    }
    crate::commands::print_text(&text)
}
