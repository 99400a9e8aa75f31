//! SSH with russh: one authenticated connection (`Session`) that later commands reuse —
//! `setup` runs the agent over it, `tunnel` will open `direct-tcpip` channels on
//! `Session::handle`. Host keys are checked in [`known_hosts`], keys tried in `auth`, and
//! where to connect is settled in `config`. Nothing here prints or prompts.

pub(crate) mod auth;
pub(crate) mod config;
pub(crate) mod destination;
pub mod hostfile;
pub mod include;
pub mod known_hosts;
pub mod revoked;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::ChannelMsg;
use russh::client::{self, Handle};
use russh::keys::PublicKeyOrCertificate;

use crate::error::{Error, SshError};
use auth::{AuthOutcome, Passphrase};
use config::{HostKeySettings, Target};
use known_hosts::{HostKeyOutcome, HostKeyPolicy};

/// How long the TCP connect plus SSH handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// The russh handler: checks the host key and remembers the verdict for [`Session::connect`].
pub(crate) struct Client {
    target: Target,
    /// `RevokedHostKeys` and `HashKnownHosts`, asked of the ssh config just before connecting.
    host_keys: HostKeySettings,
    policy: HostKeyPolicy,
    verdict: Arc<Mutex<Option<Result<HostKeyOutcome, Error>>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            // We advertise no certificate algorithms, so a certificate here is a protocol oddity.
            return Ok(false);
        };
        let t = &self.target;
        let outcome = known_hosts::check(
            t.host_key_name(),
            t.port,
            key,
            &t.host_key_config(&self.host_keys),
            &self.policy,
        );
        let ok = outcome.is_ok();
        if let Ok(mut v) = self.verdict.lock() {
            *v = Some(outcome);
        }
        Ok(ok)
    }

    /// Logs what the key exchange chose (the tunnel's log; `scripts/bench` compares OpenSSH on
    /// the same cipher with it).
    async fn kex_done(
        &mut self,
        _shared_secret: Option<&[u8]>,
        names: &russh::Names,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        tracing::info!(
            "SSH to {}: cipher {}, key exchange {}",
            self.target.host,
            names.cipher.as_ref(),
            names.kex.as_ref()
        );
        Ok(())
    }
}

/// Output of a remote command.
#[derive(Debug, Default)]
pub(crate) struct Output {
    /// Exit status (`None` if the server sent none, e.g. killed by a signal).
    pub(crate) status: Option<u32>,
    /// The signal that ended it, if any.
    pub(crate) signal: Option<String>,
    /// Captured stdout.
    pub(crate) stdout: Vec<u8>,
    /// Captured stderr.
    pub(crate) stderr: Vec<u8>,
}

/// An authenticated SSH connection.
pub(crate) struct Session {
    handle: Handle<Client>,
    /// The jump hosts' connections, nearest first; the session lives inside the last.
    jumps: Vec<Handle<Client>>,
    /// How each jump host's key was vouched for and which key logged in there.
    jump_outcomes: Vec<(HostKeyOutcome, AuthOutcome)>,
    target: Target,
    host_key: HostKeyOutcome,
    auth: AuthOutcome,
}

impl Session {
    /// Connects, checks the host key under `policy`, and authenticates.
    ///
    /// # Errors
    /// [`SshError::HostKeyUnknown`] (the caller may ask and retry with
    /// [`HostKeyPolicy::AcceptKey`]), [`SshError::HostKeyChanged`], a revoked host key (see
    /// [`known_hosts::check`]), [`SshError::Connect`], [`SshError::AuthFailed`], [`SshError::Timeout`].
    #[tracing::instrument(skip_all, fields(host = %target.host, port = target.port, user = %target.user))]
    pub(crate) async fn connect(
        target: &Target,
        policy: HostKeyPolicy,
        passphrase: &dyn Passphrase,
    ) -> Result<Self, Error> {
        if let Some(command) = &target.proxy_command {
            return Err(Error::Ssh(SshError::Config {
                destination: target.destination.to_string(),
                why: format!(
                    "`ProxyCommand {command}` is not supported (it runs a command); use \
                     `ProxyJump` or `--jump` instead"
                ),
            }));
        }
        // Through each jump host in turn: an SSH connection of its own (host key checked, key
        // authenticated), and the next one inside its `direct-tcpip` channel, as `ssh -J` does.
        let mut jumps: Vec<Handle<Client>> = Vec::new();
        let mut jump_outcomes = Vec::new();
        for hop in &target.jumps {
            let (handle, host_key, auth) = open(hop, &policy, passphrase, jumps.last()).await?;
            jumps.push(handle);
            jump_outcomes.push((host_key, auth));
        }
        let (handle, host_key, auth) = open(target, &policy, passphrase, jumps.last()).await?;
        Ok(Self {
            handle,
            jumps,
            jump_outcomes,
            target: target.clone(),
            host_key,
            auth,
        })
    }

    /// The russh handle, for opening more channels (`channel_open_direct_tcpip`).
    pub(crate) fn handle(&self) -> &Handle<Client> {
        &self.handle
    }

    /// Where this session is connected.
    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// How the server's host key was vouched for.
    pub(crate) fn host_key(&self) -> &HostKeyOutcome {
        &self.host_key
    }

    /// Which key authenticated, and notes from trying.
    pub(crate) fn auth(&self) -> &AuthOutcome {
        &self.auth
    }

    /// Each jump host (`target().jumps`, in order): its host key outcome and the key used.
    pub(crate) fn jump_outcomes(&self) -> &[(HostKeyOutcome, AuthOutcome)] {
        &self.jump_outcomes
    }

    /// Runs `command` through the remote shell, feeding `stdin` and collecting at most
    /// `max_output` bytes of each of stdout and stderr, for at most `timeout`.
    ///
    /// # Errors
    /// [`SshError::Protocol`] when the channel breaks, [`SshError::Timeout`] when it takes too long.
    pub(crate) async fn exec(
        &self,
        command: &str,
        stdin: &[u8],
        max_output: usize,
        timeout: Duration,
    ) -> Result<Output, Error> {
        let ssh_err = |what, source| {
            Error::Ssh(SshError::Protocol {
                host: self.target.host.clone(),
                what,
                source: Box::new(source),
            })
        };
        let run = async {
            let mut ch = self
                .handle
                .channel_open_session()
                .await
                .map_err(|e| ssh_err("opening a session channel", e))?;
            tracing::debug!(%command, stdin_bytes = stdin.len(), "exec");
            ch.exec(true, command)
                .await
                .map_err(|e| ssh_err("starting the remote command", e))?;
            if !stdin.is_empty() {
                ch.data(stdin)
                    .await
                    .map_err(|e| ssh_err("sending input to the remote command", e))?;
            }
            ch.eof()
                .await
                .map_err(|e| ssh_err("sending input to the remote command", e))?;
            let mut out = Output::default();
            while let Some(msg) = ch.wait().await {
                match msg {
                    ChannelMsg::Data { data } => append(&mut out.stdout, &data, max_output),
                    ChannelMsg::ExtendedData { data, ext: 1 } => {
                        append(&mut out.stderr, &data, max_output);
                    }
                    ChannelMsg::ExitStatus { exit_status } => out.status = Some(exit_status),
                    ChannelMsg::ExitSignal { signal_name, .. } => {
                        out.signal = Some(format!("{signal_name:?}"));
                    }
                    _ => {}
                }
            }
            Ok(out)
        };
        tokio::time::timeout(timeout, run).await.map_err(|_| {
            Error::Ssh(SshError::Timeout {
                what: "waiting for the remote command",
                secs: timeout.as_secs(),
            })
        })?
    }

    /// Says goodbye to the server, then to each jump host.
    pub(crate) async fn close(self) {
        let _ = self
            .handle
            .disconnect(russh::Disconnect::ByApplication, "", "en")
            .await;
        for jump in self.jumps.iter().rev() {
            let _ = jump
                .disconnect(russh::Disconnect::ByApplication, "", "en")
                .await;
        }
    }
}

fn append(buf: &mut Vec<u8>, data: &[u8], max: usize) {
    let room = max.saturating_sub(buf.len());
    buf.extend_from_slice(&data[..data.len().min(room)]);
}

/// One SSH connection: direct, or inside a `direct-tcpip` channel of the jump host `via`.
async fn open(
    target: &Target,
    policy: &HostKeyPolicy,
    passphrase: &dyn Passphrase,
    via: Option<&Handle<Client>>,
) -> Result<(Handle<Client>, HostKeyOutcome, AuthOutcome), Error> {
    let verdict = Arc::new(Mutex::new(None));
    let handler = Client {
        target: target.clone(),
        host_keys: config::host_key_settings(&target.destination).await?,
        policy: policy.clone(),
        verdict: verdict.clone(),
    };
    let mut config = client::Config {
        // Detect a dead server instead of hanging on it (like ServerAliveInterval).
        keepalive_interval: Some(Duration::from_secs(15)),
        keepalive_max: 3,
        nodelay: true,
        // Messages a channel may queue before its reader takes them (russh's default is 100,
        // 3.2 MB of 32 KiB packets per channel); the SSH window still keeps the pipe full.
        channel_buffer_size: CHANNEL_BUFFER,
        ..Default::default()
    };
    config.preferred.cipher = cipher_order(hardware_aes()).into();
    let recorded =
        known_hosts::recorded_algorithms(target.host_key_name(), target.port, &target.known_hosts);
    if !recorded.is_empty() {
        // Same family: a recorded `ssh-rsa` key is also verified with rsa-sha2-512/256.
        use russh::keys::Algorithm;
        let rsa = |a: &Algorithm| matches!(a, Algorithm::Rsa { .. });
        let known = |a: &Algorithm| recorded.iter().any(|r| r == a || (rsa(r) && rsa(a)));
        let (first, rest): (Vec<_>, Vec<_>) =
            config.preferred.key.iter().cloned().partition(|a| known(a));
        config.preferred.key = first.into_iter().chain(rest).collect::<Vec<_>>().into();
    }
    let config = Arc::new(config);
    let connecting = async {
        match via {
            None => {
                tracing::debug!(host = %target.host, port = target.port, "connecting");
                client::connect(config, (target.host.as_str(), target.port), handler).await
            }
            Some(jump) => {
                tracing::debug!(host = %target.host, port = target.port, "connecting through a jump host");
                let channel = jump
                    .channel_open_direct_tcpip(
                        target.host.as_str(),
                        u32::from(target.port),
                        "127.0.0.1",
                        0,
                    )
                    .await?;
                client::connect_stream(config, channel.into_stream(), handler).await
            }
        }
    };
    let res = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| {
            Error::Ssh(SshError::Timeout {
                what: "connecting to the SSH server",
                secs: CONNECT_TIMEOUT.as_secs(),
            })
        })?;
    let taken = verdict.lock().ok().and_then(|mut v| v.take());
    let (mut handle, host_key) = match (res, taken) {
        (Ok(h), Some(Ok(outcome))) => (h, outcome),
        (_, Some(Err(e))) => return Err(e),
        (Err(russh::Error::IO(source)), _) => {
            return Err(Error::Ssh(SshError::Connect {
                host: target.host.clone(),
                port: target.port,
                source,
            }));
        }
        (Err(source), _) => {
            return Err(Error::Ssh(SshError::Protocol {
                host: target.host.clone(),
                what: "connecting",
                source: Box::new(source),
            }));
        }
        (Ok(_), None) => {
            // russh calls check_server_key before handing out a handle; keep the invariant.
            return Err(Error::Ssh(SshError::Protocol {
                host: target.host.clone(),
                what: "checking the host key",
                source: Box::new(russh::Error::UnknownKey),
            }));
        }
    };
    let auth = auth::authenticate(&mut handle, target, passphrase).await?;
    Ok((handle, host_key, auth))
}

/// See `channel_buffer_size` above: 16 (512 KiB) kept the throughput of 100 and cut the
/// tunnel's peak memory under load by about 4 MB (scripts/bench, 2026-12-03).
const CHANNEL_BUFFER: usize = 16;

/// The ciphers to offer, best first. Both AEADs are aws-lc's assembly; with AES instructions
/// AES-GCM moves several times more bytes per CPU second than chacha20-poly1305 (which russh,
/// like OpenSSH, puts first for CPUs without them), and CPU per byte is what a busy laptop's
/// tunnel runs out of (scripts/bench).
fn cipher_order(aes: bool) -> Vec<russh::cipher::Name> {
    use russh::cipher::{AES_128_GCM, AES_256_CTR, AES_256_GCM, CHACHA20_POLY1305};
    if aes {
        vec![AES_256_GCM, AES_128_GCM, CHACHA20_POLY1305, AES_256_CTR]
    } else {
        vec![CHACHA20_POLY1305, AES_256_GCM, AES_128_GCM, AES_256_CTR]
    }
}

/// Whether this CPU has AES and carry-less multiplication instructions (what fast GCM needs).
fn hardware_aes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn aes_gcm_leads_only_where_the_cpu_has_aes() {
        let with = super::cipher_order(true);
        let without = super::cipher_order(false);
        assert_eq!(with[0], russh::cipher::AES_256_GCM);
        assert_eq!(without[0], russh::cipher::CHACHA20_POLY1305);
        // Both offer the same set, so either side's preference can still be met.
        let mut a: Vec<String> = with.iter().map(|n| n.as_ref().to_owned()).collect();
        let mut b: Vec<String> = without.iter().map(|n| n.as_ref().to_owned()).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}
