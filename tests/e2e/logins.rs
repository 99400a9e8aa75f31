//! Logs in wherever `ssh` logs in (issue 31), with OpenSSH as the oracle: a key that lives only
//! in an agent whose socket `~/.ssh/config` names with `IdentityAgent` (1Password, Secretive, an
//! agent of one's own), with no `SSH_AUTH_SOCK`, as for an app started from the Dock; user
//! certificates from the stack's SSH CA beside their key or only in the agent; an expired one.

use std::time::Duration;

use crate::lifecycle::{Background, within};
use crate::setup::Home;
use crate::stack::{stack, unique_name};
use crate::tunnel::Tunnel;

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

/// A fresh key pair `DIR/NAME` of the laptop user's, not authorized anywhere, and its user
/// certificate `DIR/NAME-cert.pub` from the stack's SSH CA for the operator's account, with
/// `validity` as `ssh-keygen -V` takes it.
fn certified_key(s: &crate::stack::Stack, dir: &str, name: &str, validity: &str) -> String {
    certified_key_for(s, dir, name, s.info("shell_user"), validity)
}

/// As [`certified_key`], for `principal`.
pub(crate) fn certified_key_for(
    s: &crate::stack::Stack,
    dir: &str,
    name: &str,
    principal: &str,
    validity: &str,
) -> String {
    let key = format!("{dir}/{name}");
    s.laptop(
        &[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            name,
            "-f",
            &key,
        ],
        &[],
        None,
    )
    .ok();
    let signed = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-s",
            s.info("ssh_user_ca"),
            "-I",
            name,
            "-n",
            principal,
        ])
        .args(["-V", validity])
        .arg(format!("{key}.pub"))
        .output()
        .expect("ssh-keygen runs");
    assert!(
        signed.status.success(),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    key
}

/// `ssh -T ALIAS true` with the laptop user's config: OpenSSH's verdict.
fn ssh_logs_in(s: &crate::stack::Stack, alias: &str) -> crate::stack::Out {
    s.laptop(
        &["ssh", "-T", "-o", "BatchMode=yes", alias, "true"],
        &[],
        None,
    )
}

/// `KEY-cert.pub` beside an identity file logs in where the key alone would not; an expired
/// one is refused by ssh and skipped by setup with a note naming its validity.
#[test]
fn a_user_certificate_beside_its_key_logs_in_like_ssh_and_an_expired_one_does_not() {
    let s = stack();
    let home = Home::new(s, "sshcert");
    let dir = home.dir.display().to_string();
    let id = unique_name("sc");
    let key = certified_key(s, &dir, &format!("{id}-key"), "-5m:+1h");
    let old = certified_key(s, &dir, &format!("{id}-old"), "20200101:20200102");
    let (alias, expired) = (format!("{id}-vm"), format!("{id}-vmold"));
    let block = |alias: &str, key: &str| {
        format!(
            "Host {alias}\n  HostName {}\n  User {}\n  IdentityFile {key}\n  IdentitiesOnly yes\n  \
             IdentityAgent none\n",
            s.info("server_ip"),
            s.info("shell_user"),
        )
    };
    let _block = ConfigBlock::add(
        s,
        &format!("{}{}", block(&alias, &key), block(&expired, &old)),
    );
    let agent_command = ["--agent-command", s.info("agent_via_sudo")];

    let ssh = ssh_logs_in(s, &alias);
    assert!(ssh.success(), "ssh itself does not log in:\n{}", ssh.all());
    let name = unique_name("cf");
    let mut args = vec!["setup", &name, "--server", &alias, "--yes"];
    args.extend_from_slice(&agent_command);
    let out = home.connect(s, &args).ok();
    assert!(
        out.all().contains(&format!(
            "and its certificate `{id}-key` for {}",
            s.info("shell_user")
        )),
        "{}",
        out.all()
    );
    let doctor = home.connect(s, &["doctor", &name]);
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.contains("ssh.login") && l.contains(&format!("certificate `{id}-key`"))),
        "{}",
        doctor.all()
    );
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let (status, _) = tunnel.status();
    assert!(status.success(), "{}", status.all());
    drop(tunnel);

    // Expired: OpenSSH is refused, and so is setup, which says why.
    let ssh = ssh_logs_in(s, &expired);
    assert!(
        !ssh.success(),
        "ssh logs in with an expired certificate:\n{}",
        ssh.all()
    );
    let name = unique_name("cx");
    let mut args = vec!["setup", &name, "--server", &expired, "--yes"];
    args.extend_from_slice(&agent_command);
    let out = home.connect(s, &args);
    assert!(!out.success(), "{}", out.all());
    assert!(
        out.all().contains(&format!("key id `{id}-old`"))
            && out.all().contains("valid from 2020-01-01"),
        "{}",
        out.all()
    );
}

/// A certificate the agent holds (`ssh-add` loads `KEY-cert.pub` with its key), no key file on
/// disk: ssh and setup log in with it.
#[test]
fn a_certificate_only_in_the_agent_logs_in_like_ssh() {
    let s = stack();
    let home = Home::new(s, "sshcertagent");
    let dir = home.dir.display().to_string();
    let id = unique_name("sa");
    let keys = format!("{dir}/keys");
    s.laptop(&["mkdir", "-p", &keys], &[], None).ok();
    let key = certified_key(s, &keys, &format!("{id}-key"), "-5m:+1h");
    let socket = format!("{dir}/agent.sock");
    let agent = Background::start(
        s,
        home.dir.join("agent.log"),
        &format!("ssh-agent -D -a {socket}"),
    );
    let started = within(Duration::from_secs(10), || {
        std::path::Path::new(&socket).exists()
    });
    assert!(
        started.is_some(),
        "ssh-agent did not start: {}",
        agent.log()
    );
    let added = s
        .laptop(&["ssh-add", &key], &[("SSH_AUTH_SOCK", &socket)], None)
        .ok();
    assert!(added.all().contains("Certificate added"), "{}", added.all());
    std::fs::remove_dir_all(&keys).expect("the key leaves the disk");
    let alias = format!("{id}-vm");
    let _block = ConfigBlock::add(
        s,
        &format!(
            "Host {alias}\n  HostName {}\n  User {}\n  IdentityAgent {socket}\n  \
             IdentityFile {dir}/no-such-key\n",
            s.info("server_ip"),
            s.info("shell_user"),
        ),
    );

    let ssh = ssh_logs_in(s, &alias);
    assert!(ssh.success(), "ssh itself does not log in:\n{}", ssh.all());
    let name = unique_name("ca");
    let out = home
        .connect(
            s,
            &[
                "setup",
                &name,
                "--server",
                &alias,
                "--yes",
                "--agent-command",
                s.info("agent_via_sudo"),
            ],
        )
        .ok();
    assert!(
        out.all().contains(&format!("certificate `{id}-key`"))
            && out.all().contains("(from the agent)"),
        "{}",
        out.all()
    );
    let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let (status, _) = tunnel.status();
    assert!(status.success(), "{}", status.all());
    drop(tunnel);
    let doctor = home.connect(s, &["doctor", &name]);
    assert!(
        doctor.stdout.lines().any(|l| l.contains("ssh.login")
            && l.contains(&format!("certificate `{id}-key`"))
            && l.contains("(from the agent)")),
        "{}",
        doctor.all()
    );
    drop(agent);
}

/// A team with an SSH CA: the agent enrolls a certificate principal as `user` (sshd's
/// `AuthorizedPrincipalsFile` with the forced command); a certificate naming it logs in to the
/// agent's account with ssh and with setup, may ask for its own name only, and the audit log
/// records the certificate's key id.
#[test]
fn a_principal_enrolled_as_user_gets_only_its_own_name() {
    let s = stack();
    let home = Home::new(s, "principal");
    let dir = home.dir.display().to_string();
    let id = unique_name("pr");
    let name = unique_name("pn");
    let principal = format!("{id}.team");
    let enrolled = s.agent(
        &[
            "enroll",
            &name,
            "--ssh-principal",
            &principal,
            "--role",
            "user",
        ],
        None,
    );
    let remove = || {
        let _ = s.agent(
            &["enroll", "--remove", &format!("principal:{principal}")],
            None,
        );
    };
    if !enrolled.success() {
        remove();
    }
    assert!(
        enrolled.ok().stdout.contains("authorized_principals"),
        "enroll names the file it wrote"
    );
    let key = certified_key_for(s, &dir, &format!("{id}-key"), &principal, "-5m:+1h");
    let alias = format!("{id}-ca");
    let _block = ConfigBlock::add(
        s,
        &format!(
            "Host {alias}\n  HostName {}\n  User {}\n  IdentityFile {key}\n  IdentitiesOnly yes\n  \
             IdentityAgent none\n",
            s.info("server_ip"),
            s.info("server_user"),
        ),
    );

    let ssh = s.laptop(
        &[
            "ssh",
            "-T",
            "-o",
            "BatchMode=yes",
            &alias,
            "shiqi-ca-agent",
            "--version",
        ],
        &[],
        None,
    );
    let own = home.connect(s, &["setup", &name, "--server", &alias, "--yes"]);
    // The tunnel and doctor log in with the same certificate (before the principal goes).
    let checks = own.success().then(|| {
        let (tunnel, up) = Tunnel::up(s, &home, &name, &[]);
        let (status, _) = tunnel.status();
        drop(tunnel);
        (up, status, home.connect(s, &["doctor", &name]))
    });
    let other = unique_name("po");
    let theirs = home.connect(s, &["setup", &other, "--server", &alias, "--yes"]);
    let audit = std::fs::read_to_string(format!("{}/audit.log", s.info("agent_state_dir")))
        .unwrap_or_default();
    remove();
    assert!(
        ssh.success() && ssh.stdout.contains("shiqi-ca-agent"),
        "ssh: {}",
        ssh.all()
    );
    assert!(own.success(), "{}", own.all());
    let (up, status, doctor) = checks.expect("run after a successful setup");
    assert!(
        up.success() && status.success(),
        "{}{}",
        up.all(),
        status.all()
    );
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.contains("ssh.login") && l.contains(&format!("certificate `{id}-key`"))),
        "{}",
        doctor.all()
    );
    assert!(
        own.all().contains(&format!("certificate `{id}-key`")),
        "{}",
        own.all()
    );
    assert!(!theirs.success(), "{}", theirs.all());
    assert!(
        theirs
            .stderr
            .contains(&format!("may not ask for a certificate for `{other}`"))
            && theirs.stderr.contains("role user"),
        "{}",
        theirs.all()
    );
    let line = audit
        .lines()
        .find(|l| {
            l.contains(&format!("\"key\":\"principal:{principal}\""))
                && l.contains("\"outcome\":\"ok\"")
        })
        .unwrap_or_else(|| panic!("no audit line for the principal:\n{audit}"));
    assert!(
        line.contains(&format!("\"certificate\":\"{id}-key\"")),
        "{line}"
    );
}
