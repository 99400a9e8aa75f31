//! The user this process runs as, from the OS user database (as OpenSSH finds it): `getpwuid_r`
//! on Unix (macOS included, where regular users are not in the passwd file), `USERNAME` and the
//! profile folder on Windows.

use std::path::PathBuf;

/// A user account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// The login name.
    pub name: String,
    /// The home folder the user database gives (not `$HOME`).
    pub home: PathBuf,
}

/// This process's account, if the user database knows it.
#[cfg(unix)]
pub fn current() -> Option<Account> {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok()??;
    Some(Account {
        name: user.name,
        home: user.dir,
    })
}

/// This process's account, if the environment names it.
#[cfg(not(unix))]
pub fn current() -> Option<Account> {
    Some(Account {
        name: std::env::var("USERNAME").ok()?,
        home: crate::profile::home().ok()?,
    })
}

/// The login name of `uid`.
#[cfg(unix)]
pub fn name_of(uid: u32) -> Option<String> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    Some(user.name)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn knows_this_process_and_root() {
        let me = current().expect("the test runs as a known user");
        assert!(!me.name.is_empty());
        assert!(me.home.is_absolute());
        assert_eq!(name_of(0).as_deref(), Some("root"));
    }
}
