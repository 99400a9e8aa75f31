//! What differs between the laptops people use (Linux, macOS, Windows), each concern in one
//! small module, through a portable crate where there is one; nothing else in the client asks
//! the OS these questions. `scripts/check-targets` type-checks them for macOS and Windows.

pub mod account;
pub mod addresses;
pub mod control;
pub mod files;
pub mod port_owner;
pub mod process;
pub mod ssh_agent;

/// How to install a missing client program on this system: Homebrew's name on macOS, Debian's
/// elsewhere on Unix, winget on Windows.
pub fn install_hint(debian: &str, brew: &str) -> String {
    if cfg!(target_os = "macos") {
        format!("`brew install {brew}`")
    } else if cfg!(windows) {
        format!("install {debian} (`winget search {debian}`) and put it on PATH")
    } else {
        format!("`sudo apt install {debian}` (Debian/Ubuntu; other systems: the same package)")
    }
}
