//! How errors reach the user: `error: …`, each cause, then a `hint: …` from the first typed
//! error in the chain that has one.

use crate::error::AgentError;

/// Prints an error chain to stderr.
#[expect(
    clippy::print_stderr,
    reason = "this is the one place errors are printed"
)]
pub fn print_error(err: &anyhow::Error) {
    eprint!("{}", render(err));
}

/// `error: …`, `  caused by: …` lines, and the hint.
fn render(err: &anyhow::Error) -> String {
    let mut out = format!("error: {err}\n");
    for cause in err.chain().skip(1) {
        out.push_str(&format!("  caused by: {cause}\n"));
    }
    if let Some(hint) = hint(err) {
        out.push_str(&format!("\nhint: {hint}\n"));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_error_names_the_os_error_once() {
        let err = anyhow::Error::new(AgentError::File {
            path: "/var/lib/shiqi-ca/ca.key".into(),
            why: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        })
        .context("cannot load the CA");
        let text = render(&err);
        assert_eq!(text.matches("permission denied").count(), 1, "{text}");
        assert!(
            text.starts_with(
                "error: cannot load the CA\n  caused by: `/var/lib/shiqi-ca/ca.key`: "
            ),
            "{text}"
        );
    }

    #[test]
    fn a_bad_argument_names_its_reason_once() {
        let why = shiqi_ca::Error::InvalidHost {
            host: "a b".into(),
            why: "a space",
        };
        let text = render(&anyhow::Error::new(AgentError::Argument {
            flag: "--san",
            why,
        }));
        assert!(!text.contains("caused by"), "{text}");
    }

    #[test]
    fn a_reader_that_went_away_is_not_an_error() {
        struct Gone;
        impl std::io::Write for Gone {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let e = serde_json::to_writer(Gone, &[1, 2, 3]).expect_err("pipe");
        assert!(is_broken_pipe(&anyhow::Error::new(std::io::Error::from(e))));
    }

    #[test]
    fn the_hint_comes_from_the_typed_error_in_the_chain() {
        let err = anyhow::Error::new(AgentError::NoCa {
            dir: "/srv/ca".into(),
        });
        assert!(
            render(&err).ends_with("hint: run `shiqi-ca-agent --state-dir /srv/ca init` first\n")
        );
    }
}
