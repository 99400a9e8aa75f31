//! `list [--name NAME] [--status S] [--json]`: the inventory as a table or JSON, streamed one row
//! at a time (no DER), so 100,000 certificates cost the time to print them and no more memory
//! than one.

use std::io::Write as _;

use shiqi_ca::inventory::{Filter, Listed, Record, Status};
use time::OffsetDateTime;

use crate::handler::Handler;
use crate::state::Context;

/// `list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Only the certificates of this name.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Only `valid`, `revoked` or `expired` ones.
    #[arg(long)]
    pub(crate) status: Option<String>,
}

impl Handler for ListArgs {
    fn action(&self) -> &'static str {
        "list"
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// NAME's column width: names are at most 32 characters, and a streamed table cannot measure
/// them first.
const NAME_WIDTH: usize = shiqi_ca::name::MAX_NAME_LEN;

/// Prints the certificates the filters select.
pub(crate) fn run(ctx: &Context, args: &ListArgs) -> anyhow::Result<()> {
    let status = match args.status.as_deref().map(str::trim) {
        None => None,
        Some("valid") => Some(Listed::Valid),
        Some("revoked") => Some(Listed::Revoked),
        Some("expired") => Some(Listed::Expired),
        Some(other) => {
            return Err(shiqi_ca::Error::InvalidChoice {
                what: "status",
                found: other.chars().take(64).collect(),
                choices: "valid, revoked, expired",
            }
            .into());
        }
    };
    let name = args.name.as_deref().map(str::trim);
    let filter = Filter { name, status };
    let inventory = ctx.inventory()?;
    let now = OffsetDateTime::now_utc();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let io = |e: std::io::Error| anyhow::Error::from(e);
    if args.json {
        // A JSON array written element by element.
        let mut first = true;
        out.write_all(b"[").map_err(io)?;
        // Borrowed rows written by hand (`shiqi_ca::inventory::listing`): the JSON of each
        // `Record`, byte for byte, without an allocation per field.
        inventory.each_listing(&filter, |r| -> anyhow::Result<()> {
            out.write_all(if first { b"\n  " } else { b",\n  " })?;
            first = false;
            r.write_json(&mut out)?;
            Ok(())
        })?;
        out.write_all(if first { b"]\n" } else { b"\n]\n" })
            .map_err(io)?;
    } else {
        out.write_all(header().as_bytes()).map_err(io)?;
        inventory.each_summary(&filter, |r| -> anyhow::Result<()> {
            out.write_all(row(&r, now).as_bytes())?;
            Ok(())
        })?;
    }
    out.flush().map_err(io)?;
    Ok(())
}

fn header() -> String {
    format!(
        "{:<32}  {:<NAME_WIDTH$}  {:<7}  {:<20}  STATUS\n",
        "SERIAL", "NAME", "KIND", "NOT AFTER"
    )
}

fn row(r: &Record, now: OffsetDateTime) -> String {
    let status = match r.status {
        Status::Revoked => "revoked",
        Status::Valid if r.not_after <= now => "expired",
        Status::Valid => "valid",
    };
    let not_after = r
        .not_after
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    format!(
        "{:<32}  {:<NAME_WIDTH$}  {:<7}  {:<20}  {status}\n",
        r.serial.to_hex(),
        r.name,
        r.kind.as_str(),
        not_after
    )
}

#[cfg(test)]
mod tests {
    use shiqi_ca::inventory::CertKind;

    use super::*;

    fn record(name: &str, serial: &str) -> Record {
        let t = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        Record {
            serial: serial.parse().expect("hex"),
            name: name.to_owned(),
            kind: CertKind::Client,
            subject: format!("CN={name}"),
            not_before: t,
            not_after: t,
            issued_at: t,
            status: Status::Valid,
            revoked_at: None,
            reason: None,
            der: Vec::new(),
        }
    }

    #[test]
    fn a_32_character_name_keeps_every_column_aligned() {
        let long = "a".repeat(32);
        let now = OffsetDateTime::UNIX_EPOCH;
        let lines = [
            header(),
            row(&record("saige", "0a"), now),
            row(&record(&long, "0b"), now),
        ];
        let kind_at = |l: &str| l.find("client").or_else(|| l.find("KIND"));
        assert_eq!(kind_at(&lines[0]), kind_at(&lines[1]), "{lines:?}");
        assert_eq!(kind_at(&lines[1]), kind_at(&lines[2]), "{lines:?}");
        assert!(lines[2].contains(&format!("{long}  client")), "{lines:?}");
    }
}
