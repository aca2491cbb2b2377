//! `cargo xtask build`: deps, then a release build of the workspace.

use anyhow::{bail, Result};

use crate::{deps, proc};

pub fn run(args: &[String]) -> Result<()> {
    if !args.is_empty() {
        bail!("build takes no arguments");
    }
    deps::ensure(false)?;
    proc::check(proc::cargo().args(["build", "--release"]))
}
