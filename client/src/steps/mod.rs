//! The steps of a command. Each returns values and never prints or prompts; the command
//! decides what to show. No X.509 parsing here either: that is `shiqi-ca`'s.

pub mod journal;
pub mod keygen;
pub mod keystore;
pub mod profile_files;
pub mod verify;
pub mod write;
