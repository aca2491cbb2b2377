//! One watched CPU's state in the engine: its timeline, the gaps on it
//! waiting to be explained, and what its events said beside the timeline
//! (drops, the wake-up probe's wake-ups, frequency, steal, origins). The
//! engine keeps one per watched CPU, in a `Vec` indexed by the CPU's slot.

use std::collections::VecDeque;

use crate::interval::Interval;

use super::freq::FreqLog;
use super::origins::OriginLog;
use super::stacks::StackLog;
use super::steal::Steal;
use super::timeline::Timeline;

/// The wake-up probe's wake-ups kept per CPU (one a period; the stalls
/// still waiting to be explained span a few ms).
const PROBE_WAKES: usize = 256;

/// Gaps a CPU can have pending before its queue grows.
const PENDING: usize = 256;

pub(super) struct CpuState {
    /// Its events as exclusive segments, over the window.
    pub timeline: Timeline,
    /// Its gaps waiting to be explained, by end (ties in the order
    /// reported), so the next one due is at the front.
    pub pending: VecDeque<Interval>,
    /// Its count of dropped events as last seen (in a record, or in the
    /// kernel's totals), wrapping like the record's.
    pub drops_seen: u32,
    /// The wake-up probe's timer slack, ns.
    pub slack: u64,
    /// Its frequency changes.
    pub freqs: FreqLog,
    /// When the wake-up probe was last woken (its own sched_wakeup
    /// events), oldest first.
    pub probe_wakes: VecDeque<u64>,
    /// Its steal clock, and the stalls waiting for it.
    pub steal: Steal,
    /// Who sent IPIs to it, queued work on it, woke tasks on it.
    pub origins: OriginLog,
    /// `--stacks-above`: the stacks of tasks that left it after long runs.
    pub stacks: StackLog,
}

// The engine runs per kernel event: the methods it calls per event are
// `#[inline]`, so that moving them here costs no call.
impl CpuState {
    /// `start`: CLOCK_MONOTONIC ns when tracing began; `window`: segments
    /// its timeline keeps at most.
    pub fn new(start: u64, window: usize) -> Self {
        Self {
            timeline: Timeline::new(start, window),
            pending: VecDeque::with_capacity(PENDING),
            drops_seen: 0,
            slack: 0,
            freqs: FreqLog::default(),
            probe_wakes: VecDeque::with_capacity(PROBE_WAKES),
            steal: Steal::default(),
            origins: OriginLog::default(),
            stacks: StackLog::default(),
        }
    }

    /// Task `pid` was woken at `ts`: if it is the wake-up probe, the end
    /// of its timer latency.
    #[inline]
    pub fn on_wakeup(&mut self, pid: u32, ts: u64) {
        if self.timeline.is_probe(pid) {
            let w = &mut self.probe_wakes;
            if w.len() == PROBE_WAKES {
                w.pop_front();
            }
            w.push_back(ts);
        }
    }

    /// The CPU's count of dropped events was `count` at `at` (a record's,
    /// or the kernel's total): drops not seen before mark the time since
    /// its previous record as lost. Compared as a signed step, so a count
    /// behind one already read (a record older than the totals) marks
    /// nothing.
    #[inline]
    pub fn on_dropped(&mut self, count: u32, at: u64) {
        if count.wrapping_sub(self.drops_seen) as i32 > 0 {
            self.drops_seen = count;
            self.timeline.lost_until(at);
        }
    }

    /// Queues `gap` to be explained, in the order gaps end.
    #[inline]
    pub fn queue(&mut self, gap: Interval) {
        let q = &mut self.pending;
        // Gaps mostly come in the order they end: then it is a push.
        let at = if q.back().is_none_or(|b| b.t1 <= gap.t1) { q.len() } else { q.partition_point(|p| p.t1 <= gap.t1) };
        q.insert(at, gap);
    }

    /// When its next pending gap ends (u64::MAX: none pending).
    #[inline]
    pub fn next_end(&self) -> u64 {
        self.pending.front().map_or(u64::MAX, |g| g.t1)
    }

    /// Drops history no future gap can need: before `before` (the probe's
    /// progress) and before every pending gap's start.
    pub fn prune(&mut self, before: u64) {
        let oldest_pending = self.pending.iter().map(|g| g.t0).min();
        let t = oldest_pending.map_or(before, |p| p.min(before));
        self.timeline.prune(t);
        self.freqs.prune(t);
        self.origins.prune(t);
    }
}
