//! Passive mode (`--pid`, `--tid`, `--comm`): no probe; the application's
//! own threads are watched, and every time one wanted its CPU and did not
//! have it, that interval is attributed as a probe's gap would be. This
//! module finds the threads and the CPUs they may run on; `tracker` turns
//! the kernel's events into intervals.

mod classes;
mod filter;
mod thread;
mod tracker;

use std::fs;
use std::path::Path;

use anyhow::{bail, Result};

pub use classes::Classes;
pub use filter::Filter;
pub use thread::{Booked, Books, Found, ThreadInfo};
pub use tracker::Tracker;

use crate::cpulist;
use crate::procfs::{allowed_cpus, parse_stat};
use crate::sanitize::visible_bytes;

/// Passive mode's default threshold: there is no loop floor to scale.
pub const DEFAULT_THRESHOLD_NS: u64 = 1_000;

/// What passive mode cannot see, said in every summary.
pub const HOST_PAUSES: &str = "passive mode: time the host (hypervisor) or firmware takes is invisible without a probe (no kernel event covers it); run with the probe to see it";

/// What the command line asked to watch, resolved against /proc.
#[derive(Debug)]
pub struct Target {
    pub filter: Filter,
    /// The CPUs to watch: the threads' affinity, or `--cpus`.
    pub cpus: Vec<usize>,
    /// Threads found at start (tid, escaped name), for the start-up line.
    pub threads: Vec<(u32, String)>,
    /// The same threads' (tgid, tid), to look for them again once attached.
    pub found: Vec<(u32, u32)>,
    /// Said once at start (threads partly outside `--cpus`).
    pub notes: Vec<String>,
}

fn read(root: &Path, rel: &str) -> Option<String> {
    fs::read_to_string(root.join(rel)).ok()
}

/// (flags, comm) from /proc/…/stat.
fn stat(root: &Path, rel: &str) -> Option<(u64, Vec<u8>)> {
    let st = parse_stat(&fs::read(root.join(rel)).ok()?)?;
    Some((st.flags, st.comm))
}

fn affinity(root: &Path, pid: u32, tid: u32) -> Option<Vec<usize>> {
    allowed_cpus(&read(root, &format!("proc/{pid}/task/{tid}/status"))?)
}

fn tasks(root: &Path, pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = fs::read_dir(root.join(format!("proc/{pid}/task")))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

fn pids(root: &Path) -> Vec<u32> {
    fs::read_dir(root.join("proc"))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Resolves the threads to watch and their CPUs. `cpus_arg`: `--cpus`, if
/// given; `online`: the online CPUs.
pub fn resolve(root: &Path, filter: Filter, cpus_arg: Option<&[usize]>, online: &[usize]) -> Result<Target> {
    let mut found: Vec<(u32, u32, Vec<u8>)> = Vec::new();
    // Kernel threads are watched like any other (osnoise/N, ksoftirqd/N):
    // --tid, --pid and --comm agree on them.
    let task = |pid: u32, what: &str| -> Result<(u64, Vec<u8>)> {
        let Some((flags, comm)) = stat(root, &format!("proc/{pid}/stat")) else {
            bail!("{what} {pid}: no such process");
        };
        Ok((flags, comm))
    };
    for &pid in &filter.tgids {
        task(pid, "--pid")?;
        for tid in tasks(root, pid) {
            if let Some((_, comm)) = stat(root, &format!("proc/{pid}/task/{tid}/stat")) {
                found.push((pid, tid, comm));
            }
        }
    }
    for &tid in &filter.tids {
        let (_, comm) = task(tid, "--tid")?;
        // /proc/TID works for any thread; its process is its Tgid.
        let tgid = read(root, &format!("proc/{tid}/status"))
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(tid);
        found.push((tgid, tid, comm));
    }
    if let Some(name) = &filter.comm {
        for pid in pids(root) {
            for tid in tasks(root, pid) {
                if let Some((_, comm)) = stat(root, &format!("proc/{pid}/task/{tid}/stat")) {
                    if &comm == name {
                        found.push((pid, tid, comm));
                    }
                }
            }
        }
        if found.is_empty() && cpus_arg.is_none() {
            bail!(
                "--comm {}: no thread has that name; start the application first, or give --cpus to wait for it there",
                visible_bytes(name)
            );
        }
    }
    found.sort_by_key(|f| f.1);
    found.dedup_by_key(|f| f.1);
    let mut notes = Vec::new();
    let cpus = match cpus_arg {
        Some(c) => {
            for (pid, tid, comm) in &found {
                if let Some(a) = affinity(root, *pid, *tid).filter(|a| a.iter().any(|x| !c.contains(x))) {
                    notes.push(format!(
                        "{}[{tid}] may also run on CPUs {} outside --cpus: only its time on CPUs {} is watched",
                        visible_bytes(comm),
                        cpulist::Display(&a.iter().copied().filter(|x| !c.contains(x)).collect::<Vec<_>>()),
                        cpulist::Display(c)
                    ));
                }
            }
            c.to_vec()
        }
        None => {
            let mut all: Vec<usize> =
                found.iter().filter_map(|(p, t, _)| affinity(root, *p, *t)).flatten().filter(|c| online.contains(c)).collect();
            all.sort_unstable();
            all.dedup();
            if all.is_empty() {
                bail!("cannot read the CPU affinity of the watched threads: give --cpus");
            }
            // Passive mode spins nothing: both ends of a load (a server
            // and its client, pinned apart) may take every CPU.
            if online.iter().all(|c| all.contains(c)) {
                notes.push(every_cpu_note(&all));
            }
            all
        }
    };
    let threads = found.iter().map(|(_, tid, comm)| (*tid, visible_bytes(comm))).collect();
    let found = found.iter().map(|&(tgid, tid, _)| (tgid, tid)).collect();
    Ok(Target { filter, cpus, threads, found, notes })
}

/// A watched thread running (or runnable) on a watched CPU when tracing
/// began: on an isolated CPU it may never switch, so no event would ever
/// say it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seed {
    pub tid: u32,
    pub tgid: u32,
    pub comm: crate::record::Comm,
    pub cpu: u32,
}

/// What /proc says, once attached, of the threads found at start.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AtAttach {
    /// Running or runnable on a watched CPU.
    pub running: Vec<Seed>,
    /// Found at start, gone by the time tracing began: (tid, escaped name).
    pub gone: Vec<(u32, String)>,
}

impl AtAttach {
    /// The threads found at start still there once tracing began, as
    /// (tid, `comm[tid]`): the screen counts (and lists) every watched
    /// thread, also one that has not run on a watched CPU yet.
    pub fn found(&self, t: &Target) -> Vec<(u32, String)> {
        t.threads
            .iter()
            .filter(|(tid, _)| !self.gone.iter().any(|g| g.0 == *tid))
            .map(|(tid, name)| (*tid, format!("{name}[{tid}]")))
            .collect()
    }
}

/// Looks at the threads `t` found again, now that tracing has begun.
pub fn at_attach(root: &Path, t: &Target) -> AtAttach {
    let mut r = AtAttach::default();
    for (&(tgid, tid), (_, name)) in t.found.iter().zip(&t.threads) {
        let Some(st) = fs::read(root.join(format!("proc/{tgid}/task/{tid}/stat"))).ok().and_then(|b| parse_stat(&b)) else {
            r.gone.push((tid, name.clone()));
            continue;
        };
        match st.last_cpu {
            Some(cpu) if st.state == b'R' && t.cpus.contains(&cpu) => {
                let mut comm = [0u8; crate::record::COMM_LEN];
                let n = st.comm.len().min(comm.len() - 1);
                comm[..n].copy_from_slice(&st.comm[..n]);
                r.running.push(Seed { tid, tgid, comm, cpu: cpu as u32 });
            }
            _ => {}
        }
    }
    r
}

/// The start-up lines: what is watched and how each thread was found, or
/// that nothing matches yet and what it waits for.
pub fn start_lines(t: &Target, at: &AtAttach, threshold_ns: u64) -> Vec<String> {
    let cpus = cpulist::Display(&t.cpus);
    let alive = t.threads.len() - at.gone.len();
    let mut lines = vec![if alive == 0 {
        let what = match &t.filter.comm {
            Some(c) => format!("a thread named {}", visible_bytes(c)),
            None => "a thread of the watched processes".to_string(),
        };
        format!("passive: no thread matches yet: waiting for {what} to run on CPU {cpus} (no probe; threshold {threshold_ns} ns)")
    } else {
        let names: Vec<&str> =
            t.threads.iter().filter(|(tid, _)| !at.gone.iter().any(|g| g.0 == *tid)).map(|(_, n)| n.as_str()).take(8).collect();
        let more = alive.saturating_sub(names.len());
        format!(
            "passive: watching {alive} thread{} ({}{}) on CPU {cpus}, no probe; threshold {threshold_ns} ns; host pauses are invisible without a probe",
            if alive == 1 { "" } else { "s" },
            names.join(", "),
            if more > 0 { format!(", {more} more") } else { String::new() },
        )
    }];
    for s in &at.running {
        lines.push(format!(
            "passive: {}[{}] is running on CPU {} (read from /proc at attach): watched from now, no context switch needed",
            visible_bytes(&s.comm[..s.comm.iter().position(|&b| b == 0).unwrap_or(s.comm.len())]),
            s.tid,
            s.cpu
        ));
    }
    for (tid, name) in &at.gone {
        lines.push(format!("passive: {name}[{tid}] ended before tracing began: it is not watched"));
    }
    lines.extend(t.notes.iter().cloned());
    lines
}

/// Said when the watched CPUs are every online CPU: jitterwatch's own
/// threads run among the watched ones, and their time is named as such.
fn every_cpu_note(cpus: &[usize]) -> String {
    format!(
        "watching every online CPU ({}): jitterwatch's own threads share them, and a watched thread's time lost to them is `self`",
        cpulist::Display(cpus)
    )
}

/// `resolve` on the live system, `--cpus` parsed and checked first (every
/// online CPU may be given: passive mode spins nothing).
pub fn target(root: &Path, filter: Filter, cpus_arg: Option<&str>) -> Result<Target> {
    let online = crate::checks::online_cpus(root)?;
    let given = match cpus_arg {
        Some(a) => Some(crate::checks::existing_cpus(root, Some(a))?),
        None => None,
    };
    resolve(root, filter, given.as_deref(), &online)
}

/// Watches for the `--pid` processes and `--tid` threads to exit: each is
/// said once; when none is left, the run ends (as a stop request).
pub struct Exits {
    said: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl Exits {
    /// The summary's note, if every watched process exited.
    pub fn note(&self) -> Option<String> {
        self.said.lock().ok()?.clone()
    }
}

pub fn watch_exits(t: &Target) -> Exits {
    let said = std::sync::Arc::new(std::sync::Mutex::new(None));
    let ids: Vec<(u32, &'static str)> =
        t.filter.tgids.iter().map(|&p| (p, "process")).chain(t.filter.tids.iter().map(|&p| (p, "thread"))).collect();
    if !ids.is_empty() {
        let out = said.clone();
        let _ = std::thread::Builder::new().name("jw-exits".into()).spawn(move || {
            let mut gone = vec![false; ids.len()];
            while !crate::lifecycle::stop_requested() {
                std::thread::sleep(std::time::Duration::from_millis(100));
                for (i, &(id, what)) in ids.iter().enumerate() {
                    if !gone[i] && !Path::new(&format!("/proc/{id}")).exists() {
                        gone[i] = true;
                        crate::say::say!("watched {what} {id} exited");
                    }
                }
                if gone.iter().all(|&g| g) {
                    let note = "every watched process and thread exited: the run ended there".to_string();
                    crate::say::say!("{note}");
                    if let Ok(mut s) = out.lock() {
                        *s = Some(note);
                    }
                    crate::lifecycle::request_stop();
                    return;
                }
            }
        });
    }
    Exits { said }
}

#[cfg(test)]
mod tests;
