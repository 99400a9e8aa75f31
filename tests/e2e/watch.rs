//! `tunnel status --watch` in a real terminal (tmux), on the running tunnel of a local-endpoint
//! profile: a producer's bytes moving through the endpoint, its connection with its requests,
//! then a broker stopping, as the screen shows them. Piped, the same figures come one line a
//! second.

use std::time::Duration;

use crate::endpoint::local_with_tunnel;
use crate::lifecycle::{Background, java_tool};
use crate::setup::Home;
use crate::stack::{Stack, stack};
use crate::terminal::Terminal;
use crate::tunnel::Tunnel;

/// A producer through the endpoint at `bootstrap`, 40 records of 2 KiB a second, until dropped.
fn steady_producer<'a>(
    s: &'a Stack,
    home: &Home,
    profile: &std::path::Path,
    bootstrap: &str,
    topic: &str,
) -> Background<'a> {
    let config = profile.join("client.properties").display().to_string();
    let props = format!("bootstrap.servers={bootstrap}");
    let command = java_tool(
        s,
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            topic,
            "--num-records",
            "1000000",
            "--record-size",
            "2048",
            "--throughput",
            "40",
            "--producer.config",
            &config,
            "--producer-props",
            &props,
            "acks=1",
        ],
    );
    Background::start(s, home.dir.join("producer.log"), &command)
}

/// The row of the screen's table whose text contains `needle`.
fn row<'a>(screen: &'a str, needle: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(needle))
}

/// Whether a row shows bytes moving up (its third column, `UP/s`, in KiB/s or more).
fn moving_up(line: &str) -> bool {
    let cols: Vec<&str> = line.split_whitespace().collect();
    // OPEN CONNS UP/s(2 words) DOWN/s(2) UP(2) DOWN(2) PORT…
    cols.len() > 4 && cols[3].ends_with("iB/s") && cols[2].parse::<f64>().is_ok_and(|v| v > 0.0)
}

#[test]
fn watch_shows_a_producers_bytes_and_connection_then_a_broker_stopping() {
    let s = stack();
    let home = Home::new(s, "watch");
    let (name, profile, tunnel) =
        local_with_tunnel(s, &home, "watch", "19700", &["--check-every", "2"]);
    let topic = format!("app.{name}");
    crate::kafka::create_three_leader_topic(s, &topic);
    let term = Terminal::start(
        s,
        &format!(
            "SHIQI_HOME={} shiqi-connect tunnel status {name} --watch",
            home.env()
        ),
    );
    term.expect(&format!("tunnel `{name}` · pid "));
    let producer = steady_producer(s, &home, &profile, "127.0.0.1:19700", &topic);

    // The producer's connections to the brokers' endpoint ports, with their requests, and the
    // bytes going up through the bootstrap's and the brokers' rows.
    let screen = term.until(Duration::from_secs(90), |screen| {
        row(screen, "Produce ").is_some()
            && screen
                .lines()
                .filter(|l| l.contains("127.0.0.1:1970"))
                .any(moving_up)
    });
    let screen = screen.unwrap_or_else(|| {
        panic!(
            "no producer on the screen:\n{}\nproducer:\n{}",
            term.screen(),
            producer.log()
        )
    });
    let client = row(&screen, "Produce ").unwrap();
    assert!(client.starts_with("127.0.0.1:"), "{screen}");
    assert!(
        client.contains("localhost:"),
        "the broker it is relayed to:\n{screen}"
    );
    assert!(
        screen.contains("SSH connection 1 · 0 reconnects"),
        "{screen}"
    );
    assert!(screen.contains("certificate serial "), "{screen}");
    assert!(screen.contains("tunnel.log:"), "{screen}");

    // A broker stops: its clients' connections end and the tunnel's next look at the cluster
    // says it is no longer serving.
    let _back = crate::endpoint::NodeBack(s, "3");
    let out = std::process::Command::new(s.script())
        .args(["kafka-node", "down", "3"])
        .output()
        .expect("scripts/stack runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = term.until(Duration::from_secs(90), |screen| {
        // Kafka 4.0+ lists it as fenced; before, it is missing from the answer. On the brokers'
        // row, not in the log's tail below it.
        row(screen, "brokers: asked").is_some_and(|l| {
            l.contains("broker 3 (")
                && (l.contains("not serving now")
                    || l.contains("missing from the cluster's answer"))
        })
    });
    assert!(
        screen.is_some(),
        "the stop never showed:\n{}",
        term.screen()
    );

    // Piped: one line a second with the same figures.
    // Ctrl-C (SIGINT) ends it with exit 0.
    let piped = s
        .laptop(
            &[
                "timeout",
                "--preserve-status",
                "-s",
                "INT",
                "3.5",
                "shiqi-connect",
                "tunnel",
                "status",
                &name,
                "--watch",
            ],
            &[("SHIQI_HOME", &home.env())],
            None,
        )
        .ok();
    let lines: Vec<&str> = piped.stdout.lines().collect();
    assert!(lines.len() >= 2, "{}", piped.all());
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" up connection=") && l.contains("endpoint_clients=")),
        "{}",
        piped.all()
    );
    assert!(
        !piped.stdout.contains('\u{1b}'),
        "escape codes when piped:\n{}",
        piped.all()
    );
    drop(producer);

    // It follows the tunnel: stopped, it waits; started again, the figures are back.
    tunnel.down().ok();
    term.expect("not running; waiting for it");
    let (again, up) = Tunnel::up(s, &home, &name, &[]);
    up.ok();
    let back = term.until(Duration::from_secs(30), |screen| {
        screen.contains(&format!("tunnel `{name}` · pid ")) && !screen.contains("not running")
    });
    assert!(back.is_some(), "{}", term.screen());
    drop(term);
    drop(again);
    drop(tunnel);
}
