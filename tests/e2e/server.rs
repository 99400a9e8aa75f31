//! The server side on the real stack: brokers and MariaDB accept what the agent signs and
//! refuse the rest; the signing policy holds over a real process boundary; serials stay unique.

use crate::identity;
use crate::stack::{stack, unique_name};

const API_VERSIONS: &str = "org.apache.kafka.tools.BrokerApiVersionsCommand";

#[test]
fn broker_accepts_an_agent_signed_client_and_refuses_no_certificate_and_a_foreign_ca() {
    let s = stack();
    let dir = s.scratch();
    let good = identity::signed(s, &unique_name("e2e-kafka"), dir.path());
    let bootstrap = s.info("kafka_bootstrap");

    let ok = s
        .kafka_tool(
            API_VERSIONS,
            &[
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                &good.path_str("client.properties"),
            ],
        )
        .ok();
    for port in ["19094", "29094", "39094"] {
        assert!(
            ok.stdout.contains(&format!("localhost:{port}")),
            "broker {port} not listed:\n{}",
            ok.stdout
        );
    }

    let none = s
        .kafka_tool(
            API_VERSIONS,
            &[
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                &good.path_str("nocert.properties"),
            ],
        )
        .failed();
    assert!(
        none.all().contains("SslAuthenticationException"),
        "{}",
        none.all()
    );

    let other_dir = s.scratch();
    let ca_pem = std::fs::read_to_string(good.path("ca.crt")).expect("ca");
    let foreign = identity::foreign(&unique_name("e2e-foreign"), other_dir.path(), &ca_pem);
    let refused = s
        .kafka_tool(
            API_VERSIONS,
            &[
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                &foreign.path_str("client.properties"),
            ],
        )
        .failed();
    assert!(
        refused.all().contains("SslAuthenticationException"),
        "{}",
        refused.all()
    );
}

fn mariadb(s: &crate::stack::Stack, user: &str, tls: &[String]) -> crate::stack::Out {
    let (host, port) = s.info("mysql_address").split_once(':').expect("host:port");
    let mut args = vec![
        "mariadb",
        "--no-defaults",
        "-h",
        host,
        "-P",
        port,
        "-u",
        user,
        "--batch",
        "--skip-column-names",
    ];
    args.extend(tls.iter().map(String::as_str));
    args.extend(["-e", "SELECT CURRENT_USER()"]);
    s.server(None, &args, None)
}

#[test]
fn mariadb_accepts_the_certificate_user_and_refuses_a_wrong_subject_and_no_certificate() {
    let s = stack();
    let dir = s.scratch();
    let name = unique_name("e2e-db");
    let id = identity::signed(s, &name, dir.path());
    let created = s.agent(&["mysql-user", &name], None).ok();
    let reply: serde_json::Value = serde_json::from_str(&created.stdout).expect("json");
    assert_eq!(reply["subject"], format!("/CN={name}"));
    assert_eq!(reply["issuer"], "/O=shiqi-connect/CN=shiqi-connect CA");
    assert_eq!(reply["created"], true);
    // Idempotent: a second run updates, it does not fail.
    let again: serde_json::Value =
        serde_json::from_str(&s.agent(&["mysql-user", &name], None).ok().stdout).expect("json");
    assert_eq!(again["created"], false);

    let tls = |id: &identity::Identity| {
        vec![
            format!("--ssl-ca={}", id.path_str("ca.crt")),
            format!("--ssl-cert={}", id.path_str("client.crt")),
            format!("--ssl-key={}", id.path_str("client.key")),
            "--ssl-verify-server-cert".to_owned(),
        ]
    };
    let ok = mariadb(s, &name, &tls(&id)).ok();
    assert_eq!(ok.stdout.trim(), format!("{name}@127.0.0.1"));

    // Another valid certificate from the same CA, but its subject is someone else's.
    let other_dir = s.scratch();
    let other = identity::signed(s, &unique_name("e2e-dbx"), other_dir.path());
    let wrong = mariadb(s, &name, &tls(&other)).failed();
    assert!(wrong.stderr.contains("Access denied"), "{}", wrong.stderr);

    let no_cert = mariadb(
        s,
        &name,
        &[
            format!("--ssl-ca={}", id.path_str("ca.crt")),
            "--ssl".to_owned(),
        ],
    )
    .failed();
    assert!(
        no_cert.stderr.contains("Access denied"),
        "{}",
        no_cert.stderr
    );
}

#[test]
fn mysql_user_refuses_accounts_it_did_not_create() {
    let s = stack();
    for name in ["root", s.info("mysql_admin_user"), "mysql"] {
        let out = s.agent(&["mysql-user", name], None).failed();
        assert_eq!(out.code, Some(2));
        assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    }
    // A hand-made account that happens to have a policy-valid name.
    let name = unique_name("e2e-hand");
    let sock = format!("--socket={}", s.info("mysql_socket"));
    s.server(
        None,
        &[
            "mariadb",
            "--no-defaults",
            &sock,
            "-u",
            "root",
            "-e",
            &format!("CREATE USER '{name}'@'%' IDENTIFIED BY 'x'"),
        ],
        None,
    )
    .ok();
    let dir = s.scratch();
    identity::signed(s, &name, dir.path());
    let out = s.agent(&["mysql-user", &name], None).failed();
    assert!(
        out.stderr.contains("was not created by shiqi-ca-agent"),
        "{}",
        out.stderr
    );
}

fn inventory(s: &crate::stack::Stack) -> String {
    s.agent(&["list", "--json"], None).ok().stdout
}

/// A CSR from `openssl genpkey KEY_ARGS` + `openssl req -subj SUBJ EXTRA`, made now.
pub(crate) fn openssl_csr(
    dir: &std::path::Path,
    key_args: &[&str],
    subj: &str,
    extra: &[&str],
) -> Vec<u8> {
    let key = dir.join("k.pem");
    let csr = dir.join("r.csr");
    let run = |args: Vec<&str>| {
        let out = std::process::Command::new("openssl")
            .args(&args)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let key_s = key.display().to_string();
    let csr_s = csr.display().to_string();
    run([&["genpkey", "-out", &key_s][..], key_args].concat());
    run([
        &["req", "-new", "-key", &key_s, "-subj", subj, "-out", &csr_s][..],
        extra,
    ]
    .concat());
    std::fs::read(csr).expect("csr")
}

#[test]
fn sign_refuses_each_policy_violation_with_its_reason_and_changes_nothing() {
    let s = stack();
    let dir = s.scratch();
    let d = dir.path();
    let name = unique_name("e2e-policy");
    let p256 = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"];
    let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
        (
            "wrong CN",
            name.clone(),
            openssl_csr(d, &p256, "/CN=mallory", &[]),
            "is not `CN=",
        ),
        (
            "bad name",
            "Root;DROP".to_owned(),
            openssl_csr(d, &p256, "/CN=root", &[]),
            "invalid name",
        ),
        (
            "reserved",
            "shiqi-admin".to_owned(),
            openssl_csr(d, &p256, "/CN=shiqi-admin", &[]),
            "reserved",
        ),
        (
            "broker identity",
            "kafka-broker".to_owned(),
            openssl_csr(d, &p256, "/CN=kafka-broker", &[]),
            "reserved",
        ),
        (
            "CA",
            name.clone(),
            openssl_csr(
                d,
                &p256,
                &format!("/CN={name}"),
                &["-addext", "basicConstraints=critical,CA:TRUE"],
            ),
            "CA basic constraints",
        ),
        (
            "SAN",
            name.clone(),
            openssl_csr(
                d,
                &p256,
                &format!("/CN={name}"),
                &["-addext", "subjectAltName=DNS:x.example"],
            ),
            "subjectAltName",
        ),
        (
            "RSA-1024",
            name.clone(),
            openssl_csr(
                d,
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
                &format!("/CN={name}"),
                &[],
            ),
            "RSA-1024",
        ),
        (
            "P-521",
            name.clone(),
            openssl_csr(
                d,
                &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"],
                &format!("/CN={name}"),
                &[],
            ),
            "is not allowed",
        ),
        (
            "RSA e = 3",
            name.clone(),
            openssl_csr(
                d,
                &[
                    "-algorithm",
                    "RSA",
                    "-pkeyopt",
                    "rsa_keygen_bits:2048",
                    "-pkeyopt",
                    "rsa_keygen_pubexp:3",
                ],
                &format!("/CN={name}"),
                &[],
            ),
            "public exponent 3",
        ),
        (
            "RSA-8192",
            name.clone(),
            openssl_csr(
                d,
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:8192"],
                &format!("/CN={name}"),
                &[],
            ),
            "RSA-8192",
        ),
        ("garbage", name.clone(), b"not a csr".to_vec(), "not a PEM"),
        (
            "too large",
            name.clone(),
            vec![b'A'; 70 * 1024],
            "larger than 64 KiB",
        ),
    ];
    let before = inventory(s);
    for (what, who, csr, reason) in cases {
        let out = s.agent(&["sign", "--name", &who], Some(&csr)).failed();
        assert_eq!(out.code, Some(2), "{what}");
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(reason),
            "{what}: {}",
            out.stderr
        );
        assert!(
            out.stdout.is_empty(),
            "{what}: refusals print nothing on stdout"
        );
    }
    assert_eq!(
        inventory(s),
        before,
        "a refusal must not change the inventory"
    );
}

#[test]
fn fifty_concurrent_signs_get_fifty_distinct_serials() {
    let s = stack();
    let name = unique_name("e2e-many");
    let key = shiqi_ca::key::PrivateKey::generate(shiqi_ca::key::KeyType::EcdsaP256).expect("key");
    let csr = shiqi_ca::csr::build(&key, &name.parse().expect("name")).expect("csr");
    let serials: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                scope.spawn(|| {
                    s.agent(
                        &["sign", "--name", &name, "--no-kafka"],
                        Some(csr.as_bytes()),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let out = h.join().expect("thread").ok();
                let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
                v["serial"].as_str().expect("serial").to_owned()
            })
            .collect()
    });
    let unique: std::collections::BTreeSet<_> = serials.iter().collect();
    assert_eq!(unique.len(), 50, "serials repeated: {serials:?}");
    for serial in &serials {
        assert!(serial.len() >= 16, "at least 64 bits: {serial}");
    }
    let listed: Vec<serde_json::Value> = serde_json::from_str(&inventory(s)).expect("json");
    let mine = listed.iter().filter(|r| r["name"] == name.as_str()).count();
    assert_eq!(mine, 50);
}

#[test]
fn keytool_reads_every_keystore_and_truststore_written() {
    let s = stack();
    let dir = s.scratch();
    let id = identity::signed(s, &unique_name("e2e-p12"), dir.path());
    assert!(
        id.serial.len() >= 16,
        "serials carry at least 64 bits: {}",
        id.serial
    );
    let pw = std::fs::read_to_string(id.path("password")).expect("password");
    let tls = format!("{}/server/tls/kafka-broker", s.info("stack_dir"));
    let broker_pw =
        std::fs::read_to_string(format!("{tls}/server.password")).expect("broker password");
    let files = [
        (id.path_str("keystore.p12"), pw.clone(), "PrivateKeyEntry"),
        (
            id.path_str("truststore.p12"),
            pw.clone(),
            "trustedCertEntry",
        ),
        (
            format!("{tls}/server.keystore.p12"),
            broker_pw.clone(),
            "PrivateKeyEntry",
        ),
        (
            format!("{tls}/server.truststore.p12"),
            broker_pw,
            "trustedCertEntry",
        ),
    ];
    for (file, password, entry) in files {
        let out = std::process::Command::new("keytool")
            .args([
                "-list",
                "-v",
                "-storetype",
                "PKCS12",
                "-keystore",
                &file,
                "-storepass",
                password.trim(),
            ])
            .output()
            .expect("keytool");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(&format!("Entry type: {entry}")),
            "{file}: {text}"
        );
    }
}

/// A failed `FLUSH SSL` is remembered: MariaDB keeps the old CRL (the revoked certificate
/// still logs in) until the next `crl --refresh`, which retries the reload although the CRL
/// itself is fresh, and from then on the revoked certificate is refused.
#[test]
fn a_failed_mysql_reload_is_retried_by_the_next_crl_refresh() {
    let s = stack();
    let name = unique_name("e2e-reload");
    let (d1, d2) = (s.scratch(), s.scratch());
    let first = identity::signed(s, &name, d1.path());
    let second = identity::signed(s, &name, d2.path());
    s.agent(&["mysql-user", &name], None).ok();
    let tls = |id: &identity::Identity| {
        vec![
            format!("--ssl-ca={}", id.path_str("ca.crt")),
            format!("--ssl-cert={}", id.path_str("client.crt")),
            format!("--ssl-key={}", id.path_str("client.key")),
        ]
    };
    mariadb(s, &name, &tls(&first)).ok();

    // The agent's MySQL admin login fails for this one revoke: a config naming an admin that
    // does not exist (its socket login is refused; the state, inventory and CRL are the real
    // ones).
    let cfg_dir = s.scratch();
    let config = std::fs::read_to_string(s.info("agent_config")).unwrap_or_default();
    let broken = cfg_dir.path().join("agent.toml");
    let mut text = String::new();
    let mut in_mysql = false;
    for line in config.lines() {
        if line.trim_start().starts_with('[') {
            in_mysql = line.trim() == "[mysql]";
        }
        if in_mysql && line.trim_start().starts_with("admin_user") {
            text.push_str("admin_user = \"e2e-no-such-admin\"\n");
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    assert!(text.contains("e2e-no-such-admin"), "{config}");
    std::fs::write(&broken, text).expect("write");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let revoked = s.agent(
        &[
            "--config",
            &broken.display().to_string(),
            "revoke",
            &first.serial,
            "--reason",
            "superseded",
        ],
        None,
    );
    assert_eq!(revoked.code, Some(2), "{}", revoked.all());
    assert!(
        revoked.stderr.contains("MySQL"),
        "the revoke says MySQL was not told:\n{}",
        revoked.stderr
    );
    // MariaDB still holds the old CRL.
    mariadb(s, &name, &tls(&first)).ok();

    let refresh = s.agent(&["crl", "--refresh"], None).ok();
    assert!(
        refresh
            .stdout
            .contains("an earlier MySQL reload had failed"),
        "{}",
        refresh.all()
    );
    let refused = mariadb(s, &name, &tls(&first)).failed();
    assert!(
        crate::stack::refused_at_tls(&refused.stderr),
        "{}",
        refused.stderr
    );
    mariadb(s, &name, &tls(&second)).ok();
    // Done: the next refresh has nothing to retry.
    let again = s.agent(&["crl", "--refresh"], None).ok();
    assert!(again.stdout.contains("nothing to do"), "{}", again.stdout);
}

/// `server-cert` checks what it is given before it spends a serial, and leaves an existing
/// shared folder's mode alone.
#[test]
fn server_cert_refuses_bad_input_and_keeps_a_shared_folders_mode() {
    let s = stack();
    let dir = s.scratch();
    let shared = dir.path().join("etc-kafka");
    std::fs::create_dir(&shared).expect("mkdir");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = shared.display().to_string();
    let before = inventory(s);
    for (args, expect) in [
        (vec!["--days", "4000000000"], "may live 1d to 398d"),
        (vec!["--days", "0"], "may live 1d to 398d"),
        (vec!["--san", "bad host"], "--san: invalid host"),
        (vec!["--san", "x\nMatch exec y"], "--san: invalid host"),
    ] {
        let mut full = vec!["server-cert", "e2e-srv", "--kind", "mysql", "--out", &out];
        if !args.contains(&"--san") {
            full.extend(["--san", "localhost"]);
        }
        full.extend(args.iter().copied());
        let r = s.agent(&full, None).failed();
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.all());
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(expect),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    assert_eq!(inventory(s), before, "a refusal must not spend a serial");
    s.agent(
        &[
            "server-cert",
            "e2e-srv",
            "--kind",
            "mysql",
            "--out",
            &out,
            "--san",
            "localhost",
        ],
        None,
    )
    .ok();
    let mode = std::fs::metadata(&shared)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o777, "server-cert changed an existing folder's mode");
    let key_mode = std::fs::metadata(shared.join("server.key"))
        .expect("key")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(key_mode, 0o600);
}
