//! The exit summary: per CPU in hiccups' columns plus stolen_pct, then each
//! CPU's top causes; the same as JSON with --json.

mod notes;
mod text;
mod threads;

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cause::{Cause, Kind};
use crate::outcome::Outcome;
use crate::stats::Stats;

/// Causes listed per CPU.
const TOP: usize = 10;

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

fn part_rows(w: &crate::stats::wake::WakeParts) -> Vec<PartRow> {
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

/// Where a run's summary goes beside its CSV, for `compare` to find:
/// `untuned.csv` → `untuned.summary.json`.
pub fn sidecar(csv: &Path) -> PathBuf {
    let stem = match csv.extension() {
        Some(e) if e == "csv" => csv.with_extension(""),
        _ => csv.to_path_buf(),
    };
    let mut name = stem.into_os_string();
    name.push(".summary.json");
    PathBuf::from(name)
}

/// The summary JSON's layout: raised when a field changes meaning or goes
/// (a new field does not raise it). 2: `cpus[].lost_pct` became
/// `unknown_pct` (one name, one meaning: a thread's `lost_pct` is another
/// figure), and the spin loop's figures are null without a spin probe.
/// 3: a watched thread's `ran_ns` is the kernel's time on a CPU (its
/// `sum_exec_runtime`), the clock's is `clock_ran_ns`.
pub const SCHEMA_VERSION: u32 = 3;

#[derive(Serialize)]
pub struct Summary {
    /// The layout of this JSON ([`SCHEMA_VERSION`], docs/summary-json.md).
    pub schema_version: u32,
    /// The version that wrote it.
    pub jitterwatch: &'static str,
    /// The run's CSV, as an absolute path, when it wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
    /// `probe` (the spin probe's gaps), `wakeup` (the wake-up probe's late
    /// wake-ups) or `passive` (the watched threads').
    pub mode: &'static str,
    pub duration_ns: u64,
    pub events: u64,
    pub events_per_sec: f64,
    pub overhead: Overhead,
    pub missing_tracepoints: Vec<&'static str>,
    /// How context switches were hooked.
    pub switch_hook: String,
    /// Passive mode: per watched thread, most time lost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<threads::ThreadRow>,
    pub cpus: Vec<CpuRow>,
    /// Fix hints matched to the top culprits (from the isolation audit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    /// What the reader must know to trust the figures (a reset, a probe
    /// that did not stop).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The flight recorder (--trace-dir), the recording (--record), and
    /// the stall that stopped the run (--stop-above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traces: Option<crate::trace::Totals>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<crate::trace::Recorded>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_on: Option<crate::outcome::StopStall>,
    /// --fail-above: how many stalls reached it, and the worst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_above: Option<crate::outcome::Broken>,
}

impl Summary {
    /// The summary of a run: its aggregates, and what it came to besides.
    pub fn from_stats(s: &Stats, outcome: &Outcome, mode: &'static str) -> Self {
        // The label mode.rs gives the spin probe (the summary sits below it).
        let spin = mode == "probe";
        let cpus: Vec<CpuRow> = s
            .cpus
            .iter()
            .map(|c| CpuRow {
                cpu: c.cpu,
                threshold_ns: c.probe.threshold_ns,
                hiccups: c.hiccups,
                pct99_ns: c.pct(0.99),
                pct999_ns: c.pct(0.999),
                max_ns: c.max_ns,
                stolen_pct: s.stolen_pct(c),
                explained_pct: c.explained_pct(),
                explained_in_lossy_rows_pct: c.lossy_explained_pct(),
                unknown_pct: c.lost_pct(),
                loop_floor_ns: spin.then_some(c.probe.floor_ns),
                loop_mean_ns: spin.then_some(c.probe.loop_mean_ns),
                loop_quiet_mean_ns: spin.then_some(c.probe.loop_quiet_mean_ns),
                clock: spin.then_some(c.probe.counter.unwrap_or("vdso")),
                tsc_drift_ns: c.probe.tsc_drift_ns,
                hiccups_per_sec: s.per_sec(c.hiccups),
                wakeup: c.probe.wakeup.clone(),
                late_wakeup_parts: part_rows(&c.wake),
                hiccups_with_freq_change: c.freq_changed,
                steal: c.probe.steal,
                senders: s
                    .by_sender
                    .top(c.cpu)
                    .into_iter()
                    .take(TOP)
                    .map(|(kind, sender, t)| SenderRow {
                        kind,
                        sender: sender.name(),
                        count: t.count,
                        total_ns: t.ns,
                        what: t.what.as_ref().map(|w| w.0.clone()),
                        unsent: matches!(sender, crate::stats::origins::SenderKey::Unknown | crate::stats::origins::SenderKey::NotSent),
                    })
                    .collect(),
                queue_overflows: c.probe.overflow,
                ringbuf_drops: c.probe.drops,
                by_kind: by_kind(s.top_causes(Some(c.cpu)).into_iter().map(|(k, st)| (k.cause.kind(), st.count, st.total_ns))),
                top_causes: s
                    .top_causes(Some(c.cpu))
                    .into_iter()
                    .take(TOP)
                    .map(|(k, st)| CauseRow {
                        cause: k.cause.clone(),
                        kind: k.cause.kind(),
                        name: k.cause.name(),
                        count: st.count,
                        total_ns: st.total_ns,
                        max_ns: st.max_ns,
                        p99_ns: st.p99(),
                        stack: st.stack.as_ref().map(|(_, f)| f.iter().map(|s| crate::sanitize::visible(s).into_owned()).collect()),
                    })
                    .collect(),
                tick: c.probe.tick.filter(crate::tick::worth_saying).map(|t| {
                    // Beside the watched task under SCHED: the CPU's largest task.
                    let behind =
                        s.top_causes(Some(c.cpu)).into_iter().find(|(k, _)| k.cause.kind() == Kind::Task).map(|(k, _)| k.cause.label());
                    crate::tick::state(&t, behind)
                }),
                periodic: s
                    .top_causes(Some(c.cpu))
                    .into_iter()
                    .take(crate::stats::PERIODIC_CAUSES)
                    .filter_map(|(k, st)| {
                        let p = st.period?;
                        Some(PeriodicRow {
                            cause: k.cause.label(),
                            period_ns: p.period_ns,
                            share: p.share,
                            phase_ns: p.phase_ns,
                            stalls: p.events,
                            likely: likely(k.cause.kind(), p.period_ns, c.probe.tick.map(|t| t.nohz_capable)),
                        })
                    })
                    .collect(),
            })
            .collect();
        let n = &s.counters;
        let notes = notes::of(s, outcome, &cpus);
        Summary {
            schema_version: SCHEMA_VERSION,
            jitterwatch: env!("CARGO_PKG_VERSION"),
            csv: None,
            mode,
            duration_ns: s.elapsed_ns(),
            events: n.events,
            events_per_sec: s.per_sec(n.events),
            overhead: Overhead {
                main_start_ns: crate::lifecycle::main_start_ns(),
                first_sample_ns: s.start_ns,
                first_event_ns: n.first_event_ns,
                lag_max_ns: n.lag_max_ns,
                consumer_cpu_ns: n.consumer_cpu_ns,
                consumer_ns_per_event: if n.events == 0 { 0.0 } else { n.consumer_cpu_ns as f64 / n.events as f64 },
                setup_cpu_ns: n.setup_cpu_ns,
                reordered_events: n.reordered_events,
                evicted_segments: n.evicted_segments,
                ringbuf_drops: n.drops(),
                queue_overflows: n.overflows(),
                dispatch: n.dispatch,
                bpf_programs: n
                    .prog_stats
                    .iter()
                    .filter(|p| p.run_cnt > 0)
                    .map(|p| ProgRow { name: p.name.clone(), run_cnt: p.run_cnt, ns_per_run: p.run_time_ns as f64 / p.run_cnt as f64 })
                    .collect(),
            },
            missing_tracepoints: n.missing_tracepoints.clone(),
            switch_hook: n.switch_hook.clone(),
            threads: threads::rows(&s.threads),
            cpus,
            hints: Vec::new(),
            notes,
            traces: outcome.traces.clone(),
            recorded: outcome.recorded.clone(),
            stopped_on: outcome.stopped_on,
            failed_above: outcome.broken.clone(),
        }
    }

    /// Adds the audit's fixes for this run's top culprits (deduplicated).
    pub fn with_hints(mut self, report: &crate::doctor::Report) -> Self {
        const CULPRITS: usize = 5;
        // What stands behind POSIX_TIMER, where the audit at start saw it:
        // the processes on the watched nohz_full CPUs with CPU-clock timers.
        // And behind PERF_EVENTS: the processes holding perf events.
        for (key, dep) in [("posix_cpu_timers", "POSIX_TIMER"), ("perf_events", "PERF_EVENTS")] {
            let Some(f) = report.find(key).filter(|f| f.status != crate::doctor::Status::Ok) else { continue };
            for t in self.cpus.iter_mut().filter_map(|c| c.tick.as_mut()) {
                if t.behind.is_none() && t.dependencies.contains(&dep) {
                    t.behind = Some(f.evidence.join("; "));
                }
            }
        }
        for c in &self.cpus {
            for k in c.top_causes.iter().take(CULPRITS) {
                // Passive mode has no probe: no hint about parking one.
                for h in crate::doctor::hints_for(report, &k.cause, self.mode != "passive") {
                    if !self.hints.contains(&h) {
                        self.hints.push(h);
                    }
                }
            }
            // Who sent the most: its fix, once.
            for s in c.senders.iter().take(3) {
                if let Some(h) = crate::doctor::sender_hint_for(s.kind, &s.sender, c.cpu, s.count, s.what.as_ref()) {
                    self.hints.push(h);
                }
            }
        }
        self
    }

    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

#[cfg(test)]
mod tests;
