//! Links a culprit seen at run time (a typed `Cause`) to the audit
//! findings whose fixes would remove it. Both sides are read by their
//! fields: the cause's comm, pid, IRQ number or symbol, the findings' keys
//! and typed facts.
//!
//! Here: what a hint reads of the audit (`Hints`) and the one match over
//! every kind of cause, whose short arms (idle, host, SMI, ...) say their
//! advice in place. The longer advice lives by the context the cause ran
//! in, because that decides what can move it: interrupts.rs for what
//! interrupted the CPU (IRQs, softirqs, timers, IPIs: their affinity and
//! the boot parameters that quiet them), threads.rs for what ran as a
//! thread (tasks, work items: their affinity and their callers), and
//! senders.rs for a cause's origin, the program on another CPU that sent
//! it.

mod interrupts;
mod senders;
mod threads;

use super::{Fact, Finding, Report, Status};
use crate::cause::Cause;
use crate::cpulist::Display;
use crate::record::Vector;
use crate::sanitize::{visible, visible_bytes};

use interrupts::{ipi, irq_line, softirq, timer};
pub use senders::sender_hint_for;
use threads::{task, work};

/// What a hint reads of the audit (its WARN findings, by key) and the
/// lines gathered so far, each once.
struct Hints<'a> {
    r: &'a Report,
    out: Vec<String>,
    /// A probe watched the CPU: its own parking (RT throttling, the fair
    /// server) can be a cause; in passive mode there is no probe to park.
    probe: bool,
}

impl Hints<'_> {
    fn warn(&self, key: &str) -> Option<&Finding> {
        self.r.find(key).filter(|f| f.status == Status::Warn)
    }

    /// "{title}: {fix}" for `key` when it is a WARN with a fix.
    fn add(&mut self, key: &str) -> bool {
        let Some(f) = self.warn(key) else { return false };
        let line = match &f.fix {
            Some(fix) => format!("{}: {fix}", f.title),
            None => f.title.clone(),
        };
        self.push(line);
        true
    }

    /// Every WARN whose key starts with `prefix`.
    fn add_prefix(&mut self, prefix: &str) {
        let keys: Vec<String> =
            self.r.findings.iter().filter(|f| f.status == Status::Warn && f.key.starts_with(prefix)).map(|f| f.key.clone()).collect();
        for k in keys {
            self.add(&k);
        }
    }

    /// IRQ findings for interrupts delivered to a watched CPU now (the ones
    /// that raise softirqs there), busiest first, at most a few.
    fn add_delivered_irqs(&mut self) {
        const MAX: usize = 6;
        let mut hits: Vec<(u64, String)> = self
            .r
            .findings
            .iter()
            .filter(|f| f.status == Status::Warn)
            .filter_map(|f| match f.fact {
                Some(Fact::IrqDelivered { count, .. }) => Some((count, f.key.clone())),
                _ => None,
            })
            .collect();
        hits.sort_by_key(|h| std::cmp::Reverse(h.0));
        let keys: Vec<String> = hits.into_iter().map(|(_, k)| k).collect();
        for k in keys.iter().take(MAX) {
            self.add(k);
        }
        if keys.len() > MAX {
            self.push(format!("... and {} more IRQs delivered there (see jitterwatch doctor)", keys.len() - MAX));
        }
    }

    fn push(&mut self, s: impl Into<String>) {
        let s = s.into();
        if !self.out.contains(&s) {
            self.out.push(s);
        }
    }

    fn hk(&self) -> Option<String> {
        match &self.r.find("cpus")?.fact {
            Some(Fact::Housekeeping(hk)) if !hk.is_empty() => Some(Display(hk).to_string()),
            _ => None,
        }
    }

    fn pinned(&self, tid: u32) -> bool {
        self.r.find("tasks:pinned").is_some_and(|f| matches!(&f.fact, Some(Fact::Pinned(t)) if t.contains(&tid)))
    }

    fn cpus(&self) -> String {
        let c = &self.r.cpus;
        if c.len() == 1 {
            format!("CPU {}", c[0])
        } else {
            format!("CPUs {}", Display(c))
        }
    }
}

/// One-line hints for a run-time cause; `probe`: a probe watched the CPU
/// (else passive mode: no probe-only hint).
pub fn hints_for(report: &Report, cause: &Cause, probe: bool) -> Vec<String> {
    let mut h = Hints { r: report, out: Vec::new(), probe };
    match cause {
        // arm64's tick is the architected timer's per-CPU IRQ: no affinity
        // to change, the tick's advice as x86's local timer gets.
        Cause::Irq { name, .. } if interrupts::is_tick_irq(name) => {
            h.add("nohz_full");
            h.push("arch_timer: the tick (arm64's per-CPU timer interrupt), or an hrtimer armed on that CPU (jitterwatch names the timer function)");
        }
        Cause::Irq { irq, .. } => irq_line(&mut h, *irq),
        Cause::Vector(Vector::LocalTimer) => {
            h.add("nohz_full");
            h.push("local timer: the tick, or an hrtimer armed on that CPU (jitterwatch names the timer function)");
        }
        Cause::Vector(v) => ipi(&mut h, v.name()),
        Cause::Csd(f) => ipi(&mut h, f),
        Cause::Softirq(v) => softirq(&mut h, &crate::names::softirq(*v)),
        Cause::Work(f) => work(&mut h, f),
        Cause::Task { comm, pid } => task(&mut h, &visible_bytes(comm), *pid),
        Cause::Timer(f) => timer(&mut h, f),
        Cause::Nmi(_) => {
            h.add("watchdog");
            h.push("NMIs also come from perf sampling (perf record/top with hardware events) on that CPU");
        }
        Cause::Unexplained => {
            if let Some(f) = report.find("hypervisor").filter(|f| f.status == Status::Info) {
                h.push(format!(
                    "{}: host pauses (vCPU preemption, VM exits) are invisible to the guest; only dedicated, pinned host cores remove them",
                    f.title
                ));
            } else {
                h.push("no hypervisor detected: unexplained time is SMIs (firmware), hardware, or kernel activity without a traced event");
            }
            h.add("steal");
        }
        Cause::Lost => h.push(
            "lost: events were dropped because the ring buffer was full (jitterwatch's consumer fell behind, e.g. starved on a busy housekeeping CPU): give it a CPU of its own",
        ),
        Cause::Idle(state) if state.as_ref() == crate::cause::IDLE_LOOP => {
            h.push(if h.probe {
                "idle loop: the CPU had nothing to run: the workload blocked, or was parked by RT throttling or the fair server".to_string()
            } else {
                "idle loop: the CPU had nothing to run: the watched thread slept".to_string()
            });
            if h.probe {
                h.add("rt_throttling");
                h.add("fair_server");
            }
        }
        Cause::Idle(state) => {
            // The audit's advice for the cpuidle driver in use (haltpoll's
            // poll time in a KVM guest, the driver's own limit on metal).
            let fix = ["cpuidle", "idle"].iter().find_map(|k| h.r.find(k).and_then(|f| f.fix.clone()));
            h.push(match fix {
                Some(fix) => format!("idle ({}): the CPU slept and had to wake: {fix}", visible(state)),
                None => format!("idle ({}): the CPU slept and had to wake; keeping it awake (idle=poll) removes that, at a power cost", visible(state)),
            });
            if h.probe {
                h.add("rt_throttling");
                h.add("fair_server");
            }
        }
        Cause::Slack => h.push(
            "timer slack lets the kernel fire a sleeper's timer late: SCHED_FIFO threads have none; others can set it with prctl(PR_SET_TIMERSLACK, 1)",
        ),
        Cause::Host => {
            h.push("host: the hypervisor ran something else while this vCPU was runnable (its steal clock says so): dedicated host cores with the vCPUs pinned 1:1, or a less loaded host");
            h.add("steal");
        }
        Cause::Smi => h.push(
            "smi: the firmware took the CPU (System Management Mode): in the BIOS, turn off what uses SMIs (legacy USB emulation, OS-visible power management left to the firmware, error reporting by SMI, iLO/iDRAC polling); `turbostat --show SMI` counts them",
        ),
        Cause::Own => h.push(
            "self: jitterwatch's own BPF programs on the watched CPU, by their own clock reads (BENCHMARKS.md section 3): the observer's share, shown apart so no kernel cause carries it",
        ),
        Cause::Stopped => h.push(
            "stopped: jitterwatch's own probe was stopped (SIGSTOP, Ctrl-Z, a debugger attached, a cgroup freeze): that time was not taken by anything; resume it (fg, SIGCONT) or leave it running",
        ),
        Cause::Others(_) => {}
    }
    h.out
}
