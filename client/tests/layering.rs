//! The laptop crate's layers (docs/design.md, "Layout"), checked against the code: a module may
//! use its own row and the rows below it, never a row above. A new upward `crate::…` path fails
//! here, naming the file, so the table and the imports cannot drift apart again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top to bottom, as design.md's table lists them; a row's modules may use each other.
const LAYERS: &[&[&str]] = &[
    &["main", "lib"],
    &["commands", "cli"],
    &["printer", "prompt"],
    &["doctor", "datagrip", "mysql_source"],
    &["tunnel"],
    &["ops"],
    &["steps"],
    &["agent"],
    &["profile"],
    &["probe"],
    &["ssh"],
    &["jdbc"],
    &["text", "clock", "fsutil", "error", "os"],
];

/// Edges the rows above allow but the design does not: the tunnel's daemon works through
/// operations (`ops::renew`), never through their pieces; the error type and the OS seam, in
/// one row, know nothing of each other.
const FORBIDDEN: &[(&str, &str)] = &[("tunnel", "steps"), ("error", "os"), ("os", "error")];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code before its tests (`#[cfg(test)]`, or `#[cfg(all(test, …))]` for tests of one
/// operating system).
fn non_test(text: &str) -> &str {
    let end = ["#[cfg(test)]", "#[cfg(all(test"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules a file's non-test code names as `crate::X`. Tests sit at the end of
/// each file behind `#[cfg(test)]` and may reach anywhere; comments (doc links) do not count.
fn uses(text: &str) -> BTreeSet<String> {
    let code = non_test(text);
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under src",
        files.len()
    );
    let mut upward = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap_or(file);
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_owned();
        let Some(own) = layer_of(&top) else {
            upward.push(format!(
                "{}: module `{top}` is in no layer",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for used in uses(&text) {
            if FORBIDDEN.contains(&(top.as_str(), used.as_str())) {
                upward.push(format!(
                    "{}: `{top}` uses `crate::{used}`, which the design forbids",
                    relative.display()
                ));
            }
            match layer_of(&used) {
                Some(layer) if layer >= own => {}
                Some(_) => upward.push(format!(
                    "{}: `{top}` uses `crate::{used}`, a layer above it",
                    relative.display()
                )),
                None => upward.push(format!(
                    "{}: `crate::{used}` is in no layer",
                    relative.display()
                )),
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against docs/design.md's layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_scan_sees_paths_and_skips_tests_and_comments() {
    let text = "use crate::ssh::auth;\nlet x = crate::probe::kafka::x();\n\
                /// [`crate::commands`] prints it.\n#[cfg(test)]\nmod tests { use crate::cli; }\n";
    assert_eq!(uses(text).into_iter().collect::<Vec<_>>(), ["probe", "ssh"]);
}

/// The workspace's crates, each with the crates of ours it may depend on (docs/design.md's
/// crate table): the CA library, the templates and the Kafka wire at the bottom, the two
/// binaries above them, the laptop never linking the server's agent.
const CRATES: &[(&str, &[&str])] = &[
    ("ca", &[]),
    ("render", &[]),
    ("kafka", &[]),
    ("server-agent", &["shiqi-ca", "shiqi-render", "shiqi-kafka"]),
    ("client", &["shiqi-ca", "shiqi-render", "shiqi-kafka"]),
];

/// The `shiqi-*` names a manifest's dependency tables mention.
fn our_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut in_dependencies = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line.ends_with("dependencies]");
        } else if in_dependencies && line.starts_with("shiqi-") {
            let name = line.split(['.', ' ', '=']).next().unwrap_or_default();
            found.insert(name.to_owned());
        }
    }
    found
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = Vec::new();
    for (folder, allowed) in CRATES {
        let manifest = std::fs::read_to_string(root.join(folder).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{folder}/Cargo.toml: {e}"));
        for name in our_dependencies(&manifest) {
            if !allowed.contains(&name.as_str()) {
                wrong.push(format!("{folder}/Cargo.toml depends on `{name}`"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "against docs/design.md's crate table:\n{}",
        wrong.join("\n")
    );
    let sample = "[dependencies]\nshiqi-ca.workspace = true\n[dev-dependencies]\n\
                  shiqi-connect = { workspace = true }\n[features]\nshiqi-x = []\n";
    assert_eq!(
        our_dependencies(sample).into_iter().collect::<Vec<_>>(),
        ["shiqi-ca", "shiqi-connect"]
    );
}

/// Lines of non-test code outside `src/profile/` that write `profile.json` by its name (test
/// support modules, `testing.rs` or `#![cfg(test)]`, may write fixtures).
fn profile_json_writers(relative: &Path, text: &str) -> Vec<String> {
    let test_support = relative
        .file_name()
        .is_some_and(|n| n == "testing.rs" || n == "tests.rs")
        || text.contains("#![cfg(test)]");
    if relative.starts_with("profile") || test_support {
        return Vec::new();
    }
    non_test(text)
        .lines()
        .enumerate()
        .map(|(n, line)| (n, line.split("//").next().unwrap_or_default()))
        .filter(|(_, line)| line.contains("PROFILE_JSON") || line.contains("\"profile.json\""))
        .filter(|(_, line)| {
            ["write", "rename", "copy", "create"]
                .iter()
                .any(|w| line.contains(w))
        })
        .map(|(n, line)| format!("{}:{}: {}", relative.display(), n + 1, line.trim()))
        .collect()
}

/// `profile.json` changes in place only through `profile::store::update`, under the profile's
/// lock (`Profile::save` is private to `profile/`); a second writer elsewhere fails here.
#[test]
fn profile_json_is_written_only_by_the_profile_store() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut writers = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap_or(file);
        let text = std::fs::read_to_string(file).unwrap_or_default();
        writers.extend(profile_json_writers(relative, &text));
    }
    assert!(
        writers.is_empty(),
        "profile.json written outside profile::store:\n{}",
        writers.join("\n")
    );
    let planted = "fn f(dir: &Path, p: &Profile) {\n    \
                   fsutil::write_private(&dir.join(files::PROFILE_JSON), b\"{}\");\n}\n";
    assert_eq!(
        profile_json_writers(Path::new("tunnel/refresh.rs"), planted).len(),
        1
    );
    assert!(profile_json_writers(Path::new("profile/store.rs"), planted).is_empty());
}

/// A cycle through `node`, if the graph has one reachable from it.
fn cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut found = path[at..].to_vec();
        found.push(node.to_owned());
        return Some(found);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_owned());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(c) = cycle(graph, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_owned());
    None
}

/// The first module cycle of the crate whose sources are in `src`, by top-level module (a
/// module's files and submodules are one node; the crate roots, which name every module, are
/// left out).
fn module_cycle(src: &Path) -> Option<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(src).unwrap_or(file);
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "main" || top == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let entry = graph.entry(top.clone()).or_default();
        entry.extend(uses(&text).into_iter().filter(|m| *m != top));
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| cycle(&graph, node, &mut Vec::new(), &mut done))
}

/// No crate of the workspace has modules that use each other in a circle (within a layer of
/// the table above too): each crate's modules can be read bottom to top.
#[test]
fn no_crate_has_a_module_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cycles = Vec::new();
    for (folder, _) in CRATES {
        if let Some(c) = module_cycle(&root.join(folder).join("src")) {
            cycles.push(format!("{folder}: {}", c.join(" → ")));
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(
        cycle(&graph, "a", &mut Vec::new(), &mut BTreeSet::new()),
        Some(vec!["a".to_owned(), "b".to_owned(), "a".to_owned()])
    );
}
