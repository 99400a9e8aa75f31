//! `shiqi-connect`: the laptop side. One SSH connection to the server's `shiqi-ca-agent` turns a
//! key made here into a certificate, a MySQL user and a ready profile in `~/.shiqi/NAME/`
//! (Kafka and MySQL configs, a tunnel that forwards every broker, DataGrip notes).
//!
//! Layout (docs/design.md, "Layout"): [`cli`] (clap only) → [`commands`] (settle settings, call
//! operations, print) → [`doctor`], [`tunnel`], `ops`, `steps` (work, no printing) → `agent`,
//! `probe`, [`ssh`], `profile`, [`fsutil`]. X.509 is `shiqi-ca`'s business. Report text that may
//! quote another machine is `text::Escaped`, safe on a terminal by construction.
//!
//! Items are `pub(crate)` unless the binary, the integration tests or the fuzz targets use
//! them: what is `pub` here is what they use (`cli`, `commands`' entry points, `error`,
//! `fsutil`, the `ssh` readers of known_hosts and ssh_config, doctor's config parsers, the
//! endpoint's answer rewriting), so `unreachable_pub` and dead-code warnings mean something.
#![forbid(unsafe_code)]

pub(crate) mod agent;
pub mod cli;
pub(crate) mod clock;
pub mod commands;
pub(crate) mod datagrip;
pub mod doctor;
pub mod error;
pub mod fsutil;
pub(crate) mod jdbc;
pub(crate) mod mysql_source;
pub(crate) mod ops;
pub(crate) mod os;
pub mod printer;
pub(crate) mod probe;
pub(crate) mod profile;
pub(crate) mod prompt;
pub mod ssh;
pub(crate) mod steps;
pub(crate) mod text;
pub mod tunnel;

pub use error::Error;
