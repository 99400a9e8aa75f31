//! `list --json` at 100,000 certificates: each row borrowed from SQLite's statement and written
//! as it is read, with no allocation per row. Parsing every serial into a [`Serial`] and every
//! time into an `OffsetDateTime`, only to print them again, was half of the listing's time
//! (perf: `Serial::from_str` 11%, malloc and free 10%, RFC 3339 formatting). The JSON is the
//! same as a [`Record`]'s, field for field (a test holds the two together).
//!
//! [`Serial`]: crate::name::Serial
//! [`Record`]: super::Record

use rusqlite::Row;
use serde::{Serialize, Serializer};

use super::store::{Filter, Inventory, query, summary_sql};
use super::{CertKind, Status};
use crate::error::Error;

/// One certificate of a listing, borrowed from the row being read.
#[derive(Debug, Serialize)]
pub struct Listing<'a> {
    /// The serial, lowercase hex as the inventory stores it (checked as read).
    pub serial: &'a str,
    /// The profile or server name.
    pub name: &'a str,
    /// What it is for.
    pub kind: CertKind,
    /// The subject DN as text.
    pub subject: &'a str,
    /// Start of validity.
    pub not_before: Utc,
    /// End of validity.
    pub not_after: Utc,
    /// When the inventory recorded it.
    pub issued_at: Utc,
    /// Valid or revoked.
    pub status: Status,
    /// When it was first revoked.
    pub revoked_at: Option<Utc>,
    /// The revocation reason as given.
    pub reason: Option<&'a str>,
}

/// A time in whole seconds since 1970, printed as RFC 3339 in UTC (`2026-12-07T11:51:24Z`), as
/// `time::serde::rfc3339` prints it for years 0 to 9999 (and refuses the others, as it does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc(pub i64);

impl Utc {
    /// The 20 bytes of its RFC 3339 form, or `None` outside years 0 to 9999.
    fn rfc3339(self) -> Option<[u8; 20]> {
        const DAY: u64 = 86_400;
        // Years 0 to 9999 only, as RFC 3339 (and the time crate) have them.
        if !(-62_167_219_200..=253_402_300_799).contains(&self.0) {
            return None;
        }
        // Counted from -0400-03-01, a 400-year era before the algorithm's day 0 (0000-03-01), so
        // that every value is unsigned and every division by a constant a multiplication.
        let since = u64::try_from(self.0 + 62_162_035_200 + 146_097 * 86_400).ok()?;
        let (days, secs) = (since / DAY, since % DAY);
        // Howard Hinnant's civil_from_days: the proleptic Gregorian date of a day number.
        let (era, doe) = (days / 146_097, days % 146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = (yoe + era * 400 + u64::from(month <= 2)).checked_sub(400)?;
        let mut out = *b"0000-00-00T00:00:00Z";
        // Every value below is in range for its field (year 0..=9999 checked above), so each
        // pair of digits comes from the table.
        let mut two = |at: usize, value: u64| {
            let v = usize::try_from(value % 100).unwrap_or(0);
            out[at] = TWO_DIGITS[2 * v];
            out[at + 1] = TWO_DIGITS[2 * v + 1];
        };
        two(0, year / 100);
        two(2, year % 100);
        two(5, month);
        two(8, day);
        two(11, secs / 3600);
        two(14, secs / 60 % 60);
        two(17, secs % 60);
        Some(out)
    }
}

/// "00" to "99", for [`Utc::rfc3339`].
const TWO_DIGITS: &[u8; 200] = b"0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

impl Serialize for Utc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self
            .rfc3339()
            .ok_or_else(|| serde::ser::Error::custom("a time outside years 0 to 9999"))?;
        // ASCII digits and separators only.
        s.serialize_str(std::str::from_utf8(&bytes).map_err(serde::ser::Error::custom)?)
    }
}

impl Listing<'_> {
    /// Writes it as compact JSON, the bytes `serde_json::to_writer` would write: by hand for the
    /// fields whose text needs no escaping (hex, digits, our own names), through serde_json for
    /// the three that come from outside (name, subject, reason).
    ///
    /// # Errors
    /// When `out` fails, or a time is outside years 0 to 9999.
    pub fn write_json(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let text = |out: &mut dyn std::io::Write, s: &str| {
            serde_json::to_writer(out, s).map_err(std::io::Error::from)
        };
        let time = |out: &mut dyn std::io::Write, t: Utc| match t.rfc3339() {
            Some(b) => {
                out.write_all(b"\"")?;
                out.write_all(&b)?;
                out.write_all(b"\"")
            }
            None => Err(std::io::Error::other("a time outside years 0 to 9999")),
        };
        out.write_all(b"{\"serial\":\"")?;
        out.write_all(self.serial.as_bytes())?;
        out.write_all(b"\",\"name\":")?;
        text(out, self.name)?;
        out.write_all(b",\"kind\":\"")?;
        out.write_all(self.kind.as_str().as_bytes())?;
        out.write_all(b"\",\"subject\":")?;
        text(out, self.subject)?;
        out.write_all(b",\"not_before\":")?;
        time(out, self.not_before)?;
        out.write_all(b",\"not_after\":")?;
        time(out, self.not_after)?;
        out.write_all(b",\"issued_at\":")?;
        time(out, self.issued_at)?;
        out.write_all(b",\"status\":\"")?;
        out.write_all(self.status.as_str().as_bytes())?;
        out.write_all(b"\",\"revoked_at\":")?;
        match self.revoked_at {
            Some(t) => time(out, t)?,
            None => out.write_all(b"null")?,
        }
        out.write_all(b",\"reason\":")?;
        match self.reason {
            Some(r) => text(out, r)?,
            None => out.write_all(b"null")?,
        }
        out.write_all(b"}")
    }
}

/// Whether `s` is a serial as the inventory writes one: 1 to 20 bytes in lowercase hex.
fn is_serial(s: &str) -> bool {
    (2..=40).contains(&s.len())
        && s.len().is_multiple_of(2)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn listing<'r>(row: &'r Row<'_>) -> rusqlite::Result<Listing<'r>> {
    let text = |idx: usize| -> rusqlite::Result<&'r str> {
        row.get_ref(idx)?
            .as_str()
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, row_type(), Box::new(e)))
    };
    let serial = text(0)?;
    if !is_serial(serial) {
        return Err(rusqlite::Error::FromSqlConversionFailure(
            0,
            row_type(),
            Box::new(Error::InvalidSerial {
                serial: serial.chars().take(64).collect(),
            }),
        ));
    }
    Ok(Listing {
        serial,
        name: text(1)?,
        kind: row.get(2)?,
        subject: text(3)?,
        not_before: Utc(row.get(4)?),
        not_after: Utc(row.get(5)?),
        issued_at: Utc(row.get(6)?),
        status: row.get(7)?,
        revoked_at: row.get::<_, Option<i64>>(8)?.map(Utc),
        reason: row
            .get_ref(9)?
            .as_str_or_null()
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(9, row_type(), Box::new(e)))?,
    })
}

fn row_type() -> rusqlite::types::Type {
    rusqlite::types::Type::Text
}

impl Inventory {
    /// Calls `each` with every certificate that `filter` selects, as
    /// [`Inventory::each_summary`] does, borrowed from the row instead of copied out of it.
    ///
    /// # Errors
    /// [`Error::InventoryQuery`] (a serial that is not the inventory's hex included), or the first
    /// error `each` returns.
    pub fn each_listing<E>(
        &self,
        filter: &Filter<'_>,
        mut each: impl FnMut(&Listing<'_>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<Error>,
    {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let action = "list certificates";
        let mut stmt = self
            .conn
            .prepare_cached(&summary_sql(filter))
            .map_err(query(action))?;
        let mut rows = stmt
            .query(rusqlite::params![filter.name, now])
            .map_err(query(action))?;
        while let Some(row) = rows.next().map_err(query(action))? {
            each(&listing(row).map_err(query(action))?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    use super::*;
    use crate::inventory::NewCert;
    use crate::name::Serial;

    #[test]
    fn times_print_as_the_time_crate_prints_them() {
        let mut t: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z
        let mut step: i64 = 1;
        while t < 253_402_300_800 {
            let ours = Utc(t).rfc3339().expect("in range");
            let theirs = OffsetDateTime::from_unix_timestamp(t)
                .expect("time")
                .format(&Rfc3339)
                .expect("rfc3339");
            assert_eq!(std::str::from_utf8(&ours).expect("ascii"), theirs, "{t}");
            t += step;
            step = step * 3 % 9_999_991 + 7_777;
        }
        for edge in [0, 951_782_400, 4_107_542_400, 253_402_300_799] {
            let theirs = OffsetDateTime::from_unix_timestamp(edge)
                .expect("time")
                .format(&Rfc3339)
                .expect("rfc3339");
            assert_eq!(
                Utc(edge).rfc3339().map(|b| b.to_vec()),
                Some(theirs.into_bytes())
            );
        }
        assert_eq!(Utc(253_402_300_800).rfc3339(), None, "year 10000");
        assert_eq!(Utc(-62_167_219_201).rfc3339(), None, "year -1");
    }

    #[test]
    fn a_listing_is_the_json_of_its_record() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let mut inv = Inventory::open(&dir.path().join("inventory.sqlite"))?;
        let now = OffsetDateTime::now_utc();
        for (i, name) in ["saige", "kafka-broker", "a\"b\\c\u{1}"].iter().enumerate() {
            let record = inv.issue(|_| {
                Ok(NewCert {
                    name: (*name).to_owned(),
                    kind: if i == 1 {
                        CertKind::Server
                    } else {
                        CertKind::Client
                    },
                    subject: format!("CN={name}"),
                    not_before: now - time::Duration::minutes(5),
                    not_after: now + time::Duration::days(30),
                    der: vec![0x30, 0x00],
                })
            })?;
            if i == 0 {
                inv.revoke(&record.serial, Some("key-compromise"), now)?;
            }
        }
        let mut records = Vec::new();
        inv.each_summary(&Filter::default(), |r| -> Result<(), Error> {
            records.push(serde_json::to_string(&r).map_err(|_| Error::InvalidSerial {
                serial: String::new(),
            })?);
            Ok(())
        })?;
        let mut listings = Vec::new();
        let mut written = Vec::new();
        inv.each_listing(&Filter::default(), |l| -> Result<(), Error> {
            listings.push(serde_json::to_string(l).map_err(|_| Error::InvalidSerial {
                serial: String::new(),
            })?);
            let mut bytes = Vec::new();
            l.write_json(&mut bytes).map_err(|_| Error::InvalidSerial {
                serial: String::new(),
            })?;
            written.push(String::from_utf8(bytes).unwrap_or_default());
            Ok(())
        })?;
        assert_eq!(records.len(), 3);
        assert_eq!(listings, records);
        assert_eq!(written, records, "written by hand, byte for byte");
        // A serial that is not the inventory's hex is refused, not printed.
        inv.conn
            .execute("UPDATE certs SET serial = 'ZZ' WHERE name = 'saige'", [])?;
        let bad = inv.each_listing(&Filter::default(), |_| -> Result<(), Error> { Ok(()) });
        assert!(bad.is_err());
        assert!(Serial::random().to_hex().len() <= 40);
        Ok(())
    }
}
