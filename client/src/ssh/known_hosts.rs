//! Host-key checking against known_hosts, as OpenSSH does it: known → go on; unknown → ask or
//! refuse; changed or revoked → refuse loudly. Reading the files and matching hosts is
//! [`hostfile`]'s. Never prompts: the command decides what to ask.

use std::path::{Path, PathBuf};

use russh::keys::ssh_key::{HashAlg, PublicKey};

use crate::error::Error;
use crate::ssh::hostfile::{self, Verdict};

/// What to do with a host key that is not in known_hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// Refuse it (the default; the caller may ask and retry with [`HostKeyPolicy::AcceptKey`]).
    Strict,
    /// Learn any new key into the user's known_hosts (`--accept-new-host-key`).
    AcceptNew,
    /// Learn this key only (the fingerprint the user confirmed); refuse any other.
    AcceptKey(String),
}

/// What the check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostKeyOutcome {
    /// The key is recorded in this file.
    Known(PathBuf),
    /// The key was new and has been added to this file.
    Learned(PathBuf),
}

impl HostKeyOutcome {
    /// The known_hosts file that now vouches for the server.
    pub fn file(&self) -> &Path {
        match self {
            Self::Known(p) | Self::Learned(p) => p,
        }
    }
}

/// `SHA256:…`, as `ssh-keygen -l` prints it.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// The known_hosts spelling of a host: `host` on port 22, `[host]:port` otherwise.
pub fn known_hosts_name(host: &str, port: u16) -> String {
    hostfile::host_name(host, port)
}

/// Reads a known_hosts file; a missing one is empty, as for ssh.
fn read(file: &Path) -> Result<String, Error> {
    match std::fs::read(file) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(Error::Io {
            action: "read",
            path: file.to_path_buf(),
            source,
        }),
    }
}

/// Checks `key` for `host:port` in `user_files` then `global_files`, learning it into the first
/// user file when `policy` allows. At least as strict as OpenSSH with `StrictHostKeyChecking`:
/// a `@revoked` line for the key wins over every file; a host known with any other key (of
/// any type) is *changed*, never learned; a host vouched for only by a `@cert-authority` line
/// is refused (this client does not check host certificates).
///
/// # Errors
/// [`Error::HostKeyRevoked`], [`Error::HostKeyChanged`], [`Error::HostCertAuthority`], or
/// [`Error::HostKeyUnknown`] when no file knows it and the policy does not accept it.
pub fn check(
    host: &str,
    port: u16,
    key: &PublicKey,
    user_files: &[PathBuf],
    global_files: &[PathBuf],
    policy: &HostKeyPolicy,
) -> Result<HostKeyOutcome, Error> {
    let fp = fingerprint(key);
    let algorithm = key.algorithm().to_string();
    let name = known_hosts_name(host, port);
    let mut verdicts = Vec::new();
    for file in user_files.iter().chain(global_files) {
        let text = read(file)?;
        verdicts.push((file, hostfile::verdict(&text, &name, key)));
    }
    if let Some((file, Verdict::Revoked { line })) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::Revoked { .. }))
    {
        return Err(Error::HostKeyRevoked {
            host: name,
            fingerprint: fp,
            known_hosts: (*file).clone(),
            line: *line,
        });
    }
    if let Some((file, _)) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::Known { .. }))
    {
        return Ok(HostKeyOutcome::Known((*file).clone()));
    }
    if let Some((file, Verdict::Changed { line })) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::Changed { .. }))
    {
        return Err(Error::HostKeyChanged {
            host: name,
            algorithm,
            fingerprint: fp,
            known_hosts: (*file).clone(),
            line: *line,
        });
    }
    if let Some((file, Verdict::CertAuthority { line })) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::CertAuthority { .. }))
    {
        return Err(Error::HostCertAuthority {
            host: name,
            known_hosts: (*file).clone(),
            line: *line,
        });
    }
    let learn_into = user_files
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("known_hosts"));
    let accept = match policy {
        HostKeyPolicy::Strict => false,
        HostKeyPolicy::AcceptNew => true,
        HostKeyPolicy::AcceptKey(confirmed) => *confirmed == fp,
    };
    if !accept {
        return Err(Error::HostKeyUnknown {
            host: name,
            algorithm,
            fingerprint: fp,
            known_hosts: learn_into,
        });
    }
    if let Some(dir) = learn_into.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        crate::fsutil::create_private_dir(dir)?;
    }
    append_entry(&learn_into, &name, key)?;
    tracing::debug!(file = %learn_into.display(), fingerprint = %fp, "learned host key");
    Ok(HostKeyOutcome::Learned(learn_into))
}

/// Appends `name key` to a known_hosts file, as ssh does (append, not rewrite: other ssh
/// processes may be appending too). russh's own learner starts a new file with a blank line.
fn append_entry(path: &Path, name: &str, key: &PublicKey) -> Result<(), Error> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let io_err = |source| Error::Io {
        action: "add the host key to",
        path: path.to_path_buf(),
        source,
    };
    let openssh = key.to_openssh().map_err(|e| Error::KnownHosts {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_err)?;
    let mut line = String::new();
    if f.seek(SeekFrom::End(-1)).is_ok() {
        let mut last = [0u8; 1];
        f.read_exact(&mut last).map_err(io_err)?;
        if last[0] != b'\n' {
            line.push('\n');
        }
    }
    line.push_str(&format!("{name} {openssh}\n"));
    f.write_all(line.as_bytes()).map_err(io_err)?;
    f.sync_all().map_err(io_err)
}

/// The key algorithms recorded for the host, so the handshake can prefer them (as OpenSSH
/// orders `HostKeyAlgorithms` by what known_hosts holds) and not stumble on a second key type.
pub fn recorded_algorithms(
    host: &str,
    port: u16,
    files: &[PathBuf],
) -> Vec<russh::keys::Algorithm> {
    let name = known_hosts_name(host, port);
    let mut algs = Vec::new();
    for file in files {
        let Ok(text) = read(file) else { continue };
        for e in hostfile::entries(&text, &name) {
            if let (None, Some(key)) = (e.marker, &e.key) {
                let a = key.algorithm();
                if !algs.contains(&a) {
                    algs.push(a);
                }
            }
        }
    }
    algs
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
    const KEY_B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIA6rWI3G2sz07DnfFlrouTcysQlj2P+jpNSOEWD9OJ3X";

    fn key(b64: &str) -> PublicKey {
        russh::keys::parse_public_key_base64(b64).expect("test key")
    }

    #[test]
    fn known_unknown_changed_and_learned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kh = dir.path().join("ssh/known_hosts");
        let files = [kh.clone()];
        let a = key(KEY_A);

        let err = check("h", 2222, &a, &files, &[], &HostKeyPolicy::Strict).expect_err("unknown");
        assert!(matches!(err, Error::HostKeyUnknown { ref host, .. } if host == "[h]:2222"));

        // A different confirmed fingerprint does not let another key in.
        let other = HostKeyPolicy::AcceptKey(fingerprint(&key(KEY_B)));
        assert!(check("h", 2222, &a, &files, &[], &other).is_err());

        let confirmed = HostKeyPolicy::AcceptKey(fingerprint(&a));
        assert_eq!(
            check("h", 2222, &a, &files, &[], &confirmed).expect("learned"),
            HostKeyOutcome::Learned(kh.clone())
        );
        let text = std::fs::read_to_string(&kh).expect("read");
        assert!(text.starts_with("[h]:2222 ssh-ed25519 "), "{text}");
        assert_eq!(
            check("h", 2222, &a, &files, &[], &HostKeyPolicy::Strict).expect("known"),
            HostKeyOutcome::Known(kh.clone())
        );
        assert_eq!(recorded_algorithms("h", 2222, &files).len(), 1);

        let err = check(
            "h",
            2222,
            &key(KEY_B),
            &files,
            &[],
            &HostKeyPolicy::AcceptNew,
        )
        .expect_err("changed");
        assert!(
            matches!(err, Error::HostKeyChanged { line: 1, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("REMOTE HOST IDENTIFICATION HAS CHANGED")
        );
    }

    #[test]
    fn reports_the_line_number_editors_show() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kh = dir.path().join("known_hosts");
        let text =
            format!("# comment\nother ssh-ed25519 {KEY_B}\n# another\nh ssh-ed25519 {KEY_A}");
        crate::fsutil::write_private(&kh, text.as_bytes()).expect("write");
        let err = check(
            "h",
            22,
            &key(KEY_B),
            std::slice::from_ref(&kh),
            &[],
            &HostKeyPolicy::Strict,
        )
        .expect_err("changed");
        assert!(
            matches!(err, Error::HostKeyChanged { line: 4, .. }),
            "{err}"
        );
        // Appending to a file without a final newline starts a new line.
        check(
            "new",
            22,
            &key(KEY_A),
            std::slice::from_ref(&kh),
            &[],
            &HostKeyPolicy::AcceptNew,
        )
        .expect("learn");
        let after = std::fs::read_to_string(&kh).expect("read");
        assert!(
            after.ends_with(&format!("{KEY_A}\nnew ssh-ed25519 {KEY_A}\n")),
            "{after}"
        );
    }

    #[test]
    fn finds_hashed_entries() {
        // The `ssh-keygen -H` entry for `example.com` from russh's own known_hosts tests.
        let dir = tempfile::tempdir().expect("tempdir");
        let kh = dir.path().join("known_hosts");
        crate::fsutil::write_private(
            &kh,
            b"|1|O33ESRMWPVkMYIwJ1Uw+n877jTo=|nuuC5vEqXlEZ/8BXQR7m619W6Ak= ssh-ed25519 \
              AAAAC3NzaC1lZDI1NTE5AAAAILIG2T/B0l0gaqj3puu510tu9N1OkQ4znY3LYuEm5zCF\n",
        )
        .expect("write");
        let k = key("AAAAC3NzaC1lZDI1NTE5AAAAILIG2T/B0l0gaqj3puu510tu9N1OkQ4znY3LYuEm5zCF");
        let out = check("example.com", 22, &k, &[kh], &[], &HostKeyPolicy::Strict);
        assert!(matches!(out, Ok(HostKeyOutcome::Known(_))), "{out:?}");
    }
}
