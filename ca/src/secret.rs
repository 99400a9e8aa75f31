//! `Secret<T>`: a value that never prints. Keys, keystore and database passwords live in one.

use std::fmt;

/// Wraps a secret so that `Debug` and `Display` print `***`; read it with [`Secret::expose`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret value; call it only where the value is used, never to log it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl Secret<String> {
    /// A random password of 32 characters from an unambiguous alphabet (about 190 bits).
    pub fn random_password() -> Self {
        const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let bytes: [u8; 32] = rand::random();
        let s = bytes
            .iter()
            .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
            .collect();
        Self(s)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints() {
        let s = Secret::new("hunter2".to_owned());
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        let p = Secret::random_password();
        assert_eq!(p.expose().len(), 32);
        assert_ne!(p, Secret::random_password());
    }
}
