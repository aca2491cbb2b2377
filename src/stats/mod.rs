//! Aggregates per CPU and per CPU × cause, owned by the collector thread.
//! Readers never share them: the screen gets a small render-ready
//! `Snapshot`, the exit summary the final aggregates. A reset starts them
//! afresh where they are kept.

use std::collections::VecDeque;

use crate::fastmap::Map;

use hdrhistogram::Histogram;

use crate::cause::CauseId;
use crate::interval::{Hiccup, Method};
use crate::slots::CpuSlots;

mod causes;
mod counters;
mod cpu;
pub mod origins;
pub mod periodic;
mod read;
mod threads;
pub mod wake;
pub use causes::{CauseStats, MAX_CAUSES};
pub use counters::{Counters, CpuCounters, SourceFigures, SpinFigures, WakeFigures};
pub use cpu::{CpuFigures, CpuStats};
pub use threads::{ThreadStats, Threads};

/// Highest value the histograms track: one minute, in ns.
const HIST_MAX: u64 = 60_000_000_000;
/// Worst-gap-per-second history kept for the sparkline.
const SPARK_SECS: usize = 300;
/// Recent worst stalls kept with their breakdown.
pub const WORST_KEPT: usize = 32;
/// How long a stall stays among the "recent worst".
const WORST_AGE_NS: u64 = 60_000_000_000;

pub(crate) fn histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX, sigfig).expect("valid histogram bounds")
}

/// The one way a percentile is read from a histogram, everywhere (screen,
/// summary, JSON, metrics): the nearest rank's bucket, reported as its top
/// (HdrHistogram's highest equivalent value, so within the histogram's
/// precision above the exact nearest rank) and never above `max`, the
/// largest value, kept exactly: a bucket's top may lie above every value
/// in it, and a p99 above the max is a figure that contradicts another.
pub(crate) fn quantile(h: &Histogram<u64>, q: f64, max: u64) -> u64 {
    h.value_at_quantile(q).min(max)
}

/// A cause on one CPU: the key of the per-cause aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CauseKey {
    pub cpu: u32,
    pub cause: CauseId,
}

pub struct Stats {
    /// CLOCK_MONOTONIC ns when the probes began measuring (or the reset).
    start_ns: u64,
    /// Latest time the aggregates cover.
    now_ns: u64,
    /// In the order watched; `slots` finds a CPU's.
    cpus: Vec<CpuStats>,
    slots: CpuSlots,
    causes: Map<CauseKey, CauseStats>,
    worst: Vec<Hiccup>,
    /// At most the oldest start among `worst` (u64::MAX: none): the aged
    /// ones are looked for only once one may be there.
    worst_oldest: u64,
    /// What the probes, the kernel and jitterwatch itself count (events,
    /// drops, own CPU...), since the reset; `raw` since the start, `base`
    /// as it was at the reset.
    counters: Counters,
    raw: Counters,
    base: Counters,
    /// Whether the user reset the aggregates during the run.
    was_reset: bool,
    /// Entries each CPU has in `causes`, kept for the cap.
    cause_entries: Map<u32, usize>,
    /// Per CPU: gap time and gaps since the start, kept across resets (the
    /// probe's loop period between hiccups is over the whole run).
    run_gaps: Map<u32, (u64, u64)>,
    /// Passive mode: per watched thread.
    threads: Threads,
    /// Passive mode: watched threads seen on CPUs not watched (tid, cpu).
    threads_elsewhere: Vec<(u32, u32)>,
    /// Passive mode: threads found at start that have not run on a watched
    /// CPU since (`comm[tid]`, escaped): no row of their own says so.
    threads_idle: Vec<String>,
    /// Causes by who sent them (IPIs, work, wake-ups), per CPU.
    by_sender: origins::BySender,
    /// A cause's starts copied here to look for their period (allocated once).
    period_scratch: Vec<u64>,
    /// What the run measures (the views' words, which figures they show).
    method: Method,
}

/// Causes per CPU whose period is looked for: the largest by time.
pub const PERIODIC_CAUSES: usize = 8;
/// A cause's period is looked for again this long after the last look.
const LOOK_EVERY_NS: u64 = 5_000_000_000;

impl Stats {
    pub fn new(cpus: &[usize], start_ns: u64) -> Self {
        Self {
            start_ns,
            now_ns: start_ns,
            cpus: cpus.iter().map(|&c| CpuStats::new(c as u32)).collect(),
            slots: CpuSlots::new(cpus),
            causes: Map::default(),
            worst: Vec::with_capacity(WORST_KEPT + 1),
            worst_oldest: u64::MAX,
            counters: Counters::new(cpus),
            raw: Counters::new(cpus),
            base: Counters::new(cpus),
            was_reset: false,
            cause_entries: Map::default(),
            run_gaps: Map::default(),
            threads: Threads::default(),
            threads_elsewhere: Vec::new(),
            threads_idle: Vec::new(),
            by_sender: origins::BySender::default(),
            period_scratch: Vec::new(),
            method: Method::Spin,
        }
    }

    /// Aggregates of a run that measures by `method` (the spin probe
    /// unless said).
    pub fn measuring(mut self, method: Method) -> Self {
        self.method = method;
        self
    }

    /// Looks for what recurs (periodic.rs) in each CPU's largest causes:
    /// with `all`, in every one of them now (the run's end); else in the
    /// one most due, if any has gone LOOK_EVERY_NS without a look (a look
    /// at a full ring takes 1–4 ms here, ~80 ms before periodic.rs lost its
    /// per-event divisions and binary searches: one per call keeps the
    /// collector's share small).
    pub fn look_for_periods(&mut self, now: u64, all: bool) {
        let mut due: Vec<(CauseKey, u64)> = Vec::new();
        for c in &self.cpus {
            let top = self.top_causes(Some(c.cpu));
            let frequent = top.into_iter().filter(|(_, st)| st.starts.as_ref().is_some_and(|s| s.at.len() >= periodic::MIN_EVENTS));
            for (k, st) in frequent.take(PERIODIC_CAUSES) {
                if all || now >= st.period_looked_ns.saturating_add(LOOK_EVERY_NS) {
                    due.push((*k, st.total_ns));
                }
            }
        }
        if !all {
            due.sort_by_key(|d| std::cmp::Reverse(d.1));
            due.truncate(1);
        }
        for (k, _) in due {
            let Some(st) = self.causes.get_mut(&k) else { continue };
            let Some(starts) = &st.starts else { continue };
            self.period_scratch.clear();
            self.period_scratch.extend_from_slice(&starts.at);
            st.period = periodic::detect(&mut self.period_scratch);
            st.period_looked_ns = now;
        }
    }

    pub fn set_threads(&mut self, infos: impl Iterator<Item = crate::passive::ThreadInfo>) {
        self.threads.set_info(infos);
    }

    /// Gap ns and gaps on `cpu` since the start, resets notwithstanding.
    pub fn run_gaps(&self, cpu: u32) -> (u64, u64) {
        self.run_gaps.get(&cpu).copied().unwrap_or_default()
    }

    pub fn cpu_mut(&mut self, cpu: u32) -> Option<&mut CpuStats> {
        self.slots.get(cpu).map(|i| &mut self.cpus[i])
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.now_ns.saturating_sub(self.start_ns)
    }

    pub fn stolen_pct(&self, c: &CpuStats) -> f64 {
        match self.elapsed_ns() {
            0 => 0.0,
            e => 100.0 * c.stolen_ns as f64 / e as f64,
        }
    }

    pub fn per_sec(&self, n: u64) -> f64 {
        match self.elapsed_ns() {
            0 => 0.0,
            e => n as f64 * 1e9 / e as f64,
        }
    }

    pub fn record(&mut self, h: &Hiccup) {
        let start = self.start_ns;
        if self.cpu_mut(h.cpu).is_none() {
            return;
        }
        // Not a stall: kept per thread, apart from what the CPU's stalls
        // add up to.
        if !h.source.is_stall() {
            self.threads.record(h);
            return;
        }
        let run = self.run_gaps.entry(h.cpu).or_default();
        run.0 += h.gap;
        run.1 += 1;
        let Some(c) = self.cpu_mut(h.cpu) else { return };
        c.hiccups += 1;
        let stopped: u64 = h.causes.iter().filter(|(c, _)| *c == CauseId::STOPPED).map(|(_, ns)| ns).sum();
        c.stopped_ns += stopped;
        c.stolen_ns += h.gap - stopped;
        c.explained_ns += h.explained() - stopped;
        let lost = h.lost();
        if lost > 0 {
            c.lost_ns += lost;
            c.lossy_explained_ns += h.explained() - lost;
        }
        c.max_ns = c.max_ns.max(h.gap);
        c.gaps.saturating_record(h.gap.max(1));
        note_second(&mut c.worst_per_sec, h.t0.saturating_sub(start) / 1_000_000_000, h.gap);
        if let Some(p) = &h.parts {
            c.wake.record(p);
        }
        if h.freq.is_some() {
            c.freq_changed += 1;
        }
        for (cause, ns) in h.all_causes() {
            self.add_cause(h.cpu, cause, ns, h.t0);
        }
        if let Some(st) = &h.stack {
            self.note_stack(h, st);
        }
        self.threads.record(h);
        self.by_sender.record(h);
        self.note_worst(h);
    }

    fn add_cause(&mut self, cpu: u32, cause: CauseId, ns: u64, at: u64) {
        // One lookup for a cause already known (the common case).
        let key = CauseKey { cpu, cause };
        if let Some(s) = self.causes.get_mut(&key) {
            s.add(ns, at);
            return;
        }
        let entries = self.cause_entries.entry(cpu).or_default();
        if *entries >= MAX_CAUSES {
            *entries = causes::fold_stale(&mut self.causes, cpu);
        }
        // A program already folded (maybe just now) takes its new pids: one
        // program, one cause.
        if let (Some(_), Some(program)) = (cause.task_pid(), cause.program()) {
            if let Some(s) = self.causes.get_mut(&CauseKey { cpu, cause: program }) {
                s.add(ns, at);
                return;
            }
        }
        let entries = self.cause_entries.entry(cpu).or_default();
        *entries += 1;
        self.causes.entry(key).or_default().add(ns, at);
        if cause.is_task() && cause.task_pid().is_none() {
            causes::absorb_pids(&mut self.causes, cpu, cause);
            *entries = self.causes.keys().filter(|k| k.cpu == cpu).count();
        }
    }

    /// `--stacks-above`: the stall's stack, on its cause (or the program
    /// its pids were folded into).
    fn note_stack(&mut self, h: &Hiccup, st: &crate::interval::Stack) {
        let Some(&(_, ns)) = h.causes.iter().find(|(c, _)| *c == st.cause) else { return };
        let folded = st.cause.program();
        let key = CauseKey { cpu: h.cpu, cause: st.cause };
        let found = match self.causes.get_mut(&key) {
            Some(s) => Some(s),
            None => folded.and_then(|cause| self.causes.get_mut(&CauseKey { cpu: h.cpu, cause })),
        };
        if let Some(s) = found {
            s.note_stack(ns, &st.frames);
        }
    }

    fn note_worst(&mut self, h: &Hiccup) {
        let cutoff = h.t0.saturating_sub(WORST_AGE_NS);
        if self.worst_oldest < cutoff {
            self.worst.retain(|w| w.t0 >= cutoff);
            self.worst_oldest = self.worst.iter().map(|w| w.t0).min().unwrap_or(u64::MAX);
        }
        if self.worst.len() == WORST_KEPT && self.worst.last().is_some_and(|w| w.gap >= h.gap) {
            return;
        }
        let at = self.worst.partition_point(|w| w.gap >= h.gap);
        self.worst.insert(at, h.clone());
        self.worst.truncate(WORST_KEPT);
        self.worst_oldest = self.worst_oldest.min(h.t0);
    }

    /// Causes of one CPU (or all), by total time, largest first.
    pub fn top_causes(&self, cpu: Option<u32>) -> Vec<(&CauseKey, &CauseStats)> {
        let mut v: Vec<_> = self.causes.iter().filter(|(k, _)| cpu.is_none_or(|c| k.cpu == c)).collect();
        v.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then_with(|| a.0.cmp(b.0)));
        v
    }

    /// Takes in what the probes and the kernel count, as counted since the
    /// start: the aggregates hold what came since the last reset.
    pub fn update_counters(&mut self, raw: Counters, now: u64) {
        self.now_ns = now;
        self.counters = raw.since(&self.base);
        self.raw = raw;
        for c in &mut self.cpus {
            if let Some(p) = self.counters.cpus.iter().find(|p| p.cpu == c.cpu) {
                c.counters = p.clone();
            }
        }
    }

    /// Starts the aggregates afresh at `now` (the screen's reset key): what
    /// is counted from here on is what they show.
    pub fn reset(&mut self, now: u64) {
        let cpus: Vec<usize> = self.cpus.iter().map(|c| c.cpu as usize).collect();
        let raw = std::mem::replace(&mut self.raw, Counters::new(&cpus));
        let run_gaps = std::mem::take(&mut self.run_gaps);
        *self = Stats { base: raw.clone(), was_reset: true, run_gaps, method: self.method, ..Stats::new(&cpus, now) };
        self.update_counters(raw, now);
    }
}

/// The worst gap of second `sec`, into the seconds kept (oldest first, at
/// most [`SPARK_SECS`]). Stalls come nearly in order: one held for the
/// steal clock arrives after later ones (engine/steal.rs), so its second
/// may be behind the newest.
fn note_second(secs: &mut VecDeque<(u64, u64)>, sec: u64, gap: u64) {
    match secs.iter().rposition(|&(s, _)| s <= sec) {
        Some(k) if secs[k].0 == sec => secs[k].1 = secs[k].1.max(gap),
        at => {
            let at = at.map_or(0, |k| k + 1);
            if secs.len() == SPARK_SECS {
                if at == 0 {
                    return; // older than every second kept
                }
                secs.pop_front();
                secs.insert(at - 1, (sec, gap));
            } else {
                secs.insert(at, (sec, gap));
            }
        }
    }
}

#[cfg(test)]
mod tests;
