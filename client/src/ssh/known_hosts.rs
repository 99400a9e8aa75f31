//! Host-key checking against known_hosts, as OpenSSH does it: known → go on; unknown → ask or
//! refuse; changed or revoked → refuse loudly. Reading the files and matching hosts is
//! [`hostfile`]'s, `RevokedHostKeys` is [`revoked`]'s. Never prompts: the command decides what
//! to ask.

use std::path::{Path, PathBuf};

use russh::keys::ssh_key::{HashAlg, PublicKey};

use crate::error::{Error, SshError};
use crate::ssh::hostfile::{self, Verdict};
use crate::ssh::revoked;

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

/// What the effective ssh config says about host keys, as
/// `super::config::Target::host_key_config` gathers it.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostKeyConfig<'a> {
    /// `UserKnownHostsFile`: looked in first; new keys are learned into the first one.
    pub user_files: &'a [PathBuf],
    /// `GlobalKnownHostsFile` (read only).
    pub global_files: &'a [PathBuf],
    /// `RevokedHostKeys`: files of keys refused whatever the known_hosts files say.
    pub revoked_host_keys: &'a [PathBuf],
    /// `HashKnownHosts`: learn new hosts under a hashed name.
    pub hash_known_hosts: bool,
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

/// Checks `key` for `host:port` in the user then the global known_hosts files, learning it
/// into the first user file when `policy` allows. At least as strict as OpenSSH with
/// `StrictHostKeyChecking`: `RevokedHostKeys` is asked first, as ssh does, and a file it cannot
/// use refuses every host; a `@revoked` line for the key wins over every file; a host known
/// with any other key (of any type) is *changed*, never learned; a host vouched for only by a
/// `@cert-authority` line is refused (this client does not check host certificates).
///
/// # Errors
/// [`SshError::HostKeyRevokedByFile`], [`SshError::RevokedHostKeysUnusable`],
/// [`SshError::HostKeyRevoked`], [`SshError::HostKeyChanged`], [`SshError::HostCertAuthority`], or
/// [`SshError::HostKeyUnknown`] when no file knows it and the policy does not accept it.
pub fn check(
    host: &str,
    port: u16,
    key: &PublicKey,
    config: &HostKeyConfig<'_>,
    policy: &HostKeyPolicy,
) -> Result<HostKeyOutcome, Error> {
    let fp = fingerprint(key);
    let algorithm = key.algorithm().to_string();
    let name = known_hosts_name(host, port);
    for file in config.revoked_host_keys {
        revoked::check(file, &name, key)?;
    }
    let (user_files, global_files) = (config.user_files, config.global_files);
    let mut verdicts = Vec::new();
    for file in user_files.iter().chain(global_files) {
        let text = read(file)?;
        verdicts.push((file, hostfile::verdict(&text, &name, key)));
    }
    if let Some((file, Verdict::Revoked { line })) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::Revoked { .. }))
    {
        return Err(Error::Ssh(SshError::HostKeyRevoked {
            host: name,
            fingerprint: fp,
            known_hosts: (*file).clone(),
            line: *line,
        }));
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
        return Err(Error::Ssh(SshError::HostKeyChanged {
            host: name,
            algorithm,
            fingerprint: fp,
            known_hosts: (*file).clone(),
            line: *line,
        }));
    }
    if let Some((file, Verdict::CertAuthority { line })) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Verdict::CertAuthority { .. }))
    {
        return Err(Error::Ssh(SshError::HostCertAuthority {
            host: name,
            known_hosts: (*file).clone(),
            line: *line,
        }));
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
        return Err(Error::Ssh(SshError::HostKeyUnknown {
            host: name,
            algorithm,
            fingerprint: fp,
            known_hosts: learn_into,
        }));
    }
    if let Some(dir) = learn_into.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        crate::fsutil::create_private_dir(dir)?;
    }
    append_entry(&learn_into, &name, key, config.hash_known_hosts)?;
    tracing::debug!(file = %learn_into.display(), fingerprint = %fp, "learned host key");
    Ok(HostKeyOutcome::Learned(learn_into))
}

/// Appends `name key` to a known_hosts file, as ssh does (append, not rewrite: other ssh
/// processes may be appending too), with `name` hashed when `hash` (`HashKnownHosts yes`).
/// russh's own learner starts a new file with a blank line and cannot hash.
fn append_entry(path: &Path, name: &str, key: &PublicKey, hash: bool) -> Result<(), Error> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let io_err = |source| Error::Io {
        action: "add the host key to",
        path: path.to_path_buf(),
        source,
    };
    let openssh = key.to_openssh().map_err(|e| {
        Error::Ssh(SshError::KnownHosts {
            path: path.to_path_buf(),
            source: e.into(),
        })
    })?;
    let name = if hash {
        hashed(name).ok_or_else(|| {
            io_err(std::io::Error::other(
                "no random salt to hash the host name with",
            ))
        })?
    } else {
        name.to_owned()
    };
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

/// `name` hashed under a fresh random salt, as ssh writes it with `HashKnownHosts yes`. The
/// salt comes from AWS-LC's generator, which rustls already links in.
fn hashed(name: &str) -> Option<String> {
    let mut salt = [0u8; hostfile::SALT_LEN];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut salt)
        .ok()?;
    hostfile::hashed_name(name, &salt)
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

    /// Only user known_hosts files: no global ones, no `RevokedHostKeys`, names in the clear.
    fn user(files: &[PathBuf]) -> HostKeyConfig<'_> {
        HostKeyConfig {
            user_files: files,
            ..HostKeyConfig::default()
        }
    }

    #[test]
    fn known_unknown_changed_and_learned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kh = dir.path().join("ssh/known_hosts");
        let files = [kh.clone()];
        let a = key(KEY_A);

        let err = check("h", 2222, &a, &user(&files), &HostKeyPolicy::Strict).expect_err("unknown");
        assert!(
            matches!(err, Error::Ssh(SshError::HostKeyUnknown { ref host, .. }) if host == "[h]:2222")
        );

        // A different confirmed fingerprint does not let another key in.
        let other = HostKeyPolicy::AcceptKey(fingerprint(&key(KEY_B)));
        assert!(check("h", 2222, &a, &user(&files), &other).is_err());

        let confirmed = HostKeyPolicy::AcceptKey(fingerprint(&a));
        assert_eq!(
            check("h", 2222, &a, &user(&files), &confirmed).expect("learned"),
            HostKeyOutcome::Learned(kh.clone())
        );
        let text = std::fs::read_to_string(&kh).expect("read");
        assert!(text.starts_with("[h]:2222 ssh-ed25519 "), "{text}");
        assert_eq!(
            check("h", 2222, &a, &user(&files), &HostKeyPolicy::Strict).expect("known"),
            HostKeyOutcome::Known(kh.clone())
        );
        assert_eq!(recorded_algorithms("h", 2222, &files).len(), 1);

        let err = check(
            "h",
            2222,
            &key(KEY_B),
            &user(&files),
            &HostKeyPolicy::AcceptNew,
        )
        .expect_err("changed");
        assert!(
            matches!(err, Error::Ssh(SshError::HostKeyChanged { line: 1, .. })),
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
            &user(std::slice::from_ref(&kh)),
            &HostKeyPolicy::Strict,
        )
        .expect_err("changed");
        assert!(
            matches!(err, Error::Ssh(SshError::HostKeyChanged { line: 4, .. })),
            "{err}"
        );
        // Appending to a file without a final newline starts a new line.
        check(
            "new",
            22,
            &key(KEY_A),
            &user(std::slice::from_ref(&kh)),
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
        let out = check("example.com", 22, &k, &user(&[kh]), &HostKeyPolicy::Strict);
        assert!(matches!(out, Ok(HostKeyOutcome::Known(_))), "{out:?}");
    }

    #[test]
    fn revoked_host_keys_win_over_known_hosts_and_an_unusable_file_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kh = dir.path().join("known_hosts");
        let revoked = dir.path().join("revoked_keys");
        let text = format!("h ssh-ed25519 {KEY_A}\n");
        crate::fsutil::write_private(&kh, text.as_bytes()).expect("write");
        let files = [kh];
        let config = HostKeyConfig {
            revoked_host_keys: std::slice::from_ref(&revoked),
            ..user(&files)
        };
        let a = key(KEY_A);
        // Missing: ssh refuses every host, known or not.
        let err = check("h", 22, &a, &config, &HostKeyPolicy::Strict).expect_err("missing");
        assert!(
            matches!(err, Error::Ssh(SshError::RevokedHostKeysUnusable { .. })),
            "{err}"
        );
        let list = format!("# revoked\nssh-ed25519 {KEY_A} old key\n");
        crate::fsutil::write_private(&revoked, list.as_bytes()).expect("write");
        let err = check("h", 22, &a, &config, &HostKeyPolicy::AcceptNew).expect_err("revoked");
        assert!(
            matches!(err, Error::Ssh(SshError::HostKeyRevokedByFile { line: Some(2), ref host, .. }) if host == "h"),
            "{err}"
        );
        // Not learned either.
        let err = check("new", 22, &a, &config, &HostKeyPolicy::AcceptNew).expect_err("revoked");
        assert!(
            matches!(err, Error::Ssh(SshError::HostKeyRevokedByFile { .. })),
            "{err}"
        );
        assert!(
            !std::fs::read_to_string(&files[0])
                .expect("read")
                .contains("new")
        );
        let b = key(KEY_B);
        assert!(check("new", 22, &b, &config, &HostKeyPolicy::AcceptNew).is_ok());
    }

    #[test]
    fn learns_hashed_names_when_the_config_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kh = dir.path().join("known_hosts");
        let files = [kh.clone()];
        let config = HostKeyConfig {
            hash_known_hosts: true,
            ..user(&files)
        };
        let a = key(KEY_A);
        for (host, port) in [("Example.com", 22), ("h", 2222)] {
            let out = check(host, port, &a, &config, &HostKeyPolicy::AcceptNew);
            assert!(matches!(out, Ok(HostKeyOutcome::Learned(_))), "{out:?}");
            // Found again, whatever the case of the name.
            let out = check(
                &host.to_uppercase(),
                port,
                &a,
                &config,
                &HostKeyPolicy::Strict,
            );
            assert!(matches!(out, Ok(HostKeyOutcome::Known(_))), "{out:?}");
        }
        let text = std::fs::read_to_string(&kh).expect("read");
        let names: Vec<&str> = text.lines().filter_map(|l| l.split(' ').next()).collect();
        assert_eq!(names.len(), 2, "{text}");
        assert!(
            names.iter().all(|n| n.starts_with("|1|") && n.len() == 60),
            "{text}"
        );
        assert!(!text.contains("xample") && !text.contains("2222"), "{text}");
        // A fresh salt each time: the same name never hashes the same way twice.
        assert_ne!(hashed("h"), hashed("h"));
    }
}
