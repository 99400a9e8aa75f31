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
        // Whether the stack's CA was backed up depends on which tests ran before (backup::);
        // when it was not, check says how.
        if id == "state.backup" && v["status"] == "warn" {
            assert!(
                v["fix"]
                    .as_str()
                    .is_some_and(|f| f.contains("backup --out")),
                "{v}"
            );
            continue;
        }
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
    // All passed, but for the backup warning when backup:: has not run before (as above).
    let warned: Vec<&str> = text
        .stdout
        .lines()
        .filter(|l| l.starts_with("warn"))
        .collect();
    assert!(
        text.stdout.contains("all checks passed")
            || (warned.len() == 1
                && warned[0].contains("state.backup")
                && text.stdout.contains("no failures, 1 warning(s)")),
        "{}",
        text.stdout
    );
    // Not a terminal: no progress line on stderr (the tmux test below sees it on one).
    assert!(!text.stderr.contains("check:"), "{}", text.stderr);
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

/// The stack's sshd drop-in for the agent's account, replaced for one test and put back (and
/// sshd reloaded) when dropped, with any extra drop-in removed.
struct SshdDropIns<'a> {
    s: &'a Stack,
    ours: std::path::PathBuf,
    kept: String,
    extra: Vec<std::path::PathBuf>,
}

impl<'a> SshdDropIns<'a> {
    fn new(s: &'a Stack) -> Self {
        let dir = std::path::Path::new(s.info("sshd_config")).with_file_name("sshd_config.d");
        let ours = dir.join(format!("{}.conf", s.info("server_user")));
        let kept = std::fs::read_to_string(&ours).expect("install's sshd drop-in");
        Self {
            s,
            ours,
            kept,
            extra: Vec::new(),
        }
    }

    fn write(&mut self, name: Option<&str>, text: &str) {
        let path = name.map_or_else(|| self.ours.clone(), |n| self.ours.with_file_name(n));
        std::fs::write(&path, text).expect("write the drop-in");
        if name.is_some() {
            self.extra.push(path);
        }
    }

    fn reload(&self) {
        let pid = format!("{}/server/ssh/sshd.pid", self.s.info("stack_dir"));
        self.s
            .server(
                None,
                &["sh", "-c", &format!("kill -HUP $(cat {pid})")],
                None,
            )
            .ok();
        // sshd re-execs on SIGHUP; give it a moment to listen again.
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

impl Drop for SshdDropIns<'_> {
    fn drop(&mut self) {
        for extra in &self.extra {
            let _ = std::fs::remove_file(extra);
        }
        let _ = std::fs::write(&self.ours, &self.kept);
        self.reload();
    }
}

/// The gate covers every way in as the agent's account (issue 42): with the stack's
/// server-wide `TrustedUserCAKeys`, a certificate naming the account runs nothing under
/// install's block, while the old five-line block (no `AuthorizedPrincipalsFile`) gives it a
/// shell and fails `check` and `enroll` naming that setting; an earlier `Match all` drop-in that
/// turns agent forwarding back on fails `check` too.
#[test]
fn the_sshd_gate_covers_certificates_and_an_earlier_match_that_loosens_it() {
    let s = stack();
    let account = s.info("server_user").to_owned();
    let home = crate::setup::Home::new(s, "gatecert");
    let dir = home.dir.display().to_string();
    let id = crate::stack::unique_name("gate");
    let key = crate::logins::certified_key_for(s, &dir, &id, &account, "-5m:+1h");
    let as_certificate = |command: &str| {
        s.laptop(
            &[
                "ssh",
                "-T",
                "-o",
                "BatchMode=yes",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                &format!("CertificateFile={key}-cert.pub"),
                "-i",
                &key,
                s.info("ssh_destination"),
                command,
            ],
            &[],
            None,
        )
    };
    // Install's block: the certificate is refused (its principal is in no principals line).
    let refused = as_certificate("id -un");
    assert!(!refused.success(), "{}", refused.all());
    assert!(!refused.stdout.contains(&account), "{}", refused.all());

    let mut drop_ins = SshdDropIns::new(s);
    let old_block = format!(
        "Match User {account}\n    AllowTcpForwarding local\n    AllowStreamLocalForwarding no\n    \
         PermitListen none\n    PermitTTY no\n    X11Forwarding no\n"
    );
    drop_ins.write(None, &old_block);
    drop_ins.reload();
    // What the gate refuses is real: the old block lets the certificate run commands.
    let shell = as_certificate("id -un");
    assert_eq!(shell.stdout.trim(), account, "{}", shell.all());
    let out = s.agent(&["check", "--json", "--no-revocation"], None);
    assert_eq!(out.code, Some(2), "{}", out.all());
    let f = findings(&out.stdout);
    assert_eq!(status(&f, "sshd.block"), "fail", "{}", out.stdout);
    let text = f["sshd.block"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("AuthorizedPrincipalsFile none"), "{text}");
    assert!(
        f["sshd.block"]["fix"]
            .as_str()
            .is_some_and(|fix| fix.contains("AuthorizedPrincipalsFile .ssh/authorized_principals")),
        "{}",
        out.stdout
    );
    let pubkey = std::fs::read_to_string(format!("{key}.pub")).expect("public key");
    let enroll = s.agent(
        &["enroll", &id, "--ssh-key", "-", "--role", "user"],
        Some(pubkey.as_bytes()),
    );
    assert_eq!(enroll.code, Some(2), "{}", enroll.all());
    assert!(
        enroll.stderr.contains("AuthorizedPrincipalsFile"),
        "{}",
        enroll.all()
    );

    // Install's block back, and an earlier drop-in whose `Match all` turns agent forwarding on:
    // sshd keeps the first value, so the block's `no` loses.
    drop_ins.write(None, &drop_ins.kept.clone());
    drop_ins.write(
        Some("00-e2e-loosen.conf"),
        "Match all\n    AllowAgentForwarding yes\n",
    );
    let out = s.agent(&["check", "--json", "--no-revocation"], None);
    assert_eq!(out.code, Some(2), "{}", out.all());
    let f = findings(&out.stdout);
    let text = f["sshd.block"]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("AllowAgentForwarding yes, not no"),
        "{}",
        out.stdout
    );
    drop(drop_ins);
    let out = s.agent(&["check", "--json", "--no-revocation"], None).ok();
    assert_eq!(status(&findings(&out.stdout), "sshd.block"), "ok");

    // And check itself, run as root, names the account to run it as.
    let as_root = s.server(
        None,
        &[
            s.info("agent_bin"),
            "--state-dir",
            s.info("agent_state_dir"),
            "check",
        ],
        None,
    );
    assert_eq!(as_root.code, Some(2), "{}", as_root.all());
    assert!(
        as_root
            .stderr
            .contains(&format!("sudo -u {account} shiqi-ca-agent")),
        "{}",
        as_root.all()
    );
}

/// On a terminal, check says what it waits on while it waits (the revocation wait takes up to
/// 30 s and printed nothing), then clears the line for the report.
#[test]
fn check_in_a_terminal_shows_what_it_waits_on_then_only_the_report() {
    let s = stack();
    let user = s.info("server_user");
    let term =
        crate::terminal::Terminal::on_server(s, user, &format!("{} check", s.info("agent_bin")));
    let waiting = term.until(std::time::Duration::from_secs(60), |screen| {
        screen.contains("to refuse the revoked throwaway certificate (at most 90 s")
    });
    assert!(waiting.is_some(), "no progress line:\n{}", term.screen());
    let end = term.until(std::time::Duration::from_secs(120), |screen| {
        screen.contains("exit=")
    });
    let end = end.unwrap_or_else(|| panic!("check never ended:\n{}", term.screen()));
    assert!(end.contains("exit=0"), "{end}");
    assert!(end.contains("revocation"), "{end}");
    assert!(
        !end.contains("check: waiting"),
        "the progress line stayed:\n{end}"
    );
}
