//! What the user gave that cannot be used, found before any work.

/// A flag, an answer or the environment that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Neither `$HOME` nor the OS user database names a home folder, so `~/.ssh` and
    /// `~/.shiqi` cannot be found.
    #[error(
        "cannot find the home directory: `HOME` (Windows: `USERPROFILE`) is not set and the user database has none"
    )]
    NoHome,

    /// A required value was neither given nor could be asked for.
    #[error("no {what} given")]
    Missing {
        /// What is missing, in words.
        what: &'static str,
        /// The flag that sets it.
        flag: &'static str,
        /// The environment variable that sets it.
        env: &'static str,
    },

    /// A destination that is not `user@host`, `ssh://user@host:port` or a Host alias.
    #[error("invalid SSH destination `{given}`: {why}")]
    InvalidDestination {
        /// What was given (truncated).
        given: String,
        /// Which rule it breaks.
        why: &'static str,
    },

    /// A value for an `ssh_config` keyword we write that ssh would misread.
    #[error("invalid {what} `{given}`: {why}")]
    InvalidValue {
        /// Which setting.
        what: &'static str,
        /// What was given (truncated).
        given: String,
        /// Which rule it breaks.
        why: &'static str,
    },
}

impl InputError {
    /// One next step for the user (see [`super::Error::hint`]).
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            // `--home` cannot help: `~/.ssh` (keys, known_hosts, config) is found from `HOME` too.
            Self::NoHome => {
                "set `HOME` to your home folder, e.g. `export HOME=/home/you` (Windows: \
                 `USERPROFILE`)"
                    .to_owned()
            }
            Self::Missing { flag, env, .. } => format!("pass `{flag}` or set `{env}`"),
            Self::InvalidDestination { .. } => {
                "use `user@host`, `ssh://user@host:port` or a `Host` alias from `~/.ssh/config`"
                    .to_owned()
            }
            _ => return None,
        })
    }
}
