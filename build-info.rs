//! The build script of both binaries (`build = "../build-info.rs"`): `--version` names the
//! commit they were built from and the target they run on (`shiqi_ca::version!`).

#![allow(
    clippy::print_stdout,
    reason = "a build script talks to cargo on stdout"
)]

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown commit".to_owned());
    // `scripts/dist --allow-dirty` marks a build from a tree with uncommitted changes.
    let suffix = std::env::var("SHIQI_COMMIT_SUFFIX").unwrap_or_default();
    println!("cargo:rustc-env=SHIQI_COMMIT={commit}{suffix}");
    println!("cargo:rerun-if-env-changed=SHIQI_COMMIT_SUFFIX");
    println!(
        "cargo:rustc-env=SHIQI_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    // Again after a commit or a checkout, not on every edit.
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/refs/heads");
    println!("cargo:rerun-if-changed=../.git/packed-refs");
}
