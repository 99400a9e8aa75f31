//! `version`: the agent's build and the protocol it speaks, asked by the laptop's doctor.

use shiqi_ca::protocol::{self, PROTOCOL_VERSION, VersionResponse};

use crate::error::AgentError;
use crate::handler::Handler;
use crate::state::Context;

/// `version`.
#[derive(Debug, clap::Args)]
pub(crate) struct VersionArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Handler for VersionArgs {
    fn action(&self) -> &'static str {
        "version"
    }

    fn user_may(&self, _ctx: &Context, _name: &str) -> Result<bool, AgentError> {
        Ok(true)
    }

    fn wire(&self) -> Option<Result<protocol::Request, String>> {
        self.json.then_some(Ok(protocol::Request::Version))
    }

    fn run(&self, _ctx: &Context) -> anyhow::Result<()> {
        run(self)
    }
}

/// Prints the build and protocol, as JSON or as two lines.
pub(crate) fn run(args: &VersionArgs) -> anyhow::Result<()> {
    let build = shiqi_ca::version!();
    if args.json {
        return crate::commands::print_json(&VersionResponse {
            version: PROTOCOL_VERSION,
            agent: build.parse()?,
        });
    }
    crate::commands::print_text(&format!(
        "shiqi-ca-agent {build}\nprotocol {PROTOCOL_VERSION}\n"
    ))
}
