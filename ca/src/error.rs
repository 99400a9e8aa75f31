//! The one error type of `shiqi-ca`. Messages name the fact; [`Error::hint`] names the fix.

use std::path::PathBuf;

/// Everything that can go wrong in the CA library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A profile/user name that does not match `[a-z][a-z0-9_-]{0,31}`.
    #[error("invalid name `{name}`: {why}")]
    InvalidName {
        /// The name as given (truncated).
        name: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A serial number that is not 1..=20 bytes of hex.
    #[error("invalid serial `{serial}`: expected hex digits such as `1f2e3d`")]
    InvalidSerial {
        /// The serial as given (truncated).
        serial: String,
    },
}

impl Error {
    /// One next step for the user, rendered by the CLIs as `hint: …`.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::InvalidName { .. } => Some(
                "names start with a lowercase letter and use only a-z, 0-9, `_` and `-` (at most 32)"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

/// A file-system error with the path it concerns.
#[derive(Debug, thiserror::Error)]
#[error("`{}`: {source}", path.display())]
pub struct PathError {
    /// The file or folder.
    pub path: PathBuf,
    /// What the OS said.
    #[source]
    pub source: std::io::Error,
}
