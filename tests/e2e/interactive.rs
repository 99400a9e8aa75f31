//! `setup` typed as a person types it, in a real terminal: tmux in the laptop namespace. The
//! questions (the server, an unknown host key) are answered with keystrokes; Ctrl-C at the host
//! key question leaves nothing behind (no profile, no staging folder, known_hosts unchanged).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::setup::Home;
use crate::stack::{Stack, stack, unique_name};

/// The tmux server's socket name: the tests' own, never the user's.
const SOCKET: &str = "shiqi-e2e";

/// One tmux session running a command, killed on drop.
struct Terminal<'a> {
    s: &'a Stack,
    session: String,
}

impl<'a> Terminal<'a> {
    /// Runs `command` (a shell line) in a new 200×50 terminal; the pane stays after it exits
    /// (the line ends by printing `exit=N` and waiting) so its screen can be read.
    fn start(s: &'a Stack, command: &str) -> Self {
        let session = unique_name("tty");
        let line = format!("{command}; echo \"exit=$?\"; sleep 600");
        s.laptop(
            &[
                "tmux",
                "-L",
                SOCKET,
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "200",
                "-y",
                "50",
                "sh",
                "-c",
                &line,
            ],
            &[],
            None,
        )
        .ok();
        Self { s, session }
    }

    fn screen(&self) -> String {
        self.s
            .laptop(
                &[
                    "tmux",
                    "-L",
                    SOCKET,
                    "capture-pane",
                    "-p",
                    "-J",
                    "-S",
                    "-500",
                    "-t",
                    &self.session,
                ],
                &[],
                None,
            )
            .stdout
    }

    /// Types `keys` (tmux key names: `Enter`, `C-c`, or literal text).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["tmux", "-L", SOCKET, "send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        self.s.laptop(&args, &[], None).ok();
    }

    /// Waits until the screen shows `text`.
    #[track_caller]
    fn expect(&self, text: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if self.screen().contains(text) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("the terminal never showed `{text}`:\n{}", self.screen());
    }
}

impl Drop for Terminal<'_> {
    fn drop(&mut self) {
        let _ = self.s.laptop(
            &["tmux", "-L", SOCKET, "kill-session", "-t", &self.session],
            &[],
            None,
        );
    }
}

/// An empty known_hosts of the laptop user's, so that the server's key is unknown.
fn empty_known_hosts(s: &Stack, home: &Home) -> PathBuf {
    let file = home.dir.join("known_hosts");
    s.laptop(&["touch", &file.display().to_string()], &[], None)
        .ok();
    file
}

#[test]
fn setup_typed_in_a_terminal_asks_for_the_server_and_the_host_key() {
    let s = stack();
    let home = Home::new(s, "tty");
    let name = unique_name("tty");
    let known = empty_known_hosts(s, &home);
    let term = Terminal::start(
        s,
        &format!(
            "SHIQI_HOME={} shiqi-connect setup {name} --known-hosts {}",
            home.env(),
            known.display()
        ),
    );
    term.expect("SSH destination of the server");
    term.keys(&[s.info("ssh_destination"), "Enter"]);
    term.expect("can't be established");
    term.keys(&["y"]);
    term.expect("exit=");
    let screen = term.screen();
    assert!(screen.contains("exit=0"), "{screen}");
    assert!(
        home.profile(&name).join("profile.json").exists(),
        "{screen}"
    );
    // Found by OpenSSH itself: the line may be hashed (`HashKnownHosts yes`, Debian's default).
    let learned = s
        .laptop(
            &[
                "ssh-keygen",
                "-F",
                s.info("server_ip"),
                "-f",
                &known.display().to_string(),
            ],
            &[],
            None,
        )
        .ok();
    assert!(learned.stdout.contains("ssh-ed25519"), "{}", learned.all());
}

#[test]
fn ctrl_c_at_the_host_key_question_leaves_nothing_behind() {
    let s = stack();
    let home = Home::new(s, "tty-cut");
    let name = unique_name("cut");
    let known = empty_known_hosts(s, &home);
    let term = Terminal::start(
        s,
        &format!(
            "SHIQI_HOME={} shiqi-connect setup {name} --server {} --known-hosts {}",
            home.env(),
            s.info("ssh_destination"),
            known.display()
        ),
    );
    term.expect("can't be established");
    term.keys(&["C-c"]);
    term.expect("exit=");
    let screen = term.screen();
    assert!(!screen.contains("exit=0"), "{screen}");
    assert!(
        home.leftovers(&name).is_empty(),
        "{:?}",
        home.leftovers(&name)
    );
    assert_eq!(
        std::fs::read_to_string(&known).expect("known_hosts"),
        "",
        "known_hosts changed"
    );
}
