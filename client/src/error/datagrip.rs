//! DataGrip and JDBC: a profile's MySQL as Java clients take it, DataGrip's project files and
//! launcher.

use std::path::PathBuf;

/// DataGrip and JDBC.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataGripError {
    /// The profile has no MySQL (the server reported none at setup): `jdbc`, `datagrip`.
    #[error("profile `{name}` has no MySQL: the server's agent reported none at setup")]
    NoMysql {
        /// The profile.
        name: String,
    },

    /// A value a JDBC driver cannot take in its URL.
    #[error(
        "{driver} cannot take `{field}` = `{value}` in a URL: it holds `&` or a control character, which ends the option"
    )]
    UrlValue {
        /// The driver's name.
        driver: &'static str,
        /// The option.
        field: &'static str,
        /// The value (`***` for a password).
        value: String,
    },

    /// A DataGrip project file that exists but cannot be merged into; nothing was written.
    #[error("cannot add the data source to `{}`: {why}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },

    /// `--open` found no DataGrip launcher on PATH.
    #[error("no DataGrip launcher (`datagrip` or `datagrip.sh`) on `PATH`")]
    NoLauncher {
        /// The project folder that was written.
        project: PathBuf,
    },

    /// A program could not be started.
    #[error("cannot start `{}`", program.display())]
    Launch {
        /// The program.
        program: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

impl DataGripError {
    /// One next step for the user (see [`super::Error::hint`]).
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            Self::NoMysql { name } => format!(
                "ask the server's admin to set `[mysql]` in the agent's `agent.toml`, then run \
                 `shiqi-connect setup {name} --server DEST --force`"
            ),
            Self::UrlValue { .. } => "use `--driver mysql` (Connector/J decodes `%26`), or keep \
                the profiles in a folder without `&` (`--home DIR`, env `SHIQI_HOME`)"
                .to_owned(),
            Self::File { .. } => "nothing was written; fix the file (DataGrip writes it \
                well-formed) or pass another `--project DIR`"
                .to_owned(),
            Self::NoLauncher { project } => format!(
                "nothing was written; put DataGrip's launcher on PATH (Toolbox: Settings → Tools \
                 → Shell scripts; or the tarball's `bin/datagrip.sh`), or leave out `--open` \
                 and open `{}` from DataGrip (File → Open)",
                project.display()
            ),
            Self::Launch { program, .. } => format!(
                "run `{} DIR` yourself to see why it fails",
                program.display()
            ),
        })
    }
}
