//! Reads the tunnel's `Host` block from a profile's `ssh_config` the way ssh applies it: the
//! first value of a keyword wins, `IdentityFile` and `LocalForward` add up, and blocks whose
//! patterns name the host (or `*`) apply. Only what the doctor compares is kept. No I/O beyond
//! reading the file.

use std::path::{Path, PathBuf};

use crate::ssh::config::split_directive;

/// One `LocalForward [bind:]port host:hostport`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalForward {
    /// Line number in the file (1-based).
    pub line: usize,
    /// The bind address, if given (`127.0.0.1`, `localhost`, `*`).
    pub bind: Option<String>,
    /// The local port.
    pub port: u16,
    /// The target host, as the server resolves it.
    pub host: String,
    /// The target port.
    pub host_port: u16,
}

impl LocalForward {
    /// Whether ssh listens on the laptop's loopback for it (the default bind is loopback too,
    /// with `GatewayPorts no`).
    pub fn binds_loopback(&self) -> bool {
        match self.bind.as_deref() {
            None | Some("localhost" | "127.0.0.1" | "::1") => true,
            Some(_) => false,
        }
    }
}

/// The settings of the tunnel's `Host` block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TunnelConfig {
    /// The file.
    pub path: PathBuf,
    /// `HostName`.
    pub host_name: Option<String>,
    /// `User`.
    pub user: Option<String>,
    /// `Port`.
    pub port: Option<u16>,
    /// `IdentityFile`s, `~` expanded, in order.
    pub identity_files: Vec<PathBuf>,
    /// `CertificateFile`s, `~` expanded, in order.
    pub certificate_files: Vec<PathBuf>,
    /// `IdentitiesOnly yes`.
    pub identities_only: bool,
    /// `UserKnownHostsFile`s, `~` expanded.
    pub known_hosts: Vec<PathBuf>,
    /// `LocalForward`s.
    pub forwards: Vec<LocalForward>,
    /// Lines that could not be read as what their keyword needs.
    pub problems: Vec<String>,
}

impl TunnelConfig {
    /// Reads the block for `host` from `path`.
    ///
    /// # Errors
    /// A message when the file cannot be read or has no block for `host`.
    pub fn load(path: &Path, host: &str, home: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let mut cfg = parse(&text, host, home)
            .ok_or_else(|| format!("`{}` has no `Host {host}` block", path.display()))?;
        cfg.path = path.to_path_buf();
        Ok(cfg)
    }

    /// The forward whose local port is `port`.
    pub fn forward(&self, port: u16) -> Option<&LocalForward> {
        self.forwards.iter().find(|f| f.port == port)
    }
}

/// Parses `text` for `host`; `None` when no block names it.
pub fn parse(text: &str, host: &str, home: &Path) -> Option<TunnelConfig> {
    let mut cfg = TunnelConfig::default();
    let mut applies = true; // directives before the first Host apply to every host
    let mut named = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, rest) = split_directive(line);
        let key = key.to_ascii_lowercase();
        let args = words(rest);
        if key == "host" {
            applies = args.iter().any(|p| p == host || p == "*");
            named |= args.iter().any(|p| p == host);
            continue;
        }
        if key == "match" {
            applies = false;
            continue;
        }
        if !applies {
            continue;
        }
        let first = args.first().cloned().unwrap_or_default();
        match key.as_str() {
            "hostname" if cfg.host_name.is_none() => cfg.host_name = Some(first),
            "user" if cfg.user.is_none() => cfg.user = Some(first),
            "port" if cfg.port.is_none() => cfg.port = first.parse().ok(),
            "identityfile" => cfg.identity_files.push(expand(&first, home)),
            "certificatefile" => cfg.certificate_files.push(expand(&first, home)),
            "identitiesonly" => cfg.identities_only = first.eq_ignore_ascii_case("yes"),
            "userknownhostsfile" if cfg.known_hosts.is_empty() => {
                cfg.known_hosts = args
                    .iter()
                    .filter(|a| *a != "none")
                    .map(|a| expand(a, home))
                    .collect();
            }
            "localforward" => match local_forward(&args, i + 1) {
                Some(f) => cfg.forwards.push(f),
                None => cfg.problems.push(format!(
                    "line {}: `{line}` is not `LocalForward [BIND:]PORT HOST:PORT`",
                    i + 1
                )),
            },
            _ => {}
        }
    }
    named.then_some(cfg)
}

/// Arguments, with double quotes grouping words.
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn expand(raw: &str, home: &Path) -> PathBuf {
    if raw == "~" {
        return home.to_path_buf();
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        return home.join(rest);
    }
    PathBuf::from(raw.replace("%d", &home.to_string_lossy()))
}

/// `[bind:]port` and `host:port` (IPv6 in brackets; `host/port` as ssh also allows).
fn local_forward(args: &[String], line: usize) -> Option<LocalForward> {
    let [listen, target] = args else {
        return None;
    };
    let (bind, port) = match split_host_port(listen) {
        Some((b, p)) => (Some(b), p),
        None => (None, listen.parse().ok()?),
    };
    let (host, host_port) = split_host_port(target)?;
    Some(LocalForward {
        line,
        bind,
        port,
        host,
        host_port,
    })
}

fn split_host_port(s: &str) -> Option<(String, u16)> {
    if let Some(inner) = s.strip_prefix('[') {
        let (h, rest) = inner.split_once(']')?;
        let p = rest.strip_prefix(':').or_else(|| rest.strip_prefix('/'))?;
        return Some((h.to_owned(), p.parse().ok()?));
    }
    let (h, p) = s.rsplit_once(':').or_else(|| s.rsplit_once('/'))?;
    if h.is_empty() {
        return None;
    }
    Some((h.to_owned(), p.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "# comment\nHost shiqi-tunnel\n    HostName 10.231.0.1\n    User shiqi-dev\n\
        \x20   Port 22\n    IdentityFile ~/.ssh/id_ed25519\n    IdentitiesOnly yes\n\
        \x20   UserKnownHostsFile \"/home/s/.ssh/known hosts\"\n\
        \x20   LocalForward 127.0.0.1:19094 localhost:19094\n\
        \x20   LocalForward 29094 [::1]:29094\n    LocalForward=3306 127.0.0.1:3306\n\
        Host other\n    LocalForward 1 a:1\n    User nobody\n";

    #[test]
    fn reads_the_tunnel_block_as_ssh_applies_it() {
        let c = parse(RENDERED, "shiqi-tunnel", Path::new("/home/s")).expect("block");
        assert_eq!(c.host_name.as_deref(), Some("10.231.0.1"));
        assert_eq!(c.user.as_deref(), Some("shiqi-dev"));
        assert_eq!(c.port, Some(22));
        assert_eq!(c.identity_files, [PathBuf::from("/home/s/.ssh/id_ed25519")]);
        assert!(c.identities_only);
        assert_eq!(c.known_hosts, [PathBuf::from("/home/s/.ssh/known hosts")]);
        let ports: Vec<_> = c
            .forwards
            .iter()
            .map(|f| (f.port, f.host.as_str()))
            .collect();
        assert_eq!(
            ports,
            [(19094, "localhost"), (29094, "::1"), (3306, "127.0.0.1")]
        );
        assert_eq!(c.forward(19094).map(|f| f.line), Some(9));
        assert!(c.forwards.iter().all(LocalForward::binds_loopback));
        assert!(c.problems.is_empty());
    }

    #[test]
    fn no_block_for_the_host_is_none() {
        assert!(parse("Host a\n  User b\n", "shiqi-tunnel", Path::new("/h")).is_none());
    }

    #[test]
    fn bad_forwards_and_wide_binds_are_noticed() {
        let c = parse(
            "Host t\n LocalForward 19094\n LocalForward *:3306 db:3306\n",
            "t",
            Path::new("/h"),
        )
        .expect("block");
        assert_eq!(c.problems.len(), 1);
        assert!(!c.forwards[0].binds_loopback());
    }
}
