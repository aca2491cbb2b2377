//! The summary's notes: what the reader must know to trust its figures
//! (a reset, unreadable counters, no steal clock, a run stopped on a stall
//! or a recording cut short).

use crate::outcome::Outcome;
use crate::stats::Stats;

use super::CpuRow;

/// Said once where the kernel reports no steal clock.
pub const NO_STEAL_CLOCK: &str =
    "no steal clock was read (bare metal, a hypervisor without a paravirt steal clock, or a kernel without CONFIG_PARAVIRT_TIME_ACCOUNTING): host preemption, if any, stays unexplained";

pub fn of(s: &Stats, outcome: &Outcome, cpus: &[CpuRow]) -> Vec<String> {
    let n = &s.counters;
    let mut notes = Vec::new();
    if s.was_reset {
        notes.push("the counts were reset during the run: this summary covers the time since the last reset".to_string());
    }
    if n.drop_read_failures > 0 {
        notes.push(format!(
            "the kernel's drop counters could not be read {} time(s): the ring-buffer drop counts are lower bounds",
            n.drop_read_failures
        ));
    }
    for c in s.cpus.iter().filter(|c| c.stopped_ns > 0) {
        notes.push(format!(
            "the probe on CPU {} was stopped for {} (SIGSTOP, a debugger or a cgroup freeze): its gaps show it as `stopped`, not counted as stolen",
            c.cpu,
            crate::units::ns(c.stopped_ns)
        ));
    }
    for &(tid, cpu) in &s.threads_elsewhere {
        notes.push(format!("watched thread {tid} also ran on CPU {cpu}, which is not watched: its time there is not counted"));
    }
    if n.events > 0 && cpus.iter().all(|c| c.steal.is_none()) {
        notes.push(NO_STEAL_CLOCK.to_string());
    }
    if let Some(st) = &outcome.stopped_on {
        notes.push(format!(
            "the run stopped on a stall of {} on CPU {} (--stop-above {})",
            crate::units::ns(st.gap_ns),
            st.cpu,
            crate::units::ns(st.limit_ns)
        ));
    }
    if let Some(cut) = outcome.recorded.as_ref().and_then(|r| r.cut_at) {
        notes.push(format!(
            "--record reached its cap ({} MiB of events) {} into the run: the trace ends there",
            crate::trace::RECORD_CAP_BYTES >> 20,
            crate::units::ns(cut.saturating_sub(s.start_ns))
        ));
    }
    notes
}
