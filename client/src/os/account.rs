//! The user this process runs as, from the OS user database (as OpenSSH finds it): `getpwuid_r`
//! on Unix (macOS included, where regular users are not in the passwd file), `USERNAME` and the
//! profile folder on Windows.

use std::path::PathBuf;

use crate::error::Error;

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
        home: home().ok()?,
    })
}

/// The login name of `uid`.
#[cfg(unix)]
pub fn name_of(uid: u32) -> Option<String> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    Some(user.name)
}

/// The user's home folder, as OpenSSH finds it: on Unix `$HOME` when set, else the account's
/// home from the user database (`getpwuid_r`); on Windows `%USERPROFILE%`, else the profile
/// folder (Win32-OpenSSH ignores `HOME`, which Git Bash and Cygwin set to paths of their own).
///
/// # Errors
/// [`Error::NoHome`] when neither gives one.
#[expect(clippy::disallowed_methods, reason = "this is the one home lookup")]
pub fn home() -> Result<PathBuf, Error> {
    let from_env = if cfg!(windows) {
        None
    } else {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
    };
    from_env
        .or_else(std::env::home_dir)
        .filter(|h| !h.as_os_str().is_empty())
        .ok_or(Error::NoHome)
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
