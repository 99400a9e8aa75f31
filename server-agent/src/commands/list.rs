//! `list`: the inventory as a table or JSON.

use shiqi_ca::inventory::{Record, Status};
use time::OffsetDateTime;

use crate::cli::ListArgs;
use crate::state::Context;

/// Prints every issued certificate.
pub fn run(ctx: &Context, args: ListArgs) -> anyhow::Result<()> {
    let records = ctx.inventory()?.list()?;
    if args.json {
        return crate::commands::print_json(&records);
    }
    crate::commands::print_text(&table(&records, OffsetDateTime::now_utc()))
}

/// Aligned columns; NAME is as wide as the longest name, so no row pushes the others out.
fn table(records: &[Record], now: OffsetDateTime) -> String {
    let name_width = records
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("NAME".len());
    let mut text = format!(
        "{:<32}  {:<name_width$}  {:<7}  {:<20}  STATUS\n",
        "SERIAL", "NAME", "KIND", "NOT AFTER"
    );
    for r in records {
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
            "{:<32}  {:<name_width$}  {:<7}  {:<20}  {status}\n",
            r.serial.to_hex(),
            r.name,
            r.kind.as_str(),
            not_after
        ));
    }
    text
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
        let text = table(
            &[record("saige", "0a"), record(&long, "0b")],
            OffsetDateTime::UNIX_EPOCH,
        );
        let lines: Vec<&str> = text.lines().collect();
        let kind_at = |l: &str| l.find("client").or_else(|| l.find("KIND"));
        assert_eq!(kind_at(lines[0]), kind_at(lines[1]), "{text}");
        assert_eq!(kind_at(lines[1]), kind_at(lines[2]), "{text}");
        assert!(lines[2].contains(&format!("{long}  client")), "{text}");
        // An inventory of short names is not padded to 32.
        let short = table(&[record("bo", "0c")], OffsetDateTime::UNIX_EPOCH);
        assert!(short.contains("NAME  KIND"), "{short}");
    }
}
