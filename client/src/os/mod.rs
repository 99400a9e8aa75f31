//! What differs between the laptops people use (Linux, macOS, Windows), each concern in one
//! small module, through a portable crate where there is one; nothing else in the client asks
//! the OS these questions. `scripts/check-targets` type-checks them for macOS and Windows.

pub mod account;
pub mod addresses;
pub mod files;
pub mod port_owner;
pub mod process;
