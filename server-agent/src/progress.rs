//! What a long command is waiting on, while it waits: one line on stderr with a spinner and the
//! seconds so far (`⠙ check: waiting for broker 2 to refuse the revoked throwaway (12s)`),
//! rewritten in place and cleared when done. Only on a terminal, never with `--json` or `-v`: a
//! pipe, a log or a script gets the report and nothing else.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The progress line of one command (nothing at all when not shown).
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// Shows `what` when stderr is a terminal, the command's output is not JSON and no debug
    /// log (`-v`) writes to stderr between the redraws.
    pub(crate) fn start(json: bool, what: &str) -> Self {
        if json || !std::io::stderr().is_terminal() || tracing::enabled!(tracing::Level::DEBUG) {
            return Self(None);
        }
        Self(Some(Self::bar(ProgressDrawTarget::stderr(), what)))
    }

    fn bar(target: ProgressDrawTarget, what: &str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(None, target);
        // A literal template: it parses.
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(shiqi_ca::text::one_line(what, 200));
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    /// Says what it is waiting on now.
    pub(crate) fn set(&self, what: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(shiqi_ca::text::one_line(what, 200));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}
