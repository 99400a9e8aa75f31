//! Times and spans as people read them in reports: `2026-11-09 07:59 UTC`, `3 days`,
//! `40 minutes`. One spelling for doctor, `status`, `tunnel status` and the tunnel's log.

use time::{Duration, OffsetDateTime};

/// `2026-11-09 07:59 UTC`.
pub(crate) fn when(t: OffsetDateTime) -> String {
    format!("{} {:02}:{:02} UTC", t.date(), t.hour(), t.minute())
}

/// `17:02:11`: the time of day in UTC, for a screen that shows today (`tunnel status --watch`).
pub(crate) fn time_of_day(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
}

/// `3 days`, `5 hours`, `12 minutes` (the sign dropped: the sentence says ago or left).
pub(crate) fn span(d: Duration) -> String {
    let d = d.abs();
    if d.whole_days() >= 2 {
        format!("{} days", d.whole_days())
    } else if d.whole_hours() >= 2 {
        format!("{} hours", d.whole_hours())
    } else if d.whole_minutes() >= 2 {
        format!("{} minutes", d.whole_minutes())
    } else {
        format!("{} seconds", d.whole_seconds())
    }
}

/// The lifetime a certificate was signed for: its validity less the agent's
/// [`shiqi_ca::issue::BACKDATE`] (`1h` for one that starts 5 minutes early and ends in an hour).
pub(crate) fn lifetime(not_before: OffsetDateTime, not_after: OffsetDateTime) -> String {
    let minutes = (not_after - not_before - shiqi_ca::issue::BACKDATE).whole_minutes();
    u32::try_from(minutes)
        .ok()
        .and_then(shiqi_ca::Span::minutes)
        .map_or_else(|| span(not_after - not_before), |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_in_one_unit_rounded_down() {
        for (d, shown) in [
            (Duration::days(30), "30 days"),
            (Duration::hours(47), "47 hours"),
            (Duration::minutes(119), "119 minutes"),
            (Duration::seconds(-100), "100 seconds"),
            (Duration::ZERO, "0 seconds"),
        ] {
            assert_eq!(span(d), shown);
        }
        let t = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(lifetime(t, t + Duration::minutes(65)), "1h");
        assert_eq!(
            lifetime(t, t + Duration::days(30) + Duration::minutes(5)),
            "30d"
        );
        assert_eq!(lifetime(t, t + Duration::minutes(3)), "3 minutes");
    }
}
