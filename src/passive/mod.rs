//! Passive mode (`--pid`, `--tid`, `--comm`): no probe; the application's
//! own threads are watched, and every time one wanted its CPU and did not
//! have it, that interval is attributed as a probe's gap would be. This
//! module finds the threads and the CPUs they may run on; `tracker` turns
//! the kernel's events into intervals.

mod filter;
mod tracker;

use std::fs;
use std::path::Path;

use anyhow::{bail, Result};

pub use filter::Filter;
pub use tracker::{ThreadInfo, Tracker};

use crate::cpulist;
use crate::procfs::{allowed_cpus, parse_stat, PF_KTHREAD};
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
    let user_task = |pid: u32, what: &str| -> Result<(u64, Vec<u8>)> {
        let Some((flags, comm)) = stat(root, &format!("proc/{pid}/stat")) else {
            bail!("{what} {pid}: no such process");
        };
        if flags & PF_KTHREAD != 0 {
            bail!(
                "{what} {pid} is a kernel thread ({}): passive mode watches user threads; use --cpus with the probe for kernel activity",
                visible_bytes(&comm)
            );
        }
        Ok((flags, comm))
    };
    for &pid in &filter.tgids {
        user_task(pid, "--pid")?;
        for tid in tasks(root, pid) {
            if let Some((_, comm)) = stat(root, &format!("proc/{pid}/task/{tid}/stat")) {
                found.push((pid, tid, comm));
            }
        }
    }
    for &tid in &filter.tids {
        let (_, comm) = user_task(tid, "--tid")?;
        // /proc/TID works for any thread; its process is its Tgid.
        let tgid = read(root, &format!("proc/{tid}/status"))
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(tid);
        found.push((tgid, tid, comm));
    }
    if let Some(name) = &filter.comm {
        for pid in pids(root) {
            for tid in tasks(root, pid) {
                if let Some((flags, comm)) = stat(root, &format!("proc/{pid}/task/{tid}/stat")) {
                    if flags & PF_KTHREAD == 0 && &comm == name {
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
            if online.iter().all(|c| all.contains(c)) {
                bail!(
                    "the watched threads may run on every online CPU ({}): pin them (taskset, isolcpus) or give --cpus, so jitterwatch keeps a CPU of its own",
                    cpulist::Display(&all)
                );
            }
            all
        }
    };
    let threads = found.iter().map(|(_, tid, comm)| (*tid, visible_bytes(comm))).collect();
    Ok(Target { filter, cpus, threads, notes })
}

/// `resolve` on the live system, `--cpus` parsed and checked first.
pub fn target(root: &Path, filter: Filter, cpus_arg: Option<&str>) -> Result<Target> {
    let online = crate::checks::online_cpus(root)?;
    let given = match cpus_arg {
        Some(a) => Some(crate::checks::watched_cpus(root, Some(a))?),
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
