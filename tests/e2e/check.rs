//! `shiqi-ca-agent check`, the server's doctor, against the real stack: all ok on the stack as
//! built, with a measured revocation delay per broker and for MySQL; and each of six broken
//! server settings is one failing line naming its fix.

use std::collections::BTreeMap;

use crate::stack::{ExtraBroker, Stack, stack};

/// The findings of `check --json`, by id.
fn findings(out: &str) -> BTreeMap<String, serde_json::Value> {
    let list: Vec<serde_json::Value> = serde_json::from_str(out).expect("check --json is JSON");
    list.into_iter()
        .map(|f| (f["id"].as_str().unwrap_or_default().to_owned(), f))
        .collect()
}

fn status(f: &BTreeMap<String, serde_json::Value>, id: &str) -> String {
    f.get(id)
        .and_then(|v| v["status"].as_str())
        .unwrap_or("missing")
        .to_owned()
}

#[test]
fn check_is_all_ok_on_the_stack_and_measures_how_fast_each_server_refuses_a_revoked_certificate() {
    let s = stack();
    let out = s.agent(&["check", "--json"], None).ok();
    let f = findings(&out.stdout);
    for (id, v) in &f {
        assert_eq!(v["status"], "ok", "{id}: {v}\n{}", out.stdout);
    }
    let brokers: Vec<&str> = s.info("kafka_brokers").split(',').collect();
    for n in 1..=brokers.len() {
        for check in [
            "client_auth",
            "accepts",
            "authorizer",
            "principal",
            "revocation",
        ] {
            assert_eq!(
                status(&f, &format!("kafka.{check}@{n}")),
                "ok",
                "{}",
                out.stdout
            );
        }
        let secs = f[&format!("kafka.revocation@{n}")]["seconds"]
            .as_f64()
            .expect("seconds");
        // The JVM re-reads a changed CRL file within 30 s.
        assert!((0.0..=45.0).contains(&secs), "broker {n}: {secs} s");
    }
    for id in [
        "mysql.accepts",
        "mysql.crl",
        "mysql.bind",
        "mysql.revocation",
        "sshd.block",
        "state.modes",
        "crl.next_update",
        "kafka.listeners",
    ] {
        assert_eq!(status(&f, id), "ok", "{id}\n{}", out.stdout);
    }
    // MySQL re-reads the CRL when the agent asks (FLUSH SSL): refused at once.
    let mysql = f["mysql.revocation"]["seconds"].as_f64().expect("seconds");
    assert!(mysql < 5.0, "MySQL took {mysql} s");

    // The text report says the same, one line each, and the throwaway left nothing behind:
    // no ACL of it on the cluster, and its certificate revoked in the inventory.
    let text = s.agent(&["check", "--no-revocation"], None).ok();
    assert!(text.stdout.contains("all checks passed"), "{}", text.stdout);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("skip") && l.contains("revocation")),
        "{}",
        text.stdout
    );
    let acls = s.kafka_tool(
        "kafka.admin.AclCommand",
        &[
            "--bootstrap-server",
            s.info("kafka_bootstrap"),
            "--command-config",
            s.info("kafka_admin_properties"),
            "--list",
        ],
    );
    assert!(!acls.stdout.contains("shiqi-check-"), "{}", acls.stdout);
    let list = s.agent(&["list", "--json"], None).ok();
    assert!(list.stdout.contains("shiqi-check-"), "{}", list.stdout);
}

/// A second MariaDB on port 3307 of the server, as a careless install leaves one: listening on
/// every address and without `ssl_crl` (TLS on, with the stack's server certificate). Its admin
/// is the agent's account over the socket (unix_socket: no password file). Stopped when dropped.
struct CarelessMariadb<'a> {
    stack: &'a Stack,
    dir: tempfile::TempDir,
}

impl<'a> CarelessMariadb<'a> {
    fn start(s: &'a Stack) -> Self {
        let dir = s.scratch();
        let d = dir.path().display().to_string();
        let tls: String = std::fs::read_to_string(s.info("mysql_tls_cnf"))
            .expect("the stack's mysqld.cnf")
            .lines()
            .filter(|l| l.starts_with("ssl_") && !l.starts_with("ssl_crl"))
            .map(|l| format!("{l}\n"))
            .collect();
        let script = format!(
            r#"set -e
install -d -o mysql -g mysql {d}/data {d}/run
cat > {d}/my.cnf <<EOF
[mysqld]
user = mysql
datadir = {d}/data
socket = {d}/run/mysqld.sock
pid-file = {d}/run/mysqld.pid
port = 3307
bind-address = 0.0.0.0
skip-name-resolve
performance_schema = OFF
innodb_buffer_pool_size = 16M
{tls}EOF
mariadb-install-db --defaults-file={d}/my.cnf --user=mysql --auth-root-authentication-method=socket --skip-test-db >{d}/install.log 2>&1
setsid /usr/sbin/mariadbd --defaults-file={d}/my.cnf >{d}/mysqld.log 2>&1 </dev/null &
for i in $(seq 100); do mariadb --no-defaults --socket={d}/run/mysqld.sock -u root -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.2; done
mariadb --no-defaults --socket={d}/run/mysqld.sock -u root -e "CREATE USER '{user}'@'localhost' IDENTIFIED VIA unix_socket; GRANT ALL ON *.* TO '{user}'@'localhost' WITH GRANT OPTION"
"#,
            user = s.info("server_user"),
        );
        s.server(None, &["bash", "-c", &script], None).ok();
        Self { stack: s, dir }
    }

    fn socket(&self) -> String {
        format!("{}/run/mysqld.sock", self.dir.path().display())
    }
}

impl Drop for CarelessMariadb<'_> {
    fn drop(&mut self) {
        let pid = format!("{}/run/mysqld.pid", self.dir.path().display());
        let _ = self.stack.server(
            None,
            &[
                "bash",
                "-c",
                &format!("[ -s {pid} ] && kill $(cat {pid}); sleep 1"),
            ],
            None,
        );
    }
}

#[test]
fn check_names_each_broken_server_setting_with_its_fix() {
    let s = stack();
    // Extra brokers, each with one setting undone after install's settings (the stack has room
    // for two: node N listens on port N9094).
    let no_client_auth = ExtraBroker::start(s, 4, &["ssl.client.auth=none"]);
    let _no_authorizer = ExtraBroker::start(s, 5, &["authorizer.class.name="]);
    let careless = CarelessMariadb::start(s);

    // The stack's sshd_config (Debian's defaults: the agent's block is only in the drop-in
    // `install` wrote) without the `Include` of that drop-in's folder.
    let dir = s.scratch();
    let sshd_config = std::fs::read_to_string(s.info("sshd_config")).expect("sshd_config");
    assert!(!sshd_config.contains("Match User"), "{sshd_config}");
    let bare_text: String = sshd_config
        .lines()
        .filter(|l| !l.starts_with("Include"))
        .map(|l| format!("{l}\n"))
        .collect();
    let bare = dir.path().join("sshd_config");
    std::fs::write(&bare, bare_text).expect("write");

    let mut config: toml::Table = std::fs::read_to_string(s.info("agent_config"))
        .expect("agent.toml")
        .parse()
        .expect("agent.toml is TOML");
    let table = |config: &toml::Table, name: &str| -> toml::Table {
        config
            .get(name)
            .and_then(|t| t.as_table())
            .cloned()
            .unwrap_or_default()
    };
    let mut mysql = table(&config, "mysql");
    mysql.insert("port".into(), 3307.into());
    mysql.insert("admin_socket".into(), careless.socket().into());
    mysql.insert("admin_user".into(), s.info("server_user").into());
    mysql.insert(
        "admin_password_file".into(),
        dir.path()
            .join("no-password-file")
            .display()
            .to_string()
            .into(),
    );
    config.insert("mysql".into(), mysql.into());
    let mut access = table(&config, "access");
    access.insert("sshd_config".into(), bare.display().to_string().into());
    config.insert("access".into(), access.into());
    let broken = dir.path().join("agent.toml");
    std::fs::write(&broken, config.to_string()).expect("write");
    use std::os::unix::fs::PermissionsExt as _;
    for f in [&bare, &broken] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }

    let config = broken.display().to_string();
    let out = s.agent(&["--config", &config, "check", "--no-revocation"], None);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("5 check(s) failed"), "{}", out.all());
    let fail = |out: &crate::stack::Out, id: &str, fix: &str| {
        let lines: Vec<&str> = out.stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("FAIL") && l.split_whitespace().nth(1) == Some(id))
            .unwrap_or_else(|| panic!("no FAIL line for {id}:\n{}", out.stdout));
        let next = lines.get(at + 1).copied().unwrap_or_default();
        assert!(
            next.contains("fix:") && next.contains(fix),
            "{id}: the fix names `{fix}`:\n{}",
            out.stdout
        );
    };
    fail(&out, "kafka.client_auth@4", "ssl.client.auth=required");
    fail(&out, "kafka.authorizer@5", "StandardAuthorizer");
    fail(&out, "mysql.crl", "ssl_crl");
    fail(&out, "mysql.bind", "bind-address = 127.0.0.1");
    fail(&out, "sshd.block", "PermitListen none");
    // The healthy brokers stay ok in the same run.
    for ok in [
        "kafka.client_auth@1",
        "kafka.principal@2",
        "kafka.authorizer@3",
    ] {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with("ok") && l.split_whitespace().nth(1) == Some(ok)),
            "{ok}:\n{}",
            out.stdout
        );
    }

    // The sixth: broker 4 again, now asking for certificates but mapping them to the whole DN.
    drop(no_client_auth);
    let _no_mapping = ExtraBroker::start(s, 4, &["ssl.principal.mapping.rules=DEFAULT"]);
    let out = s.agent(&["check", "--no-revocation"], None);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("2 check(s) failed"), "{}", out.all());
    fail(&out, "kafka.principal@4", "ssl.principal.mapping.rules");
    fail(&out, "kafka.authorizer@5", "StandardAuthorizer");
}
