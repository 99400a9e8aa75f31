//! The Kafka ACLs of principal `User:NAME` (the brokers map a client certificate's `CN=NAME`
//! to it): granted by `kafka-user` and `provision`, taken back by `kafka-user --revoke` and
//! `revoke`.
//!
//! Granting is idempotent and additive: it creates the `[kafka] grants` ACLs the principal lacks
//! and never removes others (an admin's extra ACLs stay; to reset, revoke then grant).
//! Revoking deletes every ACL of the principal, whatever made it, and waits until every broker
//! has stopped listing them.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use shiqi_ca::ProfileName;
use shiqi_ca::protocol::{KafkaUserResponse, PROTOCOL_VERSION};

use crate::acl::{AclBinding, AclFilter};
use crate::audit;
use crate::error::AgentError;
use crate::kafka::Admin;
use crate::name_lock;
use crate::state::Context;

pub(crate) fn record(
    ctx: &Context,
    action: &str,
    name: &str,
    result: &anyhow::Result<KafkaUserResponse>,
) {
    let (outcome, reason) = match result {
        Ok(_) => ("ok", None),
        Err(e) => ("failed", Some(format!("{e:#}"))),
    };
    audit::record(
        ctx,
        &audit::Entry {
            action,
            name,
            serial: None,
            outcome,
            reason,
        },
    );
}

/// Creates the `[kafka] grants` ACLs `User:NAME` lacks, over `admin` (the caller has checked
/// that NAME has a valid certificate), and records the outcome in the audit log as `action`.
pub(crate) fn grant(
    ctx: &Context,
    admin: &Admin<'_>,
    name: &ProfileName,
) -> anyhow::Result<KafkaUserResponse> {
    let result = grant_acls(ctx, admin, name);
    record(ctx, "kafka-user", name.as_str(), &result);
    result
}

fn grant_acls(
    ctx: &Context,
    admin: &Admin<'_>,
    name: &ProfileName,
) -> anyhow::Result<KafkaUserResponse> {
    let principal = principal(name);
    let wanted: BTreeSet<AclBinding> = ctx
        .config
        .kafka
        .grants
        .iter()
        .flat_map(|g| g.bindings(name))
        .collect();
    let bootstrap = &admin.bootstrap;
    let held: BTreeSet<AclBinding> = admin
        .describe_acls(&AclFilter::principal(&principal), None, admin.timeout)
        .with_context(|| format!("Kafka at `{bootstrap}`"))?
        .into_iter()
        .collect();
    let missing: Vec<AclBinding> = wanted.difference(&held).cloned().collect();
    admin
        .create_acls(&missing)
        .with_context(|| format!("Kafka at `{bootstrap}`"))?;
    if let Err(gone) = name_lock::still_entitled(ctx, name) {
        // Revoked or blocked while we granted: take back everything the principal holds.
        admin
            .delete_acls(&[AclFilter::principal(&principal)])
            .with_context(|| format!("Kafka at `{bootstrap}`: rolling back after `{gone}`"))?;
        return Err(gone.into());
    }
    tracing::debug!(%principal, created = missing.len(), held = held.len(), "kafka-user");
    // Not a second describe: brokers apply new ACLs a moment after the controller commits
    // them, so a describe now could miss what was just created.
    let now: BTreeSet<&AclBinding> = held.iter().chain(&missing).collect();
    Ok(KafkaUserResponse {
        version: PROTOCOL_VERSION,
        principal: principal.into(),
        acls: now.into_iter().map(AclBinding::to_wire).collect(),
        created: missing.iter().map(AclBinding::to_wire).collect(),
        deleted: Vec::new(),
    })
}

/// Deletes every ACL of `User:NAME`, whatever made it: `kafka-user --revoke`, and `revoke`
/// once no valid certificate is left for the name.
pub(crate) fn revoke(ctx: &Context, name: &ProfileName) -> anyhow::Result<KafkaUserResponse> {
    let principal = principal(name);
    let ca = ctx.ca()?;
    let admin = Admin::connect(ctx, &ca)?;
    let filter = AclFilter::principal(&principal);
    let deleted = admin
        .delete_acls(std::slice::from_ref(&filter))
        .with_context(|| format!("Kafka at `{}`", admin.bootstrap))?;
    let brokers = gone_everywhere(&admin, &filter)?;
    tracing::debug!(%principal, ?brokers, "no broker lists the principal's ACLs any more");
    Ok(KafkaUserResponse {
        version: PROTOCOL_VERSION,
        principal: principal.into(),
        acls: Vec::new(),
        created: Vec::new(),
        deleted: deleted.iter().map(AclBinding::to_wire).collect(),
    })
}

/// Waits until every broker in the metadata answers DescribeAcls for `filter` with nothing, and
/// returns their ids. The controller commits a deletion at once, but each broker authorizes
/// from its own copy of the metadata and applies it a moment later: until then a consumer
/// connected to a lagging partition leader still reads. Bounded by `timeout`.
fn gone_everywhere(admin: &Admin<'_>, filter: &AclFilter) -> Result<Vec<i32>, AgentError> {
    let timeout = admin.timeout;
    let deadline = std::time::Instant::now() + timeout;
    let nodes = admin.nodes()?;
    let brokers: Vec<i32> = nodes.iter().map(|n| n.id).collect();
    let mut lagging = nodes;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let per_request = left.clamp(Duration::from_secs(1), Duration::from_secs(5));
        lagging.retain(|node| {
            admin
                .describe_acls(filter, Some(node), per_request)
                .map_or(true, |held| !held.is_empty())
        });
        if lagging.is_empty() {
            return Ok(brokers);
        }
        if left.is_zero() {
            let ids: Vec<String> = lagging.iter().map(|n| n.id.to_string()).collect();
            return Err(admin.error(format!(
                "broker(s) {} still list the deleted ACLs after {} s, so a client connected \
                 there may still be authorized",
                ids.join(", "),
                timeout.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100).min(left));
    }
}

/// A valid profile name that is not one of the server's own identities (the super users
/// `kafka-broker` and `shiqi-admin` among them).
pub(crate) fn user_name(ctx: &Context, raw: &str) -> anyhow::Result<ProfileName> {
    let name: ProfileName = raw.parse()?;
    if ctx.config.reserved_names().contains(&name.as_str()) {
        return Err(AgentError::ReservedName {
            name: name.to_string(),
        }
        .into());
    }
    Ok(name)
}

fn principal(name: &ProfileName) -> String {
    format!("User:{name}")
}
