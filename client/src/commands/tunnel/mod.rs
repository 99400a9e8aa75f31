//! `shiqi-connect tunnel up|down|status [NAME]`, and the hidden `tunnel run NAME` that `up`
//! starts in the background. Settles the profile first (NAME may be left out when there is only
//! one), then runs the `tunnel` modules and shows what they found: progress on stderr, the
//! forwards (or `--json`) on stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use shiqi_ca::ProfileName;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::{GlobalArgs, TunnelAction, TunnelArgs};
use crate::error::Error;
use crate::printer::Printer;
use crate::profile::{ForwardRecord, Roots, tilde};
use crate::tunnel::Paths;

/// Everything a tunnel command needs, settled before anything runs.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The profile.
    pub(crate) name: ProfileName,
    /// `$SHIQI_HOME` (default `~/.shiqi`), absolute.
    pub(crate) root: PathBuf,
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// The profile's tunnel files.
    pub(crate) paths: Paths,
    /// `--json`.
    pub(crate) json: bool,
    /// `-v` count, passed on to the background process.
    pub(crate) verbose: u8,
}

impl Settings {
    /// Settles the profile: the one named, or the only one under `$SHIQI_HOME`. `command` names
    /// the verb for the hint when several profiles could be meant.
    ///
    /// # Errors
    /// As [`Roots::pick`], or [`InputError::NoHome`](crate::error::InputError::NoHome).
    pub(crate) fn resolve(
        name: Option<&str>,
        command: &'static str,
        global: &GlobalArgs,
    ) -> Result<Self, Error> {
        let roots = Roots::resolve(global.shiqi_home.as_deref())?;
        let name = roots.pick(name, command)?;
        Ok(Self {
            paths: Paths::new(&roots.root, &name),
            name,
            root: roots.root,
            home: roots.home,
            json: global.json,
            verbose: global.verbose,
        })
    }

    fn show(&self, p: &Path) -> String {
        tilde(p, &self.home)
    }
}

mod at_login;
mod background;
mod down;
mod status;
mod up;
mod watch;

use background::run_daemon;
pub(crate) use down::down;
pub(crate) use status::status;
pub(crate) use up::up;
pub(crate) use watch::watch;

/// Runs one tunnel verb.
///
/// # Errors
/// The failing step's error, with context.
pub(crate) async fn run(
    args: &TunnelArgs,
    global: &GlobalArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    match &args.action {
        TunnelAction::Up(a) => {
            let s = Settings::resolve(a.name.as_deref(), "tunnel up", global)?;
            let code = up(&s, a.openssh, a.check_every, &a.endpoint, printer).await?;
            if a.at_login {
                at_login::install(&s, printer)?;
            }
            Ok(code)
        }
        TunnelAction::Down(a) => {
            let s = Settings::resolve(a.name.as_deref(), "tunnel down", global)?;
            if a.at_login {
                at_login::remove(&s, printer)?;
            }
            down(&s, printer).await
        }
        TunnelAction::Status(a) => {
            let s = Settings::resolve(a.name.as_deref(), "tunnel status", global)?;
            if a.watch {
                watch(&s, a.count).await
            } else {
                status(&s).await
            }
        }
        TunnelAction::Run(a) => {
            let s = Settings::resolve(a.name.as_deref(), "tunnel run", global)?;
            run_daemon(&s, std::time::Duration::from_secs(a.check_every)).await
        }
    }
}

/// `127.0.0.1:P -> host:port`.
pub(super) fn arrow(f: &ForwardRecord) -> String {
    let target = shiqi_ca::HostPort {
        host: f.remote_host.clone(),
        port: f.remote_port,
    };
    format!("127.0.0.1:{} -> {target}", f.local_port)
}

/// A time as RFC 3339, for `--json`.
pub(super) fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| t.to_string())
}
