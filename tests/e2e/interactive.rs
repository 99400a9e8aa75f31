//! `setup` typed as a person types it, in a real terminal: tmux in the laptop namespace. The
//! questions (the server, an unknown host key) are answered with keystrokes; Ctrl-C at the host
//! key question leaves nothing behind (no profile, no staging folder, known_hosts unchanged).

use std::path::PathBuf;

use crate::setup::Home;
use crate::stack::{Stack, stack, unique_name};
use crate::terminal::Terminal;

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

/// A slow agent (here one that sleeps 4 s before each answer) shows as waiting, not stuck: the
/// step's line turns a spinner and counts the seconds, then gives way to the step's outcome.
#[test]
fn setup_shows_a_slow_agent_as_waiting_with_the_seconds_then_its_outcome() {
    let s = stack();
    let home = Home::new(s, "tty-slow");
    let name = unique_name("slow");
    let agent = format!("sleep 4; {}", s.info("agent_via_sudo"));
    let term = Terminal::start(
        s,
        &format!(
            "SHIQI_HOME={} shiqi-connect setup {name} --server {} --yes --agent-command '{agent}'",
            home.env(),
            s.info("shell_destination"),
        ),
    );
    let label = "get a certificate, Kafka permissions and MySQL user from the agent";
    // The seconds count: a line with the label ending in `2s` or more.
    let counting = |screen: &str| {
        screen.lines().any(|l| {
            l.contains(label)
                && l.trim_end()
                    .rsplit(' ')
                    .next()
                    .and_then(|t| t.strip_suffix('s'))
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| n >= 2)
        })
    };
    let waiting = term.until(std::time::Duration::from_secs(60), counting);
    assert!(waiting.is_some(), "no counting line:\n{}", term.screen());
    term.expect("exit=");
    let screen = term.screen();
    assert!(screen.contains("exit=0"), "{screen}");
    assert!(screen.contains(&format!("✓ {label}: serial ")), "{screen}");
    assert!(
        screen
            .lines()
            .all(|l| !l.contains(label) || l.contains('✓')),
        "the waiting line stayed:\n{screen}"
    );
}
