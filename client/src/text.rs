//! Report text that is safe on a terminal by construction.
//!
//! doctor's findings and `tunnel status`'s outcomes quote other machines (an SSH banner, a
//! MySQL greeting, error text and `CURRENT_USER()`, Kafka metadata, the tunnel's last error) and
//! are written to stdout, as data, not through [`crate::printer::Printer`], which escapes only
//! what it writes to stderr. So those report types hold [`Escaped`] instead of `String`: the
//! only way to make one escapes control characters and caps the length, and every renderer (the
//! text lines, `--json`, any later one) gets text that cannot drive the terminal. A new check
//! cannot forget: a raw `String` does not fit the field.

use std::fmt;
use std::ops::Deref;

use serde::Serialize;

/// The most characters one report text keeps. Our own longest sentences are a few hundred
/// characters; past this it is a server's junk (a 1 MB banner), not something to read.
pub(crate) const MAX_CHARS: usize = 2000;

/// The most characters of one server-supplied string quoted inside our own sentence (a version,
/// an error message), so the sentence around it stays readable.
pub(crate) const QUOTE_CHARS: usize = 200;

/// Text with every control character written as an escape (`\n`, `\u{1b}`) and at most
/// [`MAX_CHARS`] characters (an ellipsis marks a cut).
///
/// `--json` holds the escaped form too: `jq -r` prints a JSON string's controls raw, and these
/// are sentences for people, not bytes to reproduce.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub(crate) struct Escaped(String);

impl Escaped {
    /// Escapes and caps `s`.
    pub(crate) fn new(s: &str) -> Self {
        Self(shiqi_ca::text::one_line(s, MAX_CHARS))
    }

    /// The escaped text.
    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Escaped {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Escaped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`: a width or alignment (`{:<21}`) applies as to any string.
        f.pad(&self.0)
    }
}

impl From<&str> for Escaped {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for Escaped {
    fn from(s: String) -> Self {
        Self::new(&s)
    }
}

impl From<&String> for Escaped {
    fn from(s: &String) -> Self {
        Self::new(s)
    }
}

/// A server's string to quote inside our own sentence: escaped and cut to [`QUOTE_CHARS`].
pub(crate) fn quote(s: &str) -> String {
    shiqi_ca::text::one_line(s, QUOTE_CHARS)
}

/// Whether `s` holds a control character other than `\n` (the one a renderer puts between
/// lines): what tests of every output path assert never happens.
#[cfg(test)]
pub(crate) fn has_raw_controls(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\n')
}

/// Hostile text as a fake server would send it: a title change (OSC 0 … BEL), a screen clear
/// (CSI 2J), a carriage return and a forged line.
#[cfg(test)]
pub(crate) const HOSTILE: &str = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\rok    files  all good\nfail";

/// [`HOSTILE`] as the reports show it.
#[cfg(test)]
pub(crate) const HOSTILE_SHOWN: &str =
    "x\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\rok    files  all good\\nfail";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_caps_whatever_it_is_made_from() {
        let e = Escaped::from(HOSTILE);
        assert_eq!(e.as_str(), HOSTILE_SHOWN);
        assert!(!has_raw_controls(&e) && !e.contains('\n'));
        assert_eq!(Escaped::from(HOSTILE.to_owned()), e);

        let banner = "A".repeat(1 << 20);
        let e = Escaped::from(&banner);
        assert_eq!(e.chars().count(), MAX_CHARS);
        assert!(e.ends_with('…'));
        assert_eq!(quote(&banner).chars().count(), QUOTE_CHARS);

        // Escaping what is already escaped changes nothing (a quote inside a finding).
        assert_eq!(Escaped::from(quote(HOSTILE)).as_str(), HOSTILE_SHOWN);
    }

    #[test]
    fn json_holds_the_escaped_form() {
        let j = serde_json::to_string(&Escaped::from(HOSTILE)).expect("json");
        assert!(!j.contains("\\u001b") && !has_raw_controls(&j), "{j}");
        assert!(j.contains("\\\\u{1b}]0;pwned"), "{j}");
    }
}
