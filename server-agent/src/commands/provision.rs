//! `provision --name NAME`: `sign`, `kafka-user` and `mysql-user` in one request, what
//! `shiqi-connect setup` sends. One process and one Kafka admin connection instead of three of
//! each: the brokers' metadata and the ACLs go over the same connection.
//!
//! Each step records its own audit entry, as the separate commands do. A refusal before signing
//! prints nothing on stdout; a failure after it prints the answer so far and exits non-zero, so
//! the client knows a certificate was issued and revokes it.

use shiqi_ca::protocol::{self, PROTOCOL_VERSION, ProvisionResponse};
use shiqi_ca::{ProfileName, Span};

use crate::error::AgentError;
use crate::handler::{self, Handler};
use crate::kafka::Admin;
use crate::ops::{Cluster, acls, mysql_user, sign};
use crate::state::Context;

/// `provision`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProvisionArgs {
    /// The name the certificate, the Kafka principal and the MySQL user are for.
    #[arg(long)]
    pub(crate) name: String,
    /// Neither ask Kafka for its brokers nor grant ACLs.
    #[arg(long)]
    pub(crate) no_kafka: bool,
    /// The certificate's lifetime (`10m`, `1h`, `30d`) [default: config `lifetime.client`]; at
    /// most the caller's role's `lifetime.client_max`.
    #[arg(long, value_name = "SPAN")]
    pub(crate) lifetime: Option<Span>,
}

impl Handler for ProvisionArgs {
    fn action(&self) -> &'static str {
        "provision"
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
        Some(
            handler::parsed("name", &self.name).map(|name| protocol::Request::Provision {
                name,
                lifetime: self.lifetime,
            }),
        )
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Signs, grants, creates, and prints a `ProvisionResponse`.
pub(crate) fn run(ctx: &Context, args: &ProvisionArgs) -> anyhow::Result<()> {
    let csr = super::read_csr()?;
    let cluster = Cluster::new(ctx, !args.no_kafka);
    let ask = sign::Ask {
        replaces: None,
        lifetime: args.lifetime,
    };
    let certificate = sign::issue(ctx, &args.name, &csr, &ask, &cluster)?;
    let name: ProfileName = certificate.name.clone();
    let mut response = ProvisionResponse {
        version: PROTOCOL_VERSION,
        certificate,
        kafka: None,
        mysql: None,
    };
    let finished = finish(ctx, cluster.connected(), &name, &mut response);
    sign::refresh_crl(ctx);
    crate::commands::print_json(&response)?;
    finished
}

/// The steps after signing, each only for a service the answer's facts name.
fn finish(
    ctx: &Context,
    admin: Option<&Admin<'_>>,
    name: &ProfileName,
    response: &mut ProvisionResponse,
) -> anyhow::Result<()> {
    // Facts about Kafka mean the cluster's connection answered.
    if response.certificate.facts.kafka.is_some()
        && let Some(admin) = admin
    {
        response.kafka = Some(acls::grant(ctx, admin, name)?);
    }
    if response.certificate.facts.mysql.is_some() {
        response.mysql = Some(mysql_user::ensure_recorded(ctx, name)?);
    }
    Ok(())
}
