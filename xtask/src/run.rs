//! `cargo xtask run -- ARGS`: build as the user, run jitterwatch as root.

use anyhow::{bail, Result};

use crate::{deps, proc};

pub fn run(args: &[String]) -> Result<()> {
    // Not root: make sure sudo exists before spending time on a build.
    let sudo = if proc::is_root() { None } else { Some(proc::sudo()?) };
    deps::ensure(false)?;
    proc::check(proc::cargo().args(["build", "--release", "--bin", "jitterwatch"]))?;

    let bin = proc::target_dir().join("release/jitterwatch");
    if !bin.is_file() {
        bail!("{} is missing after the build", bin.display());
    }
    let mut cmd = match sudo {
        None => std::process::Command::new(&bin),
        Some(mut sudo) => {
            sudo.arg("-E").arg(&bin);
            sudo
        }
    };
    cmd.args(args);
    let st = proc::status(&mut cmd)?;
    if st.success() {
        Ok(())
    } else {
        Err(proc::ChildExit(proc::exit_code(st)).into())
    }
}
