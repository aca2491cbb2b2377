//! The start-up every command that attaches BPF shares (`watch` and
//! `events`): which CPUs, the privileges and BTF it needs, this thread
//! pinned to the housekeeping CPUs (every thread spawned from here inherits
//! it; probes re-pin themselves), and the kernel's symbols. Each failure is
//! one line that says what to do.

use crate::say::say;
use std::path::Path;

use anyhow::{Context, Result};

use crate::caps::Wants;
use crate::cpulock::{self, CpuLocks};
use crate::engine::{IdleStates, Namer};
use crate::kallsyms::Kallsyms;
use crate::{checks, cpulist, sys};

pub struct Prepared {
    pub cpus: Vec<usize>,
    pub housekeeping: Vec<usize>,
    /// The kernel's symbols and idle states, read once here: the host facts
    /// the engine names causes with.
    pub namer: Namer,
    /// The watched CPUs' locks, when the command spins on them.
    pub locks: Option<CpuLocks>,
}

/// `own`: the command will spin on the CPUs, so it takes their locks;
/// `wants`: what else it will do that takes a capability.
pub fn prepare(cpus_arg: Option<&str>, own: bool, wants: Wants) -> Result<Prepared> {
    let root = Path::new("/");
    // A probe owns its CPUs and jitterwatch needs one besides; what spins
    // nothing (passive mode, events) may watch every CPU and share them.
    let cpus = if own { checks::watched_cpus(root, cpus_arg)? } else { checks::existing_cpus(root, cpus_arg)? };
    let caps = checks::privileges(wants)?;
    checks::btf(root)?;
    // SAFETY: geteuid cannot fail.
    let place = cpulock::Place::system(unsafe { libc::geteuid() });
    let locks = if own { Some(cpulock::take(&place, &cpus)?) } else { None };
    let online = checks::online_cpus(root)?;
    let mut housekeeping = cpulist::housekeeping(&online, &cpus);
    if housekeeping.is_empty() {
        housekeeping = online;
    }
    // Off the CPUs other instances watch, when that leaves any.
    let others = cpulock::held_by_others(&place, &cpus);
    if housekeeping.iter().any(|c| !others.contains(c)) {
        housekeeping.retain(|c| !others.contains(c));
    }
    sys::pin_to(&housekeeping).context("cannot pin jitterwatch to the unwatched CPUs")?;
    // Unreadable, every function shows as an address: degraded, not
    // fatal. Readable but all zeros is a missing CAP_SYSLOG: refused.
    let kallsyms = Kallsyms::load(&root.join("proc/kallsyms")).unwrap_or_else(|_| Kallsyms::empty());
    if let Some(notice) = crate::caps::symbols(caps, kallsyms.len()).map_err(anyhow::Error::msg)? {
        say!("{notice}");
    }
    let namer = Namer::new(kallsyms, IdleStates::read(root));
    Ok(Prepared { cpus, housekeeping, namer, locks })
}

/// Says once which tracepoints this kernel lacks (their programs were not
/// loaded; the rest works).
pub fn say_missing(missing: &[&str]) {
    if !missing.is_empty() {
        say!("not traced, this kernel lacks: {}", missing.join(", "));
    }
}
