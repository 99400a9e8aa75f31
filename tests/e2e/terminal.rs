//! A real terminal for the tests that need one: a tmux session in the laptop namespace, typed
//! into with send-keys and read with capture-pane.

use std::time::{Duration, Instant};

use crate::stack::{Stack, unique_name};

/// The tmux server's socket name: the tests' own, never the user's.
const SOCKET: &str = "shiqi-e2e";

/// One tmux session running a command, killed on drop.
pub(crate) struct Terminal<'a> {
    s: &'a Stack,
    session: String,
    /// On the server as this user; on the laptop (as its user) when `None`.
    server_user: Option<String>,
}

impl<'a> Terminal<'a> {
    /// Runs `command` (a shell line) in a new 200×50 terminal on the laptop; the pane stays
    /// after it exits (the line ends by printing `exit=N` and waiting) so its screen can be read.
    pub(crate) fn start(s: &'a Stack, command: &str) -> Self {
        Self::open(s, None, command)
    }

    /// [`Terminal::start`] on the server, as `user`.
    pub(crate) fn on_server(s: &'a Stack, user: &str, command: &str) -> Self {
        Self::open(s, Some(user.to_owned()), command)
    }

    fn open(s: &'a Stack, server_user: Option<String>, command: &str) -> Self {
        let session = unique_name("tty");
        let line = format!("{command}; echo \"exit=$?\"; sleep 600");
        let t = Self {
            s,
            session,
            server_user,
        };
        t.tmux(&[
            "tmux",
            "-L",
            SOCKET,
            "new-session",
            "-d",
            "-s",
            &t.session,
            "-x",
            "200",
            "-y",
            "50",
            "sh",
            "-c",
            &line,
        ])
        .ok();
        t
    }

    /// Runs `args` (a tmux command line) where the terminal is.
    fn tmux(&self, args: &[&str]) -> crate::stack::Out {
        match &self.server_user {
            None => self.s.laptop(args, &[], None),
            Some(user) => self.s.server(Some(user), args, None),
        }
    }

    pub(crate) fn screen(&self) -> String {
        self.tmux(&[
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
        ])
        .stdout
    }

    /// Types `keys` (tmux key names: `Enter`, `C-c`, or literal text).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["tmux", "-L", SOCKET, "send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        self.tmux(&args).ok();
    }

    /// The first screen within `limit` for which `wanted` holds.
    pub(crate) fn until(&self, limit: Duration, wanted: impl Fn(&str) -> bool) -> Option<String> {
        let start = Instant::now();
        while start.elapsed() < limit {
            let screen = self.screen();
            if wanted(&screen) {
                return Some(screen);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        None
    }

    /// Waits until the screen shows `text`.
    #[track_caller]
    pub(crate) fn expect(&self, text: &str) {
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
        let _ = self.tmux(&["tmux", "-L", SOCKET, "kill-session", "-t", &self.session]);
    }
}
