//! The steps of a command. Each returns values and never prints or prompts; the command
//! decides what to show. No X.509 parsing here either: that is `shiqi-ca`'s.

pub(crate) mod journal;
pub(crate) mod keygen;
pub(crate) mod keystore;
pub(crate) mod profile_files;
pub(crate) mod verify;
pub(crate) mod write;
