//! `backup` and `restore` (issue 47): the stack's CA written to one file encrypted to a
//! passphrase, read back into another state directory (same CA, same certificates and
//! revocations, CRL numbers ahead of the original's), refused with a wrong passphrase, over an
//! existing CA without `--force`, and through an admin key; `check` reports the last backup; and
//! `install --restore` puts a second CA back on a server after its state was removed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::install::{SecondCa, lines_with};
use crate::stack::{Out, Stack, stack, unique_name};

const PASSPHRASE: &[u8] = b"correct horse battery staple\n";

/// A folder on the server owned by the agent's account (0700), removed when dropped.
struct AgentDir<'a> {
    s: &'a Stack,
    path: PathBuf,
}

impl<'a> AgentDir<'a> {
    fn new(s: &'a Stack, account: &str) -> Self {
        let path = std::env::temp_dir().join(unique_name("backup"));
        let p = path.display().to_string();
        s.server(
            None,
            &[
                "install", "-d", "-m", "0700", "-o", account, "-g", account, &p,
            ],
            None,
        )
        .ok();
        Self { s, path }
    }

    fn join(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }
}

impl Drop for AgentDir<'_> {
    fn drop(&mut self) {
        let _ = self
            .s
            .server(None, &["rm", "-rf", &self.path.display().to_string()], None);
    }
}

/// `shiqi-ca-agent --state-dir STATE ARGS` as the stack's agent account.
fn agent_at(s: &Stack, state: &str, args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut full = vec![s.info("agent_bin"), "--state-dir", state];
    full.extend_from_slice(args);
    s.server(Some(s.info("server_user")), &full, stdin)
}

/// Each certificate of `list --json` as (serial, revoked).
fn certificates(out: &Out) -> BTreeSet<(String, bool)> {
    let list: Vec<serde_json::Value> = serde_json::from_str(&out.stdout).expect("list --json");
    list.iter()
        .map(|c| {
            (
                c["serial"].as_str().unwrap_or_default().to_owned(),
                !c["revoked_at"].is_null(),
            )
        })
        .collect()
}

/// The CRL number of the PEM CRL at `path`.
fn crl_number(path: &str) -> u64 {
    let out = std::process::Command::new("openssl")
        .args(["crl", "-noout", "-crlnumber", "-in", path])
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.trim().trim_start_matches("crlNumber=0x");
    u64::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("crl number of {path}: {text}"))
}

#[test]
fn a_backup_restores_the_same_ca_elsewhere_and_nothing_else_opens_it() {
    let s = stack();
    let account = s.info("server_user");
    let main = s.info("agent_state_dir");
    let dir = AgentDir::new(s, account);
    let file = dir.join("ca.age");

    // A revoked certificate, so that the backup has one.
    let name = unique_name("bk");
    let scratch = s.scratch();
    let csr = crate::server::openssl_csr(
        scratch.path(),
        &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        &format!("/CN={name}"),
        &[],
    );
    let signed = s
        .agent(&["sign", "--name", &name, "--no-kafka"], Some(&csr))
        .ok();
    let serial =
        serde_json::from_str::<serde_json::Value>(&signed.stdout).expect("sign JSON")["serial"]
            .as_str()
            .expect("serial")
            .to_owned();
    s.agent(&["revoke", &serial, "--reason", "superseded"], None)
        .ok();

    // A short passphrase is refused; the passphrase never comes from argv.
    let short = s.agent(
        &["backup", "--out", &file, "--passphrase-file", "-"],
        Some(b"short\n"),
    );
    assert_eq!(short.code, Some(2), "{}", short.all());
    assert!(short.stderr.contains("shorter than 12"), "{}", short.all());
    assert!(!Path::new(&file).exists());

    let before = certificates(&s.agent(&["list", "--json"], None).ok());
    let made = s
        .agent(
            &["backup", "--out", &file, "--passphrase-file", "-"],
            Some(PASSPHRASE),
        )
        .ok();
    assert!(made.stdout.contains("backed up CA"), "{}", made.all());
    let mode = s.server(None, &["stat", "-c", "%a %U", &file], None).ok();
    assert_eq!(mode.stdout.trim(), format!("600 {account}"));
    let checked = s.agent(&["check", "--json", "--no-revocation"], None).ok();
    let findings: Vec<serde_json::Value> = serde_json::from_str(&checked.stdout).expect("JSON");
    let last = findings
        .iter()
        .find(|f| f["id"] == "state.backup")
        .expect("a state.backup finding");
    assert_eq!(last["status"], "ok", "{last}");
    assert!(
        last["text"].as_str().unwrap_or_default().contains(&file),
        "{last}"
    );

    // Another age implementation opens it (rage, through its Python binding), as `age -d` would:
    // a tar of the manifest, the CA and the inventory.
    let names = std::process::Command::new(s.info("python"))
        .args([
            "-c",
            "import io, sys, tarfile, pyrage\n\
             data = pyrage.passphrase.decrypt(open(sys.argv[1], 'rb').read(), sys.argv[2])\n\
             print(' '.join(tarfile.open(fileobj=io.BytesIO(data)).getnames()))",
            &file,
            std::str::from_utf8(PASSPHRASE).expect("utf-8").trim(),
        ])
        .output()
        .expect("python");
    assert!(names.status.success(), "{names:?}");
    assert_eq!(
        String::from_utf8_lossy(&names.stdout).trim(),
        "MANIFEST.json ca.key ca.crt inventory.sqlite agent.toml"
    );

    // Not through an admin key: the CA key leaves the server only by the operator's hand.
    let remote = s.laptop(
        &[
            "ssh",
            "-T",
            "-o",
            "BatchMode=yes",
            s.info("ssh_destination"),
            "shiqi-ca-agent",
            "backup",
            "--out",
            &dir.join("remote.age"),
            "--passphrase-file",
            "-",
        ],
        &[],
        Some(PASSPHRASE),
    );
    assert!(!remote.success(), "{}", remote.all());
    assert!(remote.stderr.contains("`backup`"), "{}", remote.all());
    assert!(!Path::new(&dir.join("remote.age")).exists());

    // Another state directory: a wrong passphrase opens nothing and writes nothing.
    let other = dir.join("restored");
    let wrong = agent_at(
        s,
        &other,
        &["restore", &file, "--passphrase-file", "-"],
        Some(b"not the passphrase at all\n"),
    );
    assert_eq!(wrong.code, Some(2), "{}", wrong.all());
    assert!(
        wrong.stderr.contains("the passphrase does not open"),
        "{}",
        wrong.all()
    );
    assert!(!Path::new(&other).join("ca.key").exists());

    let restored = agent_at(
        s,
        &other,
        &["restore", &file, "--passphrase-file", "-"],
        Some(PASSPHRASE),
    )
    .ok();
    assert!(
        restored.stdout.contains("restored CA"),
        "{}",
        restored.all()
    );
    let read = |p: String| std::fs::read(p).expect("read");
    assert_eq!(
        read(format!("{other}/ca.crt")),
        read(format!("{main}/ca.crt"))
    );
    let after = certificates(&agent_at(s, &other, &["list", "--json"], None).ok());
    assert_eq!(after, before, "the restored inventory differs");
    assert!(
        after.contains(&(serial.clone(), true)),
        "{serial} not revoked"
    );

    // Its CRL (published into the scratch folder, not the stack's) lists the revocation, with
    // a number ahead of every CRL the original signed.
    let publish = dir.join("pub");
    let config = format!("{other}/agent.toml");
    let mut table: toml::Table = std::fs::read_to_string(&config)
        .expect("the backup's agent.toml")
        .parse()
        .expect("TOML");
    let mut crl = table
        .get("crl")
        .and_then(|t| t.as_table())
        .cloned()
        .unwrap_or_default();
    crl.insert("publish_dir".into(), publish.clone().into());
    table.insert("crl".into(), crl.into());
    let edited = dir.join("edited.toml");
    s.server(
        Some(account),
        &["sh", "-c", &format!("cat > {edited}")],
        Some(table.to_string().as_bytes()),
    )
    .ok();
    agent_at(
        s,
        &other,
        &["--config", &edited, "crl", "--no-reload"],
        None,
    )
    .ok();
    let listed = std::process::Command::new("openssl")
        .args(["crl", "-noout", "-text", "-in", &format!("{other}/crl.pem")])
        .output()
        .expect("openssl");
    let listed = String::from_utf8_lossy(&listed.stdout).to_ascii_uppercase();
    assert!(listed.contains(&serial.to_ascii_uppercase()), "{listed}");
    assert!(
        crl_number(&format!("{other}/crl.pem")) > crl_number(&format!("{main}/crl.pem")) + 999_000
    );

    // Over a CA: refused without --force; with it, the old one is moved aside.
    let again = agent_at(
        s,
        &other,
        &["restore", &file, "--passphrase-file", "-"],
        Some(PASSPHRASE),
    );
    assert_eq!(again.code, Some(2), "{}", again.all());
    assert!(again.stderr.contains("--force"), "{}", again.all());
    let forced = agent_at(
        s,
        &other,
        &["restore", &file, "--passphrase-file", "-", "--force"],
        Some(PASSPHRASE),
    )
    .ok();
    assert!(forced.stdout.contains("is in"), "{}", forced.all());
}

/// `install --restore` on a server whose second CA was removed (account, state, sshd drop-in,
/// MariaDB admin): the same CA comes back, with its certificates.
#[test]
fn install_restore_brings_a_removed_ca_back() {
    let s = stack();
    let root = s.info("stack_dir").to_owned();
    let account = "shiqi-ca-e2r".to_owned();
    let make = || SecondCa {
        s,
        account: account.clone(),
        state: PathBuf::from(format!("{root}/server/ca-e2r")),
        publish: PathBuf::from(format!("{root}/server/crl-e2r")),
        drop_in: PathBuf::from(format!("{root}/server/ssh/sshd_config.d/{account}.conf")),
    };
    let scratch = s.scratch();
    let state = format!("{root}/server/ca-e2r");
    let pass = scratch.path().join("pass");
    std::fs::write(&pass, PASSPHRASE).expect("write");
    let file = scratch.path().join("ca.age");
    let first = make();
    first.install(scratch.path(), None, None, &[]).ok();
    let as_account = |args: &[&str], stdin: Option<&[u8]>| {
        let mut full = vec![s.info("agent_bin"), "--state-dir", &state];
        full.extend_from_slice(args);
        s.server(Some(&account), &full, stdin)
    };
    let before = certificates(&as_account(&["list", "--json"], None).ok());
    let ca = std::fs::read(format!("{state}/ca.crt")).expect("ca.crt");
    // The account writes into a folder of its own; root keeps the file.
    let out = AgentDir::new(s, &account);
    as_account(
        &[
            "backup",
            "--out",
            &out.join("ca.age"),
            "--passphrase-file",
            "-",
        ],
        Some(PASSPHRASE),
    )
    .ok();
    std::fs::copy(out.join("ca.age"), &file).expect("copy the backup");
    drop(out);
    drop(first);
    assert!(!Path::new(&state).exists());

    let second = make();
    let file_s = file.display().to_string();
    let pass_s = pass.display().to_string();
    let back = second
        .install(
            scratch.path(),
            None,
            None,
            &["--restore", &file_s, "--passphrase-file", &pass_s],
        )
        .ok();
    assert_eq!(
        lines_with(&back.stdout, "done", "ca").len(),
        1,
        "{}",
        back.stdout
    );
    assert!(
        back.stdout.contains("restored the CA from"),
        "{}",
        back.stdout
    );
    assert_eq!(
        std::fs::read(format!("{state}/ca.crt")).expect("ca.crt"),
        ca
    );
    let after = certificates(&as_account(&["list", "--json"], None).ok());
    assert!(after.is_superset(&before), "{before:?}\n{after:?}");
    // Nothing of the backup or its passphrase is left in the state directory.
    assert!(!Path::new(&format!("{state}/restore.age")).exists());
}
