//! The agent's operations: what commands are made of. Each does one thing to the CA or a
//! service and records it in the audit log; commands resolve their inputs, call operations and
//! print, so no command calls another. A request's Kafka connection belongs to the command
//! ([`Cluster`]) and is lent to each operation that needs it.
//!
//! - [`sign`]: issue a client certificate (and keep the CRL fresh after it);
//! - [`acls`]: grant or take back a principal's Kafka ACLs;
//! - [`mysql_user`]: make the certificate-only MySQL account;
//! - [`revoke`]: revoke certificates and make it effective on MySQL and Kafka;
//! - [`backup`]: the CA's state as one encrypted file, and back.

pub(crate) mod acls;
pub(crate) mod backup;
pub(crate) mod mysql_user;
pub(crate) mod revoke;
pub(crate) mod sign;

use std::cell::OnceCell;

use shiqi_ca::issue::Ca;

use crate::kafka::Admin;
use crate::state::Context;

/// The Kafka cluster as one request sees it: its admin connection is made on first use and
/// then serves every operation of the request (the brokers for the answer, then the ACLs),
/// one connection per process instead of one per step.
pub(crate) struct Cluster<'a> {
    ctx: &'a Context,
    ask: bool,
    admin: OnceCell<Result<Admin<'a>, String>>,
}

impl<'a> Cluster<'a> {
    /// The cluster of `[kafka]`; `ask` false (`--no-kafka`) keeps it out of the request.
    pub(crate) fn new(ctx: &'a Context, ask: bool) -> Self {
        Self {
            ctx,
            ask,
            admin: OnceCell::new(),
        }
    }

    /// The admin connection, made now if it was not yet; why there is none otherwise.
    ///
    /// # Errors
    /// Not asked, Kafka not configured, or the connection's error, in words.
    pub(crate) fn admin(&self, ca: &Ca) -> Result<&Admin<'a>, String> {
        if !self.ask {
            return Err("not asked (--no-kafka)".to_owned());
        }
        if self.ctx.config.kafka.bootstrap.is_empty() {
            return Err("Kafka is not configured on the server".to_owned());
        }
        self.admin
            .get_or_init(|| Admin::connect(self.ctx, ca).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The connection, if an operation made one (never a new one).
    pub(crate) fn connected(&self) -> Option<&Admin<'a>> {
        self.admin.get().and_then(|a| a.as_ref().ok())
    }
}
