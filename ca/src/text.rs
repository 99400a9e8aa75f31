//! Text from another machine on our terminal: control characters (ANSI/OSC escapes, CR, NUL,
//! newlines) are shown escaped, so a server cannot move the cursor, rewrite earlier lines or add
//! lines that look like ours.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control character written as `\n`, `\r`, `\t`, `\0` or `\u{1b}`; other text,
/// including non-ASCII letters, unchanged.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            // `escape_debug` spells every control character as an escape sequence.
            let _ = write!(out, "{}", c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`], then cut to at most `max` characters (an ellipsis marks the cut), for
/// server text quoted in our own one-line messages.
pub fn one_line(s: &str, max: usize) -> String {
    let escaped = escape_controls(s);
    if escaped.chars().count() <= max {
        return escaped.into_owned();
    }
    let mut cut: String = escaped.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A time as people read it in messages: `2026-12-03 10:36:31 UTC`.
pub fn utc(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_controls_and_keeps_the_rest() {
        assert_eq!(escape_controls("plain ünï"), "plain ünï");
        assert_eq!(
            escape_controls("a\u{1b}]0;pwned\u{7}\r\n\0b"),
            "a\\u{1b}]0;pwned\\u{7}\\r\\n\\0b"
        );
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("a\nb", 10), "a\\nb");
    }
}
