//! SSH: the server answers, its host key is in the tunnel's known_hosts, which key logs in, and
//! whether `ssh_config` names that key — the seed trap where DataGrip and ssh looked for
//! `~/.ssh/id_rsa` while the key that works is `~/.ssh/id_ed25519`.
//!
//! The login is tried first exactly as the tunnel's `ssh_config` would (its `IdentityFile`s,
//! `IdentitiesOnly`), then, if that fails, with every key the user has, to name the one that
//! works. Uses [`crate::ssh::Session`] (russh) and `ssh::auth`.

use std::path::{Path, PathBuf};

use shiqi_ca::protocol::PROTOCOL_VERSION;

use crate::agent::AgentCommand;
use crate::doctor::tunnel_config::TunnelConfig;
use crate::doctor::{CheckId, Context, Finding, Findings, Status, needs};
use crate::error::{AgentError, Error, SshError};
use crate::probe::speaks as probe;
use crate::profile::KeyUsed;
use crate::profile::Profile;
use crate::ssh::Session;
use crate::ssh::auth::Passphrase;
use crate::ssh::config::{self, Env, Target};
use crate::ssh::destination::Destination;
use crate::ssh::known_hosts::HostKeyPolicy;

/// The keys OpenSSH tries when a config names none.
const OPENSSH_DEFAULT_KEYS: &[&str] = &[
    ".ssh/id_rsa",
    ".ssh/id_ecdsa",
    ".ssh/id_ecdsa_sk",
    ".ssh/id_ed25519",
    ".ssh/id_ed25519_sk",
];

/// What the SSH checks tell later ones.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ssh {
    /// The first of `ssh.reach`, `ssh.host-key` and `ssh.login` that failed: nothing logs in.
    pub(crate) login: Option<CheckId>,
    /// Whether `ssh.config-key` failed: the tunnel's own `ssh_config` does not log in.
    pub(crate) config_key: bool,
}

impl Ssh {
    /// Reads the lines of the SSH checks.
    fn of(lines: &[Finding]) -> Self {
        let failed = |id: CheckId| {
            lines
                .iter()
                .any(|f| f.check == id && f.status == Status::Fail)
        };
        Self {
            login: [CheckId::SshReach, CheckId::SshHostKey, CheckId::SshLogin]
                .into_iter()
                .find(|id| failed(*id)),
            config_key: failed(CheckId::SshConfigKey),
        }
    }

    /// The first SSH check that failed: the tunnel cannot start until it passes.
    pub(crate) fn blocker(&self) -> Option<CheckId> {
        self.login
            .or(self.config_key.then_some(CheckId::SshConfigKey))
    }
}

/// `ssh.*`, then `agent.version` through the tunnel's login.
pub(crate) async fn check(ctx: &Context, st: &mut Findings, passphrase: &dyn Passphrase) -> Ssh {
    let from = st.checks.len();
    let agent = ssh(ctx, st, passphrase).await;
    // Asked over the tunnel's own login: when only another key logs in, that is what fails.
    let after = if st.status(CheckId::SshLogin) == Some(Status::Ok) {
        CheckId::SshConfigKey
    } else {
        CheckId::SshLogin
    };
    st.push(agent.unwrap_or_else(|| Finding::skip(CheckId::AgentVersion, needs(after))));
    Ssh::of(&st.checks[from..])
}

/// `ssh.*`; the `agent.version` finding when the tunnel's login works.
async fn ssh(ctx: &Context, st: &mut Findings, passphrase: &dyn Passphrase) -> Option<Finding> {
    let profile = match &ctx.profile {
        Ok(p) => p,
        Err(why) => {
            for id in [
                CheckId::SshReach,
                CheckId::SshHostKey,
                CheckId::SshLogin,
                CheckId::SshConfigKey,
            ] {
                st.push(Finding::skip(id, format!("no profile: {why}")));
            }
            return None;
        }
    };
    let cfg = ctx.ssh_config.as_ref().ok();
    let target = tunnel_target(ctx, profile, cfg);
    if !reach_check(ctx, st, &target).await {
        return None;
    }
    let first = Session::connect(&target, HostKeyPolicy::Strict, passphrase).await;
    let (mut certificate, mut login_notes, mut agent) = (None, Vec::new(), None);
    let (tunnel_key, used) = match first {
        Ok(s) => {
            st.push(host_key_ok(ctx, s.host_key().file()));
            let used = s.auth().used.clone();
            certificate.clone_from(&s.auth().certificate);
            // Certificates skipped as expired, keys skipped as encrypted: said once, here.
            login_notes.clone_from(&s.auth().notes);
            agent = Some(agent_version(profile, &s).await);
            s.close().await;
            (Some(used.clone()), used)
        }
        Err(Error::Ssh(SshError::AuthFailed { tried, .. })) => {
            st.push(host_key_ok(ctx, &target.known_hosts[0]));
            (
                None,
                other_key(ctx, st, profile, &target, &tried, passphrase).await?,
            )
        }
        Err(e) => {
            st.push(host_key_failure(ctx, &e));
            for id in [CheckId::SshLogin, CheckId::SshConfigKey] {
                st.push(Finding::skip(id, needs(CheckId::SshHostKey)));
            }
            return None;
        }
    };
    let with_cert = certificate
        .map(|c| format!(" with its {c}"))
        .unwrap_or_default();
    let mut login = Finding::ok(
        CheckId::SshLogin,
        format!(
            "`{}@{}` accepts {}{with_cert}",
            target.user,
            target.host,
            shown_key(ctx, &used)
        ),
    );
    for n in login_notes {
        login = login.note(n);
    }
    st.push(login);
    st.push(config_key(ctx, cfg, tunnel_key.as_ref(), &used));
    agent
}

/// The tunnel's login, as its `ssh_config` says (the profile's server where it says nothing).
fn tunnel_target(ctx: &Context, profile: &Profile, cfg: Option<&TunnelConfig>) -> Target {
    let host = cfg
        .and_then(|c| c.host_name.clone())
        .unwrap_or_else(|| profile.server.host.clone());
    let port = cfg.and_then(|c| c.port).unwrap_or(profile.server.port);
    let user = cfg
        .and_then(|c| c.user.clone())
        .unwrap_or_else(|| profile.server.user.clone());
    // Behind jump hosts (`ProxyJump`, `--jump`).
    let jumps = crate::tunnel::Targets::resolve(profile, &ctx.home)
        .map(|t| t.first.jumps)
        .unwrap_or_default();
    let known_hosts = cfg
        .map(|c| c.known_hosts.clone())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| vec![profile.server.known_hosts.clone()]);
    // The login itself is the server's (through the jump hosts, if any).
    Target {
        destination: Destination {
            user: Some(user.clone()),
            host: host.clone(),
            port: Some(port),
        },
        host,
        port,
        user,
        identity_files: tunnel_keys(cfg, &ctx.home),
        certificate_files: cfg.map(|c| c.certificate_files.clone()).unwrap_or_default(),
        pkcs11_provider: None,
        identities_only: cfg.is_some_and(|c| c.identities_only),
        use_agent: true,
        // The agent that signed during setup (an `IdentityAgent` socket), as the tunnel uses.
        identity_agent: match &profile.server.ssh_key {
            KeyUsed::Agent { socket, .. } => socket.clone(),
            KeyUsed::File { .. } => None,
        },
        known_hosts,
        global_known_hosts: vec![PathBuf::from("/etc/ssh/ssh_known_hosts")],
        host_key_alias: None,
        proxy_command: None,
        proxy_jump: None,
        jumps,
        resolved_by: "ssh_config",
    }
}

/// `ssh.reach`: TCP, and an SSH banner, from the first jump host when there are any (what this
/// machine reaches), else the server. Whether it passed; the SSH lines after it are skipped
/// when not.
async fn reach_check(ctx: &Context, st: &mut Findings, target: &Target) -> bool {
    let (host, port, user) = target.jumps.first().map_or_else(
        || (target.host.clone(), target.port, target.user.clone()),
        |j| (j.host.clone(), j.port, j.user.clone()),
    );
    let (h, p) = (host.clone(), port);
    let banner = tokio::task::spawn_blocking(move || probe::ssh_banner(&h, p))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
    let line = reach(ctx, (&host, port, &user), target.jumps.len(), banner);
    let failed = line.status == Status::Fail;
    st.push(line);
    if failed {
        for id in [
            CheckId::SshHostKey,
            CheckId::SshLogin,
            CheckId::SshConfigKey,
        ] {
            st.push(Finding::skip(id, needs(CheckId::SshReach)));
        }
    }
    !failed
}

/// The key that logs in when the tunnel's own keys (`tried`) do not: the user's own
/// configuration and every usual key. `None`, with the `ssh.login` failure, when none does.
async fn other_key(
    ctx: &Context,
    st: &mut Findings,
    profile: &Profile,
    target: &Target,
    tried: &str,
    passphrase: &dyn Passphrase,
) -> Option<KeyUsed> {
    let all = everything_target(ctx, profile, target);
    if let Ok(s) = Session::connect(&all, HostKeyPolicy::Strict, passphrase).await {
        let used = s.auth().used.clone();
        s.close().await;
        return Some(used);
    }
    let (user, host) = (&target.user, &target.host);
    st.push(Finding::fail(
        CheckId::SshLogin,
        format!("`{user}@{host}` accepts none of your SSH keys (tried: {tried})"),
        format!(
            "add your public key to `~{user}/.ssh/authorized_keys` on the server \
             (`ssh-copy-id {user}@{host}`), or load the key into ssh-agent (`ssh-add`)"
        ),
    ));
    st.push(Finding::skip(
        CheckId::SshConfigKey,
        needs(CheckId::SshLogin),
    ));
    None
}

/// `agent.version`: the server's agent speaks this build's protocol. A laptop and an agent of
/// different releases fail the first request that changed, with an error about a field; this
/// names the one to update instead.
async fn agent_version(
    profile: &crate::profile::Profile,
    session: &crate::ssh::Session,
) -> Finding {
    let id = CheckId::AgentVersion;
    let agent = match AgentCommand::new(&profile.server.agent_command) {
        Ok(a) => a,
        Err(e) => return Finding::fail(id, e.to_string(), "run `shiqi-connect setup` again"),
    };
    version_finding(crate::agent::version(session, &agent).await)
}

/// `agent.version` from the agent's answer.
fn version_finding(answer: Result<shiqi_ca::protocol::VersionResponse, Error>) -> Finding {
    let id = CheckId::AgentVersion;
    let ours = shiqi_ca::version!();
    let update_agent = format!(
        "put shiqi-ca-agent {} on the server (docs/install.md); `shiqi-ca-agent version` there \
         says which it runs",
        env!("CARGO_PKG_VERSION")
    );
    match answer {
        Ok(v) if v.version == PROTOCOL_VERSION => {
            let finding = Finding::ok(
                id,
                format!(
                    "`shiqi-ca-agent {}` speaks protocol {}, as this shiqi-connect does",
                    v.agent, v.version
                ),
            );
            // The same release and commit; the target differs between a laptop and a server.
            let release = |build: &str| build.split(", ").next().unwrap_or_default().to_owned();
            if release(v.agent.as_str()) == release(ours) {
                finding
            } else {
                finding.note(format!("this laptop runs {ours}"))
            }
        }
        Ok(v) if v.version > PROTOCOL_VERSION => Finding::fail(
            id,
            format!(
                "the server's agent (`{}`) speaks protocol {}, newer than this shiqi-connect's {} \
                 ({ours})",
                v.agent, v.version, PROTOCOL_VERSION
            ),
            "update shiqi-connect on this laptop to the agent's release (docs/install.md)",
        ),
        Ok(v) => Finding::fail(
            id,
            format!(
                "the server's agent (`{}`) speaks protocol {}, older than this shiqi-connect's {}",
                v.agent, v.version, PROTOCOL_VERSION
            ),
            update_agent,
        ),
        Err(Error::Agent(AgentError::TooOld { .. })) => Finding::fail(
            id,
            "the server's agent predates `version`: it is older than this shiqi-connect",
            update_agent,
        ),
        Err(e) => {
            let fix = e.hint().unwrap_or_else(|| update_agent.clone());
            Finding::fail(id, e.to_string(), fix)
        }
    }
}

/// `ssh.reach` from what `host:port` answered. The banner comes before any host key is
/// checked; [`probe::ssh_banner`] escaped it, and the finding escapes again whatever it quotes.
fn reach(
    ctx: &Context,
    (host, port, user): (&str, u16, &str),
    jumps: usize,
    banner: std::io::Result<String>,
) -> Finding {
    match banner {
        Ok(b) if b.starts_with("SSH-") => {
            let via = if jumps == 0 {
                String::new()
            } else {
                format!(" (the first of {jumps} jump host(s))")
            };
            Finding::ok(
                CheckId::SshReach,
                format!("`{host}:{port}`{via} answers `{b}`"),
            )
        }
        Ok(b) => Finding::fail(
            CheckId::SshReach,
            format!("`{host}:{port}` answers, but not as an SSH server (`{b}`)"),
            format!("check `HostName` and `Port` in `{}`", ssh_config_shown(ctx)),
        ),
        Err(e) => Finding::fail(
            CheckId::SshReach,
            format!("cannot reach the SSH server `{host}:{port}`: {e}"),
            format!(
                "check that the server is up and the network path to it; \
                 `ssh -p {port} {user}@{host} true` shows the same"
            ),
        ),
    }
}

fn ssh_config_shown(ctx: &Context) -> String {
    ctx.path(crate::profile::files::SSH_CONFIG)
        .map(|p| ctx.show(&p))
        .unwrap_or_else(|| "ssh_config".to_owned())
}

fn shown_key(ctx: &Context, k: &KeyUsed) -> String {
    match k {
        KeyUsed::File { path, .. } => format!("`{}`", ctx.show(path)),
        KeyUsed::Agent {
            file: Some(path),
            socket,
            ..
        } => match socket {
            Some(s) => format!(
                "`{}` (through the agent at `{}`)",
                ctx.show(path),
                ctx.show(s)
            ),
            None => format!("`{}` (through ssh-agent)", ctx.show(path)),
        },
        KeyUsed::Agent {
            socket: Some(s), ..
        } => format!("{k} (the agent at `{}`)", ctx.show(s)),
        other => other.to_string(),
    }
}

fn host_key_ok(ctx: &Context, file: &Path) -> Finding {
    Finding::ok(
        CheckId::SshHostKey,
        format!("the server's host key is known in `{}`", ctx.show(file)),
    )
}

fn host_key_failure(ctx: &Context, e: &Error) -> Finding {
    match e {
        Error::Ssh(SshError::HostKeyUnknown {
            host,
            algorithm,
            fingerprint,
            known_hosts,
        }) => Finding::fail(
            CheckId::SshHostKey,
            format!(
                "the host key of `{host}` ({algorithm} {fingerprint}) is not in `{}`, which the \
                 tunnel's ssh_config trusts (`StrictHostKeyChecking yes`)",
                ctx.show(known_hosts)
            ),
            format!(
                "compare the fingerprint with the server's (`ssh-keygen -lf \
                 /etc/ssh/ssh_host_ed25519_key.pub` on it), then add it: `ssh-keyscan {} >> {}`",
                host.trim_start_matches('[')
                    .split(']')
                    .next()
                    .unwrap_or(host),
                ctx.show(known_hosts)
            ),
        ),
        Error::Ssh(SshError::HostKeyChanged {
            known_hosts, line, ..
        }) => Finding::fail(
            CheckId::SshHostKey,
            e.to_string(),
            format!(
                "if the server was really reinstalled, ask its admin for the new fingerprint and \
                 remove line {line} of `{}`; otherwise someone may be intercepting the connection",
                ctx.show(known_hosts)
            ),
        ),
        other => Finding::fail(
            CheckId::SshHostKey,
            format!("the SSH handshake did not complete: {}", chain(other)),
            other
                .hint()
                .unwrap_or_else(|| "try `ssh -v` to the server to see where it breaks".to_owned()),
        ),
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// The keys ssh offers for the tunnel: its `IdentityFile`s, or OpenSSH's defaults.
fn tunnel_keys(cfg: Option<&TunnelConfig>, home: &Path) -> Vec<PathBuf> {
    match cfg {
        Some(c) if !c.identity_files.is_empty() => c.identity_files.clone(),
        _ => OPENSSH_DEFAULT_KEYS.iter().map(|k| home.join(k)).collect(),
    }
}

/// The user's view of the destination (their `~/.ssh/config`, agent, usual keys), pointed at
/// the tunnel's server.
fn everything_target(ctx: &Context, profile: &Profile, tunnel: &Target) -> Target {
    let env = Env::from_process(ctx.home.clone(), None);
    let mut keys = tunnel.identity_files.clone();
    if let Ok(dest) = profile.server.destination.parse::<Destination>()
        && let Ok(t) = config::resolve(&dest, &env)
    {
        keys.extend(t.identity_files);
    }
    keys.extend(OPENSSH_DEFAULT_KEYS.iter().map(|k| ctx.home.join(k)));
    let mut seen = Vec::new();
    keys.retain(|k| {
        let new = !seen.contains(k);
        seen.push(k.clone());
        new
    });
    Target {
        identity_files: keys,
        identities_only: false,
        ..tunnel.clone()
    }
}

/// `ssh.config-key`.
fn config_key(
    ctx: &Context,
    cfg: Option<&TunnelConfig>,
    tunnel_key: Option<&KeyUsed>,
    works: &KeyUsed,
) -> Finding {
    let Some(cfg) = cfg else {
        return Finding::skip(
            CheckId::SshConfigKey,
            "the tunnel's `ssh_config` cannot be read",
        );
    };
    let cfg_shown = ctx.show(&cfg.path);
    let works_file = match works {
        KeyUsed::File { path, .. } => Some(path.clone()),
        KeyUsed::Agent { file, .. } => file.clone(),
    };
    let datagrip = |check: Finding| match &works_file {
        Some(f) if f.file_name().is_some_and(|n| n != "id_rsa") => check.note(format!(
            "DataGrip's SSH tunnel looks for `~/.ssh/id_rsa` unless told otherwise: choose \
             \"Key pair\" with `{}`, or \"OpenSSH config and authentication agent\"",
            ctx.show(f)
        )),
        _ => check,
    };
    if tunnel_key.is_none() {
        return datagrip(names_the_wrong_key(ctx, cfg, works, works_file.as_deref()));
    }
    // The tunnel's own keys work; ssh also ignores a key file others can read.
    if let Some(f) = &works_file
        && let Some(mode) = crate::os::files::mode(f)
        && mode & 0o077 != 0
    {
        return Finding::fail(
            CheckId::SshConfigKey,
            format!(
                "`{}` is mode {:04o}: OpenSSH ignores a private key others can read \
                 (\"UNPROTECTED PRIVATE KEY FILE\")",
                ctx.show(f),
                mode
            ),
            format!("`chmod 600 {}`", ctx.show(f)),
        );
    }
    let found = match (&works_file, works) {
        (Some(f), _) if cfg.identity_files.contains(f) => {
            format!(
                "`{cfg_shown}` names `{}`, the key that logs in",
                ctx.show(f)
            )
        }
        (_, KeyUsed::Agent { .. }) => format!(
            "the tunnel logs in with ssh-agent's key {}; keep it loaded (`ssh-add -l`)",
            shown_key(ctx, works)
        ),
        (Some(f), _) => format!(
            "`{cfg_shown}` names no key; ssh finds `{}` among its defaults",
            ctx.show(f)
        ),
        (None, _) => format!("`{cfg_shown}` works as written"),
    };
    datagrip(Finding::ok(CheckId::SshConfigKey, found))
}

/// `ssh.config-key` when the tunnel's own keys do not log in: what its `ssh_config` names, and
/// the key that works instead (`works`, from the file `works_file` if it is one).
fn names_the_wrong_key(
    ctx: &Context,
    cfg: &TunnelConfig,
    works: &KeyUsed,
    works_file: Option<&Path>,
) -> Finding {
    let cfg_shown = ctx.show(&cfg.path);
    let (absent, present): (Vec<&PathBuf>, Vec<&PathBuf>) =
        cfg.identity_files.iter().partition(|p| !p.exists());
    let show = |v: &[&PathBuf]| {
        v.iter()
            .map(|p| format!("`IdentityFile {}`", ctx.show(p)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let named = match (absent.is_empty(), present.is_empty()) {
        (true, true) => "no `IdentityFile` (so ssh tries `~/.ssh/id_rsa`, `~/.ssh/id_ecdsa`, \
             `~/.ssh/id_ed25519`), and the server refuses those"
            .to_owned(),
        (true, false) => format!("{}, which the server refuses", show(&present)),
        (false, true) => format!("{}, which does not exist", show(&absent)),
        (false, false) => format!(
            "{} (missing) and {} (refused by the server)",
            show(&absent),
            show(&present)
        ),
    };
    let fix = match &works_file {
        Some(f) => format!(
            "set `IdentityFile {}` (with `IdentitiesOnly yes`) in `{cfg_shown}`",
            ctx.show(f)
        ),
        None => format!(
            "remove the `IdentityFile` and `IdentitiesOnly` lines from `{cfg_shown}` so ssh \
             uses the agent's key, and keep that key loaded (`ssh-add`)"
        ),
    };
    Finding::fail(
        CheckId::SshConfigKey,
        format!(
            "`{cfg_shown}` has {named}; the key that works is {}",
            shown_key(ctx, works)
        ),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::doctor::line;
    use crate::text::{HOSTILE, has_raw_controls};

    #[test]
    fn the_agent_version_names_which_side_to_update() {
        use crate::doctor::Status;
        use shiqi_ca::protocol::{RequestKind, VersionResponse};
        let answer = |version: u32| {
            Ok(VersionResponse {
                version,
                agent: "9.9.9 (0123456789ab, x86_64-unknown-linux-musl)"
                    .parse()
                    .expect("text"),
            })
        };
        let same = version_finding(answer(PROTOCOL_VERSION));
        assert_eq!(same.status, Status::Ok, "{}", same.found);
        // Another release on the same protocol works, and says so.
        assert!(same.notes.iter().any(|n| n.contains("this laptop runs")));
        let newer = version_finding(answer(PROTOCOL_VERSION + 1));
        assert_eq!(newer.status, Status::Fail);
        assert!(
            newer
                .fix
                .as_ref()
                .is_some_and(|f| f.contains("update shiqi-connect on this laptop"))
        );
        let older = version_finding(answer(PROTOCOL_VERSION - 1));
        assert_eq!(older.status, Status::Fail);
        assert!(
            older
                .fix
                .as_ref()
                .is_some_and(|f| f.contains("shiqi-ca-agent") && f.contains("on the server"))
        );
        let too_old = version_finding(Err(Error::Agent(AgentError::TooOld {
            op: RequestKind::Version,
        })));
        assert_eq!(too_old.status, Status::Fail);
        assert!(
            too_old.found.contains("predates `version`"),
            "{}",
            too_old.found
        );
    }

    fn ctx(home: &Path) -> Context {
        Context::load(&crate::doctor::Inputs {
            home: home.to_owned(),
            profile_dir: None,
            configs: Vec::new(),
            bootstrap: Vec::new(),
        })
    }

    /// `ssh.reach` for whatever a fake server on 127.0.0.1 says first, as doctor prints it.
    fn reach_line(banner: &[u8]) -> String {
        let home = tempfile::tempdir().expect("tempdir");
        let port = crate::probe::fake_server(banner.to_vec(), 1);
        let said = probe::ssh_banner("127.0.0.1", port);
        line(
            &reach(&ctx(home.path()), ("127.0.0.1", port, "u"), 0, said),
            false,
        )
    }

    #[test]
    fn a_hostile_ssh_banner_is_shown_escaped() {
        let shown = reach_line(b"SSH-2.0-x\x1b]0;pwned\x07\x1b[2J\rok    files\r\n");
        assert!(shown.starts_with("ok    ssh.reach"), "{shown}");
        assert!(
            shown.contains("SSH-2.0-x\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\rok    files`"),
            "{shown}"
        );
        assert!(!has_raw_controls(&shown), "{shown:?}");

        // Not SSH: the first line, escaped, in the failure.
        let shown = reach_line(HOSTILE.as_bytes());
        assert!(shown.starts_with("fail  ssh.reach"), "{shown}");
        assert!(shown.contains("(`x\\u{1b}]0;pwned\\u{7}"), "{shown}");
        assert!(!has_raw_controls(&shown), "{shown:?}");
        assert_eq!(shown.lines().count(), 2, "{shown}");
    }
}
