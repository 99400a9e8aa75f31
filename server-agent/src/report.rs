//! How errors reach the user: `error: …`, each cause, then a `hint: …` from the first typed
//! error in the chain that has one.

use crate::error::AgentError;

/// Prints an error chain to stderr.
#[expect(
    clippy::print_stderr,
    reason = "this is the one place errors are printed"
)]
pub fn print_error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
    if let Some(hint) = hint(err) {
        eprintln!("\nhint: {hint}");
    }
}

fn hint(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|e| {
        if let Some(e) = e.downcast_ref::<AgentError>() {
            e.hint()
        } else if let Some(e) = e.downcast_ref::<shiqi_ca::Error>() {
            e.hint()
        } else {
            None
        }
    })
}

/// A reader that went away (`… | head`) is not an error (ripgrep does the same).
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
