//! Logs in wherever `ssh` logs in (issue 31): a key that lives only in an agent whose socket
//! `~/.ssh/config` names with `IdentityAgent` (1Password, Secretive, an agent of one's own),
//! with no `SSH_AUTH_SOCK`, as for an app started from the Dock.

use std::time::Duration;

use crate::lifecycle::{Background, within};
use crate::setup::Home;
use crate::stack::{stack, unique_name};

/// Adds a `Host` block to the laptop user's own `~/.ssh/config` (which `ssh -G` reads from the
/// password database's home, whatever `$HOME` says) and puts the file back when dropped.
struct ConfigBlock {
    path: std::path::PathBuf,
    before: Option<String>,
}

impl ConfigBlock {
    fn add(s: &crate::stack::Stack, block: &str) -> Self {
        let path = std::path::PathBuf::from(format!("{}/.ssh/config", s.info("laptop_home")));
        let before = std::fs::read_to_string(&path).ok();
        let text = format!("{}\n{block}", before.clone().unwrap_or_default());
        let write = format!("umask 077 && cat > {}", path.display());
        s.laptop(&["bash", "-c", &write], &[], Some(text.as_bytes()))
            .ok();
        Self { path, before }
    }
}

impl Drop for ConfigBlock {
    fn drop(&mut self) {
        match &self.before {
            Some(text) => {
                let _ = std::fs::write(&self.path, text);
            }
            None => {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

#[test]
fn a_key_only_in_an_identity_agent_logs_in_like_ssh() {
    let s = stack();
    let home = Home::new(s, "idagent");
    let dir = home.dir.display().to_string();
    let laptop_ssh = format!("{}/.ssh", s.info("laptop_home"));
    // A `$HOME` with known_hosts and no key file: the key lives only in the agent.
    let prepare =
        format!("umask 077 && mkdir -p {dir}/.ssh && cp {laptop_ssh}/known_hosts {dir}/.ssh/");
    s.laptop(&["bash", "-c", &prepare], &[], None).ok();
    let socket = format!("{dir}/agent.sock");
    let agent = Background::start(
        s,
        home.dir.join("agent.log"),
        &format!("ssh-agent -D -a {socket}"),
    );
    let up = within(Duration::from_secs(10), || {
        std::path::Path::new(&socket).exists()
    });
    assert!(up.is_some(), "ssh-agent did not start: {}", agent.log());
    s.laptop(
        &["ssh-add", &format!("{laptop_ssh}/id_ed25519")],
        &[("SSH_AUTH_SOCK", &socket)],
        None,
    )
    .ok();
    let alias = unique_name("vmia");
    let _block = ConfigBlock::add(
        s,
        &format!(
            "Host {alias}\n  HostName {}\n  User shiqi-ca\n  IdentityAgent {socket}\n",
            s.info("server_ip")
        ),
    );

    // OpenSSH logs in through that agent (no key file offered), and so must setup: with no
    // `SSH_AUTH_SOCK` (the laptop's commands run with a clean environment), an agent key in the
    // profile means the `IdentityAgent` socket was used (the agent comes before key files).
    let nokey = format!("IdentityFile={dir}/no-such-key");
    let ssh = s.laptop(
        &[
            "ssh",
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            &nokey,
            &alias,
            "shiqi-ca-agent",
            "--version",
        ],
        &[],
        None,
    );
    assert!(ssh.success(), "ssh itself does not log in:\n{}", ssh.all());
    let name = unique_name("ia");
    let out = s.laptop(
        &["shiqi-connect", "setup", &name, "--server", &alias, "--yes"],
        &[("SHIQI_HOME", &home.env())],
        None,
    );
    assert!(
        out.success(),
        "setup did not use the IdentityAgent:\n{}",
        out.all()
    );
    let profile =
        std::fs::read_to_string(home.profile(&name).join("profile.json")).expect("profile.json");
    assert!(profile.contains("\"kind\": \"agent\""), "{profile}");
    assert!(
        profile.contains(&socket),
        "the profile does not record the socket:\n{profile}"
    );
    // The tunnel's ssh_config names the same agent, so OpenSSH (and DataGrip's "OpenSSH config"
    // mode) ask it too; the OpenSSH tunnel comes up and every forward logs in.
    let config =
        std::fs::read_to_string(home.profile(&name).join("ssh_config")).expect("ssh_config");
    assert!(
        config.contains(&format!("    IdentityAgent {socket}\n")),
        "{config}"
    );
    home.connect(s, &["tunnel", "up", &name, "--openssh"]).ok();
    let status = home.connect(s, &["tunnel", "status", &name]);
    home.connect(s, &["tunnel", "down", &name]).ok();
    assert!(status.success(), "{}", status.all());
    drop(agent);
}
