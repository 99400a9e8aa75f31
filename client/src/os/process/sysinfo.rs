//! Through `sysinfo`: `/proc` on Linux, the Toolhelp API on Windows.

use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};

fn load(pid: u32) -> Option<System> {
    let mut sys = System::new().ok()?;
    let pid = Pid::from_u32(pid);
    let what = ProcessRefreshKind::nothing().with_cmd(UpdateKind::Always);
    sys.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), true, what);
    sys.process(pid)?;
    Some(sys)
}

/// The command line of `pid`, if it runs and may be looked at.
pub(crate) fn cmdline(pid: u32) -> Option<Vec<String>> {
    let sys = load(pid)?;
    let process = sys.process(Pid::from_u32(pid))?;
    Some(
        process
            .cmd()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    )
}

/// Whether `pid` exists and has not exited (a zombie whose parent has not reaped it counts as
/// gone: it holds no ports).
pub(crate) fn alive(pid: u32) -> bool {
    load(pid)
        .and_then(|sys| sys.process(Pid::from_u32(pid)).map(|p| p.status()))
        .is_some_and(|s| !matches!(s, ProcessStatus::Zombie | ProcessStatus::Dead))
}

#[cfg(test)]
mod tests {
    use super::{alive, cmdline};

    /// A program that exits at once, on each OS.
    fn exits_at_once() -> std::process::Command {
        if cfg!(windows) {
            let mut c = std::process::Command::new("cmd");
            c.args(["/c", "exit"]);
            c
        } else {
            std::process::Command::new("true")
        }
    }

    #[test]
    fn sees_itself_and_not_a_reaped_child() {
        let me = std::process::id();
        assert!(alive(me));
        let args = cmdline(me).expect("own command line");
        assert!(!args.is_empty());
        let mut child = exits_at_once().spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("reaped");
        assert!(!alive(pid));
    }

    #[test]
    fn an_exited_child_not_yet_reaped_is_not_alive() {
        let child = exits_at_once().spawn().expect("spawn");
        let pid = child.id();
        // It exits at once; unreaped, it is a zombie.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!alive(pid));
        drop(child);
    }
}
