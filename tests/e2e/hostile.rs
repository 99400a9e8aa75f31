//! A hostile server: a wrapper around the real agent rewrites one field of its JSON answer at a
//! time — a newline that would add an ssh `Match exec` line, a quote, a terminal escape, ten
//! kilobytes — and `setup`, `tunnel up` and `rotate` must refuse the answer with one error
//! naming the field, change nothing on the laptop, and run nothing.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::setup::Home;
use crate::stack::{Out, Stack, stack, unique_name};

/// The wrapper: runs the real agent, then, when the spec file names this subcommand, replaces
/// the Nth string (or number) leaf of its JSON answer. Arrays are walked at index 0 only: their
/// other elements have the same type. It records how many leaves the answer had, so the test
/// knows when it has covered them all.
const WRAPPER: &str = r#"#!/usr/bin/env python3
import json, subprocess, sys
spec_path, agent, args = sys.argv[1], sys.argv[2], sys.argv[3:]
run = subprocess.run([agent] + args, input=sys.stdin.buffer.read(), capture_output=True)
sys.stderr.buffer.write(run.stderr)
with open(spec_path) as f:
    spec = json.load(f)
out = run.stdout
if spec.get("op") == (args[0] if args else None) and out.strip():
    doc = json.loads(out)
    leaves = []
    def walk(node, path):
        if isinstance(node, dict):
            for k in sorted(node):
                walk(node[k], path + [k])
        elif isinstance(node, list):
            if node:
                walk(node[0], path + [0])
        elif isinstance(node, str) and spec["kind"] == "string":
            leaves.append(path)
        elif isinstance(node, int) and not isinstance(node, bool) and spec["kind"] == "number" and path[-1] == "port":
            leaves.append(path)
    walk(doc, [])
    with open(spec_path + ".count", "w") as f:
        f.write(str(len(leaves)))
    if spec["index"] < len(leaves):
        path = leaves[spec["index"]]
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        old = parent[path[-1]]
        parent[path[-1]] = spec["value"] if spec["kind"] == "number" else old + spec["value"]
        with open(spec_path + ".field", "w") as f:
            f.write(".".join(str(p) for p in path))
    out = (json.dumps(doc) + "\n").encode()
sys.stdout.buffer.write(out)
sys.exit(run.returncode)
"#;

/// A hostile agent on the server, and a marker file its injected commands would create.
struct Hostile {
    dir: tempfile::TempDir,
}

impl Hostile {
    fn new(s: &Stack) -> Self {
        let dir = s.scratch();
        // The wrapper runs as the server's login user and writes its counts here; an injected
        // command would run as the laptop user and touch the marker here.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let wrapper = dir.path().join("hostile-agent");
        std::fs::write(&wrapper, WRAPPER).expect("wrapper");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let h = Self { dir };
        h.pass_through();
        h
    }

    fn spec(&self) -> PathBuf {
        self.dir.path().join("spec.json")
    }

    fn marker(&self) -> PathBuf {
        self.dir.path().join("pwned")
    }

    /// `--agent-command` for setup: the wrapper, its spec file and the real agent.
    fn command(&self, s: &Stack) -> String {
        format!(
            "{} {} {}",
            self.dir.path().join("hostile-agent").display(),
            self.spec().display(),
            s.info("agent_via_sudo")
        )
    }

    fn pass_through(&self) {
        self.set(&serde_json::json!({}));
    }

    fn set(&self, spec: &serde_json::Value) {
        for extra in [".count", ".field"] {
            let _ = std::fs::remove_file(format!("{}{extra}", self.spec().display()));
        }
        std::fs::write(self.spec(), spec.to_string()).expect("spec");
        std::fs::set_permissions(self.spec(), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
    }

    /// How many leaves the last answer had, and which one was changed.
    fn last(&self) -> (Option<usize>, Option<String>) {
        let read =
            |extra: &str| std::fs::read_to_string(format!("{}{extra}", self.spec().display())).ok();
        (
            read(".count").and_then(|c| c.trim().parse().ok()),
            read(".field"),
        )
    }
}

/// Every hostile value, appended to the field's real value (numbers replace it).
fn payloads(marker: &Path) -> Vec<(&'static str, String)> {
    let m = marker.display();
    vec![
        (
            "newline",
            format!("\nMatch exec \"touch {m}\"\nProxyCommand touch {m}\n[mysql]\npager=touch {m}"),
        ),
        ("quote", "\"' #".to_owned()),
        ("escape", "\u{1b}]0;owned\u{7}\u{1b}[2J\r".to_owned()),
        ("long", "a".repeat(10_000)),
    ]
}

/// Every file under `dir`, with its bytes (a tunnel's pid, log and socket left out).
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .is_none_or(|x| x != "sock" && x != "pid" && x != "log")
            {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// Checks one refused run: exit 2, one `error:` line naming `field`, no control character
/// from the server on the terminal.
#[track_caller]
fn refused_naming(out: &Out, field: &str, case: &str) {
    assert_eq!(
        out.code,
        Some(2),
        "{case}: expected a refusal:\n{}",
        out.all()
    );
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{case}: one error line:\n{}", out.stderr);
    // The wire path's last part, as the client names it (`brokers[0].host` for `brokers.0.host`).
    let last = field
        .rsplit('.')
        .find(|p| p.parse::<usize>().is_err())
        .unwrap_or(field);
    let report: String = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:") || l.trim_start().starts_with("caused by:"))
        .collect();
    assert!(
        report.contains(last),
        "{case}: the error names `{field}`:\n{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains('\u{1b}') && !out.stderr.contains('\r'),
        "{case}: a server's escape sequence reached the terminal:\n{:?}",
        out.stderr
    );
}

/// Runs `run` once per leaf of `op`'s answer and payload; `check` judges each result. The
/// first run of each kind tells how many leaves there are, so no run goes unmutated (an
/// unmutated `rotate` would really rotate).
fn each_case(
    h: &Hostile,
    op: &str,
    kinds: &[&str],
    mut run: impl FnMut() -> Out,
    mut check: impl FnMut(&Out, &str, &str),
) -> usize {
    let mut specs: Vec<(String, serde_json::Value)> = Vec::new();
    for (label, value) in payloads(&h.marker()) {
        if kinds.contains(&label) {
            specs.push((
                format!("+ {label}"),
                serde_json::json!({"kind": "string", "value": value}),
            ));
        }
    }
    for bad_port in [0, 70_000] {
        specs.push((
            format!("= {bad_port}"),
            serde_json::json!({"kind": "number", "value": bad_port}),
        ));
    }
    let mut cases = 0;
    for (label, mut spec) in specs {
        let mut index = 0;
        loop {
            spec["op"] = op.into();
            spec["index"] = index.into();
            h.set(&spec);
            let out = run();
            let (count, field) = h.last();
            let count =
                count.unwrap_or_else(|| panic!("{op}: the wrapper saw no answer:\n{}", out.all()));
            let Some(field) = field else {
                assert_eq!(count, 0, "{op}: leaf {index} was not changed");
                break;
            };
            check(&out, &field, &format!("{op} {field} {label}"));
            cases += 1;
            index += 1;
            if index >= count {
                break;
            }
        }
    }
    h.pass_through();
    cases
}

#[test]
fn a_hostile_agent_is_refused_field_by_field_and_changes_nothing() {
    let s = stack();
    let home = Home::new(s, "hostile");
    let h = Hostile::new(s);
    let agent = h.command(s);

    // setup: every field of provision's answer (certificate, Kafka ACLs, MySQL user), every
    // payload.
    let fresh = unique_name("hs");
    let setup_cases = each_case(
        &h,
        "provision",
        &["newline", "quote", "escape", "long"],
        || {
            // An accepted quote leaves a profile; start clean each time.
            let _ = std::fs::remove_dir_all(home.profile(&fresh));
            home.setup_at(
                s,
                s.info("shell_destination"),
                &fresh,
                &["--agent-command", &agent],
            )
        },
        |out, field, case| {
            if out.success() {
                // Only display-only free text may carry a quote; nothing of it reaches a file.
                assert!(
                    case.ends_with("+ quote"),
                    "{case}: accepted:\n{}",
                    out.all()
                );
                let written = snapshot(&home.profile(&fresh));
                for (path, bytes) in &written {
                    assert!(
                        !String::from_utf8_lossy(bytes).contains("\"' #"),
                        "{case}: the server's text reached {}",
                        path.display()
                    );
                }
                std::fs::remove_dir_all(home.profile(&fresh)).expect("clean");
                return;
            }
            refused_naming(out, field, case);
            assert!(
                home.leftovers(&fresh).is_empty(),
                "{case}: {:?}",
                home.leftovers(&fresh)
            );
        },
    );

    // A good profile through the same wrapper, then hostile `tunnel up` and `rotate`.
    let name = unique_name("hp");
    home.setup_at(
        s,
        s.info("shell_destination"),
        &name,
        &["--agent-command", &agent],
    )
    .ok();
    let dir = home.profile(&name);
    let before = snapshot(&dir);
    let unchanged = |case: &str| {
        let after = snapshot(&dir);
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "{case}: the profile's files changed"
        );
        for (p, bytes) in &before {
            assert!(
                after.get(p) == Some(bytes),
                "{case}: {} changed",
                p.display()
            );
        }
        assert!(
            home.leftovers(&name).iter().all(|f| f == &name),
            "{case}: {:?}",
            home.leftovers(&name)
        );
    };
    let tunnel_cases = each_case(
        &h,
        "brokers",
        &["newline", "quote", "escape", "long"],
        || {
            let out = home.connect(s, &["tunnel", "up", &name]);
            let _ = home.connect(s, &["tunnel", "down", &name]);
            out
        },
        |out, field, case| {
            refused_naming(out, field, case);
            unchanged(case);
        },
    );
    let rotate_cases = each_case(
        &h,
        "sign",
        &["newline", "long"],
        || home.connect(s, &["rotate", &name]),
        |out, field, case| {
            refused_naming(out, field, case);
            unchanged(case);
        },
    );

    // Nothing ran: not during the runs, and not when OpenSSH reads the profile's ssh_config.
    let ssh_config = dir.join("ssh_config").display().to_string();
    s.laptop(&["ssh", "-G", "-F", &ssh_config, "shiqi-tunnel"], &[], None)
        .ok();
    assert!(!h.marker().exists(), "an injected command ran");
    eprintln!(
        "hostile agent: {setup_cases} setup, {tunnel_cases} tunnel up, {rotate_cases} rotate cases refused"
    );
    assert!(setup_cases >= 60 && tunnel_cases >= 8 && rotate_cases >= 20);
}
