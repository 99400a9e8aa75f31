//! The checks behind `shiqi-connect doctor`: each finds one fact about a profile and this
//! machine (files, tools, SSH, certificate, tunnel, addresses, protocols, configs, logins) and
//! says `ok`, `warn`, `fail` or `skip`, with the fix for every warn and fail.
//!
//! Checks run in a fixed order (`run`): each is a function that takes the `Context`, the
//! report to add its lines to (`Findings`), and what earlier checks returned for it (e.g.
//! `forwards::Tunnel`, `Probes`). A check whose precondition failed earlier reports `skip`
//! with the reason instead of failing again, so one fault is one failing line. Nothing here
//! prints; `crate::commands::doctor` does.
//!
//! Adding a check: a module of its own with its `check` function, and in this file its `mod`
//! line, its `CheckId` and the call in `run`.

pub(crate) mod addresses;
pub(crate) mod cert;
pub(crate) mod cluster;
pub mod configs;
pub(crate) mod files;
pub(crate) mod forwards;
mod keys;
pub mod lint;
pub(crate) mod logins;
pub(crate) mod protocol;
pub(crate) mod server;
#[cfg(test)]
pub(crate) mod testing;
pub mod tunnel_config;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::probe::speaks::{self as probe, Speaks};
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
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) enum CheckId {
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
    pub(crate) const WIDTH: usize = 17;

    /// The stable name in the output and in `--json`.
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) struct Finding {
    /// Which check.
    pub(crate) check: CheckId,
    /// What it looked at when a check runs more than once (a config file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) subject: Option<Escaped>,
    /// The verdict.
    pub(crate) status: Status,
    /// What was found.
    pub(crate) found: Escaped,
    /// What to do (every warn and fail has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fix: Option<Escaped>,
    /// More to know (e.g. the JVM's DNS cache after a name-resolution fix).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) notes: Vec<Escaped>,
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
    pub(crate) fn ok(check: CheckId, found: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Ok, found, None)
    }

    /// A `warn` line and its fix.
    pub(crate) fn warn(check: CheckId, found: impl Into<Escaped>, fix: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Warn, found, Some(fix.into()))
    }

    /// A `fail` line and its fix.
    pub(crate) fn fail(check: CheckId, found: impl Into<Escaped>, fix: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Fail, found, Some(fix.into()))
    }

    /// A `skip` line and why.
    pub(crate) fn skip(check: CheckId, why: impl Into<Escaped>) -> Self {
        Self::new(check, Status::Skip, why, None)
    }

    /// The same line about `subject`.
    pub(crate) fn about(mut self, subject: impl Into<Escaped>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Adds a note.
    pub(crate) fn note(mut self, note: impl Into<Escaped>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// The note every fix that touches name resolution carries (FIELD-NOTES §4.3).
pub(crate) const JVM_DNS_NOTE: &str = "Java caches name lookups: a running Java client or DataGrip keeps \
    the old address until it is restarted (`networkaddress.cache.ttl` is a security property, \
    set in `$JAVA_HOME/conf/security/java.security`, not a `-D` flag; `-Dsun.net.inetaddr.ttl=0` \
    works as a system property)";

/// What the doctor is asked to look at.
#[derive(Clone, Debug)]
pub(crate) struct Inputs {
    /// `$HOME`, for `~` in paths and for resolving the SSH destination.
    pub(crate) home: PathBuf,
    /// The profile folder, if a profile is checked.
    pub(crate) profile_dir: Option<PathBuf>,
    /// `--config FILE`…: lint these instead of the profile's configs.
    pub(crate) configs: Vec<PathBuf>,
    /// `--bootstrap HOST:PORT`…: probe these clusters (no file, no profile).
    pub(crate) bootstrap: Vec<String>,
}

/// The profile as found on disk: every file is read at most once, here.
pub(crate) struct Context {
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// The profile folder (`None`: only `--config` files are checked).
    pub(crate) dir: Option<PathBuf>,
    /// `profile.json`, or why it could not be read.
    pub(crate) profile: Result<Profile, String>,
    /// The tunnel's `Host` block in `ssh_config`, or why it could not be read.
    pub(crate) ssh_config: Result<TunnelConfig, String>,
    /// The configs to lint and to compare with the ports.
    pub(crate) configs: Vec<ConfigFile>,
}

impl Context {
    /// Reads the profile and the configs. Never fails: what cannot be read is a finding.
    pub(crate) fn load(inputs: &Inputs) -> Self {
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
        let configs = if inputs.configs.is_empty() {
            inputs
                .profile_dir
                .as_deref()
                .map(lint::profile_configs)
                .unwrap_or_default()
        } else {
            inputs.configs.iter().map(|p| ConfigFile::load(p)).collect()
        };
        Self {
            home: inputs.home.clone(),
            dir: inputs.profile_dir.clone(),
            profile,
            ssh_config,
            configs,
        }
    }

    /// A file of the profile.
    pub(crate) fn path(&self, file: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(file))
    }

    /// `path` with the home folder as `~`.
    pub(crate) fn show(&self, path: &Path) -> String {
        crate::profile::tilde(path, &self.home)
    }

    /// How to start the tunnel, as the user would type it.
    pub(crate) fn tunnel_command(&self) -> String {
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
    pub(crate) fn local_endpoint(&self) -> bool {
        self.profile.as_ref().is_ok_and(|p| !p.endpoint.is_direct())
    }

    /// The local port on which the tunnel's endpoint serves the profile's MySQL (local mode
    /// with MySQL): plaintext MySQL with no TLS offered, the endpoint doing the TLS with the
    /// certificate upstream. `None` in direct mode, where the port forwards the server's TLS.
    pub(crate) fn mysql_endpoint(&self) -> Option<u16> {
        let p = self.profile.as_ref().ok()?;
        let m = p.mysql.as_ref()?;
        (!p.endpoint.is_direct()).then(|| m.port.get())
    }

    /// The profile's name, or `NAME` for a command the user completes.
    pub(crate) fn name(&self) -> String {
        self.profile
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_else(|_| "NAME".to_owned())
    }

    /// `tunnel.log` as the user would type it: where the endpoint says what it met.
    pub(crate) fn tunnel_log(&self) -> String {
        self.path(crate::tunnel::LOG)
            .map(|p| self.show(&p))
            .unwrap_or_default()
    }

    /// How Kafka clients reach the cluster, in words (`None`: the profile has no Kafka).
    pub(crate) fn kafka_mode(&self) -> Option<String> {
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
    pub(crate) fn use_local_endpoint(&self) -> String {
        let name = self
            .profile
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_else(|_| "NAME".to_owned());
        format!("use the local endpoint: `shiqi-connect tunnel up {name} --endpoint local`")
    }

    /// How to get a new key and certificate: `shiqi-connect rotate NAME`, or setup again when
    /// there is no profile to rotate.
    pub(crate) fn renew_command(&self) -> String {
        match &self.profile {
            Ok(p) => format!("shiqi-connect rotate {}", p.name),
            Err(_) => self.setup_again(),
        }
    }

    /// `shiqi-connect setup NAME --server DEST --force`, to rebuild the profile.
    pub(crate) fn setup_again(&self) -> String {
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
pub(crate) type Sink = Box<dyn FnMut(&Finding) + Send>;

/// The report: every line so far, in order. Checks add to it; what a later check needs from an
/// earlier one is not read from here but passed on typed (e.g. [`forwards::Tunnel`]).
#[derive(Default)]
pub(crate) struct Findings {
    /// Every line so far.
    pub(crate) checks: Vec<Finding>,
    /// Where lines go as they are made, besides `checks`.
    pub(crate) sink: Option<Sink>,
}

/// What each probed `host:port` speaks, probed once by whichever check asks first (`tunnel`,
/// `addresses.names`, `protocol`) and read by the logins.
#[derive(Clone, Debug, Default)]
pub(crate) struct Probes(BTreeMap<(String, u16), Speaks>);

impl Probes {
    /// What `host:port` was found to speak, if it was probed.
    pub(crate) fn get(&self, host: &str, port: u16) -> Option<&Speaks> {
        self.0.get(&(host.to_owned(), port))
    }

    /// Records what `host:port` speaks.
    pub(crate) fn insert(&mut self, host: &str, port: u16, speaks: Speaks) {
        self.0.insert((host.to_owned(), port), speaks);
    }

    /// What `host:port` speaks, probing it (as Kafka or MySQL, checking the name `sni`) the
    /// first time.
    pub(crate) fn probe(&mut self, host: &str, port: u16, kafka: bool, sni: &str) -> Speaks {
        if let Some(s) = self.get(host, port) {
            return s.clone();
        }
        let s = if kafka {
            probe::kafka(host, port, sni)
        } else {
            probe::mysql(host, port, sni)
        };
        self.insert(host, port, s.clone());
        s
    }
}

impl Findings {
    /// Records a line (and hands it to the sink).
    pub(crate) fn push(&mut self, check: Finding) {
        if let Some(sink) = &mut self.sink {
            sink(&check);
        }
        self.checks.push(check);
    }

    /// The worst status of `id` so far (`None`: it did not run).
    pub(crate) fn status(&self, id: CheckId) -> Option<Status> {
        self.checks
            .iter()
            .filter(|c| c.check == id)
            .map(|c| c.status)
            .max()
    }

    /// Whether `id` ran and failed.
    #[cfg(test)]
    pub(crate) fn failed(&self, id: CheckId) -> bool {
        self.status(id) == Some(Status::Fail)
    }

    /// The first of `ids` that failed, for a `skip` reason.
    #[cfg(test)]
    pub(crate) fn first_failed(&self, ids: &[CheckId]) -> Option<CheckId> {
        ids.iter().copied().find(|id| self.failed(*id))
    }

    /// The worst status overall.
    pub(crate) fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .filter(|s| *s != Status::Skip)
            .max()
            .unwrap_or(Status::Ok)
    }
}

/// `skip` line text for a check that needs `id` to pass.
pub(crate) fn needs(id: CheckId) -> String {
    format!("needs `{}` to pass first", id.as_str())
}

/// Runs every check in order; `sink` sees each line as soon as it is made.
pub(crate) async fn run(
    inputs: &Inputs,
    passphrase: &dyn Passphrase,
    sink: Option<Sink>,
) -> Findings {
    let ctx = Context::load(inputs);
    let mut st = Findings {
        sink,
        ..Findings::default()
    };
    if ctx.dir.is_some() {
        profile_checks(&ctx, &mut st, passphrase).await;
    } else {
        lint::check(&ctx, &mut st);
        cluster::check(&ctx, &mut st, &inputs.bootstrap).await;
    }
    st
}

/// The checks of a profile, in order: each takes what it needs from earlier ones and returns
/// what later ones need.
async fn profile_checks(ctx: &Context, st: &mut Findings, passphrase: &dyn Passphrase) {
    files::check(ctx, st);
    files::tools(ctx, st);
    let ssh = server::check(ctx, st, passphrase).await;
    let cert = cert::check(ctx, st);
    let mut probes = Probes::default();
    let tunnel = forwards::check(ctx, st, forwards::Needs { ssh, cert }, &mut probes).await;
    let addresses = addresses::check(ctx, st, &tunnel, &mut probes);
    protocol::check(ctx, st, &tunnel, &mut probes);
    lint::check(ctx, st);
    let earlier = logins::Earlier {
        cert,
        tunnel,
        addresses,
        probes,
    };
    logins::check(ctx, st, &earlier).await;
}

#[cfg(test)]
mod tests {
    use super::*;

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
