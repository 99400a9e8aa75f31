//! `shiqi-connect jdbc [NAME] [--driver mysql|mariadb] [--verify full|ca]`: the JDBC URL for
//! the profile's MySQL through the tunnel, on stdout (`--json`: with the driver and mode).
//!
//! In direct mode the URL holds the keystore password: neither Connector/J nor MariaDB
//! Connector/J reads a password from a file, and PKCS#12 needs one. Through the local endpoint
//! it holds the user only. It goes to stdout only because the user asked
//! for it; it is never logged, and the notes on stderr say where it came from.

use std::process::ExitCode;

use serde::Serialize;
use shiqi_ca::Secret;

use crate::cli::{GlobalArgs, JdbcArgs};
use crate::commands::{MysqlClient, print_stdout};
use crate::jdbc;
use crate::mysql_source::{self, Paths};
use crate::printer::Printer;

/// `--json` output.
#[derive(Serialize)]
struct Json<'a> {
    driver: String,
    driver_class: &'a str,
    /// `null` through the local endpoint (the client does no TLS).
    verify: Option<String>,
    url: &'a str,
}

/// Runs `jdbc`.
///
/// # Errors
/// No profile, no MySQL in it, no `keystore.password`, or a path the driver cannot take.
pub(crate) fn run(
    args: &JdbcArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let c = MysqlClient::settle(&args.source, global, "jdbc", printer)?;
    let url = match c.verify {
        Some(verify) => {
            let paths = Paths::of(&c.source.dir);
            let password = c.source.password()?;
            let url = jdbc::url(
                c.driver,
                verify,
                &mysql_source::endpoint(&c.source, &paths, &password),
            )?;
            printer.note(&format!(
                "the URL holds the password of `{}`; paste it where only you can read it",
                c.source
                    .file(crate::profile::files::KEYSTORE_PASSWORD)
                    .display()
            ));
            url
        }
        None => {
            printer.note(&format!(
                "through the tunnel's local endpoint: no password and no SSL settings (the \
                 tunnel logs in with the certificate; start it with `shiqi-connect tunnel up {}`)",
                c.source.name
            ));
            Secret::new(jdbc::plain_url(
                c.driver,
                c.source.port,
                &c.source.name,
                c.profile.endpoint_options.allow_local_infile,
            ))
        }
    };
    if global.json {
        let j = Json {
            driver: c.driver.to_string(),
            driver_class: c.driver.class(),
            verify: c.verify.map(|v| v.to_string()),
            url: url.expose(),
        };
        let mut text = serde_json::to_string_pretty(&j).unwrap_or_default();
        text.push('\n');
        print_stdout(&text)?;
    } else {
        print_stdout(&format!("{}\n", url.expose()))?;
    }
    Ok(ExitCode::SUCCESS)
}
