//! The engine: explains intervals from any source by what ran on their CPU.
//! Each CPU's kernel events build its timeline; an interval is attributed
//! once the event stream has been drained past its end (the watermark, or
//! its CPU's own events passing it), and charged to causes by exclusive
//! time. Pure logic: no BPF, no threads.

mod attribute;
mod context;
mod freq;
mod namer;
mod origins;
mod spill;
mod steal;
mod timeline;
mod wakeup;

use std::collections::VecDeque;

use crate::interval::{Hiccup, Interval};
use crate::record::{Event, OriginKind, Payload};

pub use context::Context;
pub use namer::{IdleStates, Namer};
pub use steal::StealTotals;
use timeline::Timeline;

/// A CPU's events come in order but for BPF programs nested in others
/// (an IRQ entered while a program ran): an event this much past a gap's end
/// means every event inside the gap has been seen.
pub const REORDER_NS: u64 = 1_000_000;

/// The wake-up probe's wake-ups kept per CPU (one a period; the stalls
/// still waiting to be explained span a few ms).
const PROBE_WAKES: usize = 256;

/// Hiccups kept for reuse once the sinks have seen them: their cause and
/// origin lists keep their capacity, so explaining a stall allocates
/// nothing once warmed up. Those held for a steal reading come back in
/// bursts, [`steal::HOLD_NS`] later; a burst beyond this is freed.
const SPARE_HICCUPS: usize = 4096;

pub struct Engine {
    /// CPU number → index into `timelines`.
    slots: crate::slots::CpuSlots,
    timelines: Vec<Timeline>,
    /// Per timeline: its gaps waiting to be explained, by end (ties in the
    /// order reported), so the next one due is at the front.
    pending: Vec<VecDeque<Interval>>,
    /// The gaps being explained now, reused.
    ready: Vec<Interval>,
    /// Gaps attributed as their CPU's events passed them, not yet handed out.
    done: VecDeque<Hiccup>,
    scratch: Vec<(Context, u64)>,
    /// Hiccups handed out and seen, for reuse (see [`SPARE_HICCUPS`]).
    spare: Vec<Hiccup>,
    /// The stall being explained at the watermark, reused.
    current: Hiccup,
    pub namer: Namer,
    /// Events from CPUs we do not watch (should stay 0: BPF filters them).
    pub foreign_events: u64,
    /// Per timeline: the CPU's count of dropped events as last seen (in a
    /// record, or in the kernel's totals), wrapping like the record's.
    drops_seen: Vec<u32>,
    /// Per timeline: the wake-up probe's timer slack, ns.
    slack: Vec<u64>,
    /// Per timeline: its frequency changes.
    freqs: Vec<freq::FreqLog>,
    /// Per timeline: when the wake-up probe was last woken (its own
    /// sched_wakeup events), oldest first.
    probe_wakes: Vec<VecDeque<u64>>,
    /// Per timeline: its steal clock, and the stalls waiting for it.
    steals: Vec<steal::Steal>,
    /// Per timeline: who sent IPIs to it, queued work on it, woke tasks on it.
    origins: Vec<origins::OriginLog>,
    /// The sources have stopped: nothing waits for a later steal reading.
    finishing: bool,
}

impl Engine {
    /// `start`: CLOCK_MONOTONIC ns when tracing began; `window`: segments
    /// each CPU keeps at most.
    pub fn new(cpus: &[usize], start: u64, window: usize, namer: Namer) -> Self {
        Self {
            slots: crate::slots::CpuSlots::new(cpus),
            timelines: cpus.iter().map(|_| Timeline::new(start, window)).collect(),
            pending: cpus.iter().map(|_| VecDeque::with_capacity(256)).collect(),
            ready: Vec::with_capacity(256),
            done: VecDeque::with_capacity(64),
            scratch: Vec::with_capacity(32),
            spare: Vec::with_capacity(SPARE_HICCUPS),
            current: Hiccup::default(),
            namer,
            foreign_events: 0,
            drops_seen: vec![0; cpus.len()],
            slack: vec![0; cpus.len()],
            freqs: cpus.iter().map(|_| freq::FreqLog::default()).collect(),
            probe_wakes: cpus.iter().map(|_| VecDeque::with_capacity(PROBE_WAKES)).collect(),
            steals: cpus.iter().map(|_| steal::Steal::default()).collect(),
            origins: cpus.iter().map(|_| origins::OriginLog::default()).collect(),
            finishing: false,
        }
    }

    fn slot(&self, cpu: u32) -> Option<usize> {
        self.slots.get(cpu)
    }

    /// The wake-up probe's timer slack on `cpu`, ns.
    pub fn set_probe_slack(&mut self, cpu: u32, slack_ns: u64) {
        if let Some(i) = self.slot(cpu) {
            self.slack[i] = slack_ns;
        }
    }

    pub fn set_probe_tids(&mut self, cpu: u32, tids: &[u32]) {
        if let Some(i) = self.slot(cpu) {
            self.timelines[i].set_probe_tids(tids);
        }
    }

    pub fn on_event(&mut self, ev: &Event) {
        let Some(i) = self.slot(ev.cpu) else {
            self.foreign_events += 1;
            return;
        };
        if let Payload::IrqEntry { irq, name } = &ev.payload {
            self.namer.note_irq(*irq, name);
        }
        // Written by the CPU that changed it: not this CPU's order or counts.
        if let Payload::Freq { khz } = ev.payload {
            self.freqs[i].on_change(ev.ts, khz);
            return;
        }
        if let Payload::Steal { ns } = ev.payload {
            self.steals[i].on_reading(ev.ts, ns);
            return;
        }
        // Written by the sender's CPU (in this CPU's order only if it is this one).
        if let Payload::Origin { kind, sender, from_cpu, callsite, func, woken } = ev.payload {
            let task = origins::RawSender::Task { comm: sender.comm, pid: sender.pid, tgid: sender.tgid, cpu: from_cpu };
            // Sent from this CPU at interrupt level (a timer queueing work,
            // an interrupt waking a task): that context sent it, not the
            // task it interrupted.
            let raw = match self.timelines[i].current() {
                c
                @ (Context::Irq(_) | Context::Softirq(_) | Context::Timer(_) | Context::Vector(_) | Context::Csd(_) | Context::Nmi(_))
                    if from_cpu == ev.cpu =>
                {
                    origins::RawSender::Local(c)
                }
                _ => task,
            };
            let key = if kind == OriginKind::Wake { u64::from(woken) } else { func };
            self.origins[i].push(origins::Sent { ts: ev.ts, kind, key, sender: raw, callsite });
            return;
        }
        // The wake-up probe woken (in its timer's callback): the end of its
        // timer latency.
        if let Payload::Wakeup { task, .. } = &ev.payload {
            if self.timelines[i].is_probe(task.pid) {
                let w = &mut self.probe_wakes[i];
                if w.len() == PROBE_WAKES {
                    w.pop_front();
                }
                w.push_back(ev.ts);
            }
        }
        // Wake-ups are written on other CPUs: their counts are not this CPU's.
        if matches!(ev.payload, Payload::Wakeup { .. }) {
            self.timelines[i].on_event(ev);
            return;
        }
        self.steals[i].saw(ev.ts);
        // Compared as a signed step, so a record older than totals already
        // read (its count behind) marks nothing.
        let newly_dropped = ev.dropped.wrapping_sub(self.drops_seen[i]) as i32;
        // Before anything is attributed up to this event: the stretch since
        // the CPU's previous record is not known.
        if newly_dropped > 0 {
            self.drops_seen[i] = ev.dropped;
            self.timelines[i].lost_until(ev.ts);
        }
        // Once the window is filling, attribute a gap as soon as its CPU's
        // events have passed it, while the window surely still holds it: a
        // consumer that fell behind drains a burst that would slide the
        // window past the gap before the drain's watermark allowed it.
        // (Otherwise the watermark does it, in batches that are cheaper.)
        if ev.ts >= self.next_end(i).saturating_add(REORDER_NS) && self.timelines[i].filling() {
            self.attribute_cpu(i, ev.ts - REORDER_NS);
        }
        self.timelines[i].on_event(ev);
    }

    /// The kernel's count of `cpu`'s dropped events, read at `at` after a
    /// drain that emptied the ring buffer: drops after the CPU's last
    /// record (which no record carries yet) mark the time up to `at`.
    pub fn on_drop_total(&mut self, cpu: u32, total: u64, at: u64) {
        let Some(i) = self.slot(cpu) else { return };
        // The records carry the low 32 bits of the same counter.
        let total = total as u32;
        if total.wrapping_sub(self.drops_seen[i]) as i32 > 0 {
            self.drops_seen[i] = total;
            self.timelines[i].lost_until(at);
        }
    }

    pub fn on_interval(&mut self, gap: Interval) {
        if let Some(i) = self.slot(gap.cpu).filter(|_| gap.t1 > gap.t0) {
            let q = &mut self.pending[i];
            // Gaps mostly come in the order they end: then it is a push.
            let at = if q.back().is_none_or(|b| b.t1 <= gap.t1) { q.len() } else { q.partition_point(|p| p.t1 <= gap.t1) };
            q.insert(at, gap);
        }
    }

    /// When slot `i`'s next pending gap ends (u64::MAX: none pending).
    fn next_end(&self, i: usize) -> u64 {
        self.pending[i].front().map_or(u64::MAX, |g| g.t1)
    }

    /// Attributes slot `i`'s pending gaps that ended by `upto` into `done`.
    fn attribute_cpu(&mut self, i: usize, upto: u64) {
        let mut ready = self.take_due(Some(i), upto);
        for g in ready.drain(..) {
            let mut h = self.spare.pop().unwrap_or_default();
            self.attribute(g, upto, &mut h);
            self.done.push_back(h);
        }
        self.ready = ready;
    }

    /// The pending gaps (of slot `only`, or all) that ended by `upto`, in
    /// the order they ended (each CPU's history is read forwards).
    fn take_due(&mut self, only: Option<usize>, upto: u64) -> Vec<Interval> {
        let mut ready = std::mem::take(&mut self.ready);
        for (i, q) in self.pending.iter_mut().enumerate() {
            if only.is_none_or(|o| o == i) {
                while let Some(g) = q.pop_front_if(|g| g.t1 <= upto) {
                    ready.push(g);
                }
            }
        }
        // Stable: gaps of one CPU that end together keep their order.
        if only.is_none() {
            ready.sort_by_key(|g| g.t1);
        }
        ready
    }

    /// Whether stalls attributed as their CPU's events passed them wait
    /// to be handed out.
    pub fn has_done(&self) -> bool {
        !self.done.is_empty()
    }

    /// Hands out the stalls attributed as their CPU's events passed them
    /// (see [`Self::attribute_ready`]): the drain calls it as they come, so
    /// the sinks read each while it is still in cache.
    pub fn hand_out_done(&mut self, mut out: impl FnMut(&Hiccup)) {
        while let Some(mut h) = self.done.pop_front() {
            self.hand_out(&mut h, &mut out);
            recycle(&mut self.spare, h);
        }
    }

    /// `h` shown to `out` at once, or moved to its CPU's steal clock to
    /// wait for a reading (and `h` replaced by a spare): a stall (264 bytes)
    /// moves only when it is held.
    fn hand_out(&mut self, h: &mut Hiccup, out: &mut impl FnMut(&Hiccup)) {
        let i = self.slots.get(h.cpu).expect("hiccups are on watched CPUs");
        if self.steals[i].holds(h) {
            let next = self.spare.pop().unwrap_or_default();
            self.steals[i].hold(std::mem::replace(h, next));
        } else {
            out(h);
        }
    }

    /// Attributes every pending gap that ended at or before `watermark` (all
    /// events up to it have been consumed), showing each to `out`, which
    /// borrows it: the engine reuses its lists for the next stall, each
    /// handed out as soon as it is explained.
    /// Stalls on a CPU with a moving steal clock wait up to
    /// [`steal::HOLD_NS`] for the increment that may follow them.
    pub fn attribute_ready(&mut self, watermark: u64, mut out: impl FnMut(&Hiccup)) {
        self.hand_out_done(&mut out);
        let mut ready = self.take_due(None, watermark);
        // Explained in place and shown by reference.
        let mut h = std::mem::take(&mut self.current);
        for g in ready.drain(..) {
            self.attribute(g, watermark, &mut h);
            self.hand_out(&mut h, &mut out);
        }
        self.current = h;
        self.ready = ready;
        let spare = &mut self.spare;
        for s in &mut self.steals {
            s.release(watermark, self.finishing, &mut |h| {
                out(&h);
                recycle(spare, h);
            });
        }
    }

    /// The sources have stopped: the next `attribute_ready` hands out
    /// every stall without waiting for steal readings.
    pub fn finish(&mut self) {
        self.finishing = true;
    }

    /// What `cpu`'s steal clock said (None: no reading came).
    pub fn steal_totals(&self, cpu: u32) -> Option<StealTotals> {
        self.slot(cpu).map(|i| &self.steals[i]).filter(|s| s.read()).map(|s| s.totals)
    }

    /// Drops history no future gap can need: before `before[cpu]` (the
    /// probe's progress) and before every pending gap's start.
    pub fn prune(&mut self, cpu: u32, before: u64) {
        let Some(i) = self.slot(cpu) else { return };
        let oldest_pending = self.pending[i].iter().map(|g| g.t0).min();
        let t = oldest_pending.map_or(before, |p| p.min(before));
        self.timelines[i].prune(t);
        self.freqs[i].prune(t);
        self.origins[i].prune(t);
    }

    /// How the timelines' windows have fared, over all watched CPUs.
    pub fn window_stats(&self) -> WindowStats {
        self.timelines
            .iter()
            .fold(WindowStats::default(), |w, t| WindowStats { reordered: w.reordered + t.reordered, evicted: w.evicted + t.evicted })
    }
}

/// A stall the sinks have seen, kept for the next (see [`SPARE_HICCUPS`]).
fn recycle(spare: &mut Vec<Hiccup>, h: Hiccup) {
    if spare.len() < SPARE_HICCUPS {
        spare.push(h);
    }
}

/// Events stamped slightly out of order on their CPU (clamped), and
/// timeline segments evicted because a window was full (summed per context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowStats {
    pub reordered: u64,
    pub evicted: u64,
}

#[cfg(test)]
mod tests;
