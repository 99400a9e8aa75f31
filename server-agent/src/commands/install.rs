//! `install`: the server side in one command (see [`crate::install`]).

use std::path::Path;

use crate::cli::InstallArgs;
use crate::install::Install;

/// Runs `install`, printing each step's line even when a step fails.
pub fn run(state_dir: &Path, args: Box<InstallArgs>) -> anyhow::Result<()> {
    let mut install = Install::new(*args, state_dir)?;
    let result = install.run();
    crate::commands::print_text(&install.text())?;
    result?;
    Ok(())
}
