//! `sign --name NAME [--replaces SERIAL] [--lifetime SPAN]`: one PEM CSR on stdin in, one `SignResponse` JSON
//! document out ([`crate::ops::sign`]).

use shiqi_ca::protocol;
use shiqi_ca::{ProfileName, Span};

use crate::error::AgentError;
use crate::handler::{self, Handler};
use crate::ops::{Cluster, sign};
use crate::state::Context;

/// `sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The name the certificate is for; the CSR's subject must be exactly CN=NAME.
    #[arg(long)]
    pub(crate) name: String,
    /// Skip asking Kafka for its brokers (the answer then lists that fact as missing).
    #[arg(long)]
    pub(crate) no_kafka: bool,
    /// The serial of the certificate this one replaces (`shiqi-connect rotate`/`renew`): it must
    /// be a client certificate of the same name. Recorded in the audit log as a `rotate`.
    #[arg(long, value_name = "SERIAL")]
    pub(crate) replaces: Option<String>,
    /// The certificate's lifetime (`10m`, `1h`, `30d`) [default: config `lifetime.client`]; at
    /// most the caller's role's `lifetime.client_max`.
    #[arg(long, value_name = "SPAN")]
    pub(crate) lifetime: Option<Span>,
}

impl Handler for SignArgs {
    fn action(&self) -> &'static str {
        "sign"
    }

    fn target(&self) -> String {
        self.name.trim().to_owned()
    }

    fn describe(&self) -> String {
        format!("a certificate for `{}`", self.name)
    }

    fn user_may(&self, _ctx: &Context, name: &str) -> Result<bool, AgentError> {
        Ok(self.name.trim() == name)
    }

    fn locked_name(&self, _ctx: &Context) -> anyhow::Result<Option<ProfileName>> {
        Ok(handler::name(&self.name))
    }

    fn wire(&self) -> Option<Result<protocol::Request, String>> {
        if self.no_kafka {
            return None;
        }
        let request = || {
            Ok(protocol::Request::Sign {
                name: handler::parsed("name", &self.name)?,
                replaces: self
                    .replaces
                    .as_deref()
                    .map(|s| handler::parsed("replaces", s))
                    .transpose()?,
                lifetime: self.lifetime,
            })
        };
        Some(request())
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Signs the CSR and prints the answer.
pub(crate) fn run(ctx: &Context, args: &SignArgs) -> anyhow::Result<()> {
    let cluster = Cluster::new(ctx, !args.no_kafka);
    let ask = sign::Ask {
        replaces: args.replaces.as_deref(),
        lifetime: args.lifetime,
    };
    let response =
        super::read_csr().and_then(|csr| sign::issue(ctx, &args.name, &csr, &ask, &cluster))?;
    sign::refresh_crl(ctx);
    crate::commands::print_json(&response)
}
