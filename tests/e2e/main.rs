//! End-to-end tests against the real stack: OpenSSH, three Kafka brokers, MariaDB, in network
//! namespaces made by `scripts/stack`. Run them with `scripts/test`, which builds the binaries,
//! starts the stack and sets `SHIQI_CONNECT_BIN` / `SHIQI_AGENT_BIN`.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, reason = "tests fail loudly by design")]
#![allow(
    clippy::print_stderr,
    clippy::print_stdout,
    reason = "test diagnostics go to the test output"
)]

mod at_login;
mod backup;
mod bastion;
mod check;
mod cluster;
mod crash;
mod dist;
mod doctor;
mod endpoint;
mod endpoint_mysql;
mod endpoint_peers;
mod hardening;
mod hostile;
mod hostile_table;
mod identity;
mod install;
mod interactive;
mod jdbc;
mod kafka;
mod known_hosts;
mod lifecycle;
mod lifetime;
mod logins;
mod planted;
mod readme;
mod renewal;
mod server;
mod setup;
mod stack;
mod systemd_host;
mod teams;
mod terminal;
mod tunnel;
mod watch;
mod windows;
