//! `kafka-user NAME [--revoke]`: the Kafka ACLs of principal `User:NAME` ([`crate::ops::acls`]).

use shiqi_ca::ProfileName;
use shiqi_ca::inventory::CertKind;

use crate::error::AgentError;
use crate::handler::{self, Handler};
use crate::kafka::Admin;
use crate::ops::acls;
use crate::state::Context;

/// `kafka-user`.
#[derive(Debug, clap::Args)]
pub(crate) struct KafkaUserArgs {
    /// The user (and certificate) name; the principal is `User:NAME`.
    pub(crate) name: String,
    /// Delete every ACL of `User:NAME` instead (no certificate needed), and list what was
    /// deleted.
    #[arg(long)]
    pub(crate) revoke: bool,
}

impl Handler for KafkaUserArgs {
    fn action(&self) -> &'static str {
        if self.revoke {
            "kafka-user-revoke"
        } else {
            "kafka-user"
        }
    }

    fn target(&self) -> String {
        self.name.trim().to_owned()
    }

    fn describe(&self) -> String {
        if self.revoke {
            format!("deleting the Kafka ACLs of `{}`", self.name)
        } else {
            format!("the Kafka ACLs of `{}`", self.name)
        }
    }

    fn user_may(&self, _ctx: &Context, name: &str) -> Result<bool, AgentError> {
        Ok(self.name.trim() == name && !self.revoke)
    }

    fn locked_name(&self, _ctx: &Context) -> anyhow::Result<Option<ProfileName>> {
        Ok(handler::name(&self.name))
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Grants or revokes and prints a `KafkaUserResponse`.
pub(crate) fn run(ctx: &Context, args: &KafkaUserArgs) -> anyhow::Result<()> {
    let result = if args.revoke {
        let revoked = acls::user_name(ctx, &args.name).and_then(|name| acls::revoke(ctx, &name));
        acls::record(ctx, "kafka-user-revoke", &args.name, &revoked);
        revoked
    } else {
        match connect_for(ctx, &args.name) {
            // Records its own outcome.
            Ok((name, admin)) => acls::grant(ctx, &admin, &name),
            Err(e) => {
                let refused = Err(e);
                acls::record(ctx, "kafka-user", &args.name, &refused);
                refused
            }
        }
    };
    crate::commands::print_json(&result?)
}

/// NAME, checked to hold a valid client certificate, and a connection to grant over.
fn connect_for<'a>(ctx: &'a Context, raw: &str) -> anyhow::Result<(ProfileName, Admin<'a>)> {
    let name = acls::user_name(ctx, raw)?;
    ctx.inventory()?
        .latest_valid(name.as_str(), CertKind::Client)?
        .ok_or_else(|| AgentError::NoCertificate {
            name: name.to_string(),
        })?;
    let ca = ctx.ca()?;
    Ok((name, Admin::connect(ctx, &ca)?))
}
