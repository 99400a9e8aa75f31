//! `RevokedHostKeys`: host keys to refuse whatever known_hosts says, judged as OpenSSH's
//! `sshkey_check_revoked` judges them. A KRL (binary, starting `SSHKRL\n\0`) is judged by
//! OpenSSH itself (`ssh-keygen -Q`), so its format stays OpenSSH's business; a plain list (one
//! public key per line) is read here. A file that cannot be read or judged refuses every host,
//! as it does for ssh.

use std::path::Path;
use std::process::{Command, Stdio};

use russh::keys::ssh_key::{Certificate, PublicKey};

use crate::error::{Error, SshError};
use crate::fsutil;
use crate::ssh::config::find_in_path;
use crate::ssh::known_hosts::fingerprint;

/// The first bytes of a KRL (`KRL_MAGIC` in OpenSSH's krl.c); anything else is a plain list.
const KRL_MAGIC: &[u8] = b"SSHKRL\n\0";

/// Refuses `key`, shown by `host` (its known_hosts name), when the `RevokedHostKeys` `file`
/// lists it, or when the file cannot be read or judged.
///
/// # Errors
/// [`SshError::HostKeyRevokedByFile`], or [`SshError::RevokedHostKeysUnusable`] naming what is wrong.
pub fn check(file: &Path, host: &str, key: &PublicKey) -> Result<(), Error> {
    let unusable = |why: String| {
        Error::Ssh(SshError::RevokedHostKeysUnusable {
            host: host.to_owned(),
            file: file.to_path_buf(),
            why,
        })
    };
    let bytes = std::fs::read(file).map_err(|e| {
        // ssh -G shows such a path only from OpenSSH before 9.4, which opens it as written.
        let shown = file.to_string_lossy();
        let note = if shown.starts_with('~') || shown.contains('%') {
            "; OpenSSH before 9.4 does not expand `~` or `%` here: give the full path"
        } else {
            ""
        };
        unusable(format!("cannot read it ({e}){note}"))
    })?;
    let line = if bytes.starts_with(KRL_MAGIC) {
        if !krl_revokes(file, key).map_err(unusable)? {
            return Ok(());
        }
        None
    } else {
        match listed(&String::from_utf8_lossy(&bytes), key) {
            Ok(None) => return Ok(()),
            Ok(Some(line)) => Some(line),
            Err(line) => {
                return Err(unusable(format!(
                    "line {line} is neither a public key nor a comment"
                )));
            }
        }
    };
    Err(Error::Ssh(SshError::HostKeyRevokedByFile {
        host: host.to_owned(),
        fingerprint: fingerprint(key),
        file: file.to_path_buf(),
        line,
    }))
}

/// The 1-based line of a plain list that holds `key` (or a certificate for it), read as
/// OpenSSH's `sshkey_in_file` reads it: blank lines and `#` comments are skipped, and a line
/// that is not `type base64 [comment]` is an error (`Err` with its number), which makes ssh
/// refuse the host, unless an earlier line already listed the key. One difference, on the
/// strict side: OpenSSH skips RSA keys shorter than 1024 bits; here they still revoke.
fn listed(text: &str, key: &PublicKey) -> Result<Option<usize>, usize> {
    // Split on `\n` alone, as getline does: a `\r` left at a line's end is part of the line.
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // `sshkey_read`: the type runs to the first space or tab, the base64 blob to the next;
        // `b64_pton` skips white space inside the blob (such as that `\r`).
        let (kind, rest) = line.split_once([' ', '\t']).ok_or(i + 1)?;
        let blob: String = rest
            .trim_start_matches([' ', '\t'])
            .split([' ', '\t'])
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let openssh = format!("{kind} {blob}");
        // OpenSSH compares public parts only, so a listed certificate revokes its key.
        let listed = match PublicKey::from_openssh(&openssh) {
            Ok(k) => k.key_data().clone(),
            Err(_) => Certificate::from_openssh(&openssh)
                .map_err(|_| i + 1)?
                .public_key()
                .clone(),
        };
        if listed == *key.key_data() {
            return Ok(Some(i + 1));
        }
    }
    Ok(None)
}

/// Asks OpenSSH whether the KRL `krl` revokes `key`: `ssh-keygen -Q -f KRL KEYFILE`, with the
/// key written to a file in a private temporary folder. Runs while the handshake waits: a few
/// milliseconds, once per connection.
fn krl_revokes(krl: &Path, key: &PublicKey) -> Result<bool, String> {
    let keygen = find_in_path("ssh-keygen").ok_or_else(|| {
        "it is a KRL, and judging a KRL takes OpenSSH's `ssh-keygen`, which is not on PATH"
            .to_owned()
    })?;
    let dir = tempfile::Builder::new()
        .prefix("shiqi-hostkey.")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary folder for the host key ({e})"))?;
    let key_file = dir.path().join("host_key.pub");
    let openssh = key
        .to_openssh()
        .map_err(|e| format!("cannot write the host key for ssh-keygen ({e})"))?;
    fsutil::write_private(&key_file, format!("{openssh}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let out = Command::new(&keygen)
        .arg("-Q")
        .arg("-f")
        .arg(krl)
        .arg(&key_file)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}` ({e})", keygen.display()))?;
    krl_answer(out.status.code(), &out.stdout, &out.stderr)
}

/// Reads `ssh-keygen -Q`'s answer for one key (its `do_check_krl`): `KEYFILE …: ok` with
/// status 0, or `KEYFILE …: REVOKED` with status 1. Anything else (status 255 for an unreadable
/// or invalid KRL) is no answer, and so a refusal.
fn krl_answer(status: Option<i32>, stdout: &[u8], stderr: &[u8]) -> Result<bool, String> {
    let stdout = String::from_utf8_lossy(stdout);
    let last = stdout.lines().last().unwrap_or_default();
    match status {
        Some(0) if last.ends_with(": ok") => Ok(false),
        Some(1) if last.ends_with(": REVOKED") => Ok(true),
        _ => {
            let stderr = String::from_utf8_lossy(stderr);
            let said = stderr
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or(last);
            Err(format!(
                "`ssh-keygen -Q` cannot judge the key against it (status {}: {})",
                status.map_or_else(|| "killed".to_owned(), |s| s.to_string()),
                crate::text::quote(said)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
    const KEY_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA6rWI3G2sz07DnfFlrouTcysQlj2P+jpNSOEWD9OJ3X";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).expect("test key")
    }

    #[test]
    fn reads_a_plain_list_as_sshkey_in_file() {
        let (a, b) = (key(KEY_A), key(KEY_B));
        let text = format!("# revoked\n\n  \t{KEY_B} old host\r\n\t{KEY_A}\tcomment\n");
        assert_eq!(listed(&text, &a), Ok(Some(4)));
        assert_eq!(listed(&text, &b), Ok(Some(3)));
        assert_eq!(listed("", &a), Ok(None));
        assert_eq!(listed(&format!("{KEY_B}\n# {KEY_A}\n"), &a), Ok(None));
        // A bad line refuses every key it comes before; a key listed earlier is found first.
        let bad = format!("{KEY_B}\nnot a key\n{KEY_A}\n");
        assert_eq!(listed(&bad, &b), Ok(Some(1)));
        assert_eq!(listed(&bad, &a), Err(2));
        for bad in [
            "ssh-ed25519\n",
            "ssh-ed25519 \n",
            "ssh-ed25519 AAAA!\n",
            "\r\n",
            "ssh-foo AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ\n",
            // The blob says ssh-ed25519; the type says otherwise.
            "ecdsa-sha2-nistp256 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ\n",
        ] {
            assert_eq!(listed(bad, &a), Err(1), "{bad:?}");
        }
    }

    #[test]
    fn reads_ssh_keygen_q_answers() {
        let ok = b"/tmp/x/host_key.pub (/tmp/x/host_key.pub): ok\n";
        let revoked = b"/tmp/x/host_key.pub (/tmp/x/host_key.pub): REVOKED\n";
        assert_eq!(krl_answer(Some(0), ok, b""), Ok(false));
        assert_eq!(krl_answer(Some(1), revoked, b""), Ok(true));
        // Status and text must agree; anything else is no answer.
        assert!(krl_answer(Some(0), revoked, b"").is_err());
        assert!(krl_answer(Some(1), ok, b"").is_err());
        let err = krl_answer(Some(255), b"", b"Invalid KRL file k: bad\x1b[2J\n").expect_err("255");
        assert!(
            err.contains("status 255: Invalid KRL file k: bad\\u{1b}[2J"),
            "{err}"
        );
        assert!(krl_answer(None, b"", b"").is_err());
    }

    #[test]
    fn a_missing_file_refuses_and_names_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("revoked");
        let err = check(&file, "h", &key(KEY_A)).expect_err("missing");
        assert!(
            matches!(&err, Error::Ssh(SshError::RevokedHostKeysUnusable { file: f, .. }) if *f == file),
            "{err}"
        );
        assert!(err.to_string().contains("revoked"), "{err}");
        let err = check(Path::new("~/no/such/file"), "h", &key(KEY_A)).expect_err("literal");
        assert!(err.to_string().contains("give the full path"), "{err}");
        fsutil::write_private(&file, format!("{KEY_A}\n").as_bytes()).expect("write");
        let err = check(&file, "h", &key(KEY_A)).expect_err("revoked");
        assert!(
            matches!(
                err,
                Error::Ssh(SshError::HostKeyRevokedByFile { line: Some(1), .. })
            ),
            "{err}"
        );
        assert!(check(&file, "h", &key(KEY_B)).is_ok());
    }
}
