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
    let n = &s.counters();
    let mut notes = Vec::new();
    if s.was_reset() {
        notes.push("the counts were reset during the run: this summary covers the time since the last reset".to_string());
    }
    if n.drop_read_failures > 0 {
        notes.push(format!(
            "the kernel's drop counters could not be read {} time(s): the ring-buffer drop counts are lower bounds",
            n.drop_read_failures
        ));
    }
    for c in s.cpus().iter().filter(|c| c.stopped_ns > 0) {
        notes.push(format!(
            "the probe on CPU {} was stopped for {} (SIGSTOP, a debugger or a cgroup freeze): its gaps show it as `stopped`, not counted as stolen",
            c.cpu,
            crate::units::ns(c.stopped_ns)
        ));
    }
    for name in s.threads_away().1 {
        notes.push(format!("watched thread {name} never ran on a watched CPU during the run: no hiccup, nothing lost (asleep throughout)"));
    }
    for &(tid, cpu) in s.threads_away().0 {
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
    match &outcome.broken {
        Some(b) if b.count > 0 => notes.push(broken(b, s.start_ns())),
        Some(b) => notes.push(format!("passed: no stall reached --fail-above {}", crate::units::ns(b.limit_ns))),
        None => {}
    }
    if let Some(cut) = outcome.recorded.as_ref().and_then(|r| r.cut_at) {
        notes.push(format!(
            "--record reached its cap ({} MiB of events) {} into the run: the trace ends there",
            crate::trace::RECORD_CAP_BYTES >> 20,
            crate::units::ns(cut.saturating_sub(s.start_ns()))
        ));
    }
    notes
}

/// The --fail-above verdict: how many stalls broke it, the worst named.
fn broken(b: &crate::outcome::Broken, start_ns: u64) -> String {
    let worst: Vec<String> = b
        .worst
        .iter()
        .map(|w| {
            let at = w.time_ns.saturating_sub(start_ns) as f64 / 1e9;
            let who = w.tid.map_or_else(String::new, |t| format!(", thread {t}"));
            format!("{} on CPU {} at {at:.3} s{who} ({})", crate::units::ns(w.gap_ns), w.cpu, w.cause.trim_end_matches(':'))
        })
        .collect();
    let shown = if b.count as usize > worst.len() { format!("the worst {}", worst.len()) } else { "each".to_string() };
    format!("FAILED: {} stall(s) at or over --fail-above {}; {shown}: {}", b.count, crate::units::ns(b.limit_ns), worst.join("; "))
}
