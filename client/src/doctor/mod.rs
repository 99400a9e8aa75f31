//! The checks behind `shiqi-connect doctor`: each finds one fact about a profile and this
//! machine (files, tools, SSH, certificate, tunnel, addresses, protocols, configs, logins) and
//! says `ok`, `warn`, `fail` or `skip`, with the fix for every warn and fail.
//!
//! Checks run in a fixed order and read what earlier ones found ([`Findings`]): a check whose
//! precondition failed earlier reports `skip` with the reason instead of failing again, so one
//! fault is one failing line. Nothing here prints; [`crate::commands::doctor`] does.

pub mod addresses;
pub mod cert;
pub mod cluster;
pub mod configs;
pub mod files;
pub mod forwards;
mod keys;
pub mod lint;
pub mod logins;
pub mod protocol;
pub mod server;
pub mod tunnel_config;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::probe::speaks::Speaks;
use crate::profile::{Endpoint, Profile, files as pf};
use crate::ssh::auth::Passphrase;
use crate::text::Escaped;
use configs::ConfigFile;
use tunnel_config::TunnelConfig;

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// All is well.
    Ok,
    /// Not run: something it needs failed earlier, or does not apply.
    Skip,
    /// Works now, but will break or surprise; the fix says what to do.
    Warn,
    /// Broken; the fix says what to do.
    Fail,
}

impl Status {
    /// `ok`, `skip`, `warn`, `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Skip => "skip",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// Which check, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckId {
    /// The profile's files and their modes.
    Files,
    /// A mysql/mariadb client on PATH.
    ToolMysql,
    /// kcat on PATH.
    ToolKcat,
    /// java and keytool on PATH.
    ToolJava,
    /// The SSH server answers on TCP.
    SshReach,
    /// Its host key is in the tunnel's known_hosts.
    SshHostKey,
    /// Which key logs in.
    SshLogin,
    /// `ssh_config` names that key.
    SshConfigKey,
    /// The server's agent speaks this build's protocol.
    AgentVersion,
    /// The certificate is valid now (and not about to expire).
    CertValid,
    /// `ca.crt` signed it.
    CertChain,
    /// `client.key` is its key.
    CertKey,
    /// The passwords open the PKCS#12 files.
    Keystores,
    /// Every broker and MySQL has a forward that answers (or the local endpoint answers).
    Tunnel,
    /// Advertised names resolve to the tunnel.
    AddressResolve,
    /// Server certificates cover the names clients check.
    AddressNames,
    /// What each port speaks, and whether the configs agree.
    Protocol,
    /// A client config's keys and values.
    Lint,
    /// Kafka metadata with the certificate.
    LoginKafka,
    /// `SELECT CURRENT_USER()` with the certificate.
    LoginMysql,
    /// Without a profile: each bootstrap server against the config's protocol.
    ClusterBootstrap,
    /// Without a profile: each advertised broker from this machine.
    ClusterBrokers,
    /// Without a profile: an option file's MySQL server and certificate login.
    ClusterMysql,
}

impl CheckId {
    /// The longest [`CheckId::as_str`], for aligned output.
    pub const WIDTH: usize = 17;

    /// The stable name in the output and in `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Files => "files",
            Self::ToolMysql => "tool.mysql",
            Self::ToolKcat => "tool.kcat",
            Self::ToolJava => "tool.java",
            Self::SshReach => "ssh.reach",
            Self::SshHostKey => "ssh.host-key",
            Self::SshLogin => "ssh.login",
            Self::SshConfigKey => "ssh.config-key",
            Self::AgentVersion => "agent.version",
            Self::CertValid => "cert.valid",
            Self::CertChain => "cert.chain",
            Self::CertKey => "cert.key",
            Self::Keystores => "cert.keystores",
            Self::Tunnel => "tunnel",
            Self::AddressResolve => "addresses.resolve",
            Self::AddressNames => "addresses.names",
            Self::Protocol => "protocol",
            Self::Lint => "lint",
            Self::LoginKafka => "login.kafka",
            Self::LoginMysql => "login.mysql",
            Self::ClusterBootstrap => "cluster.bootstrap",
            Self::ClusterBrokers => "cluster.brokers",
            Self::ClusterMysql => "cluster.mysql",
        }
    }
}

impl Serialize for CheckId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One line of the report. Every text is [`Escaped`]: checks quote servers (banners, greetings,
/// error messages, advertised names), and the report goes to stdout as is.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// Which check.
    pub check: CheckId,
    /// What it looked at when a check runs more than once (a config file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<Escaped>,
    /// The verdict.
    pub status: Status,
    /// What was found.
    pub found: Escaped,
    /// What to do (every warn and fail has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Escaped>,
    /// More to know (e.g. the JVM's DNS cache after a name-resolution fix).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Escaped>,
}

impl Finding {
    fn new(
        check: CheckId,
        status: Status,
        found: impl Into<Escaped>,
        fix: Option<Escaped>,
    ) -> Self {
        Self {
            check,
            subject: None,
            status,
            found: found.into(),
            fix,
            notes: Vec::new(),
        }
    }

    /// An `ok` line.
    pub fn ok(check: CheckId, found: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Ok, found, None)
    }

    /// A `warn` line and its fix.
    pub fn warn(check: CheckId, found: impl Into<Escaped>, fix: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Warn, found, Some(fix.into()))
    }

    /// A `fail` line and its fix.
    pub fn fail(check: CheckId, found: impl Into<Escaped>, fix: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Fail, found, Some(fix.into()))
    }

    /// A `skip` line and why.
    pub fn skip(check: CheckId, why: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Skip, why, None)
    }

    /// The same line about `subject`.
    pub fn about(mut self, subject: impl Into<Escaped>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Adds a note.
    pub fn note(mut self, note: impl Into<Escaped>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// The note every fix that touches name resolution carries (FIELD-NOTES §4.3).
pub const JVM_DNS_NOTE: &str = "Java caches name lookups: a running Java client or DataGrip keeps \
    the old address until it is restarted (`networkaddress.cache.ttl` is a security property, \
    set in `$JAVA_HOME/conf/security/java.security`, not a `-D` flag; `-Dsun.net.inetaddr.ttl=0` \
    works as a system property)";

/// What the doctor is asked to look at.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// `$HOME`, for `~` in paths and for resolving the SSH destination.
    pub home: PathBuf,
    /// The profile folder, if a profile is checked.
    pub profile_dir: Option<PathBuf>,
    /// `--config FILE`…: lint these instead of the profile's configs.
    pub configs: Vec<PathBuf>,
    /// `--bootstrap HOST:PORT`…: probe these clusters (no file, no profile).
    pub bootstrap: Vec<String>,
}

/// The profile as found on disk: every file is read at most once, here.
pub struct Context {
    /// `$HOME`.
    pub home: PathBuf,
    /// The profile folder (`None`: only `--config` files are checked).
    pub dir: Option<PathBuf>,
    /// `profile.json`, or why it could not be read.
    pub profile: Result<Profile, String>,
    /// The tunnel's `Host` block in `ssh_config`, or why it could not be read.
    pub ssh_config: Result<TunnelConfig, String>,
    /// The configs to lint and to compare with the ports.
    pub configs: Vec<ConfigFile>,
}

impl Context {
    /// Reads the profile and the configs. Never fails: what cannot be read is a finding.
    pub fn load(inputs: &Inputs) -> Self {
        let profile = match &inputs.profile_dir {
            Some(dir) => Profile::load(dir).map_err(|e| e.to_string()),
            None => Err("no profile".to_owned()),
        };
        let tunnel_host = profile
            .as_ref()
            .map(|p| p.tunnel_host.clone())
            .unwrap_or_else(|_| "shiqi-tunnel".to_owned());
        let ssh_config = match &inputs.profile_dir {
            Some(dir) => TunnelConfig::load(&dir.join(pf::SSH_CONFIG), &tunnel_host, &inputs.home),
            None => Err("no profile".to_owned()),
        };
        let paths: Vec<PathBuf> = if inputs.configs.is_empty() {
            inputs
                .profile_dir
                .iter()
                .flat_map(|d| {
                    [pf::CLIENT_PROPERTIES, pf::LIBRDKAFKA_CONF, pf::MY_CNF]
                        .iter()
                        .map(|f| d.join(f))
                        .filter(|p| p.exists())
                        .collect::<Vec<_>>()
                })
                .collect()
        } else {
            inputs.configs.clone()
        };
        let configs = paths.iter().map(|p| ConfigFile::load(p)).collect();
        Self {
            home: inputs.home.clone(),
            dir: inputs.profile_dir.clone(),
            profile,
            ssh_config,
            configs,
        }
    }

    /// A file of the profile.
    pub fn path(&self, file: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(file))
    }

    /// `path` with the home folder as `~`.
    pub fn show(&self, path: &Path) -> String {
        crate::profile::tilde(path, &self.home)
    }

    /// How to start the tunnel, as the user would type it.
    pub fn tunnel_command(&self) -> String {
        let host = self
            .profile
            .as_ref()
            .map(|p| p.tunnel_host.as_str())
            .unwrap_or("shiqi-tunnel");
        match self.path(pf::SSH_CONFIG) {
            Some(cfg) => format!("ssh -fN -F {} {host}", self.show(&cfg)),
            None => format!("ssh -fN {host}"),
        }
    }

    /// Whether the profile's Kafka clients go through the tunnel's local endpoint.
    pub fn local_endpoint(&self) -> bool {
        self.profile.as_ref().is_ok_and(|p| !p.endpoint.is_direct())
    }

    /// The local port on which the tunnel's endpoint serves the profile's MySQL (local mode
    /// with MySQL): plaintext MySQL with no TLS offered, the endpoint doing the TLS with the
    /// certificate upstream. `None` in direct mode, where the port forwards the server's TLS.
    pub fn mysql_endpoint(&self) -> Option<u16> {
        let p = self.profile.as_ref().ok()?;
        let m = p.mysql.as_ref()?;
        (!p.endpoint.is_direct()).then(|| m.port.get())
    }

    /// The profile's name, or `NAME` for a command the user completes.
    pub fn name(&self) -> String {
        self.profile
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_else(|_| "NAME".to_owned())
    }

    /// `tunnel.log` as the user would type it: where the endpoint says what it met.
    pub fn tunnel_log(&self) -> String {
        self.path(crate::tunnel::LOG)
            .map(|p| self.show(&p))
            .unwrap_or_default()
    }

    /// How Kafka clients reach the cluster, in words (`None`: the profile has no Kafka).
    pub fn kafka_mode(&self) -> Option<String> {
        let p = self.profile.as_ref().ok()?;
        match &p.endpoint {
            Endpoint::Local { bootstrap_port, .. } => Some(format!(
                "Kafka: local endpoint on 127.0.0.1:{bootstrap_port} (the tunnel does the TLS \
                 to each broker)"
            )),
            Endpoint::Direct if p.brokers.is_empty() => None,
            Endpoint::Direct => {
                Some("Kafka: direct (clients do TLS to each broker's forward)".to_owned())
            }
        }
    }

    /// The fix for brokers a direct client cannot reach through forwards of their own.
    pub fn use_local_endpoint(&self) -> String {
        let name = self
            .profile
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_else(|_| "NAME".to_owned());
        format!("use the local endpoint: `shiqi-connect tunnel up {name} --endpoint local`")
    }

    /// How to get a new key and certificate: `shiqi-connect rotate NAME`, or setup again when
    /// there is no profile to rotate.
    pub fn renew_command(&self) -> String {
        match &self.profile {
            Ok(p) => format!("shiqi-connect rotate {}", p.name),
            Err(_) => self.setup_again(),
        }
    }

    /// `shiqi-connect setup NAME --server DEST --force`, to rebuild the profile.
    pub fn setup_again(&self) -> String {
        match &self.profile {
            Ok(p) => format!(
                "shiqi-connect setup {} --server {} --force",
                p.name, p.server.destination
            ),
            Err(_) => "shiqi-connect setup NAME --server DEST --force".to_owned(),
        }
    }
}

/// Called with each line as soon as it is known (the command prints it).
pub type Sink = Box<dyn FnMut(&Finding) + Send>;

/// What earlier checks found that later ones need.
#[derive(Default)]
pub struct Findings {
    /// Every line so far.
    pub checks: Vec<Finding>,
    /// Where lines go as they are made, besides `checks`.
    pub sink: Option<Sink>,
    /// Local ports that accept a connection.
    pub answering: BTreeSet<u16>,
    /// Local ports the tunnel should serve but does not (no forward, nothing listening, or an
    /// endpoint port that does not answer as Kafka).
    pub tunnel_broken: BTreeSet<u16>,
    /// Advertised hosts that do not resolve to the tunnel.
    pub bypassed: BTreeSet<String>,
    /// Local ports whose server certificate does not cover the name its clients check.
    pub name_mismatch: BTreeSet<u16>,
    /// What each probed `host:port` speaks.
    pub probes: BTreeMap<(String, u16), Speaks>,
}

impl Findings {
    /// Records a line (and hands it to the sink).
    pub fn push(&mut self, check: Finding) {
        if let Some(sink) = &mut self.sink {
            sink(&check);
        }
        self.checks.push(check);
    }

    /// The worst status of `id` so far (`None`: it did not run).
    pub fn status(&self, id: CheckId) -> Option<Status> {
        self.checks
            .iter()
            .filter(|c| c.check == id)
            .map(|c| c.status)
            .max()
    }

    /// Whether `id` ran and failed.
    pub fn failed(&self, id: CheckId) -> bool {
        self.status(id) == Some(Status::Fail)
    }

    /// The first of `ids` that failed, for a `skip` reason.
    pub fn first_failed(&self, ids: &[CheckId]) -> Option<CheckId> {
        ids.iter().copied().find(|id| self.failed(*id))
    }

    /// The worst status overall.
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .filter(|s| *s != Status::Skip)
            .max()
            .unwrap_or(Status::Ok)
    }
}

/// `skip` line text for a check that needs `id` to pass.
pub fn needs(id: CheckId) -> String {
    format!("needs `{}` to pass first", id.as_str())
}

/// Runs every check in order; `sink` sees each line as soon as it is made.
pub async fn run(inputs: &Inputs, passphrase: &dyn Passphrase, sink: Option<Sink>) -> Findings {
    let ctx = Context::load(inputs);
    let mut st = Findings {
        sink,
        ..Findings::default()
    };
    if ctx.dir.is_some() {
        files::check(&ctx, &mut st);
        files::tools(&ctx, &mut st);
        server::check(&ctx, &mut st, passphrase).await;
        cert::check(&ctx, &mut st);
        forwards::check(&ctx, &mut st).await;
        addresses::check(&ctx, &mut st);
        protocol::check(&ctx, &mut st);
    }
    lint::check(&ctx, &mut st);
    if ctx.dir.is_some() {
        logins::check(&ctx, &mut st).await;
    } else {
        cluster::check(&ctx, &mut st, &inputs.bootstrap).await;
    }
    st
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::{TcpListener, TcpStream};

    use super::*;
    use crate::profile::{ForwardRecord, LocalBroker};
    use crate::tunnel::state::{Phase, State};

    /// A profile folder holding `p`, an `ssh_config` whose tunnel block has a `LocalForward`
    /// for each of `forwards` (local port, target host), and `files` (name, text), loaded as
    /// doctor loads it.
    pub(crate) fn context(
        dir: &Path,
        p: &Profile,
        forwards: &[(u16, &str)],
        files: &[(&str, &str)],
    ) -> Context {
        crate::fsutil::write_private(&dir.join(pf::PROFILE_JSON), p.to_json().as_bytes())
            .expect("profile.json");
        let mut cfg = String::from("Host shiqi-tunnel\n    HostName 10.231.0.1\n");
        for (port, host) in forwards {
            cfg.push_str(&format!(
                "    LocalForward 127.0.0.1:{port} {host}:{port}\n"
            ));
        }
        crate::fsutil::write_private(&dir.join(pf::SSH_CONFIG), cfg.as_bytes())
            .expect("ssh_config");
        for (name, text) in files {
            crate::fsutil::write_private(&dir.join(name), text.as_bytes()).expect("file");
        }
        Context::load(&Inputs {
            home: dir.to_path_buf(),
            profile_dir: Some(dir.to_path_buf()),
            configs: Vec::new(),
            bootstrap: Vec::new(),
        })
    }

    /// The sample profile with brokers 1 and 2 advertising `broker-N.kafka.invalid:9093` (the
    /// multi-host shape), no MySQL, and the local endpoint on `ports` (bootstrap first).
    pub(crate) fn local_profile(ports: &[u16]) -> Profile {
        let mut p = crate::profile::tests::sample();
        p.mysql = None;
        p.brokers.truncate(2);
        for b in &mut p.brokers {
            b.host = format!("broker-{}.kafka.invalid", b.id)
                .parse()
                .expect("host");
            b.port = shiqi_ca::Port::try_from(9093).expect("port");
        }
        p.endpoint = Endpoint::Local {
            bootstrap_port: ports[0],
            brokers: ports[1..]
                .iter()
                .zip(1..)
                .map(|(port, id)| LocalBroker { id, port: *port })
                .collect(),
        };
        p
    }

    /// [`local_profile`] with MySQL (`db.shiqi.invalid`, user `saige`) on `mysql`, which the
    /// local endpoint serves.
    pub(crate) fn local_mysql_profile(ports: &[u16], mysql: u16) -> Profile {
        let mut p = local_profile(ports);
        p.mysql = Some(shiqi_ca::protocol::MysqlFacts {
            host: "db.shiqi.invalid".parse().expect("host"),
            port: shiqi_ca::Port::try_from(mysql).expect("port"),
            user: "saige".parse().expect("name"),
        });
        p
    }

    /// `my.cnf` as setup writes it for the local endpoint: no SSL settings, no password.
    pub(crate) fn local_my_cnf(port: u16) -> String {
        format!("[client]\nhost=127.0.0.1\nport={port}\nuser=saige\n")
    }

    /// How a fake local endpoint's MySQL port behaves.
    #[derive(Clone, Copy)]
    pub(crate) enum FakeMysql {
        /// Greets without TLS, logs anyone in, and says `saige@%` is `CURRENT_USER()`.
        Plain,
        /// Greets offering TLS: the server's own greeting, not the endpoint's.
        Tls,
        /// Greets without TLS, then answers the login with this error (code 1045).
        Refuses(&'static str),
        /// Sends this error in place of the greeting.
        NoGreeting(&'static str),
    }

    /// A fake MySQL port on 127.0.0.1 behaving as `how`, for every connection.
    pub(crate) fn fake_mysql(how: FakeMysql) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || answer_mysql(s, how));
            }
        });
        port
    }

    fn write_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) -> bool {
        let len = u32::try_from(payload.len()).expect("small").to_le_bytes();
        let mut out = vec![len[0], len[1], len[2], seq];
        out.extend_from_slice(payload);
        s.write_all(&out).is_ok()
    }

    fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
        let mut h = [0u8; 4];
        s.read_exact(&mut h).ok()?;
        let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
        let mut p = vec![0u8; len];
        s.read_exact(&mut p).ok()?;
        Some(p)
    }

    fn lenenc(out: &mut Vec<u8>, s: &str) {
        out.push(u8::try_from(s.len()).expect("short"));
        out.extend_from_slice(s.as_bytes());
    }

    fn answer_mysql(mut s: TcpStream, how: FakeMysql) {
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        let err = |code: u16, state: &str, text: &str| {
            let mut p = vec![0xff];
            p.extend_from_slice(&code.to_le_bytes());
            p.extend_from_slice(state.as_bytes());
            p.extend_from_slice(text.as_bytes());
            p
        };
        if let FakeMysql::NoGreeting(why) = how {
            write_packet(&mut s, 0, &err(1105, "", why));
            return;
        }
        // MariaDB 10.11's shape: no CLIENT_DEPRECATE_EOF, mysql_native_password.
        let ssl: u16 = if matches!(how, FakeMysql::Tls) {
            0x0800
        } else {
            0
        };
        let mut g = vec![10];
        g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
        g.extend_from_slice(&7u32.to_le_bytes());
        g.extend_from_slice(b"abcdefgh\0");
        g.extend_from_slice(&(0xf7ff | ssl).to_le_bytes());
        g.push(45);
        g.extend_from_slice(&2u16.to_le_bytes());
        g.extend_from_slice(&0x000bu16.to_le_bytes());
        g.push(21);
        g.extend_from_slice(&[0; 10]);
        g.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
        if !write_packet(&mut s, 0, &g) || read_packet(&mut s).is_none() {
            return;
        }
        match how {
            FakeMysql::Plain => {}
            FakeMysql::Refuses(why) => {
                write_packet(&mut s, 2, &err(1045, "#28000", why));
                return;
            }
            FakeMysql::Tls | FakeMysql::NoGreeting(_) => return,
        }
        let ok = [0u8, 0, 0, 2, 0, 0, 0];
        if !write_packet(&mut s, 2, &ok) {
            return;
        }
        while let Some(cmd) = read_packet(&mut s) {
            let current_user = cmd.windows(12).any(|w| w == b"CURRENT_USER");
            match cmd.first() {
                Some(3) if current_user => {
                    let mut col = Vec::new();
                    for part in ["def", "", "", "", "CURRENT_USER()", ""] {
                        lenenc(&mut col, part);
                    }
                    col.push(0x0c);
                    col.extend_from_slice(&33u16.to_le_bytes());
                    col.extend_from_slice(&384u32.to_le_bytes());
                    col.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0]);
                    let eof = [0xfe, 0, 0, 2, 0];
                    let mut row = Vec::new();
                    lenenc(&mut row, "saige@%");
                    let packets: [&[u8]; 5] = [&[1], &col, &eof, &row, &eof];
                    for (p, seq) in packets.iter().zip(1..) {
                        write_packet(&mut s, seq, p);
                    }
                }
                // Settings the driver asks for: no rows, so its defaults.
                Some(3 | 14) => {
                    write_packet(&mut s, 1, &ok);
                }
                _ => return,
            }
        }
    }

    /// The state file of a running tunnel whose endpoint serves Kafka on `ports` and MySQL on
    /// `mysql`.
    pub(crate) fn running_tunnel_with_mysql(dir: &Path, ports: &[u16], mysql: u16) {
        running_tunnel(dir, ports, None);
        let path = dir.join(crate::tunnel::STATE);
        let mut state = State::read(&path).expect("state");
        state.forwards.push(ForwardRecord {
            local_port: mysql,
            remote_host: "db.shiqi.invalid".parse().expect("host"),
            remote_port: shiqi_ca::Port::try_from(mysql).expect("port"),
            purpose: "MySQL, local endpoint".to_owned(),
        });
        state.write(&path).expect("state");
    }

    /// `client.properties` and `librdkafka.conf` as setup writes them for the local endpoint.
    pub(crate) fn local_configs(bootstrap: u16) -> [(&'static str, String); 2] {
        [
            (
                pf::CLIENT_PROPERTIES,
                format!("bootstrap.servers=127.0.0.1:{bootstrap}\nsecurity.protocol=PLAINTEXT\n"),
            ),
            (
                pf::LIBRDKAFKA_CONF,
                format!("bootstrap.servers=127.0.0.1:{bootstrap}\nsecurity.protocol=plaintext\n"),
            ),
        ]
    }

    /// `n` fake local endpoint ports (bootstrap first): each answers `ApiVersions`, and
    /// `Metadata` naming brokers 1.. at `host` on the other ports; anything else is closed.
    pub(crate) fn fake_endpoint(n: usize, host: &'static str) -> Vec<u16> {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
            .collect();
        let ports: Vec<u16> = listeners
            .iter()
            .map(|l| l.local_addr().expect("addr").port())
            .collect();
        let brokers: Vec<(i32, u16)> = ports[1..].iter().zip(1..).map(|(p, id)| (id, *p)).collect();
        for l in listeners {
            let brokers = brokers.clone();
            std::thread::spawn(move || {
                for s in l.incoming().flatten() {
                    let brokers = brokers.clone();
                    std::thread::spawn(move || answer_kafka(s, &brokers, host));
                }
            });
        }
        ports
    }

    fn answer_kafka(mut s: TcpStream, brokers: &[(i32, u16)], host: &str) {
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        loop {
            let mut len = [0u8; 4];
            if s.read_exact(&mut len).is_err() {
                return;
            }
            let mut req = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap_or(0)];
            if req.len() < 8 || s.read_exact(&mut req).is_err() {
                return;
            }
            let mut body = req[4..8].to_vec(); // the correlation id
            match i16::from_be_bytes([req[0], req[1]]) {
                18 => {
                    body.extend(0i16.to_be_bytes()); // no error
                    body.extend(1i32.to_be_bytes());
                    body.extend([18i16, 0, 3].iter().flat_map(|v| v.to_be_bytes()));
                }
                3 => {
                    body.extend(0i32.to_be_bytes()); // throttle
                    body.extend(i32::try_from(brokers.len()).expect("few").to_be_bytes());
                    for (id, port) in brokers {
                        body.extend(id.to_be_bytes());
                        body.extend(i16::try_from(host.len()).expect("short").to_be_bytes());
                        body.extend(host.as_bytes());
                        body.extend(i32::from(*port).to_be_bytes());
                        body.extend((-1i16).to_be_bytes()); // no rack
                    }
                    body.extend((-1i16).to_be_bytes()); // no cluster id
                    body.extend(1i32.to_be_bytes()); // controller
                    body.extend(0i32.to_be_bytes()); // no topics
                }
                _ => return,
            }
            let mut frame = i32::try_from(body.len())
                .expect("small")
                .to_be_bytes()
                .to_vec();
            frame.extend(body);
            if s.write_all(&frame).is_err() {
                return;
            }
        }
    }

    /// The state file of a running tunnel (this test process) whose endpoint serves `ports`.
    pub(crate) fn running_tunnel(dir: &Path, ports: &[u16], error: Option<&str>) {
        let record = |port: u16| ForwardRecord {
            local_port: port,
            remote_host: "broker-1.kafka.invalid".parse().expect("host"),
            remote_port: shiqi_ca::Port::try_from(9093).expect("port"),
            purpose: "Kafka, local endpoint".to_owned(),
        };
        State {
            pid: std::process::id(),
            phase: Phase::Up,
            since: time::OffsetDateTime::now_utc(),
            server: "shiqi-dev@10.231.0.1:22".to_owned(),
            generation: 0,
            forwards: Vec::new(),
            error: error.map(str::to_owned),
            hint: None,
            problems: Vec::new(),
            brokers: None,
            endpoint: ports.iter().map(|p| record(*p)).collect(),
            renewal: None,
            refused: None,
        }
        .write(&dir.join(crate::tunnel::STATE))
        .expect("state");
    }

    #[test]
    fn the_worst_status_ignores_skips() {
        let mut st = Findings::default();
        st.push(Finding::ok(CheckId::Files, "x"));
        st.push(Finding::skip(CheckId::Tunnel, "y"));
        assert_eq!(st.worst(), Status::Ok);
        st.push(Finding::warn(CheckId::ToolKcat, "x", "y"));
        assert_eq!(st.worst(), Status::Warn);
        st.push(Finding::fail(CheckId::Lint, "x", "y").about("a"));
        st.push(Finding::ok(CheckId::Lint, "x").about("b"));
        assert_eq!(st.worst(), Status::Fail);
        assert!(st.failed(CheckId::Lint));
        assert_eq!(
            st.first_failed(&[CheckId::Tunnel, CheckId::Lint]),
            Some(CheckId::Lint)
        );
    }

    #[test]
    fn the_width_fits_every_name() {
        let all = [
            CheckId::Files,
            CheckId::ToolMysql,
            CheckId::SshConfigKey,
            CheckId::AddressResolve,
            CheckId::AddressNames,
            CheckId::Keystores,
            CheckId::LoginKafka,
        ];
        assert_eq!(
            all.iter().map(|c| c.as_str().len()).max(),
            Some(CheckId::WIDTH)
        );
    }

    #[test]
    fn checks_serialize_with_their_ids() {
        let c = Finding::fail(CheckId::AddressResolve, "f", "x").note("n");
        let j = serde_json::to_value(&c).expect("json");
        assert_eq!(j["check"], "addresses.resolve");
        assert_eq!(j["status"], "fail");
        assert_eq!(j["notes"][0], "n");
        assert!(j.get("subject").is_none());
    }
}
