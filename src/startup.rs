//! The start-up every command that attaches BPF shares (`watch` and
//! `events`): which CPUs, the privileges and BTF it needs, this thread
//! pinned to the housekeeping CPUs (every thread spawned from here inherits
//! it; probes re-pin themselves), and the kernel's symbols. Each failure is
//! one line that says what to do.

use crate::say::say;
use std::path::Path;

use anyhow::{Context, Result};

use crate::kallsyms::Kallsyms;
use crate::{checks, cpulist, sys};

pub struct Prepared {
    pub cpus: Vec<usize>,
    pub housekeeping: Vec<usize>,
    pub kallsyms: Kallsyms,
}

pub fn prepare(cpus_arg: Option<&str>) -> Result<Prepared> {
    let root = Path::new("/");
    let cpus = checks::watched_cpus(root, cpus_arg)?;
    checks::privileges()?;
    checks::btf(root)?;
    let housekeeping = cpulist::housekeeping(&checks::online_cpus(root)?, &cpus);
    sys::pin_to(&housekeeping).context("cannot pin jitterwatch to the unwatched CPUs")?;
    // Without it every function shows as an address: degraded, not fatal.
    let kallsyms = Kallsyms::load(Path::new("/proc/kallsyms")).unwrap_or_else(|_| Kallsyms::empty());
    Ok(Prepared { cpus, housekeeping, kallsyms })
}

/// Says once which tracepoints this kernel lacks (their programs were not
/// loaded; the rest works).
pub fn say_missing(missing: &[&str]) {
    if !missing.is_empty() {
        say!("not traced, this kernel lacks: {}", missing.join(", "));
    }
}
