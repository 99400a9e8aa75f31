//! Another process of this user: its command line and whether it still runs.
//!
//! macOS asks `ps`: `sysinfo` reads processes there through IOKit and CoreFoundation, and
//! linking those frameworks needs Apple's SDK, which a cross build from Linux does not have
//! (docs/design.md, release builds). `ps` is in every macOS install and answers both questions.

#[cfg(any(target_os = "macos", all(test, unix)))]
mod ps;
#[cfg(not(target_os = "macos"))]
mod sysinfo;

#[cfg(target_os = "macos")]
pub(crate) use ps::{alive, cmdline};
#[cfg(not(target_os = "macos"))]
pub(crate) use sysinfo::{alive, cmdline};
