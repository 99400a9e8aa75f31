//! A certificate lifetime as people write it: `10m`, `1h`, `30d`.
//!
//! One type for the agent's `[lifetime] client = "1h"`, the laptop's `setup --lifetime 1h` and
//! the wire between them, so both sides parse and print it the same way. Whether a span suits a
//! kind of certificate (at least 5 minutes, at most 398 days for a client) is
//! [`crate::issue::Lifetime::check`]'s question, not this type's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;

/// A whole number of minutes, hours or days (at least one minute).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    minutes: u32,
}

const HOUR: u32 = 60;
const DAY: u32 = 24 * HOUR;

impl Span {
    /// `n` minutes, for constants: `n` must not be 0.
    pub(crate) const fn const_minutes(n: u32) -> Self {
        assert!(n > 0, "a span of 0 minutes");
        Self { minutes: n }
    }

    /// `n` days, for constants: `n` must be 1..=2982616.
    pub(crate) const fn const_days(n: u32) -> Self {
        Self::const_minutes(n * DAY)
    }

    /// `n` minutes (none for 0).
    pub const fn minutes(n: u32) -> Option<Self> {
        if n == 0 {
            None
        } else {
            Some(Self { minutes: n })
        }
    }

    /// `n` days (none for 0 or beyond `u32` minutes).
    pub const fn days(n: u32) -> Option<Self> {
        match n.checked_mul(DAY) {
            Some(m) => Self::minutes(m),
            None => None,
        }
    }

    /// In minutes.
    pub const fn as_minutes(self) -> u32 {
        self.minutes
    }

    /// As a `time` duration.
    pub fn duration(self) -> time::Duration {
        time::Duration::minutes(i64::from(self.minutes))
    }
}

impl fmt::Display for Span {
    /// The largest unit that divides it: `90m`, `2h`, `30d`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.minutes;
        if m.is_multiple_of(DAY) {
            write!(f, "{}d", m / DAY)
        } else if m.is_multiple_of(HOUR) {
            write!(f, "{}h", m / HOUR)
        } else {
            write!(f, "{m}m")
        }
    }
}

impl FromStr for Span {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &'static str| Error::InvalidSpan {
            given: crate::text::one_line(s, 40),
            why,
        };
        let unit = s.chars().last().ok_or_else(|| bad("it is empty"))?;
        let per = match unit {
            'm' => 1,
            'h' => HOUR,
            'd' => DAY,
            _ => return Err(bad("it must end in m, h or d")),
        };
        let digits = &s[..s.len() - unit.len_utf8()];
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("it must be a whole number before its unit"));
        }
        let n: u32 = digits.parse().map_err(|_| bad("it is too long"))?;
        n.checked_mul(per)
            .and_then(Self::minutes)
            .ok_or_else(|| bad("it must be more than 0 and less than 8,000 years"))
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_in_the_largest_unit_that_divides() {
        for (given, minutes, shown) in [
            ("10m", 10, "10m"),
            ("90m", 90, "90m"),
            ("120m", 120, "2h"),
            ("1h", 60, "1h"),
            ("48h", 2880, "2d"),
            ("30d", 43_200, "30d"),
            ("398d", 573_120, "398d"),
        ] {
            let span: Span = given.parse().expect(given);
            assert_eq!(span.as_minutes(), minutes, "{given}");
            assert_eq!(span.to_string(), shown, "{given}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_whole_number_of_one_unit() {
        for given in [
            "",
            "m",
            "0m",
            "1",
            "1s",
            "1w",
            "-1h",
            "+1h",
            "1.5h",
            "1h30m",
            " 1h",
            "1 h",
            "1H",
            "99999999999d",
            "9999999d",
            "1hé",
        ] {
            let e = given.parse::<Span>().expect_err(given);
            assert!(e.to_string().contains("lifetime"), "{given}: {e}");
        }
    }

    #[test]
    fn is_a_string_in_json_and_toml() {
        let span: Span = serde_json::from_str("\"1h\"").expect("json");
        assert_eq!(serde_json::to_string(&span).expect("json"), "\"1h\"");
        assert!(serde_json::from_str::<Span>("60").is_err());
        assert!(serde_json::from_str::<Span>("\"0m\"").is_err());
    }
}
