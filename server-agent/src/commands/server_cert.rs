//! `server-cert`: a server certificate and the files that server needs.

use std::path::PathBuf;

use serde::Serialize;
use shiqi_ca::inventory::{CertKind, NewCert};
use shiqi_ca::issue::{Lifetime, ServerUsage, Validity};
use shiqi_ca::key::{KeyType, PrivateKey};
use shiqi_ca::keystore::{self, P12Format};
use shiqi_ca::{Secret, cert::Cert};

use crate::audit;
use crate::error::AgentError;
use crate::fsutil;
use crate::handler::Handler;
use crate::render::render;
use crate::state::Context;

/// What a server certificate is for.
// The variants' doc comments are `--help` text: `[mysqld]` is a section, not a rustdoc link.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ServerKind {
    /// A Kafka broker: PKCS#12 keystore + truststore + server.properties fragment.
    Kafka,
    /// MariaDB/MySQL: PEM files + a [mysqld] fragment.
    Mysql,
}

/// `server-cert`.
// `[default: …]` is `--help` text, not a rustdoc link.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, clap::Args)]
pub(crate) struct ServerCertArgs {
    /// The certificate's common name (e.g. `kafka-broker`, `mariadb`).
    pub(crate) name: String,
    /// The server kind.
    #[arg(long, value_enum)]
    pub(crate) kind: ServerKind,
    /// A DNS name or IP address clients verify (repeat for each; for a broker every advertised
    /// host name).
    #[arg(long = "san", required = true)]
    pub(crate) sans: Vec<String>,
    /// Where to write the files: created 0700 if missing; an existing folder keeps its mode.
    /// Keys and keystores are written 0600, certificates 0644.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Validity in days [default: config `lifetime.server_days`].
    #[arg(long)]
    pub(crate) days: Option<u64>,
}

impl Handler for ServerCertArgs {
    fn action(&self) -> &'static str {
        "server-cert"
    }

    fn target(&self) -> String {
        self.name.trim().to_owned()
    }

    fn describe(&self) -> String {
        format!("`server-cert {}`", self.name)
    }

    fn run(&self, ctx: &Context) -> anyhow::Result<()> {
        run(ctx, self)
    }
}

#[derive(Serialize)]
struct KafkaCtx<'a> {
    name: &'a str,
    sans: &'a [String],
    serial: String,
    not_after: String,
    keystore: String,
    truststore: String,
    password: &'a str,
    /// The CRL distribution point certificates carry, for the revocation comment.
    crl_url: Option<String>,
}

#[derive(Serialize)]
struct MysqlCtx<'a> {
    name: &'a str,
    sans: &'a [String],
    serial: String,
    not_after: String,
    ca: String,
    cert: String,
    key: String,
    /// `ssl_crl`, when the CRL is published where the server can read it.
    crl: Option<String>,
}

/// The published CRL's path for `ssl_crl`, making sure the file exists first: MariaDB refuses
/// to start TLS when `ssl_crl` names a missing file.
fn crl_for_mysql(ctx: &Context, ca: &shiqi_ca::issue::Ca) -> anyhow::Result<Option<String>> {
    let Some(dir) = &ctx.config.crl.publish_dir else {
        return Ok(None);
    };
    crate::crl::update(ctx, ca, crate::crl::When::IfDue)?;
    Ok(Some(dir.join(crate::crl::CRL_PEM).display().to_string()))
}

/// Issues the certificate and writes the server's files into `--out`.
pub(crate) fn run(ctx: &Context, args: &ServerCertArgs) -> anyhow::Result<()> {
    let name: shiqi_ca::ProfileName = args.name.parse()?;
    // Everything the caller gave is checked before a serial is spent.
    for san in &args.sans {
        san.parse::<shiqi_ca::Host>()
            .map_err(|why| AgentError::Argument { flag: "--san", why })?;
    }
    fsutil::ensure_dir(&args.out)?;
    let ca = ctx.ca()?;
    let key = PrivateKey::generate(KeyType::EcdsaP256)?;
    let days = args
        .days
        .unwrap_or(u64::from(ctx.config.lifetime.server_days));
    let validity = Validity::for_days(time::OffsetDateTime::now_utc(), Lifetime::Server, days)?;
    let usage = match args.kind {
        ServerKind::Kafka => ServerUsage::ServerAndClient,
        ServerKind::Mysql => ServerUsage::Server,
    };
    let record = ctx.inventory()?.issue(|serial| {
        let cert = ca.issue_server(name.as_str(), &args.sans, usage, &key, serial, validity)?;
        Ok(NewCert::from_cert(name.as_str(), CertKind::Server, &cert))
    })?;
    let cert = Cert::from_der(&record.der)?;
    let out = std::fs::canonicalize(&args.out)?;
    let chain = format!("{}{}", cert.pem(), ca.cert().pem());
    let not_after = cert
        .not_after()
        .format(&time::format_description::well_known::Rfc3339)?;
    match args.kind {
        ServerKind::Kafka => {
            let password = Secret::random_password();
            let ks = keystore::keystore(&key, &chain, name.as_str(), &password, P12Format::Modern)?;
            let ts =
                keystore::truststore(&ca.cert().pem(), "shiqi-ca", &password, P12Format::Modern)?;
            let (ks_path, ts_path) = (
                out.join("server.keystore.p12"),
                out.join("server.truststore.p12"),
            );
            fsutil::write_private(&ks_path, &ks)?;
            fsutil::write_private(&ts_path, &ts)?;
            fsutil::write_private(&out.join("server.password"), password.expose().as_bytes())?;
            let fragment = render(
                "kafka-server.properties",
                KafkaCtx {
                    name: name.as_str(),
                    sans: &args.sans,
                    serial: cert.serial().to_hex(),
                    not_after,
                    keystore: ks_path.display().to_string(),
                    truststore: ts_path.display().to_string(),
                    password: password.expose(),
                    crl_url: ctx.config.crl.distribution_point(),
                },
            )?;
            // The fragment holds the keystore password, so it is private too.
            fsutil::write_private(&out.join("server.properties"), fragment.as_bytes())?;
        }
        ServerKind::Mysql => {
            let (crt, key_path, ca_path) = (
                out.join("server.crt"),
                out.join("server.key"),
                out.join("ca.crt"),
            );
            fsutil::write_atomic(&crt, chain.as_bytes(), 0o644)?;
            fsutil::write_private(&key_path, key.to_pkcs8_pem().expose().as_bytes())?;
            fsutil::write_atomic(&ca_path, ca.cert().pem().as_bytes(), 0o644)?;
            let fragment = render(
                "mysqld.cnf",
                MysqlCtx {
                    name: name.as_str(),
                    sans: &args.sans,
                    serial: cert.serial().to_hex(),
                    not_after,
                    ca: ca_path.display().to_string(),
                    cert: crt.display().to_string(),
                    key: key_path.display().to_string(),
                    crl: crl_for_mysql(ctx, &ca)?,
                },
            )?;
            fsutil::write_atomic(&out.join("mysqld.cnf"), fragment.as_bytes(), 0o644)?;
        }
    }
    audit::record(
        ctx,
        &audit::Entry {
            action: "server-cert",
            name: name.as_str(),
            serial: Some(cert.serial().to_hex()),
            outcome: "ok",
            reason: None,
        },
    );
    crate::commands::print_text(&format!(
        "issued server certificate CN={name} serial {} (SANs {}) into {}\n",
        cert.serial(),
        args.sans.join(", "),
        out.display()
    ))
}
