//! The certificate-only MySQL account for the latest certificate of a name: made by
//! `mysql-user` and `provision`.

use shiqi_ca::ProfileName;
use shiqi_ca::cert::Cert;
use shiqi_ca::inventory::CertKind;
use shiqi_ca::protocol::{MysqlUserResponse, PROTOCOL_VERSION};

use crate::audit;
use crate::error::AgentError;
use crate::mysql::{self, Ensured};
use crate::state::Context;

/// [`ensure`], with the outcome in the audit log.
pub(crate) fn ensure_recorded(
    ctx: &Context,
    name: &ProfileName,
) -> anyhow::Result<MysqlUserResponse> {
    let result = ensure(ctx, name);
    record(ctx, name.as_str(), &result);
    result
}

pub(crate) fn record(ctx: &Context, name: &str, result: &anyhow::Result<MysqlUserResponse>) {
    let (outcome, reason) = match result {
        Ok(_) => ("ok", None),
        Err(e) => ("failed", Some(format!("{e:#}"))),
    };
    audit::record(
        ctx,
        &audit::Entry {
            action: "mysql-user",
            name,
            serial: None,
            outcome,
            reason,
        },
    );
}

/// The account for NAME's latest valid client certificate (NAME is not a reserved name).
fn ensure(ctx: &Context, name: &ProfileName) -> anyhow::Result<MysqlUserResponse> {
    let record = ctx
        .inventory()?
        .latest_valid(name.as_str(), CertKind::Client)?
        .ok_or_else(|| AgentError::NoCertificate {
            name: name.to_string(),
        })?;
    let cert = Cert::from_der(&record.der)?;
    let subject = cert.subject_oneline().to_owned();
    let issuer = cert.issuer_oneline().to_owned();
    let host = ctx.config.mysql.user_host.clone();
    let address = mysql::address(ctx);
    let grants = ctx.config.mysql.grants.clone();

    let ensured = ctx.block_on(async {
        let mut conn = mysql::connect(ctx).await?;
        let mut ensured =
            mysql::ensure_user(&mut conn, &address, name, &host, &subject, &issuer, &grants).await;
        if ensured.is_ok()
            && let Err(gone) = crate::name_lock::still_entitled(ctx, name)
        {
            // Revoked or blocked while we unlocked the account: lock it again.
            ensured = match mysql::lock_account(&mut conn, &address, name, &host, &issuer).await {
                Ok(_) => Err(gone),
                Err(e) => Err(e),
            };
        }
        let _ = conn.disconnect().await;
        ensured
    })?;
    Ok(MysqlUserResponse {
        version: PROTOCOL_VERSION,
        user: name.clone(),
        host: host.parse()?,
        subject: subject.into(),
        issuer: issuer.into(),
        created: ensured == Ensured::Created,
    })
}
