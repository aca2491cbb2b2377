//! One watched CPU's aggregates: its stalls' count, time and percentiles,
//! what of it was named, lost or stopped, the worst gap of each second,
//! and what its source and the kernel count for it.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use super::{histogram, quantile, wake, CpuCounters, SPARK_SECS};

pub struct CpuStats {
    pub cpu: u32,
    pub hiccups: u64,
    pub stolen_ns: u64,
    /// Time charged to causes, `lost` included (as the CSV counts it).
    pub explained_ns: u64,
    /// Time while events were dropped, and the time charged to causes in
    /// hiccups that had some: figures from such rows are less certain.
    pub lost_ns: u64,
    pub lossy_explained_ns: u64,
    /// Time the probe itself was stopped (SIGSTOP, ptrace, frozen): in its
    /// gaps, but taken by nothing, so not in `stolen_ns`.
    pub stopped_ns: u64,
    pub max_ns: u64,
    pub gaps: Histogram<u64>,
    /// (second since start, worst gap in it), oldest first.
    pub worst_per_sec: VecDeque<(u64, u64)>,
    /// What its source and the kernel count for this CPU (since the reset).
    pub counters: CpuCounters,
    /// The wake-up probe's late wake-ups, by part.
    pub wake: wake::WakeParts,
    /// Hiccups inside which the CPU's frequency changed.
    pub freq_changed: u64,
}

/// A watched CPU's figures as the views read them: the screen's snapshot
/// carries these, the summary's row is written from them, and /metrics
/// reads the counters (its stall counts are its own: never reset). A
/// figure added here reaches each view that shows it, and nowhere else.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuFigures {
    pub cpu: u32,
    pub hiccups: u64,
    pub stolen_ns: u64,
    pub max_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    /// (second since start, worst gap in it), oldest first.
    pub worst_per_sec: VecDeque<(u64, u64)>,
    /// What its source and the kernel count for it.
    pub counters: CpuCounters,
}

impl CpuStats {
    /// Its figures, percentiles read once.
    pub fn figures(&self) -> CpuFigures {
        CpuFigures {
            cpu: self.cpu,
            hiccups: self.hiccups,
            stolen_ns: self.stolen_ns,
            max_ns: self.max_ns,
            p99_ns: self.pct(0.99),
            p999_ns: self.pct(0.999),
            worst_per_sec: self.worst_per_sec.clone(),
            counters: self.counters.clone(),
        }
    }

    pub(super) fn new(cpu: u32) -> Self {
        Self {
            cpu,
            hiccups: 0,
            stolen_ns: 0,
            explained_ns: 0,
            lost_ns: 0,
            lossy_explained_ns: 0,
            stopped_ns: 0,
            max_ns: 0,
            // 2 significant digits: percentiles to 1%, in a histogram small
            // enough (~35 KB) to stay in cache.
            gaps: histogram(2),
            worst_per_sec: VecDeque::with_capacity(SPARK_SECS),
            counters: CpuCounters::new(cpu),
            wake: wake::WakeParts::default(),
            freq_changed: 0,
        }
    }

    pub fn pct(&self, q: f64) -> u64 {
        if self.hiccups == 0 {
            0
        } else {
            quantile(&self.gaps, q, self.max_ns)
        }
    }

    fn of_stolen(&self, ns: u64) -> f64 {
        if self.stolen_ns == 0 {
            0.0
        } else {
            100.0 * ns as f64 / self.stolen_ns as f64
        }
    }

    /// Stolen time named by a kernel event: lost time is not.
    pub fn explained_pct(&self) -> f64 {
        self.of_stolen(self.explained_ns - self.lost_ns)
    }

    pub fn lost_pct(&self) -> f64 {
        self.of_stolen(self.lost_ns)
    }

    /// Of the explained time, the part from hiccups with dropped events.
    pub fn lossy_explained_pct(&self) -> f64 {
        self.of_stolen(self.lossy_explained_ns)
    }
}
