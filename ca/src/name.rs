//! Validated names: the profile / certificate name every other layer accepts.
//!
//! A `ProfileName` reaches SQL, file paths, shell command lines and X.509 subjects, so it is
//! parsed exactly once, here, and nothing downstream takes a bare `&str` ("parse, don't validate").

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;

/// Serialize as a string and Deserialize through `FromStr` (so a document cannot hold a value
/// the type's parser refuses) — and, with `display`, `Display` as `as_str()` — for the
/// validated string types.
macro_rules! string_type {
    ($t:ty, display) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        $crate::name::string_type!($t);
    };
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use string_type;

/// The longest name accepted: MySQL user names are limited to 32 characters.
pub const MAX_NAME_LEN: usize = 32;

/// A user/profile name matching `[a-z][a-z0-9_-]{0,31}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProfileName(String);

impl ProfileName {
    /// The name as a string slice; safe to embed in SQL string literals, paths and shell words.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ProfileName {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = |why: &'static str| Error::InvalidName {
            name: s.chars().take(64).collect(),
            why,
        };
        let mut chars = s.chars();
        match chars.next() {
            None => return Err(invalid("it is empty")),
            Some(c) if !c.is_ascii_lowercase() => {
                return Err(invalid("it must start with a lowercase letter a-z"));
            }
            Some(_) => {}
        }
        if s.len() > MAX_NAME_LEN {
            return Err(invalid("it is longer than 32 characters"));
        }
        if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-') {
            return Err(invalid("only a-z, 0-9, `_` and `-` are allowed"));
        }
        Ok(Self(s.to_owned()))
    }
}

/// A certificate serial number: random, 64 bits of entropy or more, shown as lowercase hex.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Serial(Vec<u8>);

impl Serial {
    /// A fresh random serial: 16 random bytes with the top bit cleared, so the DER INTEGER stays
    /// positive and at most 20 octets (RFC 5280 §4.1.2.2), and never zero in practice.
    pub fn random() -> Self {
        let mut bytes: [u8; 16] = rand::random();
        bytes[0] &= 0x7f;
        bytes[0] |= 0x01; // keep 16 significant octets so every serial prints the same width
        Self(bytes.to_vec())
    }

    /// The big-endian bytes of the serial.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Builds a serial from big-endian bytes (leading zeros are dropped).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
        Self(bytes[start..].to_vec())
    }

    /// Lowercase hex, as `openssl x509 -serial` prints it (but lowercase).
    pub fn to_hex(&self) -> String {
        // By hand rather than `hex::encode`, whose char-by-char collect was a tenth of listing
        // 100,000 certificates.
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(self.0.len() * 2);
        for b in &self.0 {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
        }
        out
    }
}

impl FromStr for Serial {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = || Error::InvalidSerial {
            serial: s.chars().take(64).collect(),
        };
        // `openssl` separates bytes with colons; the inventory and the wire do not (no copy).
        let cleaned: std::borrow::Cow<'_, str> = if s.contains(':') {
            s.replace(':', "").into()
        } else {
            s.into()
        };
        let len = cleaned.len() / 2;
        if !cleaned.len().is_multiple_of(2) || len == 0 || len > 20 {
            return Err(invalid());
        }
        let mut bytes = [0_u8; 20];
        hex::decode_to_slice(cleaned.as_bytes(), &mut bytes[..len]).map_err(|_| invalid())?;
        Ok(Self::from_bytes(&bytes[..len]))
    }
}

impl fmt::Display for Serial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl Serialize for Serial {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Serial {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

crate::name::string_type!(ProfileName, display);
crate::name::string_type!(KeyId, display);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_policy_names() {
        for ok in [
            "saige",
            "a",
            "bob_2",
            "dev-team",
            &format!("a{}", "b".repeat(31)),
        ] {
            assert!(ok.parse::<ProfileName>().is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_names_that_could_escape() {
        for bad in [
            "",
            "Saige",
            "1abc",
            "_x",
            "a b",
            "a'b",
            "a;drop",
            "../etc",
            "a/b",
            "é",
            "a\n",
            &format!("a{}", "b".repeat(32)),
        ] {
            assert!(bad.parse::<ProfileName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn serials_are_random_and_round_trip() {
        let a = Serial::random();
        let b = Serial::random();
        assert_ne!(a, b);
        assert_eq!(a.as_bytes().len(), 16);
        assert_eq!(a.to_hex().parse::<Serial>().ok(), Some(a.clone()));
        assert!(a.as_bytes()[0] < 0x80);
    }

    #[test]
    fn serials_parse_openssl_spellings_and_refuse_the_rest() {
        let hex = |s: &str| s.parse::<Serial>().map(|s| s.to_hex()).ok();
        assert_eq!(hex("0A:1b:FF").as_deref(), Some("0a1bff"));
        assert_eq!(hex("00000a").as_deref(), Some("0a"));
        assert_eq!(hex(&"7f".repeat(20)), Some("7f".repeat(20)));
        for bad in ["", ":", "a", "0g", "0a1", "é0", &"01".repeat(21)] {
            assert!(bad.parse::<Serial>().is_err(), "{bad:?}");
        }
    }
}

/// A public key's identity: the SHA-256 of its DER SubjectPublicKeyInfo, as 64 hex digits. The
/// laptop journals the key of a certificate it asked for before it asks, so that a certificate
/// whose setup never finished can be found and revoked by its key alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(String);

impl KeyId {
    /// The identity of a DER SubjectPublicKeyInfo.
    pub fn of_spki(spki_der: &[u8]) -> Self {
        use sha2::Digest as _;
        Self(hex::encode(sha2::Sha256::digest(spki_der)))
    }

    /// The 64 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for KeyId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        if s.len() != 64
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(Error::InvalidKeyId {
                given: s.chars().take(80).collect(),
            });
        }
        Ok(Self(s.to_owned()))
    }
}
