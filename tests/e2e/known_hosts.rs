//! Host-key checking against OpenSSH on the real server: for each known_hosts file of a corpus,
//! `ssh -o StrictHostKeyChecking=yes` and `shiqi-connect setup` agree — both log in, or both
//! refuse — and shiqi-connect names why (changed, revoked, certificate authority, unknown).

use std::os::unix::fs::PermissionsExt as _;

use crate::setup::Home;
use crate::stack::{stack, unique_name};

#[test]
fn setup_and_openssh_agree_on_every_known_hosts_file() {
    let s = stack();
    let home = Home::new(s, "khosts");
    let dir = s.scratch();
    let d = dir.path();
    let ip = s.info("server_ip");
    let real = std::fs::read_to_string(s.info("server_host_key")).expect("server host key");
    let real: String = real
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let fake = |kind: &str, file: &str| {
        let path = d.join(file);
        let out = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", kind, "-N", "", "-f"])
            .arg(&path)
            .output()
            .expect("ssh-keygen");
        assert!(out.status.success());
        let public = std::fs::read_to_string(path.with_extension("pub")).expect("pub");
        public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let other_ed = fake("ed25519", "other_ed");
    let other_ec = fake("ecdsa", "other_ec");
    let prefix = ip.rsplit_once('.').map(|(p, _)| p).unwrap_or(ip);

    // (label, file contents, does OpenSSH accept?, what shiqi-connect must say when refusing)
    let cases: Vec<(&str, String, bool, &str)> = vec![
        ("plain", format!("{ip} {real}\n"), true, ""),
        ("tabs", format!("\t{ip}\t{real}\tcomment\n"), true, ""),
        ("wildcard", format!("{prefix}.* {real}\n"), true, ""),
        ("question mark", format!("{prefix}.? {real}\n"), true, ""),
        ("list", format!("nothing,{ip} {real}\n"), true, ""),
        ("hashed", String::new(), true, ""),
        (
            "negated",
            format!("{prefix}.*,!{ip} {real}\n"),
            false,
            "not known",
        ),
        ("other key", format!("{ip} {other_ed}\n"), false, "CHANGED"),
        (
            "other key type",
            format!("{ip} {other_ec}\n"),
            false,
            "CHANGED",
        ),
        (
            "revoked",
            format!("{ip} {real}\n@revoked * {real}\n"),
            false,
            "REVOKED",
        ),
        (
            "ca only",
            format!("@cert-authority * {other_ed}\n"),
            false,
            "certificate authority",
        ),
        (
            "wrong port",
            format!("[{ip}]:2222 {real}\n"),
            false,
            "not known",
        ),
        ("comment", format!("# {ip} {real}\n"), false, "not known"),
    ];
    let mut agreed = 0;
    for (label, text, openssh_accepts, why) in &cases {
        let file = d.join(format!("kh-{}", label.replace(' ', "-")));
        std::fs::write(&file, text).expect("write");
        if text.is_empty() {
            std::fs::write(&file, format!("{ip} {real}\n")).expect("write");
            let out = std::process::Command::new("ssh-keygen")
                .args(["-q", "-H", "-f"])
                .arg(&file)
                .output()
                .expect("ssh-keygen -H");
            assert!(out.status.success());
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let f = file.display().to_string();
        let before = std::fs::read_to_string(&file).expect("read");

        let ssh = s.laptop(
            &[
                "ssh",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                &format!("UserKnownHostsFile={f}"),
                "-o",
                "GlobalKnownHostsFile=/dev/null",
                // The operator's shell account: same sshd and host key, and `true` runs there
                // (the agent's account runs agent requests only).
                s.info("shell_destination"),
                "true",
            ],
            &[],
            None,
        );
        assert_eq!(
            ssh.success(),
            *openssh_accepts,
            "{label}: OpenSSH's verdict changed:\n{}",
            ssh.all()
        );

        let name = unique_name("kh");
        let ours = home.setup(s, &name, &["--known-hosts", &f]);
        assert_eq!(
            ours.success(),
            *openssh_accepts,
            "{label}: shiqi-connect disagrees with OpenSSH:\n{}",
            ours.all()
        );
        if !ours.success() {
            assert!(
                ours.stderr.contains(why),
                "{label}: expected `{why}`:\n{}",
                ours.stderr
            );
            assert!(home.leftovers(&name).is_empty(), "{label}: left a profile");
        }
        // Never learned: the file is as written.
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            before,
            "{label}: the known_hosts file changed"
        );
        agreed += 1;
    }
    assert_eq!(agreed, cases.len());
}
