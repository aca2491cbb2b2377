//! `cargo xtask build`: deps, then a release build of the workspace.

use anyhow::Result;

use crate::{deps, proc};

pub fn run() -> Result<()> {
    deps::ensure(false)?;
    proc::check(proc::cargo().args(["build", "--release"]))
}
