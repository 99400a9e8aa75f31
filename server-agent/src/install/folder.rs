//! Root's file changes, made through folder handles that never follow a link.
//!
//! install runs as root among folders other accounts own: the brokers' config folder, MariaDB's
//! TLS folder, the agent's own state. A path that is checked and then used by name can be
//! swapped in between (a link to `/etc` planted where a folder was, a dangling link where a
//! backup will be written), and root then writes or chowns whatever that account chose. So a
//! [`Folder`] is opened component by component from `/` with `O_NOFOLLOW`, each folder on the
//! way must be changeable only by root or by the accounts the step names ([`Trust`]), and every
//! read, write, rename, chown and chmod below it is made relative to that handle or on the
//! opened file itself. POSIX ACLs are not read: a folder whose ACL lets another account write
//! is the admin's to notice.

use std::ffi::OsStr;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

use crate::error::AgentError;

/// Who besides root may change a folder that a step reads or writes in: the accounts it acts
/// for (the agent's, the brokers', MariaDB's), each with its primary group.
#[derive(Clone, Debug, Default)]
pub(super) struct Trust {
    /// (name, uid, gid) of each trusted account.
    accounts: Vec<(String, u32, u32)>,
}

impl Trust {
    /// Root alone.
    pub(super) fn root() -> Self {
        Self::default()
    }

    /// Root and `name` (whose uid and gid are `ids`).
    pub(super) fn and(mut self, name: &str, ids: (u32, u32)) -> Self {
        self.accounts.push((name.to_owned(), ids.0, ids.1));
        self
    }

    /// Whether `uid` is root or a trusted account.
    pub(super) fn owner(&self, uid: u32) -> bool {
        self.uid(uid)
    }

    fn uid(&self, uid: u32) -> bool {
        uid == 0 || self.accounts.iter().any(|a| a.1 == uid)
    }

    fn gid(&self, gid: u32) -> bool {
        gid == 0 || self.accounts.iter().any(|a| a.2 == gid)
    }

    /// The accounts named, for messages: "root" or "root and `kafka`".
    fn names(&self) -> String {
        let mut out = "root".to_owned();
        for (name, ..) in &self.accounts {
            out.push_str(&format!(" and `{name}`"));
        }
        out
    }
}

/// An open folder that only trusted accounts can change.
pub(super) struct Folder {
    fd: OwnedFd,
    path: PathBuf,
}

/// The account name of `uid`, or the number.
pub(super) fn user(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {uid}"), |u| format!("`{}`", u.name))
}

fn group(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or_else(|| format!("gid {gid}"), |g| format!("`{}`", g.name))
}

/// Who other than `trust` can change the folder `st`, if anyone: its owner (who can always
/// chmod it), its group when group-writable, everyone when world-writable. A sticky folder
/// owned by a trusted account (`/tmp`) is fine to pass through: others cannot rename or remove
/// what they do not own there, and what lies below is checked in turn.
fn untrusted_writer(st: &Stat, trust: &Trust, pass_through: bool) -> Option<String> {
    let mode = st.st_mode;
    if !trust.uid(st.st_uid) {
        return Some(format!("owned by {}", user(st.st_uid)));
    }
    let sticky = mode & 0o1000 != 0;
    if pass_through && sticky {
        return None;
    }
    if mode & 0o002 != 0 {
        return Some("writable by every account".to_owned());
    }
    if mode & 0o020 != 0 && !trust.gid(st.st_gid) {
        return Some(format!("writable by the group {}", group(st.st_gid)));
    }
    None
}

fn io_error(path: &Path) -> impl FnOnce(rustix::io::Errno) -> AgentError + '_ {
    move |e| AgentError::File {
        path: path.to_owned(),
        why: e.into(),
    }
}

/// The refusal for a path root must not touch.
fn refuse(path: &Path, what: String, trust: &Trust) -> AgentError {
    AgentError::Planted {
        path: path.to_owned(),
        why: what,
        fix: format!(
            "make it a real folder that only {} can change (no link; `chown root:` and `chmod \
             go-w` it), or name its account with --kafka-owner/--mysql-owner if it is that \
             service's; then run install again",
            trust.names()
        ),
    }
}

fn name_of(name: &str) -> Result<&OsStr, AgentError> {
    // One entry of this folder: never `..`, `/` or empty.
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(AgentError::Local {
            why: format!("`{name}` is not a file name"),
        });
    }
    Ok(OsStr::new(name))
}

const FILE_FIX: &str = "put a regular file with one link there (not a symbolic or hard link), \
                        then run install again";

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

impl Folder {
    /// Opens the absolute folder `path`, refusing a link or a folder on the way that an account
    /// outside `trust` can change.
    pub(super) fn open(path: &Path, trust: &Trust) -> Result<Self, AgentError> {
        Self::walk(path, trust, None)
    }

    /// As [`Folder::open`], creating the missing folders on the way (root's: 0755, the last
    /// 0700).
    pub(super) fn open_or_create(path: &Path, trust: &Trust) -> Result<Self, AgentError> {
        Self::walk(path, trust, Some(0o700))
    }

    fn walk(path: &Path, trust: &Trust, create: Option<u32>) -> Result<Self, AgentError> {
        if !path.is_absolute() {
            return Err(AgentError::Local {
                why: format!("{}: give an absolute path", path.display()),
            });
        }
        let mut at = PathBuf::from("/");
        let mut fd = rustix::fs::open("/", DIR_FLAGS, Mode::empty()).map_err(io_error(&at))?;
        let parts: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(p) => Some(Ok(p)),
                Component::RootDir | Component::CurDir => None,
                Component::ParentDir | Component::Prefix(_) => Some(Err(())),
            })
            .collect::<Result<_, _>>()
            .map_err(|()| AgentError::Local {
                why: format!("{}: give a path without `..`", path.display()),
            })?;
        for (n, part) in parts.iter().enumerate() {
            let last = n + 1 == parts.len();
            let st = rustix::fs::fstat(&fd).map_err(io_error(&at))?;
            if let Some(who) = untrusted_writer(&st, trust, true) {
                return Err(refuse(&at, who, trust));
            }
            at.push(part);
            let opened = rustix::fs::openat(&fd, *part, DIR_FLAGS, Mode::empty());
            fd = match opened {
                Ok(next) => next,
                Err(rustix::io::Errno::NOENT) if create.is_some() => {
                    // The folders on the way are for passing through; the last is private.
                    let mode = if last { create.unwrap_or(0o700) } else { 0o755 };
                    rustix::fs::mkdirat(&fd, *part, Mode::from_raw_mode(mode))
                        .map_err(io_error(&at))?;
                    rustix::fs::openat(&fd, *part, DIR_FLAGS, Mode::empty())
                        .map_err(io_error(&at))?
                }
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                    let what = match rustix::fs::statat(&fd, *part, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(s) if FileType::from_raw_mode(s.st_mode) == FileType::Symlink => {
                            format!("a symbolic link (owned by {})", user(s.st_uid))
                        }
                        _ => "not a folder".to_owned(),
                    };
                    return Err(refuse(&at, what, trust));
                }
                Err(e) => return Err(io_error(&at)(e)),
            };
            if last {
                let st = rustix::fs::fstat(&fd).map_err(io_error(&at))?;
                if let Some(who) = untrusted_writer(&st, trust, false) {
                    return Err(refuse(&at, who, trust));
                }
            }
        }
        Ok(Self { fd, path: at })
    }

    /// The path of `name` in it, for messages.
    pub(super) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Its owner, group and mode.
    pub(super) fn stat(&self) -> Result<Stat, AgentError> {
        rustix::fs::fstat(&self.fd).map_err(io_error(&self.path))
    }

    /// Sets its own mode and owner (on the handle: whatever the path now names).
    pub(super) fn set(
        &self,
        mode: Option<u32>,
        owner: Option<(u32, u32)>,
    ) -> Result<(), AgentError> {
        if let Some((uid, gid)) = owner {
            rustix::fs::fchown(
                &self.fd,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(io_error(&self.path))?;
        }
        if let Some(mode) = mode {
            rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(mode))
                .map_err(io_error(&self.path))?;
        }
        Ok(())
    }

    /// The folder `name` in it, under the same rule.
    pub(super) fn sub(&self, name: &str, trust: &Trust) -> Result<Self, AgentError> {
        let path = self.join(name);
        let fd = match rustix::fs::openat(&self.fd, name_of(name)?, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                return Err(refuse(
                    &path,
                    "a symbolic link or not a folder".into(),
                    trust,
                ));
            }
            Err(e) => return Err(io_error(&path)(e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(io_error(&path))?;
        if let Some(who) = untrusted_writer(&st, trust, false) {
            return Err(refuse(&path, who, trust));
        }
        Ok(Self { fd, path })
    }

    /// Makes the folder `name` (mode 0700, root's): false if something is already there.
    pub(super) fn mkdir(&self, name: &str) -> Result<bool, AgentError> {
        match rustix::fs::mkdirat(&self.fd, name_of(name)?, Mode::from_raw_mode(0o700)) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(e) => Err(io_error(&self.join(name))(e)),
        }
    }

    /// What `name` is, without following it; `None` when missing.
    pub(super) fn entry(&self, name: &str) -> Result<Option<Stat>, AgentError> {
        match rustix::fs::statat(&self.fd, name_of(name)?, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(io_error(&self.join(name))(e)),
        }
    }

    /// Opens the regular file `name` without following a link, refusing one with more than one
    /// link (a hard link to `/etc/shadow` would hand its bytes or its owner to the folder's
    /// owner); `None` when missing.
    fn open_file(&self, name: &str, flags: OFlags) -> Result<Option<(OwnedFd, Stat)>, AgentError> {
        let path = self.join(name);
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = match rustix::fs::openat(&self.fd, name_of(name)?, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => {
                return Err(AgentError::Planted {
                    path,
                    why: "a symbolic link".into(),
                    fix: FILE_FIX.into(),
                });
            }
            Err(e) => return Err(io_error(&path)(e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(io_error(&path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(AgentError::Planted {
                path,
                why: "not a regular file".into(),
                fix: FILE_FIX.into(),
            });
        }
        if st.st_nlink != 1 {
            return Err(AgentError::Planted {
                path,
                why: format!("a file with {} hard links", st.st_nlink),
                fix: FILE_FIX.into(),
            });
        }
        Ok(Some((fd, st)))
    }

    /// The bytes and status of the regular file `name` (at most `max` bytes); `None` when
    /// missing.
    pub(super) fn read(&self, name: &str, max: u64) -> Result<Option<(Vec<u8>, Stat)>, AgentError> {
        let Some((fd, st)) = self.open_file(name, OFlags::RDONLY)? else {
            return Ok(None);
        };
        let path = self.join(name);
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|why| AgentError::File {
                path: path.clone(),
                why,
            })?;
        if bytes.len() as u64 > max {
            return Err(AgentError::Local {
                why: format!("{} is larger than {max} bytes", path.display()),
            });
        }
        Ok(Some((bytes, st)))
    }

    /// Creates `name` with `bytes` unless something (a file, a link, anything) is there;
    /// returns whether it did. The file is made with `O_EXCL`, so a planted link is never
    /// followed.
    pub(super) fn create_new(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<bool, AgentError> {
        let path = self.join(name);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            match rustix::fs::openat(&self.fd, name_of(name)?, flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::EXIST) => return Ok(false),
                Err(e) => return Err(io_error(&path)(e)),
            };
        if let Err(e) = fill(fd, bytes, mode, owner, &path) {
            let _ = rustix::fs::unlinkat(&self.fd, name_of(name)?, AtFlags::empty());
            return Err(e);
        }
        Ok(true)
    }

    /// Replaces `name` with `bytes` (mode, owner set before it appears): written to a fresh
    /// temporary name in this folder, fsynced, renamed over. A reader never sees half a file.
    pub(super) fn write(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(), AgentError> {
        let target = name_of(name)?;
        let path = self.join(name);
        let mut tries = 0;
        let (tmp, fd) = loop {
            let tmp = format!(".{name}.shiqi-{:016x}", rand_u64());
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rustix::fs::openat(&self.fd, tmp.as_str(), flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => break (tmp, fd),
                Err(rustix::io::Errno::EXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(io_error(&path)(e)),
            }
        };
        let done = fill(fd, bytes, mode, owner, &path).and_then(|()| {
            rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, target).map_err(io_error(&path))
        });
        if done.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
        }
        done
    }

    /// Removes the file or link `name` (never what a link points at); missing is fine.
    pub(super) fn remove(&self, name: &str) -> Result<(), AgentError> {
        match rustix::fs::unlinkat(&self.fd, name_of(name)?, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(io_error(&self.join(name))(e)),
        }
    }

    /// Renames `from` to `to` within this folder.
    pub(super) fn rename(&self, from: &str, to: &str) -> Result<(), AgentError> {
        rustix::fs::renameat(&self.fd, name_of(from)?, &self.fd, name_of(to)?)
            .map_err(io_error(&self.join(from)))
    }

    /// Removes the folder `name` and everything in it, through handles: a link inside is
    /// removed, never followed. Missing is fine.
    pub(super) fn remove_tree(&self, name: &str) -> Result<(), AgentError> {
        let path = self.join(name);
        let Some(st) = self.entry(name)? else {
            return Ok(());
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return self.remove(name);
        }
        let sub = match rustix::fs::openat(&self.fd, name_of(name)?, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Self {
                fd,
                path: path.clone(),
            },
            Err(e) => return Err(io_error(&path)(e)),
        };
        for entry in sub.names()? {
            sub.remove_tree(&entry)?;
        }
        match rustix::fs::unlinkat(&self.fd, name_of(name)?, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(io_error(&path)(e)),
        }
    }

    /// The names in this folder (not `.` or `..`).
    pub(super) fn names(&self) -> Result<Vec<String>, AgentError> {
        let dup = rustix::io::dup(&self.fd).map_err(io_error(&self.path))?;
        let mut dir = rustix::fs::Dir::new(dup).map_err(io_error(&self.path))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(io_error(&self.path))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            // Names that are not UTF-8 are not ours: they are left alone.
            if let Ok(name) = std::str::from_utf8(name) {
                out.push(name.to_owned());
            }
        }
        Ok(out)
    }

    /// Hands each regular, singly linked file owned by `from` in this folder to `to`, then the
    /// folder itself: what the agent's account wrote there becomes the service's. Links,
    /// folders and files another account owns are left alone.
    pub(super) fn hand_over(&self, from: u32, to: (u32, u32)) -> Result<(), AgentError> {
        for name in self.names()? {
            let Some(st) = self.entry(&name)? else {
                continue;
            };
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
                || st.st_uid != from
                || st.st_nlink != 1
            {
                continue;
            }
            // Opened (never followed) and checked again on the handle: the entry may have been
            // swapped since the look above.
            let Some((fd, st)) = self.open_file(&name, OFlags::RDONLY)? else {
                continue;
            };
            if st.st_uid != from {
                continue;
            }
            rustix::fs::fchown(
                &fd,
                Some(rustix::fs::Uid::from_raw(to.0)),
                Some(rustix::fs::Gid::from_raw(to.1)),
            )
            .map_err(io_error(&self.join(&name)))?;
        }
        self.set(None, Some(to))
    }
}

/// Sets mode and owner on the new file `fd`, then writes and syncs `bytes`.
fn fill(
    fd: OwnedFd,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    path: &Path,
) -> Result<(), AgentError> {
    if let Some((uid, gid)) = owner {
        rustix::fs::fchown(
            fd.as_fd(),
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )
        .map_err(io_error(path))?;
    }
    rustix::fs::fchmod(fd.as_fd(), Mode::from_raw_mode(mode)).map_err(io_error(path))?;
    let mut file = std::fs::File::from(fd);
    let failed = |why| AgentError::File {
        path: path.to_owned(),
        why,
    };
    file.write_all(bytes).map_err(failed)?;
    file.sync_all().map_err(failed)
}

/// A name for a temporary file nobody can guess ahead (only O_EXCL makes it safe; this keeps
/// collisions rare).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// The name of the last component of `path` as `&str`, for [`Folder`] calls.
pub(super) fn file_name(path: &Path) -> Result<&str, AgentError> {
    path.file_name()
        .and_then(|n| std::str::from_utf8(n.as_bytes()).ok())
        .ok_or_else(|| AgentError::Local {
            why: format!(
                "{}: give a path that ends in a UTF-8 file name",
                path.display()
            ),
        })
}

/// The folder of `path` and its last component.
pub(super) fn split(path: &Path) -> Result<(&Path, &str), AgentError> {
    let dir = path.parent().ok_or_else(|| AgentError::Local {
        why: format!("{}: give a path inside a folder", path.display()),
    })?;
    Ok((dir, file_name(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    fn trust_me() -> Trust {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        Trust::root().and("me", (uid, gid))
    }

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        dir
    }

    #[test]
    fn a_planted_link_is_never_followed_by_create_new_or_write() {
        let dir = private_dir();
        let victim = dir.path().join("victim");
        crate::fsutil::write_private(&victim, b"kept\n").expect("write");
        std::os::unix::fs::symlink(&victim, dir.path().join("backup")).expect("symlink");
        std::os::unix::fs::symlink(dir.path().join("dangling"), dir.path().join("new"))
            .expect("symlink");
        let folder = Folder::open(dir.path(), &trust_me()).expect("open");
        assert!(
            !folder
                .create_new("backup", b"evil", 0o600, None)
                .expect("create")
        );
        assert!(
            !folder
                .create_new("new", b"evil", 0o600, None)
                .expect("create")
        );
        assert!(
            !dir.path().join("dangling").exists(),
            "a dangling link was followed"
        );
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "kept\n");
        // write replaces the link itself, never its target.
        folder.write("backup", b"mine", 0o640, None).expect("write");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "kept\n");
        let meta = std::fs::symlink_metadata(dir.path().join("backup")).expect("stat");
        assert!(meta.is_file() && meta.mode() & 0o777 == 0o640, "{meta:?}");
        // No temporary file is left behind.
        let left: Vec<_> = folder
            .names()
            .expect("names")
            .into_iter()
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn reads_refuse_links_and_files_with_more_than_one_link() {
        let dir = private_dir();
        crate::fsutil::write_private(&dir.path().join("f"), b"x").expect("write");
        std::fs::hard_link(dir.path().join("f"), dir.path().join("g")).expect("link");
        std::os::unix::fs::symlink("f", dir.path().join("l")).expect("symlink");
        let folder = Folder::open(dir.path(), &trust_me()).expect("open");
        for name in ["f", "g", "l"] {
            let e = folder.read(name, 100).expect_err(name).to_string();
            assert!(e.contains(name), "{e}");
        }
        assert!(
            folder
                .read("missing", 100)
                .expect("missing is fine")
                .is_none()
        );
        std::fs::remove_file(dir.path().join("g")).expect("rm");
        assert_eq!(
            folder.read("f", 100).expect("read").expect("present").0,
            b"x"
        );
    }

    #[test]
    fn a_link_or_a_folder_others_can_write_on_the_way_is_refused() {
        let dir = private_dir();
        std::fs::create_dir(dir.path().join("real")).expect("mkdir");
        std::os::unix::fs::symlink("real", dir.path().join("link")).expect("symlink");
        let e = Folder::open(&dir.path().join("link/x"), &trust_me())
            .err()
            .expect("refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let open = dir.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = Folder::open(&open, &trust_me()).err().expect("refused");
        assert!(e.to_string().contains("writable by every account"), "{e}");
        // Sticky and owned by a trusted account (as /tmp is root's): passed through, not
        // written in.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        std::fs::create_dir(open.join("inner")).expect("mkdir");
        std::fs::set_permissions(open.join("inner"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        assert!(Folder::open(&open.join("inner"), &trust_me()).is_ok());
        assert!(Folder::open(&open, &trust_me()).is_err());
        // `..` is refused before anything is opened.
        assert!(Folder::open(&dir.path().join("real/../real"), &trust_me()).is_err());
    }

    #[test]
    fn hand_over_skips_links_and_remove_tree_never_follows_one() {
        let dir = private_dir();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        crate::fsutil::write_private(&outside.join("keep"), b"k").expect("write");
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).expect("mkdir");
        crate::fsutil::write_private(&tree.join("sub/f"), b"f").expect("write");
        std::os::unix::fs::symlink(&outside, tree.join("out")).expect("symlink");
        let top = Folder::open(dir.path(), &trust_me()).expect("open");
        let me = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        top.sub("tree", &trust_me())
            .expect("sub")
            .hand_over(me, (me, gid))
            .expect("hand over");
        top.remove_tree("tree").expect("remove");
        assert!(!tree.exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).expect("kept"),
            "k"
        );
    }
}
