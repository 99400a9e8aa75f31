//! `mysql-user NAME`: the certificate-only MySQL account for the latest certificate of NAME.

use shiqi_ca::ProfileName;

use crate::cli::MysqlUserArgs;
use crate::error::AgentError;
use crate::ops::mysql_user;
use crate::state::Context;

/// Creates or refreshes the account and prints a `MysqlUserResponse`.
pub fn run(ctx: &Context, args: MysqlUserArgs) -> anyhow::Result<()> {
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
