//! known_hosts matching against OpenSSH as the oracle: for a corpus of files (plain, tabs,
//! wildcards, negation, `[host]:port`, markers, comments, garbage, hashed by `ssh-keygen -H`)
//! and many host names, the lines `hostfile::entries` finds are exactly the lines
//! `ssh-keygen -F NAME -f FILE` reports, with the same markers. Keys are made at run time.
//!
//! `RevokedHostKeys` and hashed writes against OpenSSH too: `ssh` itself connects to a local
//! russh server that shows a known host key and refuses every login, so how far ssh gets says
//! whether it took the key (`Permission denied`), found it revoked, or could not use the file;
//! KRLs are also put to `ssh-keygen -Q`, and the lines we learn to `ssh-keygen -F`.
#![allow(clippy::unwrap_used, reason = "tests fail loudly by design")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use russh::keys::ssh_key::PublicKey;
use shiqi_connect::Error;
use shiqi_connect::error::SshError;
use shiqi_connect::fsutil::write_private;
use shiqi_connect::ssh::hostfile::{self, Marker, Verdict};
use shiqi_connect::ssh::known_hosts::{self, HostKeyConfig, HostKeyOutcome, HostKeyPolicy};
use shiqi_connect::ssh::revoked;

fn keygen(dir: &Path, name: &str, kind: &str) -> String {
    let path = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", "", "-f"])
        .arg(&path)
        .output()
        .expect("ssh-keygen runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    public
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What `ssh-keygen -F` reports: (line, marker) of every line found for `name`.
fn oracle(file: &Path, name: &str) -> BTreeSet<(usize, Option<Marker>)> {
    let out = Command::new("ssh-keygen")
        .args(["-F", name, "-f"])
        .arg(file)
        .output()
        .expect("ssh-keygen runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&format!("# Host {name} found: line "))?;
            let mut parts = rest.split_whitespace();
            let line = parts.next()?.parse().ok()?;
            let marker = match parts.next() {
                Some("REVOKED") => Some(Marker::Revoked),
                Some("CA") => Some(Marker::CertAuthority),
                _ => None,
            };
            Some((line, marker))
        })
        .collect()
}

fn ours(text: &str, name: &str) -> BTreeSet<(usize, Option<Marker>)> {
    hostfile::entries(text, name)
        .into_iter()
        .map(|e| (e.line, e.marker))
        .collect()
}

#[test]
fn matches_ssh_keygen_on_every_file_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = keygen(d, "a", "ed25519");
    let b = keygen(d, "b", "ecdsa");
    let c = keygen(d, "c", "ed25519");
    let plain = format!(
        "# a comment line\n\
         \n\
         host {a}\n\
         \thost2\t{b}\tcomment with\ttabs\n\
         @revoked * {c}\n\
         @cert-authority *.ex.com {a}\n\
         foo,!host {a}\n\
         !bar,ba* {b}\n\
         [host]:2222 {b}\n\
         [h*]:22?? {c}\n\
         @bogus host {a}\n\
         h?st {b}\n\
         HOST3 {c}\n\
         host\n\
         host ssh-ed25519 not-base64!\n\
         10.0.0.1,[10.0.0.1]:2222 {a}\n\
         *.ex.com,!bad.ex.com {b}\n\
         # host {c}\n\
         host4 {a} # a comment with host {b}\n\
         @revoked\thost5 {a}\n\
         host5 {a}\n"
    );
    let plain_file = d.join("plain");
    shiqi_connect::fsutil::write_private(&plain_file, plain.as_bytes()).unwrap();

    // A hashed copy of a marker-free file, as `ssh-keygen -H` writes it.
    let hashable = format!("host {a}\nhost2 {b}\n[host]:2222 {c}\n10.0.0.1 {a}\nmixed.Case {b}\n");
    let hashed_file = d.join("hashed");
    shiqi_connect::fsutil::write_private(&hashed_file, hashable.as_bytes()).unwrap();
    let out = Command::new("ssh-keygen")
        .args(["-q", "-H", "-f"])
        .arg(&hashed_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hashed = std::fs::read_to_string(&hashed_file).unwrap();
    assert!(
        hashed.starts_with("|1|"),
        "ssh-keygen -H hashed the file:\n{hashed}"
    );

    let names = [
        "host",
        "HOST",
        "host2",
        "host3",
        "host4",
        "host5",
        "hast",
        "hoost",
        "foo",
        "bar",
        "baz",
        "a.ex.com",
        "bad.ex.com",
        "ex.com",
        "[host]:2222",
        "[host]:2223",
        "[hx]:2299",
        "[host]:22",
        "10.0.0.1",
        "[10.0.0.1]:2222",
        "mixed.case",
        "nothing",
    ];
    let mut compared = 0;
    for (file, text) in [(&plain_file, &plain), (&hashed_file, &hashed)] {
        for name in names {
            // ssh lowercases the host name before it looks it up (`ssh-keygen -F` does not,
            // which shows on hashed lines): ask the oracle what ssh would ask.
            let want = oracle(file, &name.to_ascii_lowercase());
            assert_eq!(
                ours(text, name),
                want,
                "{name} in {}:\n{text}",
                file.display()
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 2 * names.len());
}

#[test]
fn verdicts_revoked_first_then_known_then_changed_of_any_type() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = keygen(d, "a", "ed25519");
    let b = keygen(d, "b", "ecdsa");
    let key = |s: &str| russh::keys::ssh_key::PublicKey::from_openssh(s).unwrap();
    let (ka, kb) = (key(&a), key(&b));
    let text = format!("host {a}\nother {b}\n@revoked * {b}\n@cert-authority ca.ex {a}\n");
    assert_eq!(
        hostfile::verdict(&text, "host", &ka),
        Verdict::Known { line: 1 }
    );
    // Known with an Ed25519 key; an ECDSA key now is a change, not a new key type.
    assert_eq!(
        hostfile::verdict(&format!("host {a}\n"), "host", &kb),
        Verdict::Changed { line: 1 }
    );
    // `@revoked` wins even where another line records the key.
    assert_eq!(
        hostfile::verdict(&text, "other", &kb),
        Verdict::Revoked { line: 3 }
    );
    assert_eq!(
        hostfile::verdict(&text, "ca.ex", &ka),
        Verdict::CertAuthority { line: 4 }
    );
    assert_eq!(hostfile::verdict(&text, "new", &ka), Verdict::Unknown);
}

/// A server that shows one host key and refuses every login, counting the attempts.
struct Refuser(Arc<AtomicUsize>);

impl russh::server::Handler for Refuser {
    type Error = russh::Error;

    async fn auth_none(&mut self, _: &str) -> Result<russh::server::Auth, Self::Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(russh::server::Auth::reject())
    }
}

/// Serves `host_key` (a private key file) on a loopback port; returns the port and the count of
/// login attempts (each one a client that took the host key).
async fn serve(host_key: &Path) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = Arc::new(russh::server::Config {
        keys: vec![russh::keys::load_secret_key(host_key, None).unwrap()],
        auth_rejection_time: Duration::ZERO,
        auth_rejection_time_initial: Some(Duration::ZERO),
        ..Default::default()
    });
    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = attempts.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (config, handler) = (config.clone(), Refuser(counter.clone()));
            tokio::spawn(async move {
                if let Ok(session) = russh::server::run_stream(config, socket, handler).await {
                    let _ = session.await;
                }
            });
        }
    });
    (port, attempts)
}

/// What a client made of the server's host key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Took {
    /// Accepted it and went on to log in.
    Key,
    /// Refused it as revoked.
    Revoked,
    /// Refused it because the `RevokedHostKeys` file is unusable.
    Unusable,
    /// Refused it as unknown or changed.
    Nothing,
}

/// OpenSSH's verdict: `ssh` to the server on `port` with these files and no way to log in.
async fn openssh(port: u16, known_hosts: &Path, revoked: Option<&Path>, alias: &str) -> Took {
    let mut cmd = tokio::process::Command::new("ssh");
    cmd.args(["-F", "/dev/null", "-p", &port.to_string()]);
    for option in [
        "BatchMode=yes",
        "StrictHostKeyChecking=yes",
        "CheckHostIP=no",
        "GlobalKnownHostsFile=/dev/null",
        "IdentityAgent=none",
        "PubkeyAuthentication=no",
        "PasswordAuthentication=no",
        "KbdInteractiveAuthentication=no",
        "GSSAPIAuthentication=no",
        "HostbasedAuthentication=no",
        "ConnectTimeout=10",
    ] {
        cmd.args(["-o", option]);
    }
    cmd.arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()));
    if let Some(file) = revoked {
        cmd.arg("-o")
            .arg(format!("RevokedHostKeys={}", file.display()));
    }
    if !alias.is_empty() {
        cmd.arg("-o").arg(format!("HostKeyAlias={alias}"));
    }
    let out = cmd
        .args(["corpus@127.0.0.1", "true"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("ssh runs");
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("revoked by file") {
        Took::Revoked
    } else if err.contains("Error checking host key") {
        Took::Unusable
    } else if err.contains("Permission denied") {
        Took::Key
    } else if err.contains("Host key verification failed") {
        Took::Nothing
    } else {
        panic!("unexpected answer from ssh: {err}");
    }
}

/// Our verdict on the same file.
fn ours_on_revoked(file: &Path, key: &PublicKey) -> Took {
    match revoked::check(file, "corpus", key) {
        Ok(()) => Took::Key,
        Err(Error::Ssh(SshError::HostKeyRevokedByFile { .. })) => Took::Revoked,
        Err(Error::Ssh(SshError::RevokedHostKeysUnusable { .. })) => Took::Unusable,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// `ssh-keygen -Q -f KRL KEY`: revoked, not revoked, or no answer (status 255).
fn keygen_q(krl: &Path, key_pub: &Path) -> Took {
    let out = Command::new("ssh-keygen")
        .args(["-Q", "-f"])
        .arg(krl)
        .arg(key_pub)
        .output()
        .expect("ssh-keygen runs");
    match out.status.code() {
        Some(0) => Took::Key,
        Some(1) => Took::Revoked,
        _ => Took::Unusable,
    }
}

/// `ssh-keygen -k -f KRL SPEC…`: a KRL made by OpenSSH.
fn make_krl(krl: &Path, specs: &[&Path]) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-k", "-f"])
        .arg(krl)
        .args(specs)
        .output()
        .expect("ssh-keygen runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
#[tokio::test]
async fn revoked_host_keys_agree_with_openssh() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // `h` is the server's host key; the others are not. (No DSA: OpenSSH 10 has none.)
    let h = keygen(d, "h", "ed25519");
    let o = keygen(d, "o", "ecdsa");
    let p = keygen(d, "p", "ed25519");
    let rsa = keygen(d, "rsa", "rsa");
    let key = PublicKey::from_openssh(&h).unwrap();
    let (port, attempts) = serve(&d.join("h")).await;
    let known_hosts = d.join("known_hosts");
    write_private(&known_hosts, format!("corpus {h}\n").as_bytes()).unwrap();
    let h_blob = h.split(' ').nth(1).unwrap();

    let lists: Vec<(&str, String)> = vec![
        (
            "among others",
            format!("# revoked\n\n  {o} old\n\t{h}\tcomment\n"),
        ),
        ("others only", format!("{o}\n{p}\n")),
        ("other types first", format!("{rsa}\n{o}\n{h}\n")),
        ("other types only", format!("{rsa}\n{o}\n")),
        ("empty", String::new()),
        ("commented out", format!("# {h}\n  #{h}\n")),
        ("garbage before it", format!("{o}\nnot a key\n{h}\n")),
        ("garbage after it", format!("{h}\nnot a key\n")),
        ("CRLF", format!("{o}\r\n{h}\r\n")),
        ("a CR-only line", format!("\r\n{o}\n")),
        ("no final newline", h.clone()),
        ("a type with no key", "ssh-ed25519\n".to_owned()),
        ("a type with a blank key", "ssh-ed25519 \n".to_owned()),
        ("an unknown type", format!("ssh-foo {h_blob}\n")),
        (
            "another type's name",
            format!("ecdsa-sha2-nistp256 {h_blob}\n"),
        ),
        (
            "a blob split by a space",
            format!("ssh-ed25519 {} {}\n", &h_blob[..20], &h_blob[20..]),
        ),
        ("options before the key", format!("restrict {h}\n")),
        ("binary", "\u{1}\u{2}SSH\n".to_owned()),
    ];
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (i, (label, text)) in lists.iter().enumerate() {
        let file = d.join(format!("list{i}"));
        write_private(&file, text.as_bytes()).unwrap();
        files.push((format!("list, {label}"), file));
    }
    files.push(("missing".to_owned(), d.join("missing")));
    let folder = d.join("folder");
    std::fs::create_dir(&folder).unwrap();
    files.push(("a folder".to_owned(), folder));

    // KRLs, made by OpenSSH from keys, from a list, and from a fingerprint.
    let mut krls: Vec<(&str, PathBuf)> = Vec::new();
    let krl = |name: &str, specs: &[&Path]| {
        let file = d.join(name);
        make_krl(&file, specs);
        file
    };
    let (h_pub, o_pub, p_pub) = (d.join("h.pub"), d.join("o.pub"), d.join("p.pub"));
    krls.push(("of the host key", krl("krl1", &[&h_pub])));
    krls.push(("of other keys", krl("krl2", &[&o_pub, &p_pub])));
    let list = d.join("both.list");
    write_private(&list, format!("{o}\n{h}\n").as_bytes()).unwrap();
    krls.push(("of a list holding it", krl("krl3", &[&list])));
    let fp = Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(&h_pub)
        .output()
        .unwrap();
    let fp = String::from_utf8_lossy(&fp.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    let spec = d.join("fingerprint.spec");
    write_private(&spec, format!("hash: {fp}\n").as_bytes()).unwrap();
    krls.push(("of its SHA256 fingerprint", krl("krl4", &[&spec])));
    krls.push(("with no keys", krl("krl5", &[])));
    let mut broken = std::fs::read(d.join("krl1")).unwrap();
    broken.truncate(broken.len() - 3);
    let broken_file = d.join("krl6");
    write_private(&broken_file, &broken).unwrap();
    krls.push(("cut short", broken_file));
    let bogus = d.join("krl7");
    write_private(&bogus, b"SSHKRL\n\0not a KRL after all\n").unwrap();
    krls.push(("with the magic only", bogus));

    for (label, file) in &krls {
        let want = openssh(port, &known_hosts, Some(file), "corpus").await;
        assert_eq!(
            keygen_q(file, &h_pub),
            want,
            "KRL {label}: ssh-keygen -Q and ssh"
        );
        files.push((format!("KRL {label}"), file.clone()));
    }

    let mut seen = BTreeSet::new();
    for (label, file) in &files {
        let before = attempts.load(Ordering::SeqCst);
        let want = openssh(port, &known_hosts, Some(file), "corpus").await;
        // ssh logs in only after taking the key: refusals come before any authentication.
        let logged_in = attempts.load(Ordering::SeqCst) > before;
        assert_eq!(logged_in, want == Took::Key, "{label}: {want:?}");
        assert_eq!(ours_on_revoked(file, &key), want, "{label}");
        seen.insert(format!("{want:?}"));
    }
    // The corpus exercises every verdict.
    assert_eq!(seen.len(), 3, "{seen:?}");

    // Whatever known_hosts says: revoked also when no file knows the host, or another does.
    let revoking = &krls[0].1;
    let config = HostKeyConfig {
        user_files: std::slice::from_ref(&known_hosts),
        revoked_host_keys: std::slice::from_ref(revoking),
        ..HostKeyConfig::default()
    };
    for (host, policy) in [
        ("corpus", HostKeyPolicy::Strict),
        ("new", HostKeyPolicy::AcceptNew),
    ] {
        let err = known_hosts::check(host, 22, &key, &config, &policy).unwrap_err();
        assert!(
            matches!(&err, Error::Ssh(SshError::HostKeyRevokedByFile { file, .. }) if file == revoking),
            "{err}"
        );
        assert!(err.to_string().contains("REVOKED"), "{err}");
    }
    assert_eq!(
        openssh(port, &known_hosts, Some(revoking), "new").await,
        Took::Revoked
    );
}

#[expect(
    clippy::disallowed_methods,
    reason = "#[tokio::test] builds its own runtime"
)]
#[tokio::test]
async fn hashed_writes_are_found_by_openssh() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let h = keygen(d, "h", "ed25519");
    let o = keygen(d, "o", "ecdsa");
    let (kh_key, ko_key) = (
        PublicKey::from_openssh(&h).unwrap(),
        PublicKey::from_openssh(&o).unwrap(),
    );
    let (port, _) = serve(&d.join("h")).await;
    let file = d.join("known_hosts");
    let files = [file.clone()];
    let hashed = HostKeyConfig {
        user_files: &files,
        hash_known_hosts: true,
        ..HostKeyConfig::default()
    };
    let plain = HostKeyConfig {
        hash_known_hosts: false,
        ..hashed
    };
    let learn = |host: &str, port: u16, key: &PublicKey, config: &HostKeyConfig<'_>| {
        let out = known_hosts::check(host, port, key, config, &HostKeyPolicy::AcceptNew);
        assert_eq!(
            out.unwrap(),
            HostKeyOutcome::Learned(file.clone()),
            "{host}"
        );
    };
    learn("Example.COM", 22, &ko_key, &hashed);
    learn("10.0.0.9", 2222, &ko_key, &hashed);
    learn("plain.example", 2200, &ko_key, &plain);
    learn("127.0.0.1", port, &kh_key, &hashed);

    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for i in [0, 1, 3] {
        assert!(lines[i].starts_with("|1|"), "line {}: {text}", i + 1);
    }
    assert!(
        lines[2].starts_with("[plain.example]:2200 ecdsa-sha2-"),
        "{text}"
    );
    assert!(
        !text.contains("xample.") && !text.contains("10.0.0.9"),
        "{text}"
    );

    let found = |name: &str| oracle(&file, name);
    let line = |n: usize| BTreeSet::from([(n, None)]);
    assert_eq!(found("example.com"), line(1));
    assert_eq!(found("[10.0.0.9]:2222"), line(2));
    assert_eq!(found("[plain.example]:2200"), line(3));
    assert_eq!(found(&format!("[127.0.0.1]:{port}")), line(4));
    for nothing in [
        "10.0.0.9",
        "[10.0.0.9]:22",
        "[example.com]:2222",
        "plain.example",
    ] {
        assert_eq!(found(nothing), BTreeSet::new(), "{nothing}");
    }
    // We read back what we wrote, as ssh-keygen does.
    for name in [
        "example.com",
        "[10.0.0.9]:2222",
        "[plain.example]:2200",
        "10.0.0.9",
    ] {
        assert_eq!(ours(&text, name), found(name), "{name}");
    }
    // And ssh takes the key under the hashed `[127.0.0.1]:PORT` line.
    assert_eq!(openssh(port, &file, None, "").await, Took::Key);
    let other = d.join("other_known_hosts");
    write_private(&other, lines[..3].join("\n").as_bytes()).unwrap();
    assert_eq!(openssh(port, &other, None, "").await, Took::Nothing);
}
