//! `mysql-user NAME`: the certificate-only MySQL account for the latest certificate of NAME.

use shiqi_ca::ProfileName;

use crate::error::AgentError;
use crate::handler::{self, Handler};
use crate::ops::mysql_user;
use crate::state::Context;

/// `mysql-user`.
#[derive(Debug, clap::Args)]
pub(crate) struct MysqlUserArgs {
    /// The user (and certificate) name.
    pub(crate) name: String,
}

impl Handler for MysqlUserArgs {
    fn action(&self) -> &'static str {
        "mysql-user"
    }

    fn target(&self) -> String {
        self.name.trim().to_owned()
    }

    fn describe(&self) -> String {
        format!("the MySQL user `{}`", self.name)
    }

    fn user_may(&self, _ctx: &Context, name: &str) -> Result<bool, AgentError> {
        Ok(self.name.trim() == name)
    }

    fn locked_name(&self, _ctx: &Context) -> anyhow::Result<Option<ProfileName>> {
        Ok(handler::name(&self.name))
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Creates or refreshes the account and prints a `MysqlUserResponse`.
pub(crate) fn run(ctx: &Context, args: &MysqlUserArgs) -> anyhow::Result<()> {
    let name = args
        .name
        .parse::<ProfileName>()
        .map_err(anyhow::Error::from)
        .and_then(|name| {
            if ctx.config.reserved_names().contains(&name.as_str()) {
                return Err(AgentError::ReservedName {
                    name: name.to_string(),
                }
                .into());
            }
            Ok(name)
        });
    let result = match name {
        Ok(name) => mysql_user::ensure_recorded(ctx, &name),
        Err(e) => {
            let refused = Err(e);
            mysql_user::record(ctx, &args.name, &refused);
            refused
        }
    };
    crate::commands::print_json(&result?)
}
