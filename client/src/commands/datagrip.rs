//! `shiqi-connect datagrip [NAME] [--project DIR [--open]]`: DataGrip's data source for the
//! profile's MySQL. Without `--project`, the clipboard block on stdout; with it, the data source
//! merged into `DIR/.idea/` (the written paths on stdout) and, with `--open`, DataGrip started
//! on DIR. The launcher is looked for before anything is written.

use std::process::ExitCode;

use serde::Serialize;

use crate::cli::{DatagripArgs, GlobalArgs};
use crate::commands::{MysqlClient, print_stdout};
use crate::datagrip::{self, DataSource, Tls, launch, project};
use crate::error::{DataGripError, Error};
use crate::mysql_source::Paths;
use crate::printer::Printer;

/// `--json` output.
#[derive(Serialize)]
struct Json<'a> {
    name: &'a str,
    uuid: &'a str,
    driver: String,
    /// `null` through the local endpoint (the data source has no SSL settings).
    verify: Option<String>,
    jdbc_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    clipboard: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    files: Vec<String>,
}

/// Runs `datagrip`.
///
/// # Errors
/// No profile, no MySQL in it, a project file that cannot be merged into, no launcher for
/// `--open`.
pub(crate) fn run(
    args: &DatagripArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let c = MysqlClient::settle(&args.source, global, "datagrip", printer)?;
    let paths = Paths::of(&c.source.dir);
    let name = &c.source.name;
    let ds = DataSource {
        uuid: datagrip::uuid_for(name, &c.profile.server.host, c.profile.server.port),
        name: datagrip::display_name(name),
        driver: c.driver,
        port: c.source.port,
        user: name.clone(),
        tls: c.verify.map(|verification| Tls {
            verification,
            ca_crt: paths.ca_crt,
            client_crt: paths.client_crt,
            client_key: paths.client_key,
        }),
        tunnel_up: format!("shiqi-connect tunnel up {name}"),
        allow_local_infile: c.profile.endpoint_options.allow_local_infile,
    };
    let Some(dir) = &args.project else {
        let clipboard = ds.clipboard();
        if global.json {
            return json(&ds, Some(clipboard), Vec::new());
        }
        print_stdout(&clipboard)?;
        printer.note(
            "copy it, then in DataGrip: Database Explorer → + → Import from Clipboard; start \
             the tunnel before connecting",
        );
        return Ok(ExitCode::SUCCESS);
    };
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
    // Settled before writing: `--open` without a launcher changes nothing.
    let launcher = if args.open {
        let path = std::env::var_os("PATH");
        Some(launch::find(path.as_deref()).ok_or_else(|| {
            Error::DataGrip(DataGripError::NoLauncher {
                project: dir.clone(),
            })
        })?)
    } else {
        None
    };
    let written = project::write(&dir, &ds)?;
    let files: Vec<String> = written
        .files
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    printer.note(&format!(
        "{} data source `{}` in `{}`",
        if written.replaced {
            "replaced"
        } else {
            "added"
        },
        ds.name,
        dir.display()
    ));
    if let Some(launcher) = launcher {
        let pid = launch::open(&launcher, &dir)?;
        printer.note(&format!(
            "started `{} {}` (pid {pid})",
            launcher.display(),
            dir.display()
        ));
    }
    if global.json {
        return json(&ds, None, files);
    }
    print_stdout(&files.iter().map(|f| format!("{f}\n")).collect::<String>())?;
    Ok(ExitCode::SUCCESS)
}

fn json(
    ds: &DataSource,
    clipboard: Option<String>,
    files: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let j = Json {
        name: &ds.name,
        uuid: &ds.uuid,
        driver: ds.driver.to_string(),
        verify: ds.tls.as_ref().map(|t| t.verification.to_string()),
        jdbc_url: ds.jdbc_url(),
        clipboard,
        files,
    };
    let mut text = serde_json::to_string_pretty(&j).unwrap_or_default();
    text.push('\n');
    print_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::MysqlClientArgs;
    use crate::jdbc::{Driver, Verification};
    use crate::printer::ColorChoice;
    use crate::profile::{files, tests::sample};

    fn global(home: &std::path::Path) -> GlobalArgs {
        GlobalArgs {
            verbose: 0,
            quiet: true,
            yes: true,
            no_progress: true,
            json: false,
            color: ColorChoice::Never,
            shiqi_home: Some(home.to_path_buf()),
        }
    }

    #[test]
    fn writes_the_project_and_refuses_a_profile_without_mysql() {
        let home = tempfile::tempdir().expect("tempdir");
        let dir = home.path().join("saige");
        crate::fsutil::create_private_dir(&dir).expect("mkdir");
        let mut p = sample();
        p.write_fixture(&dir);
        let project = home.path().join("proj");
        let args = DatagripArgs {
            // Both given: nothing is probed.
            source: MysqlClientArgs {
                name: Some("saige".into()),
                driver: Some(Driver::Mariadb),
                verify: Some(Verification::Ca),
            },
            project: Some(project.clone()),
            open: false,
        };
        let printer = crate::commands::printer(&global(home.path()));
        run(&args, &global(home.path()), &printer).expect("runs");
        let shared = std::fs::read_to_string(project.join(".idea/dataSources.xml")).expect("xml");
        assert!(
            shared.contains("<driver-ref>mariadb</driver-ref>"),
            "{shared}"
        );
        let local =
            std::fs::read_to_string(project.join(".idea/dataSources.local.xml")).expect("xml");
        assert!(local.contains("<mode>VERIFY_CA</mode>"), "{local}");
        assert!(local.contains(&dir.join(files::CLIENT_KEY).display().to_string()));

        p.mysql = None;
        p.write_fixture(&dir);
        let e = run(&args, &global(home.path()), &printer).expect_err("no mysql");
        assert!(e.to_string().contains("has no MySQL"), "{e}");
    }
}
