//! A profile folder: finding, reading, locking and rendering it, the tunnel it plans, and renewing
//! its certificate.

use std::path::PathBuf;

/// A profile and its certificate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// Another run holds the name's lock.
    #[error("another shiqi-connect is working on profile `{name}` right now")]
    Busy {
        /// The profile.
        name: String,
    },

    /// A profile of this name exists and `--force` was not given.
    #[error("profile `{name}` already exists at `{}`; keeping it", path.display())]
    Exists {
        /// The profile name.
        name: String,
        /// Its folder.
        path: PathBuf,
    },

    /// `profile.json` cannot be read.
    #[error("cannot read profile `{}`: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },

    /// `$SHIQI_HOME` holds no profile (tunnel).
    #[error("no profile in `{}`", root.display())]
    NoProfiles {
        /// `$SHIQI_HOME`.
        root: PathBuf,
    },

    /// No NAME given and `$SHIQI_HOME` holds several profiles.
    #[error("`{}` holds several profiles ({}); which one?", root.display(), names.join(", "))]
    WhichProfile {
        /// `$SHIQI_HOME`.
        root: PathBuf,
        /// The profile names found.
        names: Vec<String>,
        /// The subcommand that asked (`tunnel up`, `doctor`, …), for the hint.
        command: &'static str,
    },

    /// The named profile does not exist (tunnel).
    #[error("no profile `{name}` at `{}`", path.display())]
    NoSuchProfile {
        /// The name given.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },

    /// Two brokers advertise the same port: one local forward cannot serve both.
    #[error(
        "{first} and {second} both use port {port} (`{first_host}:{port}`, \
         `{second_host}:{port}`): one local port cannot forward to two servers"
    )]
    DuplicatePort {
        /// The clashing port.
        port: u16,
        /// The first user of the port (`broker 1`, `MySQL`).
        first: String,
        /// Its advertised host.
        first_host: String,
        /// The second user.
        second: String,
        /// Its advertised host.
        second_host: String,
    },

    /// A template failed to render (a bug in a template, not in the input).
    #[error("cannot render `{template}`")]
    Template {
        /// The template file name.
        template: &'static str,
        /// What minijinja said.
        #[source]
        source: minijinja::Error,
    },

    /// A value the laptop supplies that could break a config file line.
    #[error("refusing to write {field} `{value}` into a config file: {why}")]
    UnsafeValue {
        /// Which value.
        field: &'static str,
        /// The value, escaped and cut.
        value: String,
        /// Which rule it breaks.
        why: &'static str,
    },

    /// A renewal did not ask for a certificate: the servers do not answer with the current one
    /// either, so a new one could not be proven (and would only be signed and revoked).
    #[error("not renewing the certificate of `{name}` yet: {why}")]
    RenewalWaits {
        /// The profile.
        name: String,
        /// Which service refused the current certificate, or that none answered.
        why: String,
    },

    /// Renewals signed as many certificates as they may without one logging in.
    #[error(
        "stopped renewing the certificate of `{name}`: {signed} certificates were signed for it \
         and none logged in"
    )]
    RenewalStopped {
        /// The profile.
        name: String,
        /// How many were signed (and revoked again).
        signed: u32,
    },

    /// A service refused the certificate `rotate` just obtained; the old profile is untouched.
    #[error("{service} refused the new certificate `{serial}`: {why}")]
    NewCertRefused {
        /// Which service.
        service: String,
        /// What it said.
        why: String,
        /// The new certificate's serial.
        serial: String,
        /// Whether the new certificate was revoked again.
        revoked_new: bool,
    },
}

impl ProfileError {
    /// One next step for the user (see [`super::Error::hint`]).
    pub(crate) fn hint(&self) -> Option<String> {
        Some(match self {
            Self::UnsafeValue { .. } => "use a plain value: check `--server`, the server's entry in ~/.ssh/config, and the path of SHIQI_HOME"
                .to_owned(),
            Self::DuplicatePort { .. } => "use the local endpoint, which works whatever the \
                brokers advertise: `--endpoint local` (setup) or `shiqi-connect tunnel up NAME \
                --endpoint local`"
                .to_owned(),
            Self::Template { .. } => "this is a bug in shiqi-connect's templates".to_owned(),
            Self::RenewalWaits { name, .. } => format!(
                "nothing was signed; `shiqi-connect doctor {name}` names what the server refuses, \
                 and the renewal is tried again by itself (or `shiqi-connect renew {name}`)"
            ),
            Self::RenewalStopped { name, .. } => format!(
                "the current certificate stays valid until it expires; fix what the server \
                 refuses (`shiqi-connect doctor {name}`), then run `shiqi-connect rotate {name}`"
            ),
            Self::Busy { .. } => "wait for it to finish (setup, rotate or renew), then run this again".to_owned(),
            Self::Exists { name, .. } => {
                format!(
                    "pass `--force` to replace it, or pick another name than `{name}`; to renew \
                     its certificate: `shiqi-connect renew {name}`"
                )
            }
            Self::Read { .. } => {
                "rebuild it with `shiqi-connect setup NAME --force`".to_owned()
            }
            Self::NoProfiles { .. } => {
                "create one with `shiqi-connect setup NAME --server DEST`, or point `--home` \
                 (env `SHIQI_HOME`) at the folder that holds it"
                    .to_owned()
            }
            Self::WhichProfile { names, command, .. } => format!(
                "name it, e.g. `shiqi-connect {command} {}`",
                names.first().map_or("NAME", String::as_str)
            ),
            Self::NoSuchProfile { name, .. } => format!(
                "create it with `shiqi-connect setup {name} --server DEST`, or point `--home` \
                 (env `SHIQI_HOME`) at the folder that holds it"
            ),
            Self::NewCertRefused { revoked_new, serial, .. } => format!(
                "the profile still holds the old certificate{}; run `shiqi-connect doctor` to see \
                 why the server refuses certificates, or ask its admin",
                if *revoked_new {
                    String::new()
                } else {
                    format!(" (revoke the unused `{serial}` on the server)")
                }
            ),

        })
    }
}
