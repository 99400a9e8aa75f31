//! Who runs this request: the agent's own account, or an enrolled SSH identity through
//! `serve`. Plain data that the state, the audit log, the limits and the policy
//! ([`crate::access`]) all read; it imports none of them.

use std::fmt;

use shiqi_ca::inventory::access::{Enrollment, Role};

/// Who runs this request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A shell on the agent's own account: may do everything.
    Local {
        /// The Unix account (from the process's uid, not from `$USER`).
        account: String,
        /// The person `sudo` ran this for, when it did (sudo sets `SUDO_USER`).
        sudo_user: Option<String>,
    },
    /// An enrolled SSH key through `serve`.
    Key(Enrollment),
    /// A key whose `serve` line names a fingerprint the inventory does not know (removed with
    /// `enroll --remove` while its line stayed): may do nothing.
    Unenrolled {
        /// The fingerprint from the forced command.
        fingerprint: String,
    },
}

impl Caller {
    /// The caller of a process started from a shell: the account of its real uid.
    pub(crate) fn local() -> Self {
        let uid = nix::unistd::getuid();
        let account = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map_or_else(|| format!("uid {uid}"), |u| u.name);
        Self::Local {
            account,
            sudo_user: std::env::var("SUDO_USER").ok().filter(|s| !s.is_empty()),
        }
    }

    /// The key's role, or `None` for a local caller.
    pub(crate) fn role(&self) -> Option<Role> {
        match self {
            Self::Local { .. } | Self::Unenrolled { .. } => None,
            Self::Key(k) => Some(k.role),
        }
    }
}

impl fmt::Display for Caller {
    /// How the audit log and the inventory name this caller.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local {
                account,
                sudo_user: Some(by),
            } => write!(f, "local {account} (sudo by {by})"),
            Self::Local { account, .. } => write!(f, "local {account}"),
            Self::Key(k) => write!(f, "key {} ({}, {})", k.fingerprint, k.name, k.role),
            Self::Unenrolled { fingerprint } => write!(f, "unenrolled key {fingerprint}"),
        }
    }
}
