//! The `Stack` helper: the running stack's facts (`scripts/stack info`) and ways to run
//! commands on its two hosts. Every test gets its own names and temp folders from here.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The running stack.
pub(crate) struct Stack {
    pub(crate) repo: PathBuf,
    info: BTreeMap<String, String>,
}

/// A finished command.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    pub(crate) fn from(out: Output) -> Self {
        Self {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub(crate) fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Panics with both streams unless the command succeeded.
    #[track_caller]
    pub(crate) fn ok(self) -> Self {
        assert!(
            self.success(),
            "command failed ({:?}):\n--- stdout\n{}\n--- stderr\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics unless the command failed.
    #[track_caller]
    pub(crate) fn failed(self) -> Self {
        assert!(
            !self.success(),
            "command unexpectedly succeeded:\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub(crate) fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// The stack, read once. Fails loudly if it is not up or the binaries are not given.
///
/// The first call also takes an exclusive lock on `/run/shiqi-e2e.lock` for the life of the
/// test process: the laptop's forwarded ports are fixed (the advertised ones), so two runs
/// against one stack would fight over them.
pub(crate) fn stack() -> &'static Stack {
    static STACK: OnceLock<Stack> = OnceLock::new();
    static LOCK: OnceLock<std::fs::File> = OnceLock::new();
    STACK.get_or_init(|| {
        LOCK.get_or_init(|| {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open("/run/shiqi-e2e.lock")
                .expect("open /run/shiqi-e2e.lock");
            file.lock().expect("lock /run/shiqi-e2e.lock");
            file
        });
        for var in ["SHIQI_CONNECT_BIN", "SHIQI_AGENT_BIN"] {
            assert!(
                std::env::var_os(var).is_some(),
                "{var} is not set: run the end-to-end tests through `scripts/test`"
            );
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("tests/ sits inside the repository")
            .to_owned();
        let out = Command::new(repo.join("scripts/stack"))
            .arg("info")
            .output()
            .expect("scripts/stack runs");
        assert!(
            out.status.success(),
            "scripts/stack info failed: is the stack up? (`scripts/stack up`)"
        );
        let info = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Stack { repo, info }
    })
}

impl Stack {
    /// One `key=value` fact from `scripts/stack info`.
    #[track_caller]
    pub(crate) fn info(&self, key: &str) -> &str {
        self.info
            .get(key)
            .unwrap_or_else(|| panic!("`scripts/stack info` has no `{key}`"))
    }

    pub(crate) fn script(&self) -> PathBuf {
        self.repo.join("scripts/stack")
    }

    fn run(&self, mut cmd: Command, stdin: Option<&[u8]>) -> Out {
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("command starts");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin is piped");
            // The command may refuse early and close stdin; that is its answer, not ours.
            let _ = pipe.write_all(input);
        }
        Out::from(child.wait_with_output().expect("command finishes"))
    }

    /// Runs a command on the laptop as its user (HOME = the laptop home), with extra env.
    pub(crate) fn laptop(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Out {
        let mut cmd = Command::new(self.script());
        cmd.args(["exec", "laptop"]);
        for (k, v) in env {
            cmd.arg("--env").arg(format!("{k}={v}"));
        }
        cmd.arg("--").args(args);
        self.run(cmd, stdin)
    }

    /// Runs a command as root on the systemd host (`scripts/systemd-host exec`), when it is up.
    pub(crate) fn systemd_host(&self, args: &[&str], stdin: Option<&[u8]>) -> Out {
        self.nspawned(&[], args, stdin)
    }

    /// Runs a command as root on the laptop that boots systemd (`scripts/systemd-host laptop
    /// exec`), when it is up.
    pub(crate) fn systemd_laptop(&self, args: &[&str], stdin: Option<&[u8]>) -> Out {
        self.nspawned(&["laptop"], args, stdin)
    }

    fn nspawned(&self, machine: &[&str], args: &[&str], stdin: Option<&[u8]>) -> Out {
        let mut cmd = Command::new(self.repo.join("scripts/systemd-host"));
        cmd.args(machine).args(["exec", "--"]).args(args);
        self.run(cmd, stdin)
    }

    /// Runs a command on the server, as root or as `user`.
    pub(crate) fn server(&self, user: Option<&str>, args: &[&str], stdin: Option<&[u8]>) -> Out {
        let mut cmd = Command::new(self.script());
        cmd.args(["exec", "server"]);
        if let Some(u) = user {
            cmd.args(["--user", u]);
        }
        cmd.arg("--").args(args);
        self.run(cmd, stdin)
    }

    /// Runs `shiqi-ca-agent ARGS` on the server as the login user, as SSH would.
    pub(crate) fn agent(&self, args: &[&str], stdin: Option<&[u8]>) -> Out {
        let user = self.info("server_user").to_owned();
        let mut full = vec![self.info("agent_bin")];
        full.extend_from_slice(args);
        self.server(Some(&user), &full, stdin)
    }

    /// Runs a Kafka tool class from the fetched jars on the server, as root.
    pub(crate) fn kafka_tool(&self, class: &str, args: &[&str]) -> Out {
        let full = self.java_command(class, args);
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        self.server(None, &full, None)
    }

    /// As [`Stack::kafka_tool`], with `stdin` (a console producer's records).
    pub(crate) fn kafka_tool_stdin(&self, class: &str, args: &[&str], stdin: &[u8]) -> Out {
        let full = self.java_command(class, args);
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        self.server(None, &full, Some(stdin))
    }

    /// `java … CLASS ARGS` with the fetched Kafka jars on the class path and the tools' log4j
    /// config (log to stderr only), for either host.
    pub(crate) fn java_command(&self, class: &str, args: &[&str]) -> Vec<String> {
        let log4j = self.repo.join("scripts/kafka/log4j2-tools.properties");
        let mut full: Vec<String> = [
            "java",
            "-Xmx192m",
            "-XX:TieredStopAtLevel=1",
            &format!("-Dlog4j2.configurationFile={}", log4j.display()),
            "-cp",
            &format!("{}/*", self.info("kafka_libs")),
            class,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        full.extend(args.iter().map(|s| (*s).to_owned()));
        full
    }

    /// A folder for one test's files, readable by every stack user (certs for tools that run
    /// as root or as the laptop user). Removed when dropped.
    pub(crate) fn scratch(&self) -> tempfile::TempDir {
        let dir = tempfile::Builder::new()
            .prefix("shiqi-e2e-")
            .tempdir_in(std::env::temp_dir())
            .expect("temp dir");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        dir
    }
}

/// A name no other test (or earlier run against the same stack) has used.
pub(crate) fn unique_name(prefix: &str) -> String {
    let n: u32 = std::process::id()
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0));
    format!("{prefix}-{:06x}", n & 0xff_ffff)
}

/// Whether a mysql/mariadb client's error is the server refusing its certificate. Under TLS 1.3
/// the server judges the client certificate after the handshake, so the client sees either the
/// alert (`certificate revoked`, a `TLS/SSL error`) or, when it is already sending its login,
/// only the reset: `Lost connection to server at 'sending authentication information'`.
pub(crate) fn refused_at_tls(stderr: &str) -> bool {
    stderr.contains("certificate revoked")
        || stderr.contains("TLS")
        || stderr.contains("Lost connection to server at 'sending authentication information'")
}

/// A broker-only Kafka node N (4-9) started with `extra` properties appended to its config
/// (`SHIQI_KAFKA_NODE_EXTRA`, e.g. a setting broken on purpose); stopped, unregistered and its
/// data deleted when dropped (`scripts/stack kafka-node down N --purge`).
pub(crate) struct ExtraBroker<'a> {
    stack: &'a Stack,
    n: String,
}

impl<'a> ExtraBroker<'a> {
    pub(crate) fn start(stack: &'a Stack, n: u8, extra: &[&str]) -> Self {
        let guard = Self {
            stack,
            n: n.to_string(),
        };
        let out = Command::new(stack.script())
            .args(["kafka-node", "up", &guard.n])
            .env("SHIQI_KAFKA_NODE_EXTRA", extra.join("\n"))
            .output()
            .expect("scripts/stack runs");
        assert!(
            out.status.success(),
            "kafka-node up {n} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        guard
    }
}

impl Drop for ExtraBroker<'_> {
    fn drop(&mut self) {
        let _ = Command::new(self.stack.script())
            .args(["kafka-node", "down", &self.n, "--purge"])
            .output();
    }
}
