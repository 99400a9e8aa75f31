//! `backup --out FILE --passphrase-file F` and `restore FILE --passphrase-file F [--force]`
//! (see [`crate::ops::backup`]): local only, as the agent's account.

use std::path::PathBuf;

use crate::audit;
use crate::error::AgentError;
use crate::handler::{Audience, Handler};
use crate::ops::backup;
use crate::state::Context;

/// `backup --out FILE`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BackupArgs {
    /// Where to write the encrypted backup (replaced atomically, mode 0600).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// The passphrase's file (its first line), or `-` for stdin; never an argument.
    #[arg(long, value_name = "FILE")]
    pub(crate) passphrase_file: PathBuf,
}

impl Handler for BackupArgs {
    fn action(&self) -> &'static str {
        "backup"
    }

    fn describe(&self) -> String {
        "`backup` (only on the server, as the agent's account)".to_owned()
    }

    fn audience(&self) -> Audience {
        Audience::Local
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        backup(ctx, self)
    }
}

/// `restore FILE`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RestoreArgs {
    /// The backup `backup --out` wrote.
    pub(crate) file: PathBuf,
    /// The passphrase's file (its first line), or `-` for stdin.
    #[arg(long, value_name = "FILE")]
    pub(crate) passphrase_file: PathBuf,
    /// Restore over a CA that is there (moved aside into `before-restore-TIME/` first).
    #[arg(long)]
    pub(crate) force: bool,
}

impl Handler for RestoreArgs {
    fn action(&self) -> &'static str {
        "restore"
    }

    fn describe(&self) -> String {
        "`restore` (only on the server, as the agent's account)".to_owned()
    }

    fn audience(&self) -> Audience {
        Audience::Local
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        restore(ctx, self)
    }
}

/// Writes the encrypted backup and records it for `check`.
pub(crate) fn backup(ctx: &Context, args: &BackupArgs) -> anyhow::Result<()> {
    let passphrase = backup::passphrase(&args.passphrase_file)?;
    let (sealed, manifest) = backup::create(ctx, passphrase)?;
    crate::fsutil::write_private(&args.out, &sealed)?;
    backup::record(ctx, &args.out)?;
    audit::record(
        ctx,
        &audit::Entry {
            action: "backup",
            name: "",
            serial: None,
            outcome: "ok",
            reason: Some(format!("to {}", args.out.display())),
        },
    );
    crate::commands::print_text(&format!(
        "backed up CA `{}` ({} certificates, {} revoked) to {} ({} bytes, age/scrypt): keep the \
         passphrase apart from it; `restore` puts it back\n",
        manifest.ca_subject,
        manifest.certificates,
        manifest.revoked,
        args.out.display(),
        sealed.len()
    ))
}

/// Puts a backup's CA into the state directory.
pub(crate) fn restore(ctx: &Context, args: &RestoreArgs) -> anyhow::Result<()> {
    let passphrase = backup::passphrase(&args.passphrase_file)?;
    let sealed = std::fs::read(&args.file).map_err(|why| AgentError::File {
        path: args.file.clone(),
        why,
    })?;
    let opened = backup::Opened::open(&sealed, &args.file, passphrase)?;
    let done = opened.restore(ctx, args.force)?;
    let m = &opened.manifest;
    audit::record(
        ctx,
        &audit::Entry {
            action: "restore",
            name: "",
            serial: None,
            outcome: "ok",
            reason: Some(format!(
                "from {} made {}",
                args.file.display(),
                m.created_at
            )),
        },
    );
    let mut text = format!(
        "restored CA `{}` from {} (made {} by {}): {} certificates, {} revoked; CRL numbers \
         continue at {}\n",
        m.ca_subject,
        args.file.display(),
        m.created_at,
        m.agent,
        m.certificates,
        m.revoked,
        done.crl_number + 1
    );
    if let Some(dir) = &done.aside {
        text.push_str(&format!("the CA that was here is in {}\n", dir.display()));
    }
    if let Some(kept) = &done.config_to {
        text.push_str(&format!(
            "agent.toml was here already and differs: the backup's is {} (compare them)\n",
            kept.display()
        ));
    }
    text.push_str(
        "next: `crl` (publish the revocations) and `enroll --sync` (the enrolled keys' lines), \
         or `install` again, which runs both; certificates signed after the backup are not in \
         this inventory and stay valid until they expire\n",
    );
    crate::commands::print_text(&text)
}
