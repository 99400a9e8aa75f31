//! `shiqi-connect`: the laptop side. One SSH connection to the server's `shiqi-ca-agent` turns a
//! key made here into a certificate, a MySQL user and a ready profile in `~/.shiqi/NAME/`
//! (Kafka and MySQL configs, a tunnel that forwards every broker, DataGrip notes).
//!
//! Layout (docs/design.md, "Layout"): [`cli`] (clap only) → [`commands`] (settle settings, call
//! operations, print) → [`doctor`], [`tunnel`], [`ops`], [`steps`] (work, no printing) →
//! [`agent`], [`probe`], [`ssh`], [`profile`], [`fsutil`]. X.509 is `shiqi-ca`'s business. Report text that may quote
//! another machine is [`text::Escaped`], safe on a terminal by construction.
#![forbid(unsafe_code)]

pub mod agent;
pub mod cli;
pub mod commands;
pub mod datagrip;
pub mod doctor;
pub mod error;
pub mod fsutil;
pub mod jdbc;
pub mod mysql_source;
pub mod ops;
pub mod os;
pub mod printer;
pub mod probe;
pub mod profile;
pub mod prompt;
pub mod ssh;
pub mod steps;
pub mod text;
pub mod tunnel;

pub use error::Error;
