//! `tunnel up --at-login` and `tunnel down --at-login`: the login item that starts a profile's
//! tunnel when its user logs in ([`crate::os::login_item`] says how on each system), written
//! through `fsutil` like every file of ours.

use std::path::Path;

use shiqi_ca::ProfileName;

use crate::error::{Error, TunnelError};
use crate::os::login_item::{self, Item, Launch};

use super::{Paths, process};

/// Writes the item for the profile (replacing one that was there) and tells the system's
/// manager; it starts the tunnel at the next login.
///
/// # Errors
/// [`TunnelError::AtLoginPath`] for a path the item cannot hold, [`Error::Io`] when it cannot be
/// written.
pub(crate) fn install(
    paths: &Paths,
    root: &Path,
    home: &Path,
    name: &ProfileName,
) -> Result<Item, Error> {
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        action: "find this program's own path in",
        path: std::env::args_os()
            .next()
            .map(std::path::PathBuf::from)
            .unwrap_or_default(),
        source,
    })?;
    for path in [&exe, &paths.log, &root.to_path_buf()] {
        login_item::check_path(path).map_err(|why| {
            Error::Tunnel(TunnelError::AtLoginPath {
                path: path.clone(),
                why,
            })
        })?;
    }
    let launch = Launch {
        exe: &exe,
        name: name.as_str(),
        log: &paths.log,
        args: process::daemon_args(root, name, 0),
    };
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    };
    if let (Some(file), Some(text)) = (
        login_item::file(home, name.as_str()),
        login_item::text(&launch),
    ) {
        if let Some(dir) = file.parent() {
            crate::fsutil::create_dir_all(dir)?;
        }
        crate::fsutil::write_shared(&file, text.as_bytes())?;
        return login_item::enable(&launch, home).map_err(io("enable", &file));
    }
    login_item::enable(&launch, home).map_err(io("add the Run entry for", &exe))
}

/// Removes the profile's item: where it was, or `None` when there was none.
///
/// # Errors
/// [`Error::Io`] when it is there and cannot be removed.
pub(crate) fn remove(home: &Path, name: &ProfileName) -> Result<Option<String>, Error> {
    let file = login_item::file(home, name.as_str());
    let io = |action: &'static str| {
        let path = file.clone().unwrap_or_default();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    };
    let was = login_item::disable(name.as_str(), home).map_err(io("disable"))?;
    if let Some(file) = &file {
        match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io("remove")(e)),
            _ => {}
        }
    }
    Ok(was)
}

/// The profile's item, when one is installed.
pub(crate) fn installed(home: &Path, name: &ProfileName) -> Option<Item> {
    login_item::installed(name.as_str(), home)
}
