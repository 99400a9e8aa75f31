//! known_hosts matching against OpenSSH as the oracle: for a corpus of files (plain, tabs,
//! wildcards, negation, `[host]:port`, markers, comments, garbage, hashed by `ssh-keygen -H`)
//! and many host names, the lines `hostfile::entries` finds are exactly the lines
//! `ssh-keygen -F NAME -f FILE` reports, with the same markers. Keys are made at run time.
#![allow(clippy::unwrap_used, reason = "tests fail loudly by design")]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use shiqi_connect::ssh::hostfile::{self, Marker, Verdict};

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
