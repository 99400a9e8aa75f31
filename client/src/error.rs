//! The one error type of the `shiqi-connect` library. Messages name the fact; [`Error::hint`]
//! names the next step. Secrets never appear in a message.

use std::path::PathBuf;

use shiqi_ca::protocol::RequestKind;

/// What the user reads first when the agent refused `op`.
fn refusal(op: RequestKind) -> &'static str {
    match op {
        RequestKind::Sign => "the server's agent refused the CSR",
        RequestKind::Provision => "the server's agent refused",
        RequestKind::Brokers => "the server's agent could not list the Kafka brokers",
        RequestKind::Version => "the server's agent could not say its version",
        RequestKind::Revoke => "the server's agent could not revoke",
    }
}

/// Everything that can go wrong in the client library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Neither `$HOME` nor the OS user database names a home folder, so `~/.ssh` and
    /// `~/.shiqi` cannot be found.
    #[error(
        "cannot find the home directory: `HOME` (Windows: `USERPROFILE`) is not set and the user database has none"
    )]
    NoHome,

    /// A required value was neither given nor could be asked for.
    #[error("no {what} given")]
    Missing {
        /// What is missing, in words.
        what: &'static str,
        /// The flag that sets it.
        flag: &'static str,
        /// The environment variable that sets it.
        env: &'static str,
    },

    /// A destination that is not `user@host`, `ssh://user@host:port` or a Host alias.
    #[error("invalid SSH destination `{given}`: {why}")]
    InvalidDestination {
        /// What was given (truncated).
        given: String,
        /// Which rule it breaks.
        why: &'static str,
    },

    /// A value for an `ssh_config` keyword we write that ssh would misread.
    #[error("invalid {what} `{given}`: {why}")]
    InvalidValue {
        /// Which setting.
        what: &'static str,
        /// What was given (truncated).
        given: String,
        /// Which rule it breaks.
        why: &'static str,
    },

    /// `ssh -G DEST` failed.
    #[error("`ssh -G {destination}` failed: {why}")]
    SshConfig {
        /// The destination as given.
        destination: String,
        /// What ssh said (first line).
        why: String,
    },

    /// The TCP connection to the SSH server failed.
    #[error("cannot connect to `{host}:{port}`")]
    Connect {
        /// Host name or address dialled.
        host: String,
        /// Port dialled.
        port: u16,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// A step took longer than allowed.
    #[error("timed out after {secs}s while {what}")]
    Timeout {
        /// What was being waited for.
        what: &'static str,
        /// The limit.
        secs: u64,
    },

    /// The SSH protocol failed (handshake, channel, disconnect).
    #[error("SSH to `{host}` failed while {what}")]
    Ssh {
        /// The server.
        host: String,
        /// What was being done.
        what: &'static str,
        /// What russh said.
        #[source]
        source: russh::Error,
    },

    /// The server's host key is not in known_hosts and may not be learned.
    #[error("the host key of `{host}` is not known: {algorithm} key fingerprint is {fingerprint}")]
    HostKeyUnknown {
        /// The known_hosts name (`host` or `[host]:port`).
        host: String,
        /// Key algorithm, e.g. `ssh-ed25519`.
        algorithm: String,
        /// `SHA256:…`.
        fingerprint: String,
        /// Where it was looked up.
        known_hosts: PathBuf,
    },

    /// The server's host key differs from the one recorded: possibly a man-in-the-middle.
    #[error(
        "REMOTE HOST IDENTIFICATION HAS CHANGED for `{host}`: it now offers {algorithm} key \
         {fingerprint}, which differs from `{}` line {line}",
        known_hosts.display()
    )]
    HostKeyChanged {
        /// The known_hosts name.
        host: String,
        /// Key algorithm.
        algorithm: String,
        /// The fingerprint the server offered now.
        fingerprint: String,
        /// The file holding the old key.
        known_hosts: PathBuf,
        /// Its line.
        line: usize,
    },

    /// A known_hosts file could not be read or updated.
    #[error("cannot use known_hosts file `{}`", path.display())]
    KnownHosts {
        /// The file.
        path: PathBuf,
        /// What russh said.
        #[source]
        source: russh::keys::Error,
    },

    /// A `@revoked` line in known_hosts lists the key the server showed.
    #[error("the host key of `{host}` ({fingerprint}) is REVOKED at `{}` line {line}: refusing to connect", known_hosts.display())]
    HostKeyRevoked {
        /// The known_hosts name.
        host: String,
        /// The key's fingerprint.
        fingerprint: String,
        /// The file with the `@revoked` line.
        known_hosts: PathBuf,
        /// Its line.
        line: usize,
    },

    /// The `RevokedHostKeys` file (a key list or a KRL) lists the key the server showed.
    #[error(
        "the host key of `{host}` ({fingerprint}) is REVOKED by `{}`{} (RevokedHostKeys): refusing to connect",
        file.display(),
        line.map(|l| format!(" line {l}")).unwrap_or_default()
    )]
    HostKeyRevokedByFile {
        /// The known_hosts name.
        host: String,
        /// The key's fingerprint.
        fingerprint: String,
        /// The `RevokedHostKeys` file.
        file: PathBuf,
        /// The line listing the key, in a plain list (a KRL has none).
        line: Option<usize>,
    },

    /// The `RevokedHostKeys` file cannot be read or checked; OpenSSH then refuses every host.
    #[error("cannot check the host key of `{host}` against RevokedHostKeys `{}`: {why}", file.display())]
    RevokedHostKeysUnusable {
        /// The known_hosts name.
        host: String,
        /// The `RevokedHostKeys` file.
        file: PathBuf,
        /// What is wrong (escaped, one line).
        why: String,
    },

    /// Only a `@cert-authority` line vouches for the host; host certificates are not checked.
    #[error("`{host}` is trusted only through a host certificate authority (`{}` line {line}), which shiqi-connect does not check", known_hosts.display())]
    HostCertAuthority {
        /// The known_hosts name.
        host: String,
        /// The file with the `@cert-authority` line.
        known_hosts: PathBuf,
        /// Its line.
        line: usize,
    },

    /// No identity was accepted by the server.
    #[error("the server `{host}` accepted none of the SSH keys for user `{user}` (tried: {tried})")]
    AuthFailed {
        /// The remote user.
        user: String,
        /// The server.
        host: String,
        /// What was offered, comma-separated (paths and agent key comments with fingerprints,
        /// never key material).
        tried: String,
        /// The first key file offered, whose `.pub` an admin would enroll.
        key_file: Option<PathBuf>,
        /// The profile name, when the command knows it (for the `enroll` line).
        name: Option<String>,
    },

    /// A remote command exited 127: the shell did not find it.
    #[error("`{command}` is not installed on the server (not on PATH)")]
    AgentNotInstalled {
        /// The agent command as sent.
        command: String,
    },

    /// The agent exited non-zero.
    #[error("{}: {message}", refusal(*op))]
    AgentRefused {
        /// Which subcommand.
        op: RequestKind,
        /// Its exit status.
        status: u32,
        /// Its `error:` line (or the last stderr line).
        message: String,
        /// Its `hint:` line, if it printed one.
        agent_hint: Option<String>,
    },

    /// `provision` issued a certificate, then granting the Kafka ACLs or creating the MySQL user
    /// failed (the run revokes the certificate on its way out).
    #[error("the server's agent issued certificate {serial}, then failed: {message}")]
    AgentUnfinished {
        /// The issued certificate's serial.
        serial: String,
        /// The agent's `error:` line.
        message: String,
        /// Its `hint:` line, if it printed one.
        agent_hint: Option<String>,
    },

    /// The agent does not know a subcommand this client sends: it is an older version.
    #[error("the server's `shiqi-ca-agent` is older than this shiqi-connect: it has no `{}`", op.subcommand())]
    AgentTooOld {
        /// The subcommand it does not know.
        op: RequestKind,
    },

    /// The channel closed without an exit status: the connection or the agent died.
    #[error("the connection closed before `shiqi-ca-agent {}` finished", op.subcommand())]
    AgentVanished {
        /// Which subcommand.
        op: RequestKind,
    },

    /// The agent's output is not what this client understands.
    #[error("unexpected reply from `shiqi-ca-agent {}`: {why}", op.subcommand())]
    AgentReply {
        /// Which subcommand.
        op: RequestKind,
        /// What is wrong with it.
        why: String,
    },

    /// A field of the agent's reply that does not parse into its strict type (a host that is
    /// not a host name, a newline in a name): the whole reply is refused.
    #[error("the server's `shiqi-ca-agent {}` sent an invalid `{field}`: {why}", op.subcommand())]
    AgentField {
        /// Which subcommand.
        op: RequestKind,
        /// Where in the reply (`facts.kafka.brokers[1].host`).
        field: String,
        /// What is wrong with it (the value escaped).
        why: String,
    },

    /// A value the laptop supplies that could break a config file line.
    #[error("refusing to write {field} `{value}` into a config file: {why}")]
    UnsafeValue {
        /// Which value.
        field: &'static str,
        /// The value, escaped and cut.
        value: String,
        /// Which rule it breaks.
        why: &'static str,
    },

    /// The agent speaks another protocol version.
    #[error("the server's agent speaks protocol version {found}, this client speaks {expected}")]
    ProtocolVersion {
        /// The version in the reply.
        found: u32,
        /// [`shiqi_ca::protocol::PROTOCOL_VERSION`].
        expected: u32,
    },

    /// The certificate the agent returned does not fit the request.
    #[error("the certificate returned by the server does not fit the request: {why}")]
    CertMismatch {
        /// What does not fit.
        why: String,
    },

    /// The CA library failed (key generation, CSR, keystore).
    #[error("cannot {what}")]
    Ca {
        /// What was being done.
        what: &'static str,
        /// What the CA library said.
        #[source]
        source: shiqi_ca::Error,
    },

    /// Two brokers advertise the same port: one local forward cannot serve both.
    #[error(
        "{first} and {second} both use port {port} (`{first_host}:{port}`, \
         `{second_host}:{port}`): one local port cannot forward to two servers"
    )]
    DuplicatePort {
        /// The clashing port.
        port: u16,
        /// The first user of the port (`broker 1`, `MySQL`).
        first: String,
        /// Its advertised host.
        first_host: String,
        /// The second user.
        second: String,
        /// Its advertised host.
        second_host: String,
    },

    /// A template failed to render (a bug in a template, not in the input).
    #[error("cannot render `{template}`")]
    Template {
        /// The template file name.
        template: &'static str,
        /// What minijinja said.
        #[source]
        source: minijinja::Error,
    },

    /// A renewal did not ask for a certificate: the servers do not answer with the current one
    /// either, so a new one could not be proven (and would only be signed and revoked).
    #[error("not renewing the certificate of `{name}` yet: {why}")]
    RenewalWaits {
        /// The profile.
        name: String,
        /// Which service refused the current certificate, or that none answered.
        why: String,
    },

    /// Renewals signed as many certificates as they may without one logging in.
    #[error(
        "stopped renewing the certificate of `{name}`: {signed} certificates were signed for it \
         and none logged in"
    )]
    RenewalStopped {
        /// The profile.
        name: String,
        /// How many were signed (and revoked again).
        signed: u32,
    },

    /// Another run holds the name's lock.
    #[error("another shiqi-connect is working on profile `{name}` right now")]
    ProfileBusy {
        /// The profile.
        name: String,
    },

    /// A profile of this name exists and `--force` was not given.
    #[error("profile `{name}` already exists at `{}`; keeping it", path.display())]
    ProfileExists {
        /// The profile name.
        name: String,
        /// Its folder.
        path: PathBuf,
    },

    /// `profile.json` cannot be read.
    #[error("cannot read profile `{}`: {why}", path.display())]
    ProfileRead {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },

    /// `$SHIQI_HOME` holds no profile (tunnel).
    #[error("no profile in `{}`", root.display())]
    NoProfiles {
        /// `$SHIQI_HOME`.
        root: PathBuf,
    },

    /// No NAME given and `$SHIQI_HOME` holds several profiles.
    #[error("`{}` holds several profiles ({}); which one?", root.display(), names.join(", "))]
    WhichProfile {
        /// `$SHIQI_HOME`.
        root: PathBuf,
        /// The profile names found.
        names: Vec<String>,
        /// The subcommand that asked (`tunnel up`, `doctor`, …), for the hint.
        command: &'static str,
    },

    /// The named profile does not exist (tunnel).
    #[error("no profile `{name}` at `{}`", path.display())]
    NoSuchProfile {
        /// The name given.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },

    /// A local port the tunnel needs is taken (tunnel).
    #[error(
        "port `127.0.0.1:{port}` is already in use by {}",
        owner.as_ref().map_or_else(|| "another process".to_owned(), ToString::to_string)
    )]
    PortInUse {
        /// The port.
        port: u16,
        /// Who holds it, when that can be found out.
        owner: Option<crate::os::port_owner::Holder>,
    },

    /// Listening on a local port failed for another reason than it being taken (tunnel).
    #[error("cannot listen on `127.0.0.1:{port}`")]
    Listen {
        /// The port.
        port: u16,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// The tunnel of this profile runs already, in another process (tunnel).
    #[error("the tunnel of `{name}` is already running (pid {pid})")]
    TunnelRunning {
        /// The profile.
        name: String,
        /// Its process.
        pid: u32,
    },

    /// The background tunnel process reported that it could not start (tunnel).
    #[error("the tunnel did not start: {why}")]
    TunnelFailed {
        /// Its one-line error.
        why: String,
        /// Its hint, if it had one.
        hint: Option<String>,
        /// `tunnel.log`.
        log: PathBuf,
    },

    /// A tunnel process cannot be signalled (tunnel).
    #[error("cannot signal the tunnel process {pid}")]
    Signal {
        /// The process.
        pid: u32,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// A tunnel process outlived SIGTERM and SIGKILL (tunnel).
    #[error("the tunnel process {pid} did not exit within {secs}s")]
    TunnelStuck {
        /// The process.
        pid: u32,
        /// How long was waited.
        secs: u64,
    },

    /// `ssh` (OpenSSH) failed to open or close the tunnel (`tunnel up --openssh`).
    #[error("`{command}` failed: {why}")]
    OpenSsh {
        /// The command line as run.
        command: String,
        /// What ssh said (last line).
        why: String,
    },

    /// A service refused the certificate `rotate` just obtained; the old profile is untouched.
    #[error("{service} refused the new certificate `{serial}`: {why}")]
    NewCertRefused {
        /// Which service.
        service: String,
        /// What it said.
        why: String,
        /// The new certificate's serial.
        serial: String,
        /// Whether the new certificate was revoked again.
        revoked_new: bool,
    },

    /// The profile has no MySQL (the server reported none at setup): `jdbc`, `datagrip`.
    #[error("profile `{name}` has no MySQL: the server's agent reported none at setup")]
    NoMysql {
        /// The profile.
        name: String,
    },

    /// A value a JDBC driver cannot take in its URL.
    #[error(
        "{driver} cannot take `{field}` = `{value}` in a URL: it holds `&` or a control character, which ends the option"
    )]
    UrlValue {
        /// The driver's name.
        driver: &'static str,
        /// The option.
        field: &'static str,
        /// The value (`***` for a password).
        value: String,
    },

    /// A DataGrip project file that exists but cannot be merged into; nothing was written.
    #[error("cannot add the data source to `{}`: {why}", path.display())]
    DataGripFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },

    /// `--open` found no DataGrip launcher on PATH.
    #[error("no DataGrip launcher (`datagrip` or `datagrip.sh`) on `PATH`")]
    NoDataGrip {
        /// The project folder that was written.
        project: PathBuf,
    },

    /// A program could not be started.
    #[error("cannot start `{}`", program.display())]
    Launch {
        /// The program.
        program: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// A file-system operation failed.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// What was being done (`write`, `create folder`, `rename into place`).
        action: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Names the profile in an [`Error::AuthFailed`] hint (other errors are unchanged).
    #[must_use]
    pub fn for_profile(self, profile: &str) -> Self {
        match self {
            Self::AuthFailed {
                user,
                host,
                tried,
                key_file,
                name: None,
            } => Self::AuthFailed {
                user,
                host,
                tried,
                key_file,
                name: Some(profile.to_owned()),
            },
            other => other,
        }
    }

    /// One next step for the user, rendered by the CLI as `hint: …`.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            // `--home` cannot help: `~/.ssh` (keys, known_hosts, config) is found from `HOME` too.
            Self::NoHome => "set `HOME` to your home folder, e.g. `export HOME=/home/you` (Windows: \
                 `USERPROFILE`)"
                .to_owned(),
            Self::Missing { flag, env, .. } => format!("pass `{flag}` or set `{env}`"),
            Self::InvalidDestination { .. } => {
                "use `user@host`, `ssh://user@host:port` or a `Host` alias from `~/.ssh/config`"
                    .to_owned()
            }
            Self::SshConfig { .. } => {
                "check `~/.ssh/config` with `ssh -G DEST`; the destination must work with plain `ssh`"
                    .to_owned()
            }
            Self::Connect { host, port, .. } => format!(
                "check that the server is up and sshd listens there: `ssh -p {port} {host} true`"
            ),
            Self::Timeout { .. } => "check the network path to the server, then run it again".to_owned(),
            Self::Ssh { host, .. } => format!("try `ssh -v {host} true` to see where it breaks"),
            Self::HostKeyUnknown { .. } => "compare the fingerprint with the server's \
                (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on it), then run again on a \
                terminal to confirm it, or pass `--accept-new-host-key`"
                .to_owned(),
            Self::HostKeyChanged {
                known_hosts,
                line,
                host,
                ..
            } => format!(
                "if the server was really reinstalled, ask its admin for the new fingerprint, then \
                 remove line {line}: `ssh-keygen -R '{host}' -f {}`; otherwise someone may be \
                 intercepting the connection",
                known_hosts.display()
            ),
            Self::HostKeyRevoked { known_hosts, line, .. } => format!(
                "someone holding a revoked host key may be impersonating the server; ask its \
                 admin. Line {line} of `{}` revoked it on purpose: do not remove it to get in",
                known_hosts.display()
            ),
            Self::HostKeyRevokedByFile { file, .. } => format!(
                "someone holding a revoked host key may be impersonating the server; ask its \
                 admin. `{}` (RevokedHostKeys in your ssh config) revokes it on purpose: do not \
                 edit it to get in",
                file.display()
            ),
            Self::RevokedHostKeysUnusable { file, .. } => format!(
                "OpenSSH refuses every host while this file is unusable, and so does \
                 shiqi-connect: fix `{0}` (an empty file revokes nothing: `touch {0}`), or \
                 remove `RevokedHostKeys` from your ssh config (`ssh -G HOST | grep -i \
                 revokedhostkeys` shows it)",
                file.display()
            ),
            Self::HostCertAuthority { host, .. } => format!(
                "add the server's plain host key: `ssh-keyscan -t ed25519 {host} >> ~/.ssh/known_hosts`, \
                 after checking its fingerprint with the admin"
            ),
            Self::KnownHosts { path, .. } => format!(
                "check that `{}` is readable and its lines are `host key-type base64`",
                path.display()
            ),
            Self::AuthFailed {
                user,
                host,
                key_file,
                name,
                ..
            } => {
                let public = key_file.as_ref().map_or_else(
                    || "~/.ssh/id_ed25519.pub".to_owned(),
                    |f| format!("{}.pub", f.display()),
                );
                format!(
                    "if `{user}` is the CA agent's account, send `{public}` to its admin, who runs \
                     `shiqi-ca-agent enroll {} --ssh-key {} --role user` on the server; for a \
                     plain account add the key to `~{user}/.ssh/authorized_keys` (`ssh-copy-id \
                     {user}@{host}`), or load it into ssh-agent (`ssh-add`)",
                    name.as_deref().unwrap_or("NAME"),
                    public.rsplit('/').next().unwrap_or(&public),
                )
            }
            Self::AgentNotInstalled { .. } => "install `shiqi-ca-agent` on the server's PATH, or \
                pass `--agent-command /path/to/shiqi-ca-agent` (env `SHIQI_AGENT_COMMAND`)"
                .to_owned(),
            Self::AgentRefused { agent_hint: Some(h), .. }
            | Self::AgentUnfinished { agent_hint: Some(h), .. } => h.clone(),
            Self::AgentUnfinished { .. } => "fix what the error names on the server (or ask its admin), then run setup again: this certificate is revoked".to_owned(),
            Self::AgentTooOld { .. } => "install the same version of shiqi-ca-agent on the server as this shiqi-connect (`shiqi-connect --version`)".to_owned(),
            Self::AgentRefused { .. } => {
                "the server's admin can read the agent's audit log for details".to_owned()
            }
            Self::AgentVanished { .. } => {
                "check that the server is up (sshd, disk, memory), then run setup again".to_owned()
            }
            Self::AgentField { op, .. } => format!(
                "nothing was written; the server's agent or its agent.toml produced this value: run `shiqi-ca-agent {}` on the server and fix the value (or find who changed it)",
                op.subcommand()
            ),
            Self::UnsafeValue { .. } => "use a plain value: check `--server`, the server's entry in ~/.ssh/config, and the path of SHIQI_HOME"
                .to_owned(),
            Self::AgentReply { .. } | Self::ProtocolVersion { .. } => {
                "install the same shiqi-connect version on the laptop and the server".to_owned()
            }
            Self::CertMismatch { .. } => {
                "this is a bug or a misconfigured agent; report it with `-v` output".to_owned()
            }
            Self::Ca { source, .. } => return source.hint(),
            Self::DuplicatePort { .. } => "use the local endpoint, which works whatever the \
                brokers advertise: `--endpoint local` (setup) or `shiqi-connect tunnel up NAME \
                --endpoint local`"
                .to_owned(),
            Self::Template { .. } => "this is a bug in shiqi-connect's templates".to_owned(),
            Self::RenewalWaits { name, .. } => format!(
                "nothing was signed; `shiqi-connect doctor {name}` names what the server refuses, \
                 and the renewal is tried again by itself (or `shiqi-connect renew {name}`)"
            ),
            Self::RenewalStopped { name, .. } => format!(
                "the current certificate stays valid until it expires; fix what the server \
                 refuses (`shiqi-connect doctor {name}`), then run `shiqi-connect rotate {name}`"
            ),
            Self::ProfileBusy { .. } => "wait for it to finish (setup, rotate or renew), then run this again".to_owned(),
            Self::ProfileExists { name, .. } => {
                format!(
                    "pass `--force` to replace it, or pick another name than `{name}`; to renew \
                     its certificate: `shiqi-connect renew {name}`"
                )
            }
            Self::ProfileRead { .. } => {
                "rebuild it with `shiqi-connect setup NAME --force`".to_owned()
            }
            Self::NoProfiles { .. } => {
                "create one with `shiqi-connect setup NAME --server DEST`, or point `--home` \
                 (env `SHIQI_HOME`) at the folder that holds it"
                    .to_owned()
            }
            Self::WhichProfile { names, command, .. } => format!(
                "name it, e.g. `shiqi-connect {command} {}`",
                names.first().map_or("NAME", String::as_str)
            ),
            Self::NoSuchProfile { name, .. } => format!(
                "create it with `shiqi-connect setup {name} --server DEST`, or point `--home` \
                 (env `SHIQI_HOME`) at the folder that holds it"
            ),
            Self::PortInUse { port, owner } => {
                use crate::os::port_owner::Holder;
                // The system lends ports of its ephemeral range to outgoing connections; a
                // reserved port is never lent.
                let reserve = format!(
                    "; to keep outgoing connections off it, add {port} to the sysctl \
                     `net.ipv4.ip_local_reserved_ports`"
                );
                match (owner, owner.as_ref().and_then(Holder::pid)) {
                    (Some(Holder::Outgoing { .. }), Some(pid)) => format!(
                        "run `tunnel up` again once that connection has closed (or stop pid \
                         {pid}){reserve}"
                    ),
                    (Some(Holder::Outgoing { .. }), None) => format!(
                        "run `tunnel up` again in a minute, when the system frees the port{reserve}"
                    ),
                    (_, Some(pid)) => format!(
                        "stop it (`kill {pid}`; if it is another shiqi-connect or ssh tunnel, \
                         `shiqi-connect tunnel down NAME`), then run `tunnel up` again"
                    ),
                    (_, None) => {
                        "find it with `ss -ltnp` and stop it, then run `tunnel up` again".to_owned()
                    }
                }
            }
            Self::TunnelRunning { name, .. } => {
                format!("stop it with `shiqi-connect tunnel down {name}`")
            }
            Self::TunnelFailed { hint: Some(h), .. } => h.clone(),
            Self::TunnelFailed { log, .. } => format!("see `{}`", log.display()),
            Self::TunnelStuck { pid, .. } => format!("kill it with `kill -9 {pid}`"),
            Self::OpenSsh { .. } => {
                "run the command with `-v` to see where it breaks, or use the built-in tunnel \
                 (`shiqi-connect tunnel up` without `--openssh`)"
                    .to_owned()
            }
            Self::NewCertRefused { revoked_new, serial, .. } => format!(
                "the profile still holds the old certificate{}; run `shiqi-connect doctor` to see \
                 why the server refuses certificates, or ask its admin",
                if *revoked_new {
                    String::new()
                } else {
                    format!(" (revoke the unused `{serial}` on the server)")
                }
            ),
            Self::NoMysql { name } => format!(
                "ask the server's admin to set `[mysql]` in the agent's `agent.toml`, then run \
                 `shiqi-connect setup {name} --server DEST --force`"
            ),
            Self::UrlValue { .. } => "use `--driver mysql` (Connector/J decodes `%26`), or keep \
                the profiles in a folder without `&` (`--home DIR`, env `SHIQI_HOME`)"
                .to_owned(),
            Self::DataGripFile { .. } => "nothing was written; fix the file (DataGrip writes it \
                well-formed) or pass another `--project DIR`"
                .to_owned(),
            Self::NoDataGrip { project } => format!(
                "nothing was written; put DataGrip's launcher on PATH (Toolbox: Settings → Tools \
                 → Shell scripts; or the tarball's `bin/datagrip.sh`), or leave out `--open` \
                 and open `{}` from DataGrip (File → Open)",
                project.display()
            ),
            Self::Launch { program, .. } => format!(
                "run `{} DIR` yourself to see why it fails",
                program.display()
            ),
            Self::Io { .. } => "check the path's permissions and free space".to_owned(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_home_asks_for_home_not_for_a_flag_that_cannot_help() {
        let hint = Error::NoHome.hint().expect("hint");
        assert!(hint.contains("set `HOME`"), "{hint}");
        // `--home` moves only `~/.shiqi`; `~/.ssh` is still found from `HOME`.
        assert!(!hint.contains("--home"), "{hint}");
    }
}
