//! The summary's rows: what each CPU, cause, sender, recurring cause and
//! BPF program comes to, as the JSON and the text both show them.

use serde::Serialize;

use crate::cause::{Cause, Kind};

/// Who sent a kind of cause to a CPU, and how much of it.
#[derive(Serialize)]
pub struct SenderRow {
    /// ipi, work, or task (a wake-up).
    pub kind: crate::cause::Kind,
    /// The sender's program, or `(kind:name)` of the CPU's own interrupt-level code.
    pub sender: String,
    pub count: u64,
    pub total_ns: u64,
    /// What it sent that cost the most in one stall (its hint is about it).
    #[serde(skip)]
    pub what: Option<crate::cause::Cause>,
    /// Not a sender: the row of unknown senders or of what no one sends.
    #[serde(skip)]
    pub unsent: bool,
}

#[derive(Serialize)]
pub struct CpuRow {
    pub cpu: u32,
    pub threshold_ns: u64,
    pub hiccups: u64,
    pub pct99_ns: u64,
    pub pct999_ns: u64,
    pub max_ns: u64,
    pub stolen_pct: f64,
    /// Stolen time named by kernel events (lost time excluded).
    pub explained_pct: f64,
    /// Of it, the part from hiccups with dropped events (less certain).
    pub explained_in_lossy_rows_pct: f64,
    /// Stolen time while events were dropped: its causes are not known.
    /// (A thread's `lost_pct` is another figure: the share of its
    /// runnable time hiccups took.)
    pub unknown_pct: f64,
    /// The spin probe's loop (null without one: the wake-up probe, passive
    /// mode).
    pub loop_floor_ns: Option<u64>,
    pub loop_mean_ns: Option<f64>,
    /// The mean loop period with the hiccups left out: the probe's own
    /// speed, whatever steals the CPU.
    pub loop_quiet_mean_ns: Option<f64>,
    /// The probe loop's clock: `vdso`, `tsc` (x86_64) or `cntvct` (arm64)
    /// (null without a spin probe), and the counter's distance from
    /// CLOCK_MONOTONIC when the probe stopped (ns; the name is kept from
    /// when the TSC was the only counter).
    pub clock: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tsc_drift_ns: Option<i64>,
    pub hiccups_per_sec: f64,
    /// The wake-up probe's latencies, in cyclictest's terms (`hiccups`:
    /// those over the threshold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeup: Option<crate::probe::Latency>,
    /// The late wake-ups (over the threshold) by part, with each part's
    /// largest causes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub late_wakeup_parts: Vec<PartRow>,
    /// Hiccups inside which the CPU's frequency changed (cpu_frequency).
    pub hiccups_with_freq_change: u64,
    /// Causes by who sent them: IPIs by sender, work by queuer, tasks by
    /// waker (largest first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub senders: Vec<SenderRow>,
    /// The hypervisor's steal clock over the run, and where it went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal: Option<crate::engine::StealTotals>,
    pub queue_overflows: u64,
    pub ringbuf_drops: u64,
    pub top_causes: Vec<CauseRow>,
    /// Of the CPU's largest causes, those whose stalls recur on a period
    /// (stats/periodic.rs), largest cause first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub periodic: Vec<PeriodicRow>,
    /// Why the tick ran, as the kernel said at each attempt to stop it
    /// (timer:tick_stop, on nohz_full CPUs); null where it never said.
    pub tick: Option<crate::tick::State>,
    /// Every cause summed by its kind (irq, softirq, task…), most time
    /// first: the per-class totals rtla osnoise prints.
    pub by_kind: Vec<KindRow>,
}

/// A cause whose stalls recur on a period.
#[derive(Serialize, Debug, PartialEq)]
pub struct PeriodicRow {
    /// `kind:name`, as the CSV writes it.
    pub cause: String,
    pub period_ns: u64,
    /// The share of its stalls (bursts as one) that start in the fullest
    /// twentieth of the period: 0.05 is chance.
    pub share: f64,
    /// Where that twentieth begins, ns after a multiple of the period on
    /// CLOCK_MONOTONIC.
    pub phase_ns: u64,
    /// Its stalls looked at (the most recent, bursts as one).
    pub stalls: usize,
    /// What such a period usually is.
    pub likely: &'static str,
}

/// What a period of `cause`'s stalls usually is, by its length: a tick's
/// periods are CONFIG_HZ's (1000, 300, 250, 100). `nohz_capable`: whether
/// this kernel can stop a busy CPU's tick at all (None: not known), so
/// that `nohz_full=` is advised only where it can work (as doctor says).
pub fn likely(kind: Kind, period_ns: u64, nohz_capable: Option<bool>) -> &'static str {
    let tick = [1_000_000, 3_333_333, 4_000_000, 10_000_000].iter().any(|&t| period_ns.abs_diff(t) * 1000 <= t);
    match kind {
        Kind::Unexplained | Kind::Host if tick => {
            "a tick's period: in a VM, the host's work as it delivers this kernel's timer interrupt (or the host's own tick); on bare metal, SMIs or firmware timers"
        }
        Kind::Unexplained | Kind::Host => "a source outside this kernel: SMI timers, firmware or BMC polling, the host's timers",
        Kind::Irq | Kind::Timer if tick && nohz_capable == Some(false) => {
            "the scheduler tick: this kernel cannot stop it while a task runs (built without CONFIG_NO_HZ_FULL; one built with it, booted with nohz_full= on this CPU, can)"
        }
        Kind::Irq | Kind::Timer if tick => "the scheduler tick: nohz_full= on this CPU stops it while one task runs (doctor)",
        Kind::Own => "jitterwatch's own programs, inside what recurs at this period",
        _ if tick => "at the tick's period: work the tick starts (timers, RCU, vmstat)",
        _ => "a timer of its own: what sets it is named in the cause",
    }
}

#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct KindRow {
    pub kind: Kind,
    /// Stalls' shares of that kind (a stall with two IRQs counts two).
    pub count: u64,
    pub total_ns: u64,
}

/// Sums causes by kind, most time first (ties by kind).
pub fn by_kind(causes: impl IntoIterator<Item = (Kind, u64, u64)>) -> Vec<KindRow> {
    let mut rows: Vec<KindRow> = Vec::new();
    for (kind, count, total_ns) in causes {
        match rows.iter_mut().find(|r| r.kind == kind) {
            Some(r) => {
                r.count += count;
                r.total_ns += total_ns;
            }
            None => rows.push(KindRow { kind, count, total_ns }),
        }
    }
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.kind.cmp(&b.kind)));
    rows
}

#[derive(Serialize)]
pub struct PartRow {
    pub part: &'static str,
    pub total_ns: u64,
    pub max_ns: u64,
    /// `kind:name` and ns, escaped as every name is.
    pub top_causes: Vec<(String, u64)>,
}

pub(super) fn part_rows(w: &crate::stats::wake::WakeParts) -> Vec<PartRow> {
    if w.late == 0 {
        return Vec::new();
    }
    crate::stats::wake::PART_NAMES
        .iter()
        .enumerate()
        .map(|(i, &part)| PartRow {
            part,
            total_ns: w.total_ns[i],
            max_ns: w.max_ns[i],
            top_causes: w.top(i, 3).into_iter().map(|(c, ns)| (c.label(), ns)).collect(),
        })
        .collect()
}

#[derive(Serialize)]
pub struct CauseRow {
    #[serde(skip)]
    pub cause: Cause,
    pub kind: Kind,
    /// As every view shows it: escaped, never raw (`Cause::push_name`).
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub p99_ns: u64,
    /// `--stacks-above`: its kernel stack in the stall where it took the
    /// most with one, innermost frame first (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<String>>,
}

/// jitterwatch's own cost and start-up, for users and `cargo xtask bench`.
#[derive(Serialize)]
pub struct Overhead {
    /// CLOCK_MONOTONIC ns when main() began, the first probe sample, and the
    /// first kernel event drained.
    pub main_start_ns: u64,
    pub first_sample_ns: u64,
    pub first_event_ns: u64,
    pub lag_max_ns: u64,
    /// CPU time of the collector thread (ring-buffer consumer, attribution,
    /// CSV), and that per event drained.
    pub consumer_cpu_ns: u64,
    pub consumer_ns_per_event: f64,
    /// The collector's CPU time before it began draining (BPF load, attach).
    pub setup_cpu_ns: u64,
    pub reordered_events: u64,
    pub evicted_segments: u64,
    pub ringbuf_drops: u64,
    pub queue_overflows: u64,
    /// Per BPF program: runs and ns per run (with --bpf-stats).
    pub bpf_programs: Vec<ProgRow>,
    /// One hook firing's dispatch as priced at start (the kernel's part
    /// before our first clock read), and its spread over the calibration's
    /// rounds: `self` holds that much before each of our records. Absent:
    /// not priced (no task_rename tracepoint), nothing moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<crate::bpf::Dispatch>,
}

#[derive(Serialize)]
pub struct ProgRow {
    pub name: String,
    pub run_cnt: u64,
    pub ns_per_run: f64,
}
