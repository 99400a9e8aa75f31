//! The tunnel: every advertised broker (from `profile.json`) and MySQL has a `LocalForward` in
//! `ssh_config`, and its local port answers. After bootstrap a Kafka client dials every broker
//! at its advertised address, so one missing forward breaks the client on that broker only
//! (seed: kafka-day-journal, the one-port tunnel that hung on broker 2).

use std::time::Duration;

use crate::doctor::{CheckId, Context, Finding, Findings};
use crate::probe::speaks as probe;
use crate::profile::files as pf;

/// How long a local port may take to accept.
const CONNECT: Duration = Duration::from_secs(2);

/// One thing the tunnel must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    /// `broker 2`, `MySQL`.
    pub what: String,
    /// The advertised (or server-side) host.
    pub host: String,
    /// The port, the same on both ends.
    pub port: u16,
    /// Whether it is a Kafka broker.
    pub kafka: bool,
}

/// Everything the tunnel should forward, brokers by id then MySQL.
pub fn services(ctx: &Context) -> Vec<Service> {
    let Ok(p) = &ctx.profile else {
        return Vec::new();
    };
    let mut brokers = p.brokers.clone();
    brokers.sort_by_key(|b| b.id);
    let mut out: Vec<Service> = brokers
        .iter()
        .map(|b| Service {
            what: format!("broker {}", b.id),
            host: b.host.to_string(),
            port: b.port.get(),
            kafka: true,
        })
        .collect();
    if let Some(m) = &p.mysql {
        out.push(Service {
            what: "MySQL".to_owned(),
            host: m.host.to_string(),
            port: m.port.get(),
            kafka: false,
        });
    }
    out
}

/// `shiqi-connect tunnel up NAME`, when there is a profile.
fn tunnel_up(ctx: &Context) -> Option<String> {
    let name = ctx.profile.as_ref().ok()?.name.to_string();
    Some(format!("shiqi-connect tunnel up {name}"))
}

/// How to (re)start the tunnel.
pub fn start_hint(ctx: &Context) -> String {
    let openssh = format!("`{}`", ctx.tunnel_command());
    match tunnel_up(ctx) {
        Some(up) => format!("start the tunnel: `{up}` (or with OpenSSH: {openssh})"),
        None => format!("start the tunnel: {openssh}"),
    }
}

fn restart_hint(ctx: &Context) -> String {
    let cfg = ctx
        .path(pf::SSH_CONFIG)
        .map(|p| ctx.show(&p))
        .unwrap_or_default();
    let host = ctx
        .profile
        .as_ref()
        .map(|p| p.tunnel_host.clone())
        .unwrap_or_default();
    format!(
        "then restart the tunnel: `ssh -F {cfg} -O exit {host}` and `{}`",
        ctx.tunnel_command()
    )
}

/// `tunnel`.
pub fn check(ctx: &Context, st: &mut Findings) {
    let targets = services(ctx);
    let cfg = match (&ctx.profile, &ctx.ssh_config) {
        (Err(why), _) => {
            st.push(Finding::skip(CheckId::Tunnel, format!("no profile: {why}")));
            return;
        }
        (Ok(_), Err(why)) => {
            let missing = ctx.path(pf::SSH_CONFIG).is_some_and(|p| !p.exists());
            st.push(if missing {
                Finding::skip(
                    CheckId::Tunnel,
                    format!("`{}` is missing (see `files`)", pf::SSH_CONFIG),
                )
            } else {
                Finding::fail(
                    CheckId::Tunnel,
                    why.clone(),
                    format!("rebuild the profile: `{}`", ctx.setup_again()),
                )
            });
            st.tunnel_broken.extend(targets.iter().map(|t| t.port));
            return;
        }
        (Ok(_), Ok(c)) => c,
    };
    if targets.is_empty() {
        st.push(Finding::skip(
            CheckId::Tunnel,
            "the profile has no brokers and no MySQL",
        ));
        return;
    }
    let cfg_shown = ctx.show(&cfg.path);
    let mut missing = Vec::new();
    let mut wide = Vec::new();
    let mut silent = Vec::new();
    let mut good = Vec::new();
    for t in &targets {
        let forward = cfg.forward(t.port);
        let answers = probe::connect("127.0.0.1", t.port, CONNECT).is_ok();
        if answers {
            st.answering.insert(t.port);
        }
        match forward {
            None => missing.push(t),
            Some(f) if !f.binds_loopback() => wide.push((t, f.line)),
            Some(_) if !answers => silent.push(t),
            Some(f) => good.push(format!(
                "{} ({}, to `{}:{}`)",
                t.port, t.what, f.host, f.host_port
            )),
        }
        if forward.is_none() || !answers {
            st.tunnel_broken.insert(t.port);
        }
    }
    if missing.is_empty() && wide.is_empty() && silent.is_empty() && cfg.problems.is_empty() {
        st.push(Finding::ok(
            CheckId::Tunnel,
            format!(
                "{} forwards answer on 127.0.0.1: {}",
                good.len(),
                good.join(", ")
            ),
        ));
        return;
    }
    // Nothing listens and SSH itself fails: starting the tunnel cannot work yet, and the SSH
    // line already names the fault.
    let ssh = [
        CheckId::SshReach,
        CheckId::SshHostKey,
        CheckId::SshLogin,
        CheckId::SshConfigKey,
    ];
    if good.is_empty()
        && missing.is_empty()
        && wide.is_empty()
        && cfg.problems.is_empty()
        && let Some(id) = st.first_failed(&ssh)
    {
        st.push(Finding::skip(
            CheckId::Tunnel,
            format!(
                "nothing listens, and the tunnel cannot start until `{}` passes",
                id.as_str()
            ),
        ));
        return;
    }
    let mut found = Vec::new();
    let mut fixes = Vec::new();
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|t| format!("{} (`{}:{}`)", t.what, t.host, t.port))
            .collect();
        found.push(format!(
            "`{cfg_shown}` has no `LocalForward` for {}: a Kafka client that reaches the \
             cluster still fails on that broker, at its advertised address",
            list.join(", ")
        ));
        let lines: Vec<String> = missing
            .iter()
            .map(|t| {
                let host = if t.host.contains(':') {
                    format!("[{}]", t.host)
                } else {
                    t.host.clone()
                };
                format!("`LocalForward 127.0.0.1:{} {host}:{}`", t.port, t.port)
            })
            .collect();
        fixes.push(format!(
            "add {} to the `Host` block of `{cfg_shown}` (or rebuild the profile: `{}`), {}",
            lines.join(" and "),
            ctx.setup_again(),
            restart_hint(ctx)
        ));
    }
    if !wide.is_empty() {
        let list: Vec<String> = wide
            .iter()
            .map(|(t, line)| format!("{} (line {line})", t.what))
            .collect();
        found.push(format!(
            "forwards bind beyond loopback for {}: other machines could use your certificate's \
             access",
            list.join(", ")
        ));
        fixes.push(format!(
            "bind them to `127.0.0.1:PORT` in `{cfg_shown}`, {}",
            restart_hint(ctx)
        ));
    }
    if !silent.is_empty() {
        let list: Vec<String> = silent
            .iter()
            .map(|t| format!("{} ({})", t.port, t.what))
            .collect();
        found.push(format!(
            "nothing listens on 127.0.0.1 port {}: the tunnel is not running",
            list.join(", ")
        ));
        fixes.push(start_hint(ctx));
    }
    for p in &cfg.problems {
        found.push(format!("`{cfg_shown}` {p}"));
    }
    if !cfg.problems.is_empty() {
        fixes.push(format!("rebuild the profile: `{}`", ctx.setup_again()));
    }
    st.push(Finding::fail(
        CheckId::Tunnel,
        found.join("; "),
        fixes.join("; "),
    ));
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::doctor::{Inputs, Status};
    use crate::profile::tests::sample;

    fn free_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }

    /// A profile with brokers 1 and 2 on `ports`, no MySQL, and `forwards` in its ssh_config.
    fn context(dir: &std::path::Path, ports: [u16; 2], forwards: &[u16]) -> Context {
        let mut p = sample();
        p.mysql = None;
        for (b, port) in p.brokers.iter_mut().zip(ports) {
            b.port = shiqi_ca::Port::try_from(port).expect("port");
        }
        p.brokers.truncate(2);
        crate::fsutil::write_private(&dir.join(pf::PROFILE_JSON), p.to_json().as_bytes())
            .expect("profile.json");
        let mut cfg = String::from("Host shiqi-tunnel\n    HostName 10.231.0.1\n");
        for f in forwards {
            cfg.push_str(&format!("    LocalForward 127.0.0.1:{f} localhost:{f}\n"));
        }
        crate::fsutil::write_private(&dir.join(pf::SSH_CONFIG), cfg.as_bytes())
            .expect("ssh_config");
        Context::load(&Inputs {
            home: dir.to_path_buf(),
            profile_dir: Some(dir.to_path_buf()),
            configs: Vec::new(),
            bootstrap: Vec::new(),
        })
    }

    #[test]
    // Seed: kafka-day-journal, one-port tunnel hangs on broker 2
    fn a_missing_forward_names_the_broker_and_the_line_to_add() {
        let dir = tempfile::tempdir().expect("tempdir");
        let up = TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = up.local_addr().expect("addr").port();
        let b = free_port();
        let ctx = context(dir.path(), [a, b], &[a]);
        let mut st = Findings::default();
        check(&ctx, &mut st);
        let c = &st.checks[0];
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.found
                .contains(&format!("no `LocalForward` for broker 2 (`localhost:{b}`)")),
            "{c:?}"
        );
        let fix = c.fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains(&format!("`LocalForward 127.0.0.1:{b} localhost:{b}`")),
            "{fix}"
        );
        assert!(st.answering.contains(&a) && st.tunnel_broken.contains(&b));
        assert!(!st.tunnel_broken.contains(&a));
    }

    #[test]
    fn nothing_listening_is_a_tunnel_that_is_not_running_unless_ssh_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (free_port(), free_port());
        let ctx = context(dir.path(), [a, b], &[a, b]);
        let mut st = Findings::default();
        check(&ctx, &mut st);
        assert_eq!(st.checks[0].status, Status::Fail);
        assert!(st.checks[0].found.contains("the tunnel is not running"));
        assert!(
            st.checks[0]
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("start the tunnel"))
        );

        let mut st = Findings::default();
        st.push(Finding::fail(CheckId::SshLogin, "refused", "add the key"));
        check(&ctx, &mut st);
        assert_eq!(st.checks[1].status, Status::Skip, "{:?}", st.checks[1]);
        assert!(st.checks[1].found.contains("`ssh.login`"));
        assert!(st.tunnel_broken.contains(&a));
    }
}
