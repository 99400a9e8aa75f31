//! Where to connect: a [`Destination`] resolved like OpenSSH resolves it, and the ssh_config
//! syntax helpers the doctor shares.
//!
//! Resolution asks `ssh -G` when the `ssh` binary exists, so `Include`, `Match`, `HostName`,
//! `User`, `Port`, `IdentityFile` and `UserKnownHostsFile` mean exactly what they mean to ssh.
//! Without it, russh-config reads `~/.ssh/config` (no `Include`, no `Match`). No network here.
//! `RevokedHostKeys` and `HashKnownHosts` are asked of `ssh -G` again for each connection
//! ([`host_key_settings`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::error::{Error, InputError, SshError};
use crate::fsutil;
use crate::ssh::destination::Destination;
use crate::ssh::known_hosts::HostKeyConfig;

/// A destination resolved the way OpenSSH would: where to dial, as whom, with which keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The destination as given.
    pub(crate) destination: Destination,
    /// The host to dial (`HostName`).
    pub(crate) host: String,
    /// The port to dial.
    pub(crate) port: u16,
    /// The remote user.
    pub(crate) user: String,
    /// Identity files in the order to try; not filtered by existence.
    pub(crate) identity_files: Vec<PathBuf>,
    /// `CertificateFile`s: user certificates offered with the key they certify.
    pub(crate) certificate_files: Vec<PathBuf>,
    /// `PKCS11Provider`, which this client does not load (it names the agent instead).
    pub(crate) pkcs11_provider: Option<String>,
    /// `IdentitiesOnly yes`: agent keys only when they match an identity file.
    pub(crate) identities_only: bool,
    /// `IdentityAgent none` turns the agent off.
    pub(crate) use_agent: bool,
    /// `IdentityAgent PATH` (1Password, Secretive, a socket of one's own), expanded as ssh does;
    /// `None` means `SSH_AUTH_SOCK`, as when it is unset or says `SSH_AUTH_SOCK`.
    pub(crate) identity_agent: Option<PathBuf>,
    /// Files to look the host key up in; the first one is where new keys are learned.
    pub(crate) known_hosts: Vec<PathBuf>,
    /// System-wide known_hosts files (read only).
    pub(crate) global_known_hosts: Vec<PathBuf>,
    /// `HostKeyAlias`: the name the host key is recorded under, if not the host.
    pub(crate) host_key_alias: Option<String>,
    /// `ProxyCommand`, which this client refuses (it would run a command from the config).
    pub(crate) proxy_command: Option<String>,
    /// `ProxyJump` as configured (or `--jump`), e.g. `bob@bastion:2222,homelab-gw`.
    pub(crate) proxy_jump: Option<String>,
    /// The jump hosts, resolved, nearest first: the connection goes through each in turn.
    pub(crate) jumps: Vec<Target>,
    /// How the destination was resolved (`ssh -G` or `russh-config`), for `-v` output.
    pub(crate) resolved_by: &'static str,
}

impl Target {
    /// The name the host key is recorded under in known_hosts.
    pub(crate) fn host_key_name(&self) -> &str {
        self.host_key_alias.as_deref().unwrap_or(&self.host)
    }

    /// What the host key check takes: this target's known_hosts files and `settings`.
    pub(crate) fn host_key_config<'a>(
        &'a self,
        settings: &'a HostKeySettings,
    ) -> HostKeyConfig<'a> {
        HostKeyConfig {
            user_files: &self.known_hosts,
            global_files: &self.global_known_hosts,
            revoked_host_keys: &settings.revoked_host_keys,
            hash_known_hosts: settings.hash_known_hosts,
        }
    }
}

/// What the effective ssh config says about host keys besides the known_hosts files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HostKeySettings {
    /// `RevokedHostKeys`: key lists or KRLs whose keys are refused (OpenSSH 10.3 takes
    /// several; earlier versions one).
    pub(crate) revoked_host_keys: Vec<PathBuf>,
    /// `HashKnownHosts yes`: new hosts are learned under a hashed name.
    pub(crate) hash_known_hosts: bool,
}

/// Environment facts resolution depends on, gathered once so the logic stays testable.
#[derive(Clone, Debug)]
pub(crate) struct Env {
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// The local user name (`%u`, and the default remote user without ssh).
    pub(crate) local_user: String,
    /// The `ssh` binary, when it exists and sees the same home as we do.
    pub(crate) ssh: Option<PathBuf>,
    /// `--known-hosts`: use this file instead of the configured ones.
    pub(crate) known_hosts_override: Option<PathBuf>,
    /// `--jump`: the jump hosts, overriding the config's `ProxyJump` as `ssh -J` does.
    pub(crate) jump: Option<String>,
}

impl Env {
    /// Reads `$HOME`, `$USER` and `$PATH`.
    pub(crate) fn from_process(home: PathBuf, known_hosts_override: Option<PathBuf>) -> Self {
        let account = crate::os::account::current();
        let local_user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .or_else(|| account.as_ref().map(|a| a.name.clone()))
            .unwrap_or_else(|| "root".to_owned());
        // ssh reads `~/.ssh/config` from the user database, not from `$HOME`. When the two differ
        // (a test with its own HOME), `ssh -G` would answer for another user's config, so the
        // fallback reads `$HOME/.ssh/config` instead.
        let ssh = find_in_path("ssh").filter(|_| account.as_ref().is_none_or(|a| a.home == home));
        Self {
            home,
            local_user,
            ssh,
            known_hosts_override,
            jump: None,
        }
    }

    /// The same, with `--jump` (an empty value means none).
    #[must_use]
    pub(crate) fn with_jump(mut self, jump: Option<&str>) -> Self {
        self.jump = jump
            .map(str::trim)
            .filter(|j| !j.is_empty())
            .map(str::to_owned);
        self
    }
}

/// `--jump` checked hop by hop before anything connects: `None` for none.
///
/// # Errors
/// [`InputError::InvalidDestination`] naming the hop that does not parse.
pub(crate) fn check_jump(jump: Option<&str>) -> Result<Option<String>, Error> {
    let Some(jump) = jump.map(str::trim).filter(|j| !j.is_empty()) else {
        return Ok(None);
    };
    for hop in jump.split(',') {
        Destination::parse_jump(hop.trim())?;
    }
    Ok(Some(jump.to_owned()))
}

/// The most jump hosts one connection goes through (a `ProxyJump` loop stops here).
const MAX_JUMPS: usize = 8;

/// Resolves a destination with `ssh -G`, or with russh-config when ssh is not there.
///
/// # Errors
/// When `ssh -G` rejects the destination or `~/.ssh/config` cannot be read.
pub(crate) fn resolve(dest: &Destination, env: &Env) -> Result<Target, Error> {
    let mut target = resolve_one(dest, env)?;
    if let Some(jump) = &env.jump {
        // `ssh -J` replaces both ProxyJump and ProxyCommand.
        target.proxy_jump = Some(jump.clone());
        target.proxy_command = None;
    }
    if let Some(spec) = target.proxy_jump.clone() {
        target.jumps = resolve_jumps(dest, &spec, env, 0)?;
    }
    Ok(target)
}

/// The hops of `spec` (`[user@]host[:port]`, comma-separated), nearest first. As OpenSSH does
/// it: the first hop is resolved with its own config (its own `ProxyJump` included); each later
/// hop is reached through the ones before it, whatever its config says.
fn resolve_jumps(
    dest: &Destination,
    spec: &str,
    env: &Env,
    depth: usize,
) -> Result<Vec<Target>, Error> {
    let mut hops: Vec<Target> = Vec::new();
    let hop_env = Env {
        jump: None,
        ..env.clone()
    };
    for (i, raw) in spec.split(',').map(str::trim).enumerate() {
        let hop_dest = Destination::parse_jump(raw)?;
        let mut hop = resolve_one(&hop_dest, &hop_env)?;
        if i == 0 {
            if let Some(command) = &hop.proxy_command {
                return Err(Error::Ssh(SshError::Config {
                    destination: hop_dest.to_string(),
                    why: format!(
                        "`ProxyCommand {command}` is not supported (it runs a command); use \
                         `ProxyJump` instead"
                    ),
                }));
            }
            if let Some(inner) = hop.proxy_jump.clone() {
                hops.extend(resolve_jumps(&hop_dest, &inner, env, depth + 1)?);
            }
        }
        hop.proxy_command = None;
        hop.proxy_jump = None;
        hops.push(hop);
        if hops.len() + depth > MAX_JUMPS {
            return Err(Error::Ssh(SshError::Config {
                destination: dest.to_string(),
                why: format!("`ProxyJump` goes through more than {MAX_JUMPS} hosts (a loop?)"),
            }));
        }
    }
    Ok(hops)
}

/// One host's settings, without following its `ProxyJump`.
fn resolve_one(dest: &Destination, env: &Env) -> Result<Target, Error> {
    let mut target = match &env.ssh {
        Some(ssh) => {
            let mut cmd = ssh_g(ssh, dest);
            tracing::debug!(?cmd, "resolving the destination with ssh -G");
            parse_ssh_g(&ssh_g_output(dest, cmd.output())?, dest, env)
        }
        None => resolve_with_russh_config(dest, env)?,
    };
    if let Some(kh) = &env.known_hosts_override {
        target.known_hosts = vec![kh.clone()];
    }
    Ok(target)
}

/// `RevokedHostKeys` and `HashKnownHosts` for `dest`, from `ssh -G` as in [`resolve`]. Asked
/// for each connection rather than kept in [`Target`], so that every connection is held to
/// them however its target was built: resolved here, rebuilt from a profile, or a jump host.
/// Without ssh (see [`Env::from_process`]) neither applies, as in the russh-config fallback.
///
/// # Errors
/// [`InputError::NoHome`], or [`SshError::Config`] when `ssh -G` fails.
pub(crate) async fn host_key_settings(dest: &Destination) -> Result<HostKeySettings, Error> {
    let env = Env::from_process(
        crate::os::account::home().ok_or(Error::Input(InputError::NoHome))?,
        None,
    );
    let Some(ssh) = &env.ssh else {
        return Ok(HostKeySettings::default());
    };
    let cmd = ssh_g(ssh, dest);
    tracing::debug!(?cmd, "asking ssh -G how to check the host key");
    let out = tokio::process::Command::from(cmd).output().await;
    Ok(parse_host_key_settings(&ssh_g_output(dest, out)?))
}

/// `ssh -G` for `dest`.
fn ssh_g(ssh: &Path, dest: &Destination) -> Command {
    let mut cmd = Command::new(ssh);
    cmd.arg("-G");
    if let Some(u) = &dest.user {
        cmd.arg("-l").arg(u);
    }
    if let Some(p) = dest.port {
        cmd.arg("-p").arg(p.to_string());
    }
    cmd.arg("--").arg(&dest.host);
    cmd
}

/// The text `ssh -G` printed, or its complaint.
fn ssh_g_output(dest: &Destination, out: std::io::Result<Output>) -> Result<String, Error> {
    let out = out.map_err(|e| {
        Error::Ssh(SshError::Config {
            destination: dest.to_string(),
            why: e.to_string(),
        })
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::Ssh(SshError::Config {
            destination: dest.to_string(),
            why: first_line(&err).unwrap_or("no output").to_owned(),
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn first_line(s: &str) -> Option<&str> {
    s.lines().map(str::trim).find(|l| !l.is_empty())
}

/// The identity files ssh tries when none is configured, as `ssh -G` lists them.
const SSH_DEFAULT_IDENTITIES: &[&str] = &[
    "~/.ssh/id_rsa",
    "~/.ssh/id_ecdsa",
    "~/.ssh/id_ecdsa_sk",
    "~/.ssh/id_ed25519",
    "~/.ssh/id_ed25519_sk",
    "~/.ssh/id_xmss",
    "~/.ssh/id_dsa",
];

/// The keys tried after the configured ones, newest kind first.
const OUR_DEFAULT_IDENTITIES: &[&str] = &["~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa"];

/// Reads `ssh -G` output (`keyword value` lines, keywords lowercase).
fn parse_ssh_g(text: &str, dest: &Destination, env: &Env) -> Target {
    let mut host = dest.host.clone();
    let mut port = 22;
    let mut user = env.local_user.clone();
    let mut identity_raw = Vec::new();
    let mut certificate_raw = Vec::new();
    let mut pkcs11_provider = None;
    let mut known_hosts = Vec::new();
    let mut global_known_hosts = Vec::new();
    let mut identities_only = false;
    let mut use_agent = true;
    let mut identity_agent_raw = None;
    let mut host_key_alias = None;
    let (mut proxy_command, mut proxy_jump) = (None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let value = value.trim();
        match key {
            "hostname" => host = value.to_owned(),
            "user" => user = value.to_owned(),
            "port" => port = value.parse().unwrap_or(22),
            "identityfile" => identity_raw.push(value.to_owned()),
            "certificatefile" => certificate_raw.push(value.to_owned()),
            "pkcs11provider" if value != "none" => pkcs11_provider = Some(value.to_owned()),
            "identitiesonly" => identities_only = value == "yes",
            "identityagent" => {
                use_agent = value != "none";
                identity_agent_raw = Some(value.to_owned());
            }
            "userknownhostsfile" => known_hosts.extend(
                value
                    .split_whitespace()
                    .filter(|v| *v != "none")
                    .map(String::from),
            ),
            "globalknownhostsfile" => {
                global_known_hosts.extend(value.split_whitespace().map(String::from));
            }
            "hostkeyalias" => host_key_alias = Some(value.to_owned()),
            "proxycommand" if value != "none" => proxy_command = Some(value.to_owned()),
            "proxyjump" if value != "none" => proxy_jump = Some(value.to_owned()),
            _ => {}
        }
    }
    let configured = if identity_raw
        .iter()
        .map(String::as_str)
        .eq(SSH_DEFAULT_IDENTITIES.iter().copied())
    {
        Vec::new()
    } else {
        identity_raw
    };
    let tokens = Tokens {
        home: &env.home,
        local_user: &env.local_user,
        remote_user: &user,
        host: &host,
    };
    let identity_agent = identity_agent_raw
        .as_deref()
        .and_then(|raw| identity_agent(raw, &tokens, &|v| std::env::var_os(v)));
    Target {
        destination: dest.clone(),
        identity_files: identity_list(&configured, identities_only, &tokens),
        certificate_files: certificate_raw.iter().map(|p| tokens.expand(p)).collect(),
        pkcs11_provider,
        known_hosts: if known_hosts.is_empty() {
            vec![env.home.join(".ssh/known_hosts")]
        } else {
            known_hosts.iter().map(|p| tokens.expand(p)).collect()
        },
        global_known_hosts: global_known_hosts
            .iter()
            .map(|p| tokens.expand(p))
            .collect(),
        host,
        port,
        user,
        identities_only,
        use_agent,
        identity_agent,
        host_key_alias,
        proxy_command,
        proxy_jump,
        jumps: Vec::new(),
        resolved_by: "ssh -G",
    }
}

/// The socket an `IdentityAgent` value names, as ssh reads it (ssh_config(5)): `none` and
/// `SSH_AUTH_SOCK` name no socket of their own (the agent is off, or the environment's); `$VAR`
/// or `${VAR}` is that environment variable's value; anything else is a path with `~` and
/// `%d`/`%u`/`%r`/`%h` expanded (`ssh -G` prints it unexpanded).
fn identity_agent(
    raw: &str,
    tokens: &Tokens<'_>,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let raw = raw.trim_matches('"');
    if raw == "none" || raw == "SSH_AUTH_SOCK" {
        return None;
    }
    if let Some(var) = raw.strip_prefix('$') {
        let var = var
            .strip_prefix('{')
            .and_then(|v| v.strip_suffix('}'))
            .unwrap_or(var);
        return env(var).map(PathBuf::from);
    }
    Some(tokens.expand(raw))
}

/// Reads the host key settings from `ssh -G` output. `RevokedHostKeys` paths are taken as
/// printed, never expanded here: since OpenSSH 9.4 ssh expands `~`, `%h` and `${VAR}` before it
/// prints them, and before 9.4 it opened the path literally (`~/x` relative to the current
/// folder, which is ours too). It is absent or `none` when unset.
fn parse_host_key_settings(text: &str) -> HostKeySettings {
    let mut settings = HostKeySettings::default();
    for line in text.lines() {
        match line.split_once(' ').map(|(k, v)| (k, v.trim())) {
            Some(("revokedhostkeys", v)) if v != "none" => {
                settings.revoked_host_keys = v.split_whitespace().map(PathBuf::from).collect();
            }
            Some(("hashknownhosts", v)) => settings.hash_known_hosts = v == "yes",
            _ => {}
        }
    }
    settings
}

fn identity_list(
    configured: &[String],
    identities_only: bool,
    tokens: &Tokens<'_>,
) -> Vec<PathBuf> {
    let defaults = if identities_only && !configured.is_empty() {
        &[][..]
    } else {
        OUR_DEFAULT_IDENTITIES
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for raw in configured
        .iter()
        .map(String::as_str)
        .chain(defaults.iter().copied())
    {
        let p = tokens.expand(raw);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// ssh_config(5) TOKENS that matter for file names: `~`, `%d`, `%u`, `%r`, `%h`, `%%`.
struct Tokens<'a> {
    home: &'a Path,
    local_user: &'a str,
    remote_user: &'a str,
    host: &'a str,
}

impl Tokens<'_> {
    fn expand(&self, raw: &str) -> PathBuf {
        let raw = raw.trim_matches('"');
        let home = self.home.to_string_lossy();
        let mut out = String::new();
        let rest = if raw == "~" {
            out.push_str(&home);
            ""
        } else if let Some(r) = raw.strip_prefix("~/") {
            out.push_str(&home);
            out.push('/');
            r
        } else {
            raw
        };
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('d') => out.push_str(&home),
                Some('u') => out.push_str(self.local_user),
                Some('r') => out.push_str(self.remote_user),
                Some('h') => out.push_str(self.host),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        PathBuf::from(out)
    }
}

fn resolve_with_russh_config(dest: &Destination, env: &Env) -> Result<Target, Error> {
    let path = env.home.join(".ssh/config");
    let text = fsutil::read_optional(&path)?.unwrap_or_default();
    let cfg = russh_config::parse(&simplify_for_russh_config(&text, &env.home), &dest.host)
        .map_err(|e| {
            Error::Ssh(SshError::Config {
                destination: dest.to_string(),
                why: format!("cannot parse `{}`: {e}", path.display()),
            })
        })?;
    let hc = &cfg.host_config;
    let host = hc.hostname.clone().unwrap_or_else(|| dest.host.clone());
    let user = dest
        .user
        .clone()
        .or_else(|| hc.user.clone())
        .unwrap_or_else(|| env.local_user.clone());
    let tokens = Tokens {
        home: &env.home,
        local_user: &env.local_user,
        remote_user: &user,
        host: &host,
    };
    // russh-config already expanded `~` in these.
    let configured: Vec<String> = hc
        .identity_file
        .iter()
        .flatten()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let known_hosts = match &hc.user_known_hosts_file {
        Some(p) => vec![tokens.expand(&p.to_string_lossy())],
        None => vec![
            env.home.join(".ssh/known_hosts"),
            env.home.join(".ssh/known_hosts2"),
        ],
    };
    let set = |v: &Option<String>| v.clone().filter(|p| p != "none");
    Ok(Target {
        destination: dest.clone(),
        identity_files: identity_list(&configured, false, &tokens),
        // russh-config does not read `CertificateFile`; a `KEY-cert.pub` is still found.
        certificate_files: Vec::new(),
        pkcs11_provider: None,
        known_hosts,
        global_known_hosts: vec![PathBuf::from("/etc/ssh/ssh_known_hosts")],
        port: dest.port.or(hc.port).unwrap_or(22),
        host,
        user,
        identities_only: false,
        use_agent: true,
        identity_agent: None,
        host_key_alias: None,
        proxy_command: set(&hc.proxy_command),
        proxy_jump: set(&hc.proxy_jump),
        jumps: Vec::new(),
        resolved_by: "russh-config",
    })
}

/// Makes a config digestible for russh-config, which splits on one space, rejects directives
/// before the first `Host` (such as our own `Include` line) and knows no `Match`: normalises
/// `Key=Value` and tabs, drops top-level directives and `Match` blocks, and expands `~` with
/// our `$HOME` (russh-config would use the process's).
fn simplify_for_russh_config(text: &str, home: &Path) -> String {
    let mut out = String::new();
    let mut in_host = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = split_directive(line);
        match key.to_ascii_lowercase().as_str() {
            "host" => in_host = true,
            "match" => {
                in_host = false;
                continue;
            }
            _ if !in_host => continue,
            _ => {}
        }
        out.push_str(key);
        out.push(' ');
        let is_path =
            ["identityfile", "userknownhostsfile"].contains(&key.to_ascii_lowercase().as_str());
        match value.trim_matches('"').strip_prefix("~/") {
            Some(rest) if is_path => out.push_str(&home.join(rest).to_string_lossy()),
            _ => out.push_str(value),
        }
        out.push('\n');
    }
    out
}

/// Splits `Key value`, `Key=value` or `Key = value`.
pub(crate) fn split_directive(line: &str) -> (&str, &str) {
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let (key, rest) = line.split_at(end);
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    (key, rest)
}

/// Finds an executable on `$PATH`.
pub(crate) fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(s: &str) -> Destination {
        s.parse().expect("valid destination")
    }

    fn env() -> Env {
        Env {
            home: PathBuf::from("/home/saige"),
            local_user: "saige".into(),
            ssh: None,
            known_hosts_override: None,
            jump: None,
        }
    }

    #[test]
    fn follows_proxy_jump_hop_by_hop_and_jump_overrides_it() {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(home.path().join(".ssh")).expect("mkdir");
        crate::fsutil::write_private(
            &home.path().join(".ssh/config"),
            b"Host homelab\n  HostName 10.0.0.5\n  User me\n  ProxyJump vps\n\
              Host vps\n  HostName 192.0.2.4\n  User jumper\n  Port 2222\n  ProxyJump edge\n\
              Host edge\n  HostName 192.0.2.9\n\
              Host cmd\n  ProxyCommand nc %h %p\n",
        )
        .expect("write");
        let env = Env {
            home: home.path().to_path_buf(),
            ..env()
        };
        // The first hop's own ProxyJump comes first: edge, then vps, then homelab.
        let hops = |t: &Target| -> Vec<(String, u16, String)> {
            t.jumps
                .iter()
                .map(|j| (j.host.clone(), j.port, j.user.clone()))
                .collect()
        };
        let hop = |h: &str, p, u: &str| (h.to_owned(), p, u.to_owned());
        let t = resolve(&dest("homelab"), &env).expect("resolves");
        assert_eq!(
            hops(&t),
            [
                hop("192.0.2.9", 22, "saige"),
                hop("192.0.2.4", 2222, "jumper")
            ]
        );
        assert_eq!((t.host.as_str(), t.user.as_str()), ("10.0.0.5", "me"));

        // `--jump` replaces the config's ProxyJump; later hops ignore their own.
        let t = resolve(
            &dest("homelab"),
            &env.clone().with_jump(Some("bob@198.51.100.1:2200,vps")),
        )
        .expect("resolves");
        assert_eq!(
            hops(&t),
            [
                hop("198.51.100.1", 2200, "bob"),
                hop("192.0.2.4", 2222, "jumper")
            ]
        );

        // A first hop that needs ProxyCommand is refused with the reason.
        let e = resolve(&dest("homelab"), &env.clone().with_jump(Some("cmd")))
            .expect_err("ProxyCommand");
        assert!(e.to_string().contains("ProxyCommand"), "{e}");
    }

    #[test]
    fn reads_ssh_g_output() {
        let out = "user shiqi-dev\nhostname 10.231.0.1\nport 2222\nidentitiesonly yes\n\
            identityfile ~/.ssh/work_%r\nidentityfile %d/.ssh/id_ed25519\n\
            certificatefile ~/.ssh/work-cert.pub\npkcs11provider /usr/lib/opensc-pkcs11.so\n\
            userknownhostsfile /home/saige/.ssh/known_hosts /home/saige/.ssh/known_hosts2\n\
            globalknownhostsfile /etc/ssh/ssh_known_hosts\nproxycommand none\n";
        let t = parse_ssh_g(out, &dest("vm"), &env());
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str()),
            ("10.231.0.1", 2222, "shiqi-dev")
        );
        assert_eq!(
            t.identity_files,
            [
                PathBuf::from("/home/saige/.ssh/work_shiqi-dev"),
                PathBuf::from("/home/saige/.ssh/id_ed25519")
            ]
        );
        assert_eq!(
            t.certificate_files,
            [PathBuf::from("/home/saige/.ssh/work-cert.pub")]
        );
        assert_eq!(
            t.pkcs11_provider.as_deref(),
            Some("/usr/lib/opensc-pkcs11.so")
        );
        assert!(t.identities_only && t.proxy_command.is_none() && t.proxy_jump.is_none());
        assert_eq!(t.known_hosts[0], Path::new("/home/saige/.ssh/known_hosts"));
        assert_eq!(parse_host_key_settings(out), HostKeySettings::default());
    }

    #[test]
    fn reads_revoked_host_keys_and_hash_known_hosts() {
        // As OpenSSH 9.2 prints them: the path unexpanded (and so opened by ssh).
        let out = "hostname 10.231.0.1\nhashknownhosts yes\nrevokedhostkeys ~/.ssh/revoked_%h\n";
        let s = parse_host_key_settings(out);
        assert_eq!(s.revoked_host_keys, [Path::new("~/.ssh/revoked_%h")]);
        assert!(s.hash_known_hosts);
        let t = parse_ssh_g(out, &dest("vm"), &env());
        let c = t.host_key_config(&s);
        assert_eq!(c.revoked_host_keys, s.revoked_host_keys);
        assert!(c.hash_known_hosts && c.user_files == t.known_hosts);
        // OpenSSH 10.3 takes several files, prints them on one line, and `none` when unset.
        let s = parse_host_key_settings("revokedhostkeys /etc/ssh/revoked /home/a/krl\n");
        assert_eq!(
            s.revoked_host_keys,
            ["/etc/ssh/revoked", "/home/a/krl"].map(PathBuf::from)
        );
        let s = parse_host_key_settings("hashknownhosts no\nrevokedhostkeys none\n");
        assert_eq!(s, HostKeySettings::default());
    }

    #[test]
    fn identity_agent_names_a_socket_as_ssh_reads_it() {
        let t = |line: &str| parse_ssh_g(&format!("hostname h\n{line}\n"), &dest("h"), &env());
        // 1Password's and Secretive's sockets, as people write them in ~/.ssh/config.
        let op =
            t("identityagent \"~/Library/Group Containers/2BUA8C4S2C.com.1password/t/agent.sock\"");
        assert_eq!(
            op.identity_agent.as_deref(),
            Some(Path::new(
                "/home/saige/Library/Group Containers/2BUA8C4S2C.com.1password/t/agent.sock"
            ))
        );
        assert!(op.use_agent);
        let tokens = t("identityagent %d/agents/%u-%h.sock");
        assert_eq!(
            tokens.identity_agent.as_deref(),
            Some(Path::new("/home/saige/agents/saige-h.sock"))
        );
        for env_meaning in ["identityagent SSH_AUTH_SOCK", "user x"] {
            let e = t(env_meaning);
            assert!(e.use_agent && e.identity_agent.is_none(), "{env_meaning}");
        }
        let off = t("identityagent none");
        assert!(!off.use_agent && off.identity_agent.is_none());
        // `$VAR` / `${VAR}`: that variable's value, nothing when it is unset.
        let tokens = Tokens {
            home: Path::new("/home/saige"),
            local_user: "saige",
            remote_user: "x",
            host: "h",
        };
        let env = |v: &str| (v == "MY_AGENT").then(|| "/run/a.sock".into());
        for raw in ["$MY_AGENT", "${MY_AGENT}"] {
            assert_eq!(
                identity_agent(raw, &tokens, &env).as_deref(),
                Some(Path::new("/run/a.sock"))
            );
        }
        assert_eq!(identity_agent("$UNSET", &tokens, &env), None);
    }

    #[test]
    fn ssh_defaults_become_our_order() {
        let mut out = String::from("user x\nhostname h\nport 22\n");
        for f in SSH_DEFAULT_IDENTITIES {
            out.push_str(&format!("identityfile {f}\n"));
        }
        let t = parse_ssh_g(&out, &dest("h"), &env());
        let names: Vec<_> = t
            .identity_files
            .iter()
            .map(|p| p.file_name().expect("name"))
            .collect();
        assert_eq!(names, ["id_ed25519", "id_ecdsa", "id_rsa"]);
    }

    #[test]
    fn configured_identity_comes_before_defaults() {
        let out = "hostname h\nidentityfile ~/.ssh/work\n";
        let t = parse_ssh_g(out, &dest("h"), &env());
        assert_eq!(t.identity_files[0], Path::new("/home/saige/.ssh/work"));
        assert_eq!(t.identity_files.len(), 4);
    }

    #[test]
    fn falls_back_to_russh_config_despite_include_and_match() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ssh = dir.path().join(".ssh");
        fsutil::create_private_dir(&ssh).expect("mkdir");
        fsutil::write_private(
            &ssh.join("config"),
            b"Include ~/.shiqi/saige/ssh_config\n\nMatch exec true\n  User nobody\n\
              Host vm\n\tHostName=10.0.0.9\n  User dev\n  Port 2200\n  IdentityFile ~/.ssh/vm_key\n",
        )
        .expect("write");
        let env = Env {
            home: dir.path().to_path_buf(),
            ..env()
        };
        let t = resolve(&dest("vm"), &env).expect("resolves");
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str()),
            ("10.0.0.9", 2200, "dev")
        );
        assert_eq!(t.identity_files[0], ssh.join("vm_key"));
        assert_eq!(t.known_hosts[0], ssh.join("known_hosts"));
        let t = resolve(&dest("ssh://root@vm:22"), &env).expect("resolves");
        assert_eq!((t.port, t.user.as_str()), (22, "root"));
    }
}
