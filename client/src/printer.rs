//! Everything the user reads on stderr: steps with their outcome, warnings, notes, errors.
//! stdout is for data only and is written by the commands. A running step shows a progress
//! line only on a terminal, without `-v` and without `--no-progress`; the outcome line always
//! shows (unless `-q`). Output reads correctly without colour.
//!
//! A step that waits on the server (the agent signing, a renewal) is a [`Printer::wait`]: its
//! line turns a spinner and counts the seconds, so a slow agent shows as slow, not as stuck. Only
//! those: a step that may ask a question (the host key, a passphrase) keeps a still line, which a
//! prompt can follow without being drawn over.

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use console::Style;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shiqi_ca::text::escape_controls;

/// `--color`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stderr is a terminal and `NO_COLOR` is unset.
    #[default]
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// Writes to stderr.
#[derive(Clone, Debug)]
pub struct Printer {
    quiet: bool,
    progress: bool,
    color: bool,
}

/// The spinner of the [`Printer::wait`] step running, which every line on stderr (ours and the
/// log's, through [`LogWriter`]) is printed around. One per process: there is one stderr.
static SPINNER: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn spinner() -> std::sync::MutexGuard<'static, Option<ProgressBar>> {
    SPINNER.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `print` with the running spinner's line cleared, and draws it again after.
fn around_spinner<T>(print: impl FnOnce() -> T) -> T {
    let bar = spinner().clone();
    match bar {
        Some(bar) => bar.suspend(print),
        None => print(),
    }
}

/// stderr for the log subscriber (`-v`, and the warnings a renewal logs): each event written
/// around a running spinner, so neither garbles the other.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        around_spinner(|| std::io::stderr().lock().write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        around_spinner(|| std::io::stderr().lock().write_all(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl Printer {
    /// `quiet`: only warnings and errors. `progress`: whether progress lines may show at all.
    pub fn new(quiet: bool, verbose: bool, no_progress: bool, color: ColorChoice) -> Self {
        let tty = std::io::stderr().is_terminal();
        let color = match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        };
        Self {
            quiet,
            progress: tty && !verbose && !no_progress && !quiet,
            color,
        }
    }

    fn style(&self, s: Style) -> Style {
        s.force_styling(self.color)
    }

    fn line(&self, text: &str) {
        let print = || {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{text}");
        };
        // A spinner's line is cleared for it and drawn again below.
        around_spinner(print);
    }

    /// `text` with control characters escaped: messages quote the server (agent errors,
    /// warnings, MySQL and Kafka errors), which must not move the cursor or forge lines.
    fn clean(text: &str) -> std::borrow::Cow<'_, str> {
        escape_controls(text)
    }

    /// Starts a step; finish it with [`Step::done`], or drop it to mark it failed.
    pub fn step(&self, label: &str) -> Step<'_> {
        if self.progress {
            let mut err = std::io::stderr().lock();
            let dim = self.style(Style::new().dim());
            let _ = write!(
                err,
                "{}",
                dim.apply_to(format!("  … {}", Self::clean(label)))
            );
            let _ = err.flush();
        }
        Step {
            printer: self,
            label: label.to_owned(),
            open: self.progress,
            spins: false,
        }
    }

    /// Starts a step that waits on something else (the server): on a terminal its line turns a
    /// spinner and counts the seconds until [`Step::done`]. Never for a step that may prompt.
    pub fn wait(&self, label: &str) -> Step<'_> {
        if !self.progress {
            return self.step(label);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let template = if self.color {
            "  {spinner:.dim} {msg:.dim} {elapsed:.dim}"
        } else {
            "  {spinner} {msg} {elapsed}"
        };
        // A literal template: it parses.
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(Self::clean(label).into_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        // One waits at a time; an earlier one still drawn (a bug) is cleared, not left behind.
        if let Some(earlier) = spinner().replace(bar) {
            earlier.finish_and_clear();
        }
        Step {
            printer: self,
            label: label.to_owned(),
            open: true,
            spins: true,
        }
    }

    fn clear_progress(&self, open: bool, spins: bool) {
        if spins {
            if let Some(bar) = spinner().take() {
                bar.finish_and_clear();
            }
        } else if open {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
        }
    }

    /// `warning: …`, shown even with `-q`.
    pub fn warn(&self, msg: &str) {
        let y = self.style(Style::new().yellow().bold());
        self.line(&format!("{} {}", y.apply_to("warning:"), Self::clean(msg)));
    }

    /// `  note: …` under the previous step.
    pub fn note(&self, msg: &str) {
        if !self.quiet {
            self.line(&format!("  note: {}", Self::clean(msg)));
        }
    }

    /// Plain lines (a table, a summary): each line's control characters escaped.
    pub fn info(&self, msg: &str) {
        if !self.quiet {
            for l in msg.split('\n') {
                self.line(&Self::clean(l));
            }
        }
    }

    /// `next: …` with the command in cyan.
    pub fn next(&self, what: &str, command: &str) {
        if !self.quiet {
            let c = self.style(Style::new().cyan());
            let command = Self::clean(command);
            self.line(&format!(
                "{} {}",
                Self::clean(what),
                c.apply_to(format!("`{command}`"))
            ));
        }
    }

    /// The error report: `error: …`, `  caused by: …` lines, blank line, `hint: …`.
    pub fn error(&self, message: &str, causes: &[String], hint: Option<&str>) {
        let red = self.style(Style::new().red().bold());
        let cyan = self.style(Style::new().cyan());
        self.line(&format!(
            "{} {}",
            red.apply_to("error:"),
            Self::clean(message)
        ));
        for c in causes {
            self.line(&format!("  caused by: {}", Self::clean(c)));
        }
        if let Some(h) = hint {
            self.line("");
            self.line(&format!("{} {}", cyan.apply_to("hint:"), Self::clean(h)));
        }
    }
}

/// A step in progress. Dropped without [`Step::done`] (an error on the way out), it prints
/// `✗ label`, so the report that follows says which step failed.
pub struct Step<'a> {
    printer: &'a Printer,
    label: String,
    open: bool,
    /// Its line is the spinner ([`Printer::wait`]): only it clears the spinner.
    spins: bool,
}

impl Step<'_> {
    /// `✓ label: outcome`.
    pub fn done(mut self, outcome: &str) {
        let p = self.printer;
        p.clear_progress(self.open, self.spins);
        self.open = false;
        self.spins = false;
        if !p.quiet {
            let g = p.style(Style::new().green());
            let text = if outcome.is_empty() {
                self.label.clone()
            } else {
                format!("{}: {outcome}", self.label)
            };
            let text = Printer::clean(&text);
            p.line(&format!("{} {text}", g.apply_to("✓")));
        }
        self.label.clear();
    }
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        let p = self.printer;
        p.clear_progress(self.open, self.spins);
        if !self.label.is_empty() {
            let r = p.style(Style::new().red());
            p.line(&format!(
                "{} {}",
                r.apply_to("✗"),
                Printer::clean(&self.label)
            ));
        }
    }
}

/// Operations report through the printer: each step, note and warning as above.
impl crate::ops::Report for Printer {
    fn step(&self, label: &str) -> Box<dyn crate::ops::Step + '_> {
        Box::new(Printer::step(self, label))
    }

    fn wait(&self, label: &str) -> Box<dyn crate::ops::Step + '_> {
        Box::new(Printer::wait(self, label))
    }

    fn note(&self, text: &str) {
        Printer::note(self, text);
    }

    fn warn(&self, text: &str) {
        Printer::warn(self, text);
    }
}

impl crate::ops::Step for Step<'_> {
    fn done(self: Box<Self>, outcome: &str) {
        Step::done(*self, outcome);
    }
}
