//! `cargo xtask vmlinux`: regenerate bpf/x86/vmlinux.h from the running
//! kernel's BTF. Written to a temp file and renamed, so a failed dump never
//! leaves a truncated header behind.

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::proc;

const BTF: &str = "/sys/kernel/btf/vmlinux";

pub fn run() -> Result<()> {
    if !Path::new(BTF).exists() {
        bail!("{BTF} is missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y is needed)");
    }
    let bpftool = proc::which("bpftool").context("bpftool not found (`cargo xtask deps` installs it)")?;

    let dir = proc::root().join("bpf/x86");
    let dest = dir.join("vmlinux.h");
    let tmp = dir.join(".vmlinux.h.tmp");
    let out = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;

    let mut cmd = Command::new(bpftool);
    cmd.args(["btf", "dump", "file", BTF, "format", "c"]).stdout(Stdio::from(out));
    let result = proc::check(&mut cmd).and_then(|()| {
        let text = fs::read_to_string(&tmp).with_context(|| format!("reading {}", tmp.display()))?;
        if !text.contains("#ifndef __VMLINUX_H__") {
            bail!("`{}` wrote no vmlinux.h header", proc::show(&cmd));
        }
        let lines = text.lines().count();
        // Leave an identical header untouched: a new mtime would make
        // build.rs (rerun-if-changed) rebuild the BPF object for nothing.
        if fs::read_to_string(&dest).is_ok_and(|old| old == text) {
            fs::remove_file(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
            return Ok((lines, false));
        }
        fs::rename(&tmp, &dest).with_context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
        Ok((lines, true))
    });
    match result {
        Ok((lines, changed)) => {
            let what = if changed { "wrote" } else { "unchanged:" };
            println!("vmlinux: {what} bpf/x86/vmlinux.h ({lines} lines) from {BTF}");
            Ok(())
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}
