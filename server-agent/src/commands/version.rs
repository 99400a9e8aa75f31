//! `version`: the agent's build and the protocol it speaks, asked by the laptop's doctor.

use shiqi_ca::protocol::{PROTOCOL_VERSION, VersionResponse};

use crate::cli::VersionArgs;

/// Prints the build and protocol, as JSON or as two lines.
pub fn run(args: &VersionArgs) -> anyhow::Result<()> {
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
