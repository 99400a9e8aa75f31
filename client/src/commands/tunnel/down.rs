//! `tunnel down`: stop the background process (or OpenSSH's master) and wait for the ports.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::printer::Printer;
use crate::profile::{ForwardRecord, Profile};
use crate::tunnel;

use super::Settings;

/// How long `down` gives the tunnel to close its connection before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long `down` waits for the ports to be free once the tunnel is gone.
const PORTS_FREE_TIMEOUT: Duration = Duration::from_secs(5);

/// `tunnel down`: stops the built-in tunnel (SIGTERM to the verified pid, wait, SIGKILL after
/// a grace period) and an OpenSSH one (`ssh -O exit`), then checks that every port is free.
///
/// # Errors
/// When the process cannot be signalled or will not exit.
pub(crate) async fn down(s: &Settings, printer: &Printer) -> anyhow::Result<ExitCode> {
    let profile = Profile::load(&s.paths.dir)?;
    let mut stopped = Vec::new();
    if let Some(pid) = tunnel::running(&s.paths.pid, &s.root, &s.name) {
        let step = printer.step(&format!("stop the tunnel (pid {pid})"));
        let killed = tunnel::stop(pid, STOP_GRACE)
            .await
            .with_context(|| format!("cannot stop the tunnel of `{}`", s.name))?;
        step.done(if killed {
            "killed (it ignored SIGTERM)"
        } else {
            "stopped"
        });
        stopped.push(format!("shiqi-connect tunnel (pid {pid})"));
    }
    // Whatever a crashed or killed process left behind.
    tunnel::remove_stale(&s.paths.pid);
    tunnel::remove_stale(&s.paths.state);

    if tunnel::openssh_alive(&s.paths, &profile.tunnel_host) {
        let step = printer.step("stop the OpenSSH tunnel");
        tunnel::stop_openssh(&s.paths, &profile.tunnel_host)?;
        step.done("stopped");
        stopped.push("OpenSSH tunnel".to_owned());
    }

    if stopped.is_empty() {
        printer.info(&format!("the tunnel of `{}` is not running", s.name));
    }
    // Every port must be free now; a holder that is left is someone else.
    let deadline = Instant::now() + PORTS_FREE_TIMEOUT;
    let mut taken: Vec<&ForwardRecord> = profile.forwards.iter().collect();
    loop {
        taken.retain(|f| tunnel::is_taken(f.local_port));
        if taken.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for f in &taken {
        printer.warn(&format!(
            "port `127.0.0.1:{}` ({}) is still in use by {}, which is not this profile's tunnel",
            f.local_port,
            f.purpose,
            tunnel::owner_of(f.local_port)
                .map_or_else(|| "another process".to_owned(), |h| h.to_string())
        ));
    }
    if s.json {
        #[derive(Serialize)]
        struct DownReport<'a> {
            profile: &'a str,
            stopped: &'a [String],
            ports_still_in_use: Vec<u16>,
        }
        let mut j = serde_json::to_string_pretty(&DownReport {
            profile: s.name.as_str(),
            stopped: &stopped,
            ports_still_in_use: taken.iter().map(|f| f.local_port).collect(),
        })
        .unwrap_or_default();
        j.push('\n');
        crate::commands::print_stdout(&j)?;
    } else {
        for what in &stopped {
            crate::commands::print_stdout(&format!("stopped {what}\n"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
