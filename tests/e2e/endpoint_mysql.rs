//! MySQL through the tunnel's local endpoint on the real MariaDB: clients with no SSL settings
//! and no password — the `mariadb` client (with the profile's my.cnf and with no option file at
//! all), PyMySQL, MySQL Connector/J and MariaDB Connector/J with the URL `jdbc` prints — log in
//! as the certificate's account, while the server sees TLS. Compression and `LOAD DATA LOCAL`
//! pass the relay untouched; `datagrip` writes no SSL setting; a revoked name is refused with
//! the endpoint's words.

use std::path::Path;

use crate::endpoint::local_with_tunnel;
use crate::setup::Home;
use crate::stack::{Out, Stack, stack};

/// `mariadb ARGS` on the laptop.
fn mariadb(s: &Stack, args: &[&str]) -> Out {
    let mut full = vec!["mariadb"];
    full.extend_from_slice(args);
    s.laptop(&full, &[], None)
}

/// A PyMySQL login with no `ssl` and no password: `CURRENT_USER()`, or the error.
pub(crate) const PYMYSQL_LOGIN: &str = r#"
import sys, pymysql
try:
    c = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user=sys.argv[2])
    cur = c.cursor()
    cur.execute("SELECT CURRENT_USER()")
    print("current_user=" + cur.fetchone()[0])
except pymysql.MySQLError as e:
    print("error=" + str(e))
    sys.exit(1)
"#;

/// The settings (not the comments) of a profile file.
fn settings(profile: &Path, file: &str) -> String {
    std::fs::read_to_string(profile.join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn mysql_clients_with_no_ssl_settings_log_in_as_the_certificate_through_the_local_endpoint() {
    let s = stack();
    let home = Home::new(s, "endpoint-mysql");
    let (name, profile, tunnel) = local_with_tunnel(s, &home, "emy", "19900", &[]);
    let env = [("SHIQI_HOME", home.env())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let password = std::fs::read_to_string(profile.join("keystore.password")).expect("pw");
    let me = format!("{name}@127.0.0.1");

    // my.cnf: where and who, and no local files for the mysql client (issue 42).
    let cnf = settings(&profile, "my.cnf");
    assert_eq!(
        cnf.trim(),
        format!("[client]\nhost=127.0.0.1\nport=3306\nuser={name}\n\n[mysql]\nlocal-infile=0"),
        "{cnf}"
    );

    // The mariadb client with the profile's my.cnf: the server sees TLS.
    let cnf_arg = format!("--defaults-file={}", profile.join("my.cnf").display());
    let out = mariadb(
        s,
        &[
            &cnf_arg,
            "-N",
            "-e",
            "SELECT CURRENT_USER(); SHOW SESSION STATUS LIKE 'Ssl_version'",
        ],
    )
    .ok();
    assert!(out.stdout.contains(&me), "{}", out.all());
    assert!(out.stdout.contains("Ssl_version\tTLSv1."), "{}", out.all());

    // No option file at all: host, port and user on the command line, as a newcomer types it.
    let user = format!("--user={name}");
    let out = mariadb(
        s,
        &[
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-P",
            "3306",
            &user,
            "-N",
            "-e",
            "SELECT CURRENT_USER()",
        ],
    )
    .ok();
    assert_eq!(out.stdout.trim(), me, "{}", out.all());

    // Compression and LOAD DATA LOCAL are the client's and the server's business: the relay
    // passes them through.
    let rows = home.dir.join("rows.txt");
    s.laptop(
        &[
            "sh",
            "-c",
            "seq 1 2000 > \"$0\"",
            &rows.display().to_string(),
        ],
        &[],
        None,
    )
    .ok();
    let table = format!("ld_{}", name.replace('-', "_"));
    let sql = format!(
        "CREATE TABLE {table} (a INT); LOAD DATA LOCAL INFILE '{}' INTO TABLE {table}; \
         SELECT COUNT(*), SUM(a) FROM {table}; SHOW SESSION STATUS LIKE 'Compression'; \
         DROP TABLE {table}",
        rows.display()
    );
    let out = mariadb(
        s,
        &[
            &cnf_arg,
            "--compress",
            "--local-infile=1",
            "-N",
            "app",
            "-e",
            &sql,
        ],
    )
    .ok();
    assert!(out.stdout.contains("2000\t2001000"), "{}", out.all());
    assert!(out.stdout.contains("Compression\tON"), "{}", out.all());
    // With my.cnf alone the client sends no local file (issue 42: a server, or another account
    // posing as the endpoint while the tunnel is down, could ask for any).
    let sql = format!(
        "CREATE TABLE {table} (a INT); LOAD DATA LOCAL INFILE '{}' INTO TABLE {table}",
        rows.display()
    );
    let out = mariadb(s, &[&cnf_arg, "app", "-e", &sql]).failed();
    assert!(out.stderr.contains("not allowed"), "{}", out.all());
    mariadb(s, &[&cnf_arg, "app", "-e", &format!("DROP TABLE {table}")]).ok();

    // PyMySQL with no ssl argument.
    let out = s
        .laptop(
            &[s.info("python"), "-c", PYMYSQL_LOGIN, "3306", &name],
            &[],
            None,
        )
        .ok();
    assert_eq!(
        out.stdout.trim(),
        format!("current_user={me}"),
        "{}",
        out.all()
    );

    // Both JDBC drivers with the URL `jdbc` prints: the user, and each driver's switch for
    // `LOAD DATA LOCAL` off.
    let jar = crate::jdbc::jar(s);
    for (driver, infile) in [
        ("mysql", "allowLoadLocalInfile"),
        ("mariadb", "allowLocalInfile"),
    ] {
        let url = home.connect(s, &["jdbc", &name, "--driver", driver]).ok();
        assert_eq!(
            url.stdout.trim(),
            format!("jdbc:{driver}://127.0.0.1:3306/?user={name}&{infile}=false"),
            "{}",
            url.all()
        );
        let script = format!("shiqi-connect jdbc {name} --driver {driver} | java -jar {jar} -");
        let out = s.laptop(&["sh", "-c", &script], &env, None).ok();
        assert!(
            out.stdout.contains(&format!("current_user={me}")),
            "{driver}:\n{}",
            out.all()
        );
    }
    let refused = home.connect(s, &["jdbc", &name, "--verify", "full"]);
    assert!(
        !refused.success() && refused.stderr.contains("local endpoint"),
        "{}",
        refused.all()
    );

    // DataGrip: no password, no keystore, no SSL setting, in the clipboard block and the
    // project files alike.
    let clip = home.connect(s, &["datagrip", &name]).ok();
    let project = home.dir.join("proj");
    let proj = project.display().to_string();
    home.connect(s, &["datagrip", &name, "--project", &proj])
        .ok();
    let local_xml =
        std::fs::read_to_string(project.join(".idea/dataSources.local.xml")).expect("local");
    let shared_xml = std::fs::read_to_string(project.join(".idea/dataSources.xml")).expect("xml");
    for text in [&clip.stdout, &local_xml, &shared_xml] {
        for absent in [
            "ssl",
            "password",
            "keystore",
            "keyStore",
            ".crt",
            ".key",
            password.trim(),
        ] {
            assert!(!text.contains(absent), "`{absent}` in:\n{text}");
        }
    }
    assert!(
        clip.stdout
            .contains(&format!("jdbc:mariadb://127.0.0.1:3306/?user={name}")),
        "{}",
        clip.stdout
    );

    // doctor agrees: the endpoint's plaintext greeting is what it should be, and the login
    // through it is the certificate's account.
    let doctor = home.connect(s, &["doctor", &name]);
    assert_eq!(doctor.code, Some(0), "{}", doctor.all());
    assert!(
        doctor
            .stdout
            .contains("through the local endpoint on 127.0.0.1:3306"),
        "{}",
        doctor.stdout
    );

    // Revoked: the server refuses the certificate at the handshake, and the client reads why
    // in the endpoint's words.
    home.connect(
        s,
        &[
            "revoke",
            &name,
            "--server",
            s.info("ssh_destination"),
            "--reason",
            "key-compromise",
        ],
    )
    .ok();
    let out = mariadb(s, &[&cnf_arg, "-N", "-e", "SELECT CURRENT_USER()"]);
    assert!(
        !out.success(),
        "a revoked name still logs in:\n{}",
        out.all()
    );
    assert!(
        out.stderr.contains("shiqi-connect tunnel:") && out.stderr.contains("refused"),
        "{}",
        out.all()
    );
    drop(tunnel);
}
