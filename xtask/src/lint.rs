//! `cargo xtask lint`: the gates `cargo xtask test` runs first, so CI fails
//! on an unformatted tree or on any clippy warning. The lint levels beyond
//! clippy's defaults (`undocumented_unsafe_blocks`) live in the workspace's
//! Cargo.toml, so an editor's clippy sees the same ones.

use anyhow::{bail, Result};

use crate::proc;

pub fn run() -> Result<()> {
    ensure_components()?;
    if !proc::status(proc::cargo().args(["fmt", "--all", "--check"]))?.success() {
        bail!("the tree is not formatted: run `cargo fmt --all` (the diff is above)");
    }
    let clippy = ["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"];
    if !proc::status(proc::cargo().args(clippy))?.success() {
        bail!("clippy found problems (above); fix them, every warning is an error");
    }
    println!("lint: fmt and clippy clean");
    Ok(())
}

/// rustfmt and clippy come with rustup's default profile, not its minimal
/// one: add them when rustup is there, else say what is missing.
fn ensure_components() -> Result<()> {
    let has = |sub: &str| proc::cargo().args([sub, "--version"]).output().is_ok_and(|o| o.status.success());
    let missing: Vec<&str> = [("fmt", "rustfmt"), ("clippy", "clippy")].into_iter().filter(|(sub, _)| !has(sub)).map(|(_, c)| c).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if proc::which("rustup").is_none() {
        bail!("cargo {} missing and no rustup to add it: install your toolchain's {}", missing.join(" and "), missing.join(" and "));
    }
    println!("lint: adding rustup components {}", missing.join(" "));
    proc::check(std::process::Command::new("rustup").args(["component", "add"]).args(&missing))
}
