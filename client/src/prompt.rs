//! Questions on the terminal (dialoguer), and only here. They are asked only when stdin and
//! stderr are terminals and `--yes` is off; otherwise every question answers "no answer" and
//! the caller fails with a hint naming the flag.

use std::io::IsTerminal;
use std::path::Path;

use dialoguer::{Confirm, Input, Password};
use shiqi_ca::Secret;

use crate::ssh::auth::Passphrase;

/// Asks, or knows that it may not.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prompter {
    interactive: bool,
}

impl Prompter {
    /// Interactive when not `--yes` and both stdin and stderr are terminals.
    pub(crate) fn new(yes: bool) -> Self {
        Self {
            interactive: !yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        }
    }

    /// A prompter that never asks (tests, `--yes`).
    pub(crate) fn never() -> Self {
        Self { interactive: false }
    }

    /// Whether questions can be asked.
    pub(crate) fn is_interactive(&self) -> bool {
        self.interactive
    }

    /// Asks for the SSH destination of the server.
    pub(crate) fn server(&self) -> Option<String> {
        if !self.interactive {
            return None;
        }
        blocking(|| {
            Input::<String>::new()
                .with_prompt("SSH destination of the server (user@host, ssh://user@host:port or a Host alias)")
                .interact_text()
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
    }

    /// Shows an unknown host key and asks whether to trust it; `false` without a terminal.
    pub(crate) fn trust_host_key(
        &self,
        host: &str,
        algorithm: &str,
        fingerprint: &str,
        file: &Path,
    ) -> bool {
        if !self.interactive {
            return false;
        }
        let prompt = format!(
            "The authenticity of host `{host}` can't be established.\n  {algorithm} key \
             fingerprint is {fingerprint}\n  Trust it and add it to `{}`?",
            file.display()
        );
        blocking(|| {
            Confirm::new()
                .with_prompt(prompt)
                .default(false)
                .interact()
                .unwrap_or(false)
        })
    }
}

impl Passphrase for Prompter {
    fn passphrase(&self, key_file: &Path, retry: bool) -> Option<Secret<String>> {
        if !self.interactive {
            return None;
        }
        let prompt = if retry {
            format!("Wrong passphrase; try again for `{}`", key_file.display())
        } else {
            format!("Passphrase for `{}` (empty to skip)", key_file.display())
        };
        blocking(|| {
            Password::new()
                .with_prompt(prompt)
                .allow_empty_password(true)
                .interact()
                .ok()
                .filter(|p| !p.is_empty())
                .map(Secret::new)
        })
    }
}

/// Runs a blocking prompt without stalling the runtime's other tasks: the SSH session's reader
/// keeps answering the server while the user types.
/// Also clears the terminal line first, where a progress line may stand.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let _ = console::Term::stderr().clear_line();
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
