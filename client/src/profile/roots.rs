//! Where profiles live: `$HOME`, `$SHIQI_HOME` (default `~/.shiqi`), and which profile a
//! command means when the user names one or none. Every command settles this here, once.

use std::path::{Path, PathBuf};

use shiqi_ca::ProfileName;

use crate::error::{Error, InputError, ProfileError};
use crate::profile::{dir, files};

/// The profile folder root and `$HOME`, settled once per command.
#[derive(Clone, Debug)]
pub(crate) struct Roots {
    /// `$SHIQI_HOME` (default `~/.shiqi`), absolute.
    pub(crate) root: PathBuf,
    /// The user's home folder.
    pub(crate) home: PathBuf,
}

impl Roots {
    /// From `--home` (env `SHIQI_HOME`), if given, and the user's home folder.
    ///
    /// # Errors
    /// [`InputError::NoHome`].
    pub(crate) fn resolve(shiqi_home: Option<&Path>) -> Result<Self, Error> {
        let home = crate::os::account::home().ok_or(Error::Input(InputError::NoHome))?;
        let root = shiqi_home.map_or_else(|| home.join(".shiqi"), Path::to_path_buf);
        let root = std::path::absolute(&root).unwrap_or(root);
        Ok(Self { root, home })
    }

    /// The folder of profile `name`.
    pub(crate) fn dir(&self, name: &ProfileName) -> PathBuf {
        dir(&self.root, name)
    }

    /// Whether `name` has a `profile.json` (staging folders and stray files are not profiles).
    pub(crate) fn has(&self, name: &ProfileName) -> bool {
        self.dir(name).join(files::PROFILE_JSON).is_file()
    }

    /// Every profile name under the root, sorted.
    pub(crate) fn profiles(&self) -> Vec<ProfileName> {
        let mut names: Vec<ProfileName> = std::fs::read_dir(&self.root)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<ProfileName>().ok())
                    .filter(|n| self.has(n))
                    .collect()
            })
            .unwrap_or_default();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        names
    }

    /// The profile `name`, or the only one under the root when no name is given. `command` is
    /// the subcommand asking (`tunnel up`, `doctor`, …), for the hint when the choice is open.
    ///
    /// # Errors
    /// [`ProfileError::NoProfiles`], [`ProfileError::WhichProfile`], [`ProfileError::NoSuchProfile`] or an invalid
    /// name.
    pub(crate) fn pick(
        &self,
        name: Option<&str>,
        command: &'static str,
    ) -> Result<ProfileName, Error> {
        if let Some(given) = name.map(str::trim).filter(|n| !n.is_empty()) {
            let name: ProfileName = given.parse().map_err(|source| Error::Ca {
                what: "use that profile name",
                source,
            })?;
            if !self.has(&name) {
                return Err(Error::Profile(ProfileError::NoSuchProfile {
                    path: self.dir(&name),
                    name: name.to_string(),
                }));
            }
            return Ok(name);
        }
        let mut names = self.profiles();
        match names.len() {
            0 => Err(Error::Profile(ProfileError::NoProfiles {
                root: self.root.clone(),
            })),
            1 => Ok(names.remove(0)),
            _ => Err(Error::Profile(ProfileError::WhichProfile {
                root: self.root.clone(),
                names: names.iter().map(ToString::to_string).collect(),
                command,
            })),
        }
    }
}

/// `path` with the home folder shown as `~`, for messages and commands a user retypes.
pub(crate) fn tilde(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".to_owned(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make_profile(root: &Path, name: &str) {
        let dir = root.join(name);
        crate::fsutil::create_private_dir(&dir).expect("mkdir");
        let mut p = crate::profile::tests::sample();
        p.name = name.parse().expect("name");
        p.write_fixture(&dir);
    }

    fn roots(root: &Path) -> Roots {
        Roots {
            root: root.to_path_buf(),
            home: PathBuf::from("/home/saige"),
        }
    }

    #[test]
    fn picks_the_only_profile_or_asks_for_a_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let r = roots(tmp.path());
        let e = r.pick(None, "tunnel up").expect_err("none");
        assert!(
            matches!(e, Error::Profile(ProfileError::NoProfiles { .. })),
            "{e}"
        );
        assert!(
            roots(&tmp.path().join("missing"))
                .pick(None, "tunnel up")
                .is_err()
        );

        make_profile(tmp.path(), "saige");
        // Staging folders and stray files are not profiles.
        crate::fsutil::create_private_dir(&tmp.path().join(".saige.tmp-x")).expect("mkdir");
        crate::fsutil::create_private_dir(&tmp.path().join("empty")).expect("mkdir");
        assert_eq!(r.pick(None, "tunnel up").expect("one").as_str(), "saige");
        assert_eq!(
            r.pick(Some("saige"), "tunnel up").expect("named").as_str(),
            "saige"
        );

        make_profile(tmp.path(), "bob");
        assert_eq!(r.profiles().len(), 2);
        let e = r.pick(None, "tunnel up").expect_err("two");
        assert_eq!(
            e.to_string(),
            format!(
                "`{}` holds several profiles (bob, saige); which one?",
                tmp.path().display()
            )
        );
        assert_eq!(
            e.hint().as_deref(),
            Some("name it, e.g. `shiqi-connect tunnel up bob`")
        );
        let e = r.pick(Some("carol"), "tunnel up").expect_err("missing");
        assert!(
            matches!(e, Error::Profile(ProfileError::NoSuchProfile { .. })),
            "{e}"
        );
        assert!(r.pick(Some("../etc"), "tunnel up").is_err());
    }

    #[test]
    fn the_hint_names_the_command_that_asked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        make_profile(tmp.path(), "saige");
        make_profile(tmp.path(), "bob");
        for command in ["doctor", "rotate", "tunnel status"] {
            let e = roots(tmp.path()).pick(None, command).expect_err("two");
            assert_eq!(
                e.hint(),
                Some(format!("name it, e.g. `shiqi-connect {command} bob`"))
            );
        }
    }

    #[test]
    fn shows_the_home_folder_as_a_tilde() {
        let home = Path::new("/home/saige");
        assert_eq!(tilde(home, home), "~");
        assert_eq!(tilde(&home.join(".shiqi/a"), home), "~/.shiqi/a");
        assert_eq!(tilde(Path::new("/etc/x"), home), "/etc/x");
    }
}
