//! What a run came to besides its aggregates: the stall that stopped it
//! (`--stop-above`), the traces the flight recorder wrote, the whole-run
//! recording. The sinks that make them fill them in; the summary and the
//! exit status read them. The aggregates (`stats`) keep only counts.

use crate::trace::{Recorded, Totals};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The stall that stopped the run (--stop-above).
    pub stopped_on: Option<StopStall>,
    /// --fail-above: the stalls that broke its bound (the run went on).
    pub broken: Option<Broken>,
    /// The flight recorder's traces, at the end.
    pub traces: Option<Totals>,
    /// The whole-run recording, at the end.
    pub recorded: Option<Recorded>,
    /// Outputs that failed (a full disk, EIO), each said once as it failed
    /// and dropped: the run ended there, and its exit status says so.
    pub failed: Vec<String>,
}

/// A stall at or over `--stop-above`, which ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StopStall {
    pub cpu: u32,
    pub time_ns: u64,
    pub gap_ns: u64,
    pub limit_ns: u64,
}

/// `--fail-above`: the run goes on to its end, and fails (exit status 3)
/// if any stall reached the bound; the worst are kept to be named.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Broken {
    pub limit_ns: u64,
    /// Stalls at or over the bound.
    pub count: u64,
    /// The largest of them, largest first, at most [`Broken::WORST`].
    pub worst: Vec<BrokenStall>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BrokenStall {
    pub cpu: u32,
    pub time_ns: u64,
    pub gap_ns: u64,
    /// Its largest cause, `kind:name` as the CSV's causes write it.
    pub cause: String,
    /// Passive mode: the watched thread it was taken from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
}

impl Broken {
    pub const WORST: usize = 5;

    pub fn new(limit_ns: u64) -> Self {
        Broken { limit_ns, count: 0, worst: Vec::new() }
    }

    /// Counts `h` if it reached the bound, and keeps it if among the worst
    /// (a name is made only then: a few times per run).
    pub fn record(&mut self, h: &crate::interval::Hiccup) {
        if h.gap < self.limit_ns || !h.source.is_stall() {
            return;
        }
        self.count += 1;
        if self.worst.len() == Self::WORST && self.worst.last().is_some_and(|w| w.gap_ns >= h.gap) {
            return;
        }
        let cause = h.all_causes().next().map_or_else(|| crate::cause::Cause::Unexplained.label(), |(c, _)| c.label());
        let at = self.worst.partition_point(|w| w.gap_ns >= h.gap);
        self.worst.insert(at, BrokenStall { cpu: h.cpu, time_ns: h.t0, gap_ns: h.gap, cause, tid: h.victim.map(|v| v.tid) });
        self.worst.truncate(Self::WORST);
    }
}
