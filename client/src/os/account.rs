//! The user this process runs as, from the OS user database (as OpenSSH finds it): `getpwuid_r`
//! on Unix (macOS included, where regular users are not in the passwd file), `USERNAME` and the
//! profile folder on Windows.

use std::path::PathBuf;

/// A user account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Account {
    /// The login name.
    pub(crate) name: String,
    /// The home folder the user database gives (not `$HOME`).
    pub(crate) home: PathBuf,
}

/// This process's account, if the user database knows it.
#[cfg(unix)]
pub(crate) fn current() -> Option<Account> {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok()??;
    Some(Account {
        name: user.name,
        home: user.dir,
    })
}

/// This process's account, if the environment names it.
#[cfg(not(unix))]
pub(crate) fn current() -> Option<Account> {
    Some(Account {
        name: std::env::var("USERNAME").ok()?,
        home: home()?,
    })
}

/// The login name of `uid`.
#[cfg(unix)]
pub(crate) fn name_of(uid: u32) -> Option<String> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    Some(user.name)
}

/// The account (user SID, `S-1-5-21-…`) that `pid` runs as, if this account may look into it:
/// Windows lets an account read its own processes' tokens, not other accounts' (unless
/// elevated).
#[cfg(windows)]
pub(crate) fn sid_of(pid: u32) -> Option<String> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};
    let mut sys = System::new().ok()?;
    let pid = Pid::from_u32(pid);
    let what = ProcessRefreshKind::nothing().with_user(UpdateKind::Always);
    sys.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, what);
    // A `Uid` is a `Sid` on Windows, whose `Display` fails (rather than panics) when Windows
    // cannot spell it.
    let sid: &sysinfo::Uid = sys.process(pid)?.user_id()?;
    let mut text = String::new();
    std::fmt::Write::write_fmt(&mut text, format_args!("{}", &**sid)).ok()?;
    Some(text)
}

/// This process's account (its user SID), read once.
#[cfg(windows)]
pub(crate) fn own_sid() -> Option<String> {
    static OWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if let Some(sid) = OWN.get() {
        return Some(sid.clone());
    }
    let sid = sid_of(std::process::id())?;
    Some(OWN.get_or_init(|| sid).clone())
}

/// The user's home folder, as OpenSSH finds it: on Unix `$HOME` when set, else the account's
/// home from the user database (`getpwuid_r`); on Windows `%USERPROFILE%`, else the profile
/// folder (Win32-OpenSSH ignores `HOME`, which Git Bash and Cygwin set to paths of their own).
///
/// `None` when neither gives one (callers say `InputError::NoHome`: this layer knows no error type).
#[expect(clippy::disallowed_methods, reason = "this is the one home lookup")]
pub(crate) fn home() -> Option<PathBuf> {
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
