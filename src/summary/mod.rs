//! The exit summary: per CPU in hiccups' columns plus stolen_pct, then each
//! CPU's top causes; the same as JSON with --json.

mod notes;
mod rows;
mod text;
mod threads;

use rows::part_rows;
pub use rows::{by_kind, likely, CauseRow, CpuRow, Overhead, PeriodicRow, ProgRow, SenderRow};

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cause::Kind;
use crate::outcome::Outcome;
use crate::stats::Stats;

/// Causes listed per CPU.
const TOP: usize = 10;

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

/// The two clocks read together at a run's two ends.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct Clocks {
    pub start: crate::clock::ClockPair,
    pub end: crate::clock::ClockPair,
}

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
    pub mode: crate::interval::Method,
    pub duration_ns: u64,
    /// CLOCK_MONOTONIC and CLOCK_REALTIME read together as the run began
    /// and as it ended: what puts an application's wall-clock log on the
    /// run's clock (`jitterwatch explain --clock realtime`). Absent where
    /// nothing read the host (a replay).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clocks: Option<Clocks>,
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
    pub fn from_stats(s: &Stats, outcome: &Outcome) -> Self {
        let mode = s.method();
        let cpus: Vec<CpuRow> = s
            .cpus()
            .iter()
            .map(|c| (c, c.figures()))
            .map(|(c, f)| CpuRow {
                cpu: f.cpu,
                threshold_ns: f.counters.threshold_ns,
                hiccups: f.hiccups,
                pct99_ns: f.p99_ns,
                pct999_ns: f.p999_ns,
                max_ns: f.max_ns,
                stolen_pct: s.stolen_pct(c),
                explained_pct: c.explained_pct(),
                explained_in_lossy_rows_pct: c.lossy_explained_pct(),
                unknown_pct: c.lost_pct(),
                loop_floor_ns: f.counters.own.spin().map(|l| l.floor_ns),
                loop_mean_ns: f.counters.own.spin().map(|l| l.loop_mean_ns),
                loop_quiet_mean_ns: f.counters.own.spin().map(|l| l.loop_quiet_mean_ns),
                clock: f.counters.own.spin().map(|l| l.counter.unwrap_or("vdso")),
                tsc_drift_ns: f.counters.own.spin().and_then(|l| l.tsc_drift_ns),
                hiccups_per_sec: s.per_sec(c.hiccups),
                wakeup: f.counters.own.latency().cloned(),
                late_wakeup_parts: part_rows(&c.wake),
                hiccups_with_freq_change: c.freq_changed,
                steal: f.counters.steal,
                senders: s
                    .by_sender()
                    .top(c.cpu)
                    .into_iter()
                    .take(TOP)
                    .map(|(kind, sender, t)| SenderRow {
                        kind,
                        sender: sender.name(),
                        count: t.count,
                        total_ns: t.ns,
                        what: t.what.as_ref().map(|w| w.0.cause()),
                        unsent: matches!(sender, crate::stats::origins::SenderKey::Unknown | crate::stats::origins::SenderKey::NotSent),
                    })
                    .collect(),
                queue_overflows: f.counters.overflow,
                ringbuf_drops: f.counters.drops,
                by_kind: by_kind(s.top_causes(Some(c.cpu)).into_iter().map(|(k, st)| (k.cause.kind(), st.count, st.total_ns))),
                top_causes: s
                    .top_causes(Some(c.cpu))
                    .into_iter()
                    .take(TOP)
                    .map(|(k, st)| CauseRow {
                        cause: k.cause.cause(),
                        kind: k.cause.kind(),
                        name: k.cause.name(),
                        count: st.count,
                        total_ns: st.total_ns,
                        max_ns: st.max_ns,
                        p99_ns: st.p99(),
                        stack: st.stack.as_ref().map(|(_, f)| f.iter().map(|s| crate::sanitize::visible(s).into_owned()).collect()),
                    })
                    .collect(),
                tick: f.counters.tick.filter(crate::tick::worth_saying).map(|t| {
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
                            likely: likely(k.cause.kind(), p.period_ns, f.counters.tick.map(|t| t.nohz_capable)),
                        })
                    })
                    .collect(),
            })
            .collect();
        let n = &s.counters();
        let notes = notes::of(s, outcome, &cpus);
        Summary {
            schema_version: SCHEMA_VERSION,
            jitterwatch: env!("CARGO_PKG_VERSION"),
            csv: None,
            mode,
            duration_ns: s.elapsed_ns(),
            clocks: None,
            events: n.events,
            events_per_sec: s.per_sec(n.events),
            overhead: Overhead {
                main_start_ns: crate::lifecycle::main_start_ns(),
                first_sample_ns: s.start_ns(),
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
            threads: threads::rows(s.threads()),
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
                for h in crate::doctor::hints_for(report, &k.cause, self.mode.has_probe()) {
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
