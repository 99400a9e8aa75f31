//! `init`: create the CA.

use anyhow::Context as _;
use shiqi_ca::issue::{Ca, Lifetime, Validity};
use shiqi_ca::key::KeyType;

use crate::audit;
use crate::error::AgentError;
use crate::fsutil;
use crate::handler::Handler;
use crate::state::Context;

/// `init`.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// The CA key: `p256` (ECDSA P-256) or `rsa3072`.
    #[arg(long, default_value = "p256", env = "SHIQI_CA_KEY_TYPE")]
    pub(crate) key_type: String,
    /// The CA certificate's common name.
    #[arg(long, default_value = "shiqi-connect CA", env = "SHIQI_CA_COMMON_NAME")]
    pub(crate) common_name: String,
}

impl Handler for InitArgs {
    fn action(&self) -> &'static str {
        "init"
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

/// Creates the CA key (0600), certificate and inventory in a 0700 state directory.
pub(crate) fn run(ctx: &Context, args: &InitArgs) -> anyhow::Result<()> {
    let key_type: KeyType = args.key_type.parse()?;
    if !matches!(key_type, KeyType::EcdsaP256 | KeyType::Rsa3072) {
        anyhow::bail!("the CA key must be `p256` or `rsa3072`, not `{key_type}`");
    }
    if ctx.path("ca.key").exists() || ctx.path("ca.crt").exists() {
        return Err(AgentError::CaExists {
            dir: ctx.dir.clone(),
        }
        .into());
    }
    fsutil::create_private_dir(&ctx.dir)?;
    let validity = Validity::for_days(
        time::OffsetDateTime::now_utc(),
        Lifetime::Ca,
        u64::from(ctx.config.lifetime.ca_days),
    )?;
    let ca = Ca::create(key_type, &args.common_name, validity)?;
    // The key goes first and only if absent: two racing `init`s cannot both win.
    if !fsutil::create_new_private(&ctx.path("ca.key"), ca.key_pem().expose().as_bytes())? {
        return Err(AgentError::CaExists {
            dir: ctx.dir.clone(),
        }
        .into());
    }
    fsutil::write_atomic(&ctx.path("ca.crt"), ca.cert().pem().as_bytes(), 0o644)?;
    ctx.inventory().context("cannot create the inventory")?;
    audit::record(
        ctx,
        &audit::Entry {
            action: "init",
            name: &args.common_name,
            serial: Some(ca.cert().serial().to_hex()),
            outcome: "ok",
            reason: None,
        },
    );
    crate::commands::print_text(&format!(
        "created CA `{}` ({key_type}) in {}\n",
        ca.cert().subject(),
        ctx.dir.display()
    ))
}
