//! `jitterwatch doctor`: an isolation audit of the watched CPUs that names,
//! for every problem, the command or boot parameter that removes it.
//!
//! Everything is read through `root` (normally `/`), so the checks run on
//! fixture trees in tests. Nothing here panics on missing or unreadable
//! files: they are listed in [`Report::unreadable`] and the audit goes on.

mod boot;
mod cmdline;
mod cputimers;
mod hints;
mod irqs;
mod power;
mod preempt;
mod render;
mod tasks;
mod timers;
mod topology;
mod virt;
mod workqueues;

#[cfg(test)]
mod fixture;
#[cfg(test)]
pub(crate) use fixture::Fx;

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cpulist;
use crate::sanitize::visible;

pub use hints::{hints_for, sender_hint_for};

#[cfg(test)]
pub(crate) use fixture::test_hints;

pub(crate) use cmdline::Cmdline;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Ok,
    Warn,
    Info,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Group: boot, irq, workqueue, tasks, timers, power, mm, virt.
    pub check: String,
    pub status: Status,
    pub title: String,
    pub why: String,
    pub evidence: Vec<String>,
    pub fix: Option<String>,
    /// Stable id, e.g. `irq:24`, `workqueue:writeback`, `rt_throttling`, `isolcpus`.
    pub key: String,
    /// What the run-time hints read, typed (never parsed back from the
    /// wording of a title or an evidence line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact: Option<Fact>,
}

/// Facts of a finding that the hints act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fact {
    /// The online CPUs left unwatched.
    Housekeeping(Vec<usize>),
    /// An IRQ delivered to a watched CPU now, with its count there.
    IrqDelivered { irq: u32, count: u64 },
    /// Thread ids pinned to the watched CPUs (the workload, probably).
    Pinned(Vec<u32>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub cpus: Vec<usize>,
    pub findings: Vec<Finding>,
    /// What could not be read (`/path: reason`), e.g. without root.
    pub unreadable: Vec<String>,
}

impl Report {
    pub fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }

    pub fn find(&self, key: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.key == key)
    }
}

/// Prints the report (text or JSON) to `out`; the exit code is 0 when
/// nothing is WARN, 1 otherwise.
pub fn run(root: &Path, cpus: &[usize], json: bool, out: &mut dyn io::Write) -> anyhow::Result<i32> {
    let report = audit(root, cpus);
    if json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        render::text(&report, out)?;
    }
    out.flush()?;
    Ok(if report.count(Status::Warn) > 0 { 1 } else { 0 })
}

pub fn audit(root: &Path, cpus: &[usize]) -> Report {
    let mut cpus = cpus.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    let mut cx = Ctx::new(root, cpus);
    cpus_check(&mut cx);
    boot::check(&mut cx);
    preempt::check(&mut cx);
    irqs::check(&mut cx);
    workqueues::check(&mut cx);
    let threads = tasks::check(&mut cx);
    topology::check(&mut cx, &threads);
    timers::check(&mut cx);
    // The kernel's own tickless mask (boot/nohz_rcu.rs says why not the command line's).
    let nohz = cx.read_quiet("sys/devices/system/cpu/nohz_full").and_then(|s| cpulist::parse(s.trim()).ok()).unwrap_or_default();
    cputimers::check(&mut cx, &threads, &nohz);
    cputimers::perf_events(&mut cx, &threads, &nohz);
    power::check(&mut cx);
    virt::check(&mut cx);
    Report { cpus: cx.cpus, findings: cx.findings, unreadable: cx.unreadable }
}

/// The watched CPUs must be online and leave at least one housekeeping CPU.
/// Its evidence (`housekeeping: 0`) is what [`hints`] uses for commands.
fn cpus_check(cx: &mut Ctx) {
    let offline: Vec<usize> = cx.cpus.iter().copied().filter(|c| !cx.online.contains(c)).collect();
    let hk = cx.housekeeping();
    let online = format!("online: {}", cpulist::Display(&cx.online));
    let hk_ev = format!("housekeeping: {}", cpulist::Display(&hk));
    let f = if !cx.online_known {
        finding("cpus", "cpus", Status::Info, "online CPUs unknown: housekeeping CPUs not checked")
            .why("neither /sys/devices/system/cpu/online nor /proc/stat could be read")
    } else if !offline.is_empty() {
        finding("cpus", "cpus", Status::Warn, format!("{} not online", Ctx::cpu_word(&offline)))
            .why("an offline CPU runs nothing; the audit assumes it will be brought online")
            .fix(offline.iter().map(|c| format!("echo 1 > /sys/devices/system/cpu/cpu{c}/online")).collect::<Vec<_>>().join("; "))
    } else if hk.is_empty() {
        finding("cpus", "cpus", Status::Warn, "no housekeeping CPU left: every online CPU is watched")
            .why("interrupts, kernel threads and the jitterwatch consumer need a CPU that is not watched")
            .fix("watch fewer CPUs (leave at least CPU 0 out)")
    } else {
        finding("cpus", "cpus", Status::Ok, format!("{} online; housekeeping CPUs {}", Ctx::cpu_word(&cx.cpus), cpulist::Display(&hk)))
            .why("disturbances are moved to the housekeeping CPUs by the fixes below")
    };
    cx.push(f.ev(online).ev(hk_ev).fact(Fact::Housekeeping(hk)));
}

/// Shared state of one audit: where to read, what is watched, and what has
/// been found so far.
pub(crate) struct Ctx<'a> {
    pub root: &'a Path,
    pub cpus: Vec<usize>,
    pub online: Vec<usize>,
    /// False when neither sysfs nor /proc/stat said which CPUs are online
    /// (then `online` is the watched CPUs and housekeeping is unknown).
    pub online_known: bool,
    pub cmdline: Cmdline,
    pub findings: Vec<Finding>,
    pub unreadable: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn new(root: &'a Path, cpus: Vec<usize>) -> Self {
        let mut cx = Ctx {
            root,
            cpus,
            online: Vec::new(),
            online_known: true,
            cmdline: Cmdline::parse(""),
            findings: Vec::new(),
            unreadable: Vec::new(),
        };
        if let Some(s) = cx.read("proc/cmdline") {
            cx.cmdline = Cmdline::parse(&s);
        }
        cx.online = match cx.read("sys/devices/system/cpu/online").and_then(|s| cpulist::parse(s.trim()).ok()) {
            Some(v) => v,
            // Fall back on the cpuN lines of /proc/stat, then on the watched CPUs.
            None => {
                let mut v: Vec<usize> = cx
                    .read_quiet("proc/stat")
                    .map(|s| s.lines().filter_map(|l| l.strip_prefix("cpu")?.split_whitespace().next()?.parse().ok()).collect())
                    .unwrap_or_default();
                if v.is_empty() {
                    v = cx.cpus.clone();
                    cx.online_known = false;
                }
                v
            }
        };
        cx
    }

    /// Reads a file that should exist; any failure is recorded as unreadable.
    pub fn read(&mut self, rel: &str) -> Option<String> {
        match std::fs::read_to_string(self.root.join(rel)) {
            Ok(s) => Some(s),
            Err(e) => {
                self.note_unreadable(rel, &e);
                None
            }
        }
    }

    /// Reads a file that may legitimately be absent (a kernel option, a
    /// driver); only other failures (permission) are recorded.
    pub fn read_opt(&mut self, rel: &str) -> Option<String> {
        match std::fs::read_to_string(self.root.join(rel)) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.note_unreadable(rel, &e);
                None
            }
        }
    }

    /// Reads without recording anything (racy files such as /proc/PID/*).
    pub fn read_quiet(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }

    /// How a boot parameter is set on this machine: through the boot loader
    /// whose configuration is there (GRUB's defaults file, systemd-boot's or
    /// a UKI's /etc/kernel/cmdline, grubby), else said plainly.
    pub fn boot_how(&self) -> &'static str {
        if self.exists("etc/default/grub") {
            "(GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot)"
        } else if self.exists("etc/kernel/cmdline") {
            "(in /etc/kernel/cmdline, then reinstall the kernel (kernel-install add) and reboot)"
        } else if self.exists("usr/sbin/grubby") || self.exists("sbin/grubby") {
            "(grubby --update-kernel=ALL --args='...', then reboot)"
        } else {
            "(add it to the kernel command line your boot loader passes, then reboot)"
        }
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).exists()
    }

    pub fn note_unreadable(&mut self, rel: &str, e: &io::Error) {
        let why = match e.kind() {
            io::ErrorKind::NotFound => "missing".to_string(),
            io::ErrorKind::PermissionDenied => "permission denied (run as root)".to_string(),
            _ => e.to_string(),
        };
        let line = format!("/{}: {why}", visible(rel.trim_start_matches('/')));
        if !self.unreadable.contains(&line) {
            self.unreadable.push(line);
        }
    }

    /// Directory entries (names), sorted; failures recorded.
    pub fn list_dir(&mut self, rel: &str) -> Vec<String> {
        match std::fs::read_dir(self.root.join(rel)) {
            Ok(rd) => {
                let mut v: Vec<String> = rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect();
                v.sort();
                v
            }
            Err(e) => {
                self.note_unreadable(rel, &e);
                Vec::new()
            }
        }
    }

    /// Online CPUs that are not watched: where disturbances can be sent.
    pub fn housekeeping(&self) -> Vec<usize> {
        cpulist::housekeeping(&self.online, &self.cpus)
    }

    pub fn hk_list(&self) -> Option<String> {
        let hk = self.housekeeping();
        (!hk.is_empty()).then(|| cpulist::Display(&hk).to_string())
    }

    pub fn hk_mask(&self) -> Option<String> {
        let hk = self.housekeeping();
        (!hk.is_empty()).then(|| cpulist::to_mask(&hk, self.nr_cpus()))
    }

    pub fn nr_cpus(&self) -> usize {
        self.online.iter().chain(&self.cpus).max().map_or(1, |m| m + 1)
    }

    /// The watched CPUs as a cpulist (`6-7`).
    pub fn watched(&self) -> String {
        cpulist::Display(&self.cpus).to_string()
    }

    /// Watched CPUs present in `set`.
    pub fn overlap(&self, set: &[usize]) -> Vec<usize> {
        self.cpus.iter().copied().filter(|c| set.contains(c)).collect()
    }

    /// "CPU 1" / "CPUs 6-7" for titles.
    pub fn cpu_word(cpus: &[usize]) -> String {
        if cpus.len() == 1 {
            format!("CPU {}", cpus[0])
        } else {
            format!("CPUs {}", cpulist::Display(cpus))
        }
    }

    pub fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }
}

/// Builds a finding; `why`, evidence and fix are added with the setters.
pub(crate) fn finding(check: &str, key: &str, status: Status, title: impl Into<String>) -> Finding {
    Finding {
        check: check.into(),
        status,
        title: title.into(),
        why: String::new(),
        evidence: Vec::new(),
        fix: None,
        key: key.into(),
        fact: None,
    }
}

impl Finding {
    pub(crate) fn why(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }
    pub(crate) fn ev(mut self, e: impl Into<String>) -> Self {
        self.evidence.push(e.into());
        self
    }
    pub(crate) fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
    pub(crate) fn fact(mut self, fact: Fact) -> Self {
        self.fact = Some(fact);
        self
    }
    pub(crate) fn fix_opt(mut self, fix: Option<String>) -> Self {
        self.fix = fix;
        self
    }
}

/// Parses a hex cpumask as sysfs prints it (`3`, `ff,ffffffff`, `00000000,00000002`).
pub(crate) fn parse_mask(s: &str) -> Option<Vec<usize>> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut cpus = Vec::new();
    let mut base = 0usize;
    for group in s.rsplit(',') {
        let group = group.trim();
        if group.is_empty() || group.len() > 8 {
            return None;
        }
        let w = u32::from_str_radix(group, 16).ok()?;
        cpus.extend((0..32).filter(|b| w & (1 << b) != 0).map(|b| base + b));
        base += 32;
    }
    cpus.sort_unstable();
    Some(cpus)
}

/// A cpulist file's contents; empty or `(null)` means no CPUs.
pub(crate) fn parse_list_file(s: &str) -> Option<Vec<usize>> {
    cpulist::parse_file(s).ok()
}

/// Up to `max` items joined with ", ", then "… and N more".
pub(crate) fn bounded(items: &[String], max: usize) -> String {
    let mut s = items.iter().take(max).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > max {
        s.push_str(&format!(", ... and {} more", items.len() - max));
    }
    s
}

#[cfg(test)]
mod tests;
