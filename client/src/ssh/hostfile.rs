//! known_hosts files read as OpenSSH reads them (its `hostfile.c` and `match.c`), and hashed
//! names made as it makes them; pure and without I/O so that it can be tested against
//! `ssh-keygen -F` and fuzzed.
//!
//! A line is `[@marker] patterns keytype base64 [comment]`, fields split by spaces or tabs.
//! Patterns are comma-separated, with `*` and `?` wildcards, `!` negation (a matching negated
//! pattern rules the whole line out) and `[host]:port` for ports other than 22, compared without
//! regard to case; or one hashed name `|1|salt|hmac-sha1`. Lines OpenSSH skips (comments,
//! unknown markers, keys that do not parse) are skipped here too.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{KeyInit as _, Mac as _};
use russh::keys::ssh_key::PublicKey;

/// A line's marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Marker {
    /// `@revoked`: this key must never be accepted.
    Revoked,
    /// `@cert-authority`: a CA that signs host certificates.
    CertAuthority,
}

/// A line of a known_hosts file whose patterns match the host.
#[derive(Clone, Debug)]
pub struct Entry {
    /// 1-based, counting every line of the file (as editors and `ssh-keygen -F` do).
    pub line: usize,
    /// Its marker, if any.
    pub marker: Option<Marker>,
    /// Its key; `None` when the key field does not parse (OpenSSH skips such a line when
    /// checking, and `ssh-keygen -F` still lists it).
    pub key: Option<PublicKey>,
}

/// What a file says about a host's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A line records this key.
    Known {
        /// That line.
        line: usize,
    },
    /// A `@revoked` line matching the host lists this key.
    Revoked {
        /// That line.
        line: usize,
    },
    /// The host is recorded with other keys only (of any type).
    Changed {
        /// The first such line.
        line: usize,
    },
    /// Only a `@cert-authority` line matches the host; plain keys are not checked against it.
    CertAuthority {
        /// That line.
        line: usize,
    },
    /// Nothing about this host.
    Unknown,
}

/// The known_hosts spelling of a host: `host` on port 22, `[host]:port` otherwise.
pub fn host_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_owned()
    } else {
        format!("[{host}]:{port}")
    }
}

/// The lines of `text` whose patterns match `name` (as [`host_name`] spells it).
pub fn entries(text: &str, name: &str) -> Vec<Entry> {
    let name = name.to_ascii_lowercase();
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            parse_line(line, &name).map(|(marker, key)| Entry {
                line: i + 1,
                marker,
                key,
            })
        })
        .collect()
}

/// The verdict of `text` on `key` for `name`: revocation first, then a recorded key, then any
/// other recorded key (of any type: a host known with one key that now shows another is
/// treated as changed, stricter than OpenSSH's accept-new), then a CA-only entry.
pub fn verdict(text: &str, name: &str, key: &PublicKey) -> Verdict {
    let found = entries(text, name);
    let same = |e: &Entry| {
        e.key
            .as_ref()
            .is_some_and(|k| k.key_data() == key.key_data())
    };
    if let Some(e) = found
        .iter()
        .find(|e| e.marker == Some(Marker::Revoked) && same(e))
    {
        return Verdict::Revoked { line: e.line };
    }
    let plain: Vec<&Entry> = found
        .iter()
        .filter(|e| e.marker.is_none() && e.key.is_some())
        .collect();
    if let Some(e) = plain.iter().find(|e| same(e)) {
        return Verdict::Known { line: e.line };
    }
    if let Some(e) = plain.first() {
        return Verdict::Changed { line: e.line };
    }
    match found
        .iter()
        .find(|e| e.marker == Some(Marker::CertAuthority) && e.key.is_some())
    {
        Some(e) => Verdict::CertAuthority { line: e.line },
        None => Verdict::Unknown,
    }
}

/// One line: its marker and key when its patterns match `name` (lowercase), else `None`.
fn parse_line(line: &str, name: &str) -> Option<(Option<Marker>, Option<PublicKey>)> {
    let line = line.trim_start_matches([' ', '\t']);
    let (marker, rest) = match line.strip_prefix('@') {
        None => (None, line),
        Some(_) => {
            // OpenSSH's `check_markers` ends a marker at the line's first space, or its first
            // tab when it has no space, so `@revoked<TAB>host key` is no marker: the line is
            // skipped. Matched exactly, as `ssh-keygen -F` shows.
            let end = line.find(' ').or_else(|| line.find('\t'))?;
            let marker = match &line[..end] {
                "@revoked" => Marker::Revoked,
                "@cert-authority" => Marker::CertAuthority,
                _ => return None,
            };
            (Some(marker), &line[end..])
        }
    };
    let mut fields = rest.split([' ', '\t']).filter(|f| !f.is_empty());
    let first = fields.next()?;
    if first.starts_with('#') {
        return None;
    }
    if !host_matches(first, name) {
        return None;
    }
    let key_type = fields.next()?;
    let key = fields
        .next()
        .and_then(|blob| PublicKey::from_openssh(&format!("{key_type} {blob}")).ok());
    Some((marker, key))
}

/// OpenSSH's `match_hostname`: a hashed name, or a pattern list where any negated match wins.
fn host_matches(patterns: &str, name: &str) -> bool {
    if let Some(hashed) = patterns.strip_prefix("|1|") {
        return hashed_matches(hashed, name);
    }
    let mut positive = false;
    for p in patterns.split(',') {
        let (negated, p) = match p.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, p),
        };
        if wildcard(p.to_ascii_lowercase().as_bytes(), name.as_bytes()) {
            if negated {
                return false;
            }
            positive = true;
        }
    }
    positive
}

/// The salt length of a hashed name: OpenSSH's `host_hash` uses one SHA-1 digest's worth.
pub const SALT_LEN: usize = 20;

/// `name` hashed as OpenSSH writes it under `HashKnownHosts yes` (its `host_hash`):
/// `|1|` + base64(salt) + `|` + base64(HMAC-SHA1(salt, name)). `name` is spelled as
/// [`host_name`] spells it and lowercased, as ssh looks names up. `None` only if HMAC refused
/// the key, which it does for no length.
pub fn hashed_name(name: &str, salt: &[u8; SALT_LEN]) -> Option<String> {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(salt).ok()?;
    mac.update(name.to_ascii_lowercase().as_bytes());
    let hash = mac.finalize().into_bytes();
    Some(format!(
        "|1|{}|{}",
        STANDARD.encode(salt),
        STANDARD.encode(hash)
    ))
}

/// `|1|` + base64(salt) + `|` + base64(HMAC-SHA1(salt, name)), as `ssh-keygen -H` writes.
fn hashed_matches(hashed: &str, name: &str) -> bool {
    let Some((salt, hash)) = hashed.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (STANDARD.decode(salt), STANDARD.decode(hash)) else {
        return false;
    };
    let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(&salt) else {
        return false;
    };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

/// `*` matches any run (also empty), `?` one character: OpenSSH's `match_pattern`.
fn wildcard(pattern: &[u8], s: &[u8]) -> bool {
    // Iterative with one backtrack point: linear enough for any line a fuzzer can build.
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, i));
                p += 1;
            }
            Some(&c) if c == b'?' || c == s[i] => {
                p += 1;
                i += 1;
            }
            _ => match star {
                Some((sp, si)) => {
                    p = sp + 1;
                    i = si + 1;
                    star = Some((sp, si + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_and_negation_as_openssh() {
        for (pat, name, want) in [
            ("host", "host", true),
            ("HOST", "host", true),
            ("h*", "host", true),
            ("*", "anything", true),
            ("h?st", "host", true),
            ("h?st", "hoost", false),
            ("*.example.com", "a.example.com", true),
            ("*.example.com", "example.com", false),
            ("a,b,host", "host", true),
            ("*,!host", "host", false),
            ("!host,*", "host", false),
            ("!other,*", "host", true),
            ("!host", "host", false),
            ("[host]:2222", "[host]:2222", true),
            ("[h*]:2222", "[host]:2222", true),
            ("host", "[host]:2222", false),
            ("", "host", false),
        ] {
            assert_eq!(host_matches(pat, name), want, "{pat} vs {name}");
        }
    }

    #[test]
    fn hashes_names_as_ssh_keygen_h() {
        // The `ssh-keygen -H` entry for `example.com` from russh's own known_hosts tests.
        let want = "|1|O33ESRMWPVkMYIwJ1Uw+n877jTo=|nuuC5vEqXlEZ/8BXQR7m619W6Ak=";
        let salt: [u8; SALT_LEN] = STANDARD
            .decode("O33ESRMWPVkMYIwJ1Uw+n877jTo=")
            .expect("base64")
            .try_into()
            .expect("20 bytes");
        assert_eq!(hashed_name("example.com", &salt).as_deref(), Some(want));
        // ssh looks names up lowercased, so that is what is hashed.
        assert_eq!(hashed_name("Example.COM", &salt).as_deref(), Some(want));
        let port = hashed_name("[example.com]:2222", &salt).expect("hashed");
        assert!(host_matches(&port, "[example.com]:2222"));
        assert!(!host_matches(&port, "example.com"));
    }
}
