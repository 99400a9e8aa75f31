//! Test fixtures shared by the checks' unit tests: a profile folder loaded as doctor loads it,
//! sample local-endpoint profiles and configs, fake MySQL and Kafka endpoint ports, and the
//! state file of a running tunnel.
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};

use std::path::Path;

use crate::doctor::{Context, Inputs};
use crate::profile::{Endpoint, ForwardRecord, LocalBroker, Profile, files as pf};
use crate::tunnel::{Phase, State};

/// A profile folder holding `p`, an `ssh_config` whose tunnel block has a `LocalForward`
/// for each of `forwards` (local port, target host), and `files` (name, text), loaded as
/// doctor loads it.
pub(crate) fn context(
    dir: &Path,
    p: &Profile,
    forwards: &[(u16, &str)],
    files: &[(&str, &str)],
) -> Context {
    p.write_fixture(dir);
    let mut cfg = String::from("Host shiqi-tunnel\n    HostName 10.231.0.1\n");
    for (port, host) in forwards {
        cfg.push_str(&format!(
            "    LocalForward 127.0.0.1:{port} {host}:{port}\n"
        ));
    }
    crate::fsutil::write_private(&dir.join(pf::SSH_CONFIG), cfg.as_bytes()).expect("ssh_config");
    for (name, text) in files {
        crate::fsutil::write_private(&dir.join(name), text.as_bytes()).expect("file");
    }
    Context::load(&Inputs {
        home: dir.to_path_buf(),
        profile_dir: Some(dir.to_path_buf()),
        configs: Vec::new(),
        bootstrap: Vec::new(),
    })
}

/// The sample profile with brokers 1 and 2 advertising `broker-N.kafka.invalid:9093` (the
/// multi-host shape), no MySQL, and the local endpoint on `ports` (bootstrap first).
pub(crate) fn local_profile(ports: &[u16]) -> Profile {
    let mut p = crate::profile::tests::sample();
    p.mysql = None;
    p.brokers.truncate(2);
    for b in &mut p.brokers {
        b.host = format!("broker-{}.kafka.invalid", b.id)
            .parse()
            .expect("host");
        b.port = shiqi_ca::Port::try_from(9093).expect("port");
    }
    p.endpoint = Endpoint::Local {
        bootstrap_port: ports[0],
        brokers: ports[1..]
            .iter()
            .zip(1..)
            .map(|(port, id)| LocalBroker { id, port: *port })
            .collect(),
    };
    p
}

/// [`local_profile`] with MySQL (`db.shiqi.invalid`, user `saige`) on `mysql`, which the
/// local endpoint serves.
pub(crate) fn local_mysql_profile(ports: &[u16], mysql: u16) -> Profile {
    let mut p = local_profile(ports);
    p.mysql = Some(shiqi_ca::protocol::MysqlFacts {
        host: "db.shiqi.invalid".parse().expect("host"),
        port: shiqi_ca::Port::try_from(mysql).expect("port"),
        user: "saige".parse().expect("name"),
    });
    p
}

/// `my.cnf` as setup writes it for the local endpoint: no SSL settings, no password.
pub(crate) fn local_my_cnf(port: u16) -> String {
    format!("[client]\nhost=127.0.0.1\nport={port}\nuser=saige\n")
}

/// How a fake local endpoint's MySQL port behaves.
#[derive(Clone, Copy)]
pub(crate) enum FakeMysql {
    /// Greets without TLS, logs anyone in, and says `saige@%` is `CURRENT_USER()`.
    Plain,
    /// Greets offering TLS: the server's own greeting, not the endpoint's.
    Tls,
    /// Greets without TLS, then answers the login with this error (code 1045).
    Refuses(&'static str),
    /// Sends this error in place of the greeting.
    NoGreeting(&'static str),
}

/// A fake MySQL port on 127.0.0.1 behaving as `how`, for every connection.
pub(crate) fn fake_mysql(how: FakeMysql) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || answer_mysql(s, how));
        }
    });
    port
}

fn write_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) -> bool {
    let len = u32::try_from(payload.len()).expect("small").to_le_bytes();
    let mut out = vec![len[0], len[1], len[2], seq];
    out.extend_from_slice(payload);
    s.write_all(&out).is_ok()
}

fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).ok()?;
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).ok()?;
    Some(p)
}

fn lenenc(out: &mut Vec<u8>, s: &str) {
    out.push(u8::try_from(s.len()).expect("short"));
    out.extend_from_slice(s.as_bytes());
}

fn answer_mysql(mut s: TcpStream, how: FakeMysql) {
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let err = |code: u16, state: &str, text: &str| {
        let mut p = vec![0xff];
        p.extend_from_slice(&code.to_le_bytes());
        p.extend_from_slice(state.as_bytes());
        p.extend_from_slice(text.as_bytes());
        p
    };
    if let FakeMysql::NoGreeting(why) = how {
        write_packet(&mut s, 0, &err(1105, "", why));
        return;
    }
    // MariaDB 10.11's shape: no CLIENT_DEPRECATE_EOF, mysql_native_password.
    let ssl: u16 = if matches!(how, FakeMysql::Tls) {
        0x0800
    } else {
        0
    };
    let mut g = vec![10];
    g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
    g.extend_from_slice(&7u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&(0xf7ff | ssl).to_le_bytes());
    g.push(45);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&0x000bu16.to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
    if !write_packet(&mut s, 0, &g) || read_packet(&mut s).is_none() {
        return;
    }
    match how {
        FakeMysql::Plain => {}
        FakeMysql::Refuses(why) => {
            write_packet(&mut s, 2, &err(1045, "#28000", why));
            return;
        }
        FakeMysql::Tls | FakeMysql::NoGreeting(_) => return,
    }
    let ok = [0u8, 0, 0, 2, 0, 0, 0];
    if !write_packet(&mut s, 2, &ok) {
        return;
    }
    while let Some(cmd) = read_packet(&mut s) {
        let current_user = cmd.windows(12).any(|w| w == b"CURRENT_USER");
        match cmd.first() {
            Some(3) if current_user => {
                let mut col = Vec::new();
                for part in ["def", "", "", "", "CURRENT_USER()", ""] {
                    lenenc(&mut col, part);
                }
                col.push(0x0c);
                col.extend_from_slice(&33u16.to_le_bytes());
                col.extend_from_slice(&384u32.to_le_bytes());
                col.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0]);
                let eof = [0xfe, 0, 0, 2, 0];
                let mut row = Vec::new();
                lenenc(&mut row, "saige@%");
                let packets: [&[u8]; 5] = [&[1], &col, &eof, &row, &eof];
                for (p, seq) in packets.iter().zip(1..) {
                    write_packet(&mut s, seq, p);
                }
            }
            // Settings the driver asks for: no rows, so its defaults.
            Some(3 | 14) => {
                write_packet(&mut s, 1, &ok);
            }
            _ => return,
        }
    }
}

/// The state file of a running tunnel whose endpoint serves Kafka on `ports` and MySQL on
/// `mysql`.
pub(crate) fn running_tunnel_with_mysql(dir: &Path, ports: &[u16], mysql: u16) {
    running_tunnel(dir, ports, None);
    let path = dir.join(crate::tunnel::STATE);
    let mut state = State::read(&path).expect("state");
    state.forwards.push(ForwardRecord {
        local_port: mysql,
        remote_host: "db.shiqi.invalid".parse().expect("host"),
        remote_port: shiqi_ca::Port::try_from(mysql).expect("port"),
        purpose: "MySQL, local endpoint".to_owned(),
    });
    state.write(&path).expect("state");
}

/// `client.properties` and `librdkafka.conf` as setup writes them for the local endpoint.
pub(crate) fn local_configs(bootstrap: u16) -> [(&'static str, String); 2] {
    [
        (
            pf::CLIENT_PROPERTIES,
            format!("bootstrap.servers=127.0.0.1:{bootstrap}\nsecurity.protocol=PLAINTEXT\n"),
        ),
        (
            pf::LIBRDKAFKA_CONF,
            format!("bootstrap.servers=127.0.0.1:{bootstrap}\nsecurity.protocol=plaintext\n"),
        ),
    ]
}

/// `n` fake local endpoint ports (bootstrap first): each answers `ApiVersions`, and
/// `Metadata` naming brokers 1.. at `host` on the other ports; anything else is closed.
pub(crate) fn fake_endpoint(n: usize, host: &'static str) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect();
    let brokers: Vec<(i32, u16)> = ports[1..].iter().zip(1..).map(|(p, id)| (id, *p)).collect();
    for l in listeners {
        let brokers = brokers.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let brokers = brokers.clone();
                std::thread::spawn(move || answer_kafka(s, &brokers, host));
            }
        });
    }
    ports
}

fn answer_kafka(mut s: TcpStream, brokers: &[(i32, u16)], host: &str) {
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    loop {
        let mut len = [0u8; 4];
        if s.read_exact(&mut len).is_err() {
            return;
        }
        let mut req = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap_or(0)];
        if req.len() < 8 || s.read_exact(&mut req).is_err() {
            return;
        }
        let mut body = req[4..8].to_vec(); // the correlation id
        match i16::from_be_bytes([req[0], req[1]]) {
            18 => {
                body.extend(0i16.to_be_bytes()); // no error
                body.extend(1i32.to_be_bytes());
                body.extend([18i16, 0, 3].iter().flat_map(|v| v.to_be_bytes()));
            }
            3 => {
                body.extend(0i32.to_be_bytes()); // throttle
                body.extend(i32::try_from(brokers.len()).expect("few").to_be_bytes());
                for (id, port) in brokers {
                    body.extend(id.to_be_bytes());
                    body.extend(i16::try_from(host.len()).expect("short").to_be_bytes());
                    body.extend(host.as_bytes());
                    body.extend(i32::from(*port).to_be_bytes());
                    body.extend((-1i16).to_be_bytes()); // no rack
                }
                body.extend((-1i16).to_be_bytes()); // no cluster id
                body.extend(1i32.to_be_bytes()); // controller
                body.extend(0i32.to_be_bytes()); // no topics
            }
            _ => return,
        }
        let mut frame = i32::try_from(body.len())
            .expect("small")
            .to_be_bytes()
            .to_vec();
        frame.extend(body);
        if s.write_all(&frame).is_err() {
            return;
        }
    }
}

/// The state file of a running tunnel (this test process) whose endpoint serves `ports`.
pub(crate) fn running_tunnel(dir: &Path, ports: &[u16], error: Option<&str>) {
    let record = |port: u16| ForwardRecord {
        local_port: port,
        remote_host: "broker-1.kafka.invalid".parse().expect("host"),
        remote_port: shiqi_ca::Port::try_from(9093).expect("port"),
        purpose: "Kafka, local endpoint".to_owned(),
    };
    State {
        pid: std::process::id(),
        phase: Phase::Up,
        since: time::OffsetDateTime::now_utc(),
        server: "shiqi-dev@10.231.0.1:22".to_owned(),
        generation: 0,
        forwards: Vec::new(),
        error: error.map(str::to_owned),
        hint: None,
        problems: Vec::new(),
        brokers: None,
        endpoint: ports.iter().map(|p| record(*p)).collect(),
        renewal: None,
        refused: None,
    }
    .write(&dir.join(crate::tunnel::STATE))
    .expect("state");
}
