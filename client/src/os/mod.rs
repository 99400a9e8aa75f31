//! What differs between the laptops people use (Linux, macOS, Windows), each concern in one
//! small module, through a portable crate where there is one; nothing else in the client asks
//! the OS these questions. `scripts/check-targets` type-checks them for macOS and Windows.

pub(crate) mod account;
pub(crate) mod addresses;
pub(crate) mod control;
pub(crate) mod files;
pub(crate) mod login_item;
pub(crate) mod port_owner;
pub(crate) mod process;
pub(crate) mod ssh_agent;

/// Whether the system's OpenSSH can run a tunnel in the background and be controlled
/// (`ssh -f`, `ControlMaster`/`ControlPath`): Win32-OpenSSH has neither, so on Windows the
/// written `ssh_config` names no control socket and `tunnel up --openssh` is refused.
pub(crate) const OPENSSH_BACKGROUND: bool = cfg!(unix);

/// Whether a listener sets `SO_REUSEADDR`. Unix: it only lets a restarted tunnel bind while old
/// connections linger in TIME_WAIT. Windows: it would let a second socket bind a port that is
/// already listened on (and take its connections), so never there.
pub(crate) const LISTEN_REUSEADDR: bool = cfg!(unix);

/// How to install a missing client program on this system: Homebrew's name on macOS, Debian's
/// elsewhere on Unix, winget on Windows.
pub(crate) fn install_hint(debian: &str, brew: &str) -> String {
    if cfg!(target_os = "macos") {
        format!("`brew install {brew}`")
    } else if cfg!(windows) {
        format!("install {debian} (`winget search {debian}`) and put it on PATH")
    } else {
        format!("`sudo apt install {debian}` (Debian/Ubuntu; other systems: the same package)")
    }
}
