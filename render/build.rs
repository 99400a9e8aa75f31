//! Embeds every `templates/*.j2` of this crate: a new template is a new file, with no list to
//! keep in step. Writes `$OUT_DIR/templates.rs`, a `&[(name, source)]` sorted by name.

// A build script reports to cargo on stdout and fails by panicking: that is its interface.
#![allow(clippy::print_stdout, clippy::expect_used, clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // Read when the script runs, not baked in when it is compiled: two clones sharing one
    // target folder then each embed their own templates.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("templates");
    let dir = dir.as_path();
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the templates folder is readable")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".j2"))
        .collect();
    names.sort();
    let mut out = String::from("&[\n");
    for file in &names {
        let path = dir.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        let name = file.trim_end_matches(".j2");
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    out.push_str("]\n");
    let dest =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("templates.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
