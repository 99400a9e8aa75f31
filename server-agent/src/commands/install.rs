//! `install`: the server side in one command (see [`crate::install`]).

use std::path::Path;

use crate::error::AgentError;
use crate::handler::Handler;
use crate::install::{Install, InstallArgs};
use crate::state::Context;

impl Handler for InstallArgs {
    fn action(&self) -> &'static str {
        "install"
    }

    /// `run` runs it before any state exists; as a request it is refused.
    fn run(&self, _ctx: &Context) -> anyhow::Result<()> {
        Err(AgentError::Request {
            why: "`install` runs as root on the server itself, not as a request".to_owned(),
        }
        .into())
    }
}

/// Runs `install`, printing each step's line even when a step fails.
pub(crate) fn run(state_dir: &Path, args: Box<InstallArgs>) -> anyhow::Result<()> {
    let mut install = Install::new(*args, state_dir)?;
    let result = install.run();
    crate::commands::print_text(&install.text())?;
    result?;
    Ok(())
}
