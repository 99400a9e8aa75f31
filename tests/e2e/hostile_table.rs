//! One table of hostile inputs across the agent, the laptop and the config linter. Each row:
//! the input, the words its one-line error must contain, and a check that nothing changed (the
//! inventory and CRL on the server, every file under the laptop's profile root, the linted
//! file). The agent rows run the real agent over the server's shell, as SSH would.

use std::os::unix::fs::PermissionsExt as _;

use crate::hostile::snapshot;
use crate::server::openssl_csr;
use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};

/// The server's CA state a refusal must leave alone.
fn server_state(s: &Stack) -> (String, Vec<u8>) {
    let list = s.agent(&["list", "--json"], None).ok().stdout;
    let crl = std::fs::read(format!("{}/crl.pem", s.info("agent_state_dir"))).unwrap_or_default();
    (list, crl)
}

/// One refusal: exit 2 and exactly one `error:` line, which (with its `caused by:` lines)
/// contains `expect`.
#[track_caller]
fn one_line_error(out: &Out, expect: &str, row: &str) {
    assert_eq!(out.code, Some(2), "{row}: exit code:\n{}", out.all());
    let errors = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .count();
    assert_eq!(errors, 1, "{row}: one error line:\n{}", out.stderr);
    let report: String = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:") || l.trim_start().starts_with("caused by:"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        report.contains(expect),
        "{row}: expected `{expect}`:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{row}: {}", out.stderr);
}

#[test]
fn every_hostile_input_gets_one_clear_error_and_changes_nothing() {
    let s = stack();
    let dir = s.scratch();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let name = unique_name("ht");
    let p256 = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"];
    let cn = format!("/CN={name}");
    let good = openssl_csr(d, &p256, &cn, &[]);
    let mut rows = 0;

    // --- The agent: (row, args, stdin, expected words).
    let long = "a".repeat(33);
    let two = [good.clone(), good.clone()].concat();
    let bad_config = |label: &str, toml: &str| {
        let path = d.join(format!("{label}.toml"));
        std::fs::write(&path, toml).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        path.display().to_string()
    };
    let cfg_host = bad_config("host", "[mysql]\nhost = \"db\\nMatch exec x\"\n");
    let cfg_boot = bad_config("boot", "[kafka]\nbootstrap = \"localhost\"\n");
    let cfg_life = bad_config("life", "[lifetime]\nclient_days = 4000\n");
    let cfg_user = bad_config("user", "[mysql]\nuser_host = \"127.0.0.1 OR 1=1\"\n");
    type AgentRow<'a> = (&'a str, Vec<&'a str>, Option<Vec<u8>>, &'a str);
    let agent_rows: Vec<AgentRow<'_>> = vec![
        (
            "sql in a name",
            vec!["sign", "--name", "Root;DROP"],
            Some(good.clone()),
            "invalid name",
        ),
        (
            "path in a name",
            vec!["sign", "--name", "../etc"],
            Some(good.clone()),
            "invalid name",
        ),
        (
            "33-character name",
            vec!["sign", "--name", &long],
            Some(good.clone()),
            "longer than 32",
        ),
        (
            "newline in a name",
            vec!["sign", "--name", "a\nb"],
            Some(good.clone()),
            "invalid name",
        ),
        (
            "the agent's own identity",
            vec!["sign", "--name", "shiqi-admin"],
            Some(good.clone()),
            "reserved",
        ),
        (
            "root",
            vec!["sign", "--name", "root"],
            Some(good.clone()),
            "reserved",
        ),
        (
            "not a CSR",
            vec!["sign", "--name", &name],
            Some(b"hello".to_vec()),
            "not a PEM",
        ),
        (
            "70 KiB on stdin",
            vec!["sign", "--name", &name],
            Some(vec![b'A'; 70 * 1024]),
            "larger than 64 KiB",
        ),
        (
            "two CSRs",
            vec!["sign", "--name", &name],
            Some(two),
            "more than one PEM block",
        ),
        (
            "someone else's CN",
            vec!["sign", "--name", "mallory"],
            Some(good.clone()),
            "is not `CN=mallory`",
        ),
        (
            "RSA-1024",
            vec!["sign", "--name", &name],
            Some(openssl_csr(
                d,
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
                &cn,
                &[],
            )),
            "RSA-1024",
        ),
        (
            "RSA e = 3",
            vec!["sign", "--name", &name],
            Some(openssl_csr(
                d,
                &[
                    "-algorithm",
                    "RSA",
                    "-pkeyopt",
                    "rsa_keygen_bits:2048",
                    "-pkeyopt",
                    "rsa_keygen_pubexp:3",
                ],
                &cn,
                &[],
            )),
            "public exponent 3",
        ),
        (
            "P-521",
            vec!["sign", "--name", &name],
            Some(openssl_csr(
                d,
                &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"],
                &cn,
                &[],
            )),
            "is not allowed",
        ),
        (
            "asks to be a CA",
            vec!["sign", "--name", &name],
            Some(openssl_csr(
                d,
                &p256,
                &cn,
                &["-addext", "basicConstraints=critical,CA:TRUE"],
            )),
            "CA basic constraints",
        ),
        (
            "asks for a SAN",
            vec!["sign", "--name", &name],
            Some(openssl_csr(
                d,
                &p256,
                &cn,
                &["-addext", "subjectAltName=DNS:evil.example"],
            )),
            "subjectAltName",
        ),
        (
            "--replaces not hex",
            vec!["sign", "--name", &name, "--replaces", "zz"],
            Some(good.clone()),
            "invalid serial",
        ),
        (
            "--replaces unknown",
            vec!["sign", "--name", &name, "--replaces", "0abc"],
            Some(good.clone()),
            "never issued",
        ),
        (
            "revoke not hex",
            vec!["revoke", "zz"],
            None,
            "invalid serial",
        ),
        (
            "revoke unknown serial",
            vec!["revoke", "0abc"],
            None,
            "0abc",
        ),
        (
            "revoke a bad name",
            vec!["revoke", "--name", "A;B"],
            None,
            "invalid name",
        ),
        (
            "revoke a bad key id",
            vec!["revoke", "--name", &name, "--key", "../x"],
            None,
            "invalid key id",
        ),
        (
            "revoke a bogus reason",
            vec!["revoke", "0abc", "--reason", "because"],
            None,
            "revocation reason",
        ),
        (
            "lifetime of 11 million years",
            vec![
                "server-cert",
                "x",
                "--kind",
                "mysql",
                "--san",
                "localhost",
                "--out",
                "/tmp/shiqi-ht",
                "--days",
                "4000000000",
            ],
            None,
            "may live 1d to 398d",
        ),
        (
            "a SAN with a space",
            vec![
                "server-cert",
                "x",
                "--kind",
                "mysql",
                "--san",
                "a b",
                "--out",
                "/tmp/shiqi-ht",
            ],
            None,
            "--san: invalid host",
        ),
        (
            "provision root",
            vec!["provision", "--name", "root"],
            Some(good.clone()),
            "reserved",
        ),
        (
            "provision with SQL",
            vec!["provision", "--name", "x';DROP"],
            Some(good.clone()),
            "invalid name",
        ),
        (
            "provision someone else's CN",
            vec!["provision", "--name", "mallory"],
            Some(good.clone()),
            "is not `CN=mallory`",
        ),
        (
            "provision a non-CSR",
            vec!["provision", "--name", &name],
            Some(b"hello".to_vec()),
            "not a PEM",
        ),
        (
            "mysql-user root",
            vec!["mysql-user", "root"],
            None,
            "reserved",
        ),
        (
            "mysql-user with SQL",
            vec!["mysql-user", "x';DROP"],
            None,
            "invalid name",
        ),
        (
            "kafka-user a principal",
            vec!["kafka-user", "User:x"],
            None,
            "invalid name",
        ),
        (
            "config: newline in [mysql] host",
            vec!["--config", &cfg_host, "brokers"],
            None,
            "[mysql] host",
        ),
        (
            "config: bootstrap without a port",
            vec!["--config", &cfg_boot, "brokers"],
            None,
            "[kafka] bootstrap",
        ),
        (
            "config: an 11-year client lifetime",
            vec!["--config", &cfg_life, "brokers"],
            None,
            "client_days = 4000",
        ),
        (
            "config: SQL in user_host",
            vec!["--config", &cfg_user, "brokers"],
            None,
            "user_host",
        ),
    ];
    let before = server_state(s);
    for (row, args, stdin, expect) in &agent_rows {
        let out = s.agent(args, stdin.as_deref());
        one_line_error(&out, expect, row);
        assert!(
            out.stdout.is_empty(),
            "{row}: a refusal prints nothing on stdout"
        );
        rows += 1;
    }
    assert!(
        server_state(s) == before,
        "an agent refusal changed the inventory or the CRL"
    );

    // --- The laptop: every refusal leaves the profile root byte for byte as it was.
    let home = Home::new(s, "htable");
    home.setup(s, &name, &[]).ok();
    let dest = s.info("ssh_destination");
    let kh_revoked = d.join("kh-revoked");
    let host_key = std::fs::read_to_string(s.info("server_host_key")).expect("host key");
    let host_key: String = host_key
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(
        &kh_revoked,
        format!(
            "{} {host_key}\n@revoked * {host_key}\n",
            s.info("server_ip")
        ),
    )
    .expect("write");
    std::fs::set_permissions(&kh_revoked, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let kh = kh_revoked.display().to_string();
    let other = unique_name("hu");
    let laptop_rows: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "a profile name with a space",
            vec!["setup", "Bad Name", "--server", dest],
            "invalid name",
        ),
        (
            "a path as a profile name",
            vec!["setup", "../x", "--server", dest],
            "invalid name",
        ),
        (
            "a destination with a space",
            vec!["setup", &other, "--server", "a b", "--yes"],
            "invalid SSH destination",
        ),
        (
            "a destination with a newline",
            vec!["setup", &other, "--server", "h\nProxyCommand x", "--yes"],
            "invalid SSH destination",
        ),
        (
            "an agent command over two lines",
            vec![
                "setup",
                &other,
                "--server",
                dest,
                "--yes",
                "--agent-command",
                "a\nb",
            ],
            "agent command",
        ),
        (
            "a revoked host key",
            vec![
                "setup",
                &other,
                "--server",
                dest,
                "--yes",
                "--known-hosts",
                &kh,
            ],
            "REVOKED",
        ),
        (
            "the profile exists",
            vec!["setup", &name, "--server", dest, "--yes"],
            "already exists",
        ),
        (
            "tunnel up for no profile",
            vec!["tunnel", "up", "nope"],
            "no profile `nope`",
        ),
        (
            "rotate for no profile",
            vec!["rotate", "nope"],
            "no profile `nope`",
        ),
        (
            "revoke a serial that is not hex",
            vec!["revoke", &name, "--serial", "zz"],
            "invalid serial",
        ),
    ];
    let before = snapshot(&home.dir);
    for (row, args, expect) in &laptop_rows {
        let out = home.connect(s, args);
        one_line_error(&out, expect, row);
        rows += 1;
    }
    assert!(
        snapshot(&home.dir) == before,
        "a laptop refusal changed the profile root"
    );

    // --- The linter (`doctor --config`, in a root with no profile, so only the file is
    // judged): the finding names the problem and its line; the file is not touched.
    let lint_rows: Vec<(&str, &str, &str)> = vec![
        (
            "a typo'd key",
            "bootstrap.servers=localhost:19094\necurity.protocol=SSL\n",
            "did you mean `security.protocol`",
        ),
        (
            "a keystore that is not there",
            "bootstrap.servers=localhost:19094\nsecurity.protocol=SSL\nssl.keystore.location=/nonexistent/ks.p12\n",
            "which does not exist",
        ),
        (
            "a librdkafka typo",
            "bootstrap.servers=localhost:19094\nsecurity.protocol=ssl\nssl.key.locaton=/k\n",
            "unknown key `ssl.key.locaton`",
        ),
        (
            "two security.protocol lines",
            "bootstrap.servers=localhost:19094\nsecurity.protocol=SSL\nsecurity.protocol=PLAINTEXT\n",
            "this later value wins",
        ),
        (
            "host name checks turned off",
            "bootstrap.servers=localhost:19094\nsecurity.protocol=SSL\nssl.endpoint.identification.algorithm=\n",
            "turns off the check",
        ),
        (
            "an Oracle-only option for MariaDB",
            "[client]\nhost=127.0.0.1\nssl-mode=DISABLED\n",
            "MariaDB clients stop at it",
        ),
    ];
    let empty = Home::new(s, "hlint");
    for (i, (row, text, expect)) in lint_rows.iter().enumerate() {
        let file = d.join(format!("lint-{i}.conf"));
        std::fs::write(&file, text).expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let f = file.display().to_string();
        let out = empty.connect(s, &["doctor", "--config", &f]);
        let finding = out
            .stdout
            .lines()
            .chain(out.stderr.lines())
            .find(|l| (l.starts_with("fail") || l.starts_with("warn")) && l.contains(expect));
        assert!(
            finding.is_some(),
            "{row}: expected a finding `{expect}`:\n{}",
            out.all()
        );
        assert!(!out.all().contains("panicked"), "{row}");
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            *text,
            "{row}: file changed"
        );
        rows += 1;
    }
    assert!(
        snapshot(&empty.dir).is_empty(),
        "doctor wrote into an empty profile root"
    );
    eprintln!("hostile-input table: {rows} rows");
    assert!(rows >= 40, "{rows} rows");
}
