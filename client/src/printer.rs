//! Everything the user reads on stderr: steps with their outcome, warnings, notes, errors.
//! stdout is for data only and is written by the commands. A running step shows a progress
//! line only on a terminal, without `-v` and without `--no-progress`; the outcome line always
//! shows (unless `-q`). Output reads correctly without colour.

use std::io::{IsTerminal, Write};

use console::Style;
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
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{text}");
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
        }
    }

    fn clear_progress(&self, open: bool) {
        if open {
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
}

impl Step<'_> {
    /// `✓ label: outcome`.
    pub fn done(mut self, outcome: &str) {
        let p = self.printer;
        p.clear_progress(self.open);
        self.open = false;
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
        p.clear_progress(self.open);
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
