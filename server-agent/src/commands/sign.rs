//! `sign --name NAME [--replaces SERIAL]`: one PEM CSR on stdin in, one `SignResponse` JSON
//! document out ([`crate::ops::sign`]).

use crate::cli::SignArgs;
use crate::ops::{Cluster, sign};
use crate::state::Context;

/// Signs the CSR and prints the answer.
pub fn run(ctx: &Context, args: SignArgs) -> anyhow::Result<()> {
    let cluster = Cluster::new(ctx, !args.no_kafka);
    let response = super::read_csr()
        .and_then(|csr| sign::issue(ctx, &args.name, &csr, args.replaces.as_deref(), &cluster))?;
    sign::refresh_crl(ctx);
    crate::commands::print_json(&response)
}
