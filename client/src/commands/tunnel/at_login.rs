//! `tunnel up --at-login` and `tunnel down --at-login`: the login item, shown as a step.

use crate::printer::Printer;
use crate::tunnel;

use super::Settings;

/// Installs the login item once the tunnel is up, and says what starts it and when.
///
/// # Errors
/// As [`tunnel::install_at_login`].
pub(super) fn install(s: &Settings, printer: &Printer) -> anyhow::Result<()> {
    let step = printer.step("start the tunnel at login");
    let item = tunnel::install_at_login(&s.paths, &s.root, &s.home, &s.name)?;
    step.done(&format!(
        "{} `{}`",
        item.kind,
        s.show(item.location.as_ref())
    ));
    if let Some(why) = &item.pending {
        printer.info(&format!(
            "the system's service manager did not take it now ({why}); it starts the tunnel \
             from your next login"
        ));
    }
    Ok(())
}

/// Removes the login item, if there is one.
///
/// # Errors
/// As [`tunnel::remove_at_login`].
pub(super) fn remove(s: &Settings, printer: &Printer) -> anyhow::Result<()> {
    match tunnel::remove_at_login(&s.home, &s.name)? {
        Some(was) => printer
            .step("stop starting the tunnel at login")
            .done(&format!("removed `{}`", s.show(was.as_ref()))),
        None => printer.info(&format!(
            "nothing starts the tunnel of `{}` at login",
            s.name
        )),
    }
    Ok(())
}
