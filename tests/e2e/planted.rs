//! What another account plants on the server never steers root (issue 42): install follows no
//! link and writes in no folder that an account outside the step's trust can change. Each case
//! runs a second CA's install (its own account and state, removed afterwards) against folders
//! the brokers' account or the operator's shell account owns, and checks that the path a
//! followed link would have reached (the proof) is untouched.

use std::path::{Path, PathBuf};

use crate::install::{SecondCa, lines_with};
use crate::stack::{Out, Stack, stack, unique_name};

/// `stat -c FORMAT path` on the server (as root).
fn stat(s: &Stack, format: &str, path: &Path) -> String {
    let out = s
        .server(
            None,
            &["stat", "-c", format, path.to_str().expect("utf-8")],
            None,
        )
        .ok();
    out.stdout.trim().to_owned()
}

/// A folder made as root for `owner` (mode 0755), removed with everything in it when dropped.
struct Owned<'a> {
    s: &'a Stack,
    path: PathBuf,
}

impl<'a> Owned<'a> {
    fn new(s: &'a Stack, path: PathBuf, owner: &str) -> Self {
        let p = path.to_str().expect("utf-8");
        s.server(
            None,
            &["install", "-d", "-m", "0755", "-o", owner, "-g", owner, p],
            None,
        )
        .ok();
        Self { s, path }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        let _ = self.s.server(
            None,
            &["rm", "-rf", self.path.to_str().expect("utf-8")],
            None,
        );
    }
}

#[test]
fn install_follows_no_link_and_writes_in_no_folder_another_account_can_change() {
    let s = stack();
    let root = s.info("stack_dir").to_owned();
    let kafka = s.info("kafka_user").to_owned();
    let shell = s.info("shell_user").to_owned();
    let id = unique_name("planted");
    let account = "shiqi-ca-e2p".to_owned();
    let ca = SecondCa {
        s,
        account: account.clone(),
        state: PathBuf::from(format!("{root}/server/ca-e2p")),
        publish: PathBuf::from(format!("{root}/server/crl-e2p")),
        drop_in: PathBuf::from(format!("{root}/server/ssh/sshd_config.d/{account}.conf")),
    };
    let scratch = s.scratch();
    // The brokers' own folder (their account owns it, as on most servers), their config in it.
    let brokers = Owned::new(
        s,
        PathBuf::from(format!("{root}/server/{id}-brokers")),
        &kafka,
    );
    let properties = brokers.join("server.properties");
    let node = format!("{root}/server/kafka/node1/node.properties");
    s.server(
        None,
        &[
            "install",
            "-m",
            "0640",
            "-o",
            &kafka,
            "-g",
            &kafka,
            &node,
            properties.to_str().expect("utf-8"),
        ],
        None,
    )
    .ok();
    // Root-only things a followed link would reach.
    let proofs = Owned::new(
        s,
        PathBuf::from(format!("{root}/server/{id}-proofs")),
        "root",
    );
    let proof_file = proofs.join("would-be-created");
    let secret = proofs.join("secret");
    s.server(
        None,
        &[
            "sh",
            "-c",
            &format!("umask 077 && printf 'root only\\n' > {}", secret.display()),
        ],
        None,
    )
    .ok();
    // The brokers' account plants the backup's name as a dangling link to the proof path.
    let backup = brokers.join("server.properties.shiqi-backup");
    s.server(
        Some(&kafka),
        &[
            "ln",
            "-s",
            proof_file.to_str().expect("utf-8"),
            backup.to_str().expect("utf-8"),
        ],
        None,
    )
    .ok();

    let default_tls = scratch.path().join("kafka").display().to_string();
    let install = |kafka_tls: &str, properties: &Path| -> Out {
        let extra = [
            "--kafka-owner",
            kafka.as_str(),
            "--kafka-properties",
            properties.to_str().expect("utf-8"),
        ];
        ca.install(scratch.path(), Some(kafka_tls), None, &extra)
    };

    // 1. The planted backup link: the settings are applied, the link is left as it was and
    // named, and root created nothing where it points.
    let first = install(&default_tls, &properties).ok();
    assert!(
        !proof_file.exists(),
        "root followed the planted link:\n{}",
        first.stdout
    );
    let line = lines_with(&first.stdout, "needs you", "kafka.brokers").join("");
    assert!(
        line.contains("is not a regular file (a link?)"),
        "{}",
        first.stdout
    );
    assert_eq!(stat(s, "%F %U", &backup), "symbolic link shiqi-kafka");
    let applied = std::fs::read_to_string(&properties).expect("read");
    assert!(
        applied.lines().any(|l| l == "ssl.client.auth=required"),
        "{applied}"
    );
    assert_eq!(stat(s, "%U %a", &properties), format!("{kafka} 640"));

    // 2. The broker config made a hard link to a root-only file: refused, the file unchanged.
    let linked = brokers.join("linked.properties");
    s.server(
        None,
        &[
            "ln",
            secret.to_str().expect("utf-8"),
            linked.to_str().expect("utf-8"),
        ],
        None,
    )
    .ok();
    let out = install(&default_tls, &linked);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("2 hard links"), "{}", out.all());
    assert_eq!(stat(s, "%U %a %s", &secret), "root 600 10");

    // 3. A config in a folder the operator's shell account owns: install trusts root and the
    // brokers' account there, and says how to trust another.
    let other = Owned::new(
        s,
        PathBuf::from(format!("{root}/server/{id}-other")),
        &shell,
    );
    let theirs = other.join("server.properties");
    s.server(
        None,
        &[
            "install",
            "-m",
            "0644",
            "-o",
            &shell,
            "-g",
            &shell,
            &node,
            theirs.to_str().expect("utf-8"),
        ],
        None,
    )
    .ok();
    let before = stat(s, "%s %Y", &theirs);
    let out = install(&default_tls, &theirs);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains(&format!("owned by `{shell}`")) && out.all().contains("--kafka-owner"),
        "{}",
        out.all()
    );
    assert_eq!(stat(s, "%s %Y", &theirs), before);

    // 4. The brokers' TLS folder below a link the brokers' account planted (to root's folder
    // of proofs): no certificate is issued through it, nothing there changes hands.
    s.server(
        Some(&kafka),
        &[
            "ln",
            "-s",
            proofs.path.to_str().expect("utf-8"),
            brokers.join("tls").to_str().expect("utf-8"),
        ],
        None,
    )
    .ok();
    let via_link = brokers.join("tls/kafka-broker").display().to_string();
    let out = install(&via_link, &properties);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("is a symbolic link"), "{}", out.all());
    let listed = s
        .server(
            None,
            &["ls", "-A", proofs.path.to_str().expect("utf-8")],
            None,
        )
        .ok();
    assert_eq!(
        listed.stdout.split_whitespace().collect::<Vec<_>>(),
        ["secret"]
    );
    assert_eq!(stat(s, "%U", &proofs.path), "root");

    // 5. A TLS folder whose parent the operator's account owns (it could swap the folder for a
    // link while install runs): refused before anything is issued.
    let in_other = other.join("kafka-broker").display().to_string();
    let out = install(&in_other, &properties);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains(&format!("owned by `{shell}`")),
        "{}",
        out.all()
    );
    assert!(!other.join("kafka-broker").exists());
    drop(ca);
}

/// An existing account that install did not make (the operator's: uid ≥ 1000, home elsewhere)
/// is not taken over by a typo in `--account`: refused before anything changes, unless
/// `--adopt-account` says so.
#[test]
fn install_takes_over_no_existing_account_unless_told() {
    let s = stack();
    let shell = s.info("shell_user");
    let scratch = s.scratch();
    let state = scratch.path().join("state").display().to_string();
    let out = s.server(
        None,
        &[
            s.info("agent_bin"),
            "--state-dir",
            &state,
            "install",
            "--account",
            shell,
            "--no-mysql",
            "--sshd-config",
            s.info("sshd_config"),
        ],
        None,
    );
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr
            .contains(&format!("--account `{shell}` exists and its home is"))
            && out.stderr.contains("--adopt-account"),
        "{}",
        out.all()
    );
    assert!(!Path::new(&state).exists(), "install changed something");
}
