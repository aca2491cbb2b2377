//! Pairs each probe gap with its CPU's timeline once the event stream has
//! been drained past the gap's end (the watermark), and charges the gap to
//! causes by exclusive time. Pure logic: no BPF, no threads.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::cause::{Kind, Namer};
use crate::events::{Event, Payload};
use crate::timeline::{Cause, Timeline};

/// A stall the probe saw: it read the clock at `t0` and next at `t1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub cpu: u32,
    pub t0: u64,
    pub t1: u64,
}

/// A gap explained: named causes, largest first, and the rest unexplained.
/// `causes` excludes unexplained time; their sum plus `unexplained` is the gap.
#[derive(Debug, Clone, PartialEq)]
pub struct Hiccup {
    pub cpu: u32,
    pub t0: u64,
    pub gap: u64,
    pub causes: Vec<(Kind, Arc<str>, u64)>,
    pub unexplained: u64,
}

impl Hiccup {
    pub fn explained(&self) -> u64 {
        self.gap - self.unexplained
    }

    /// Every cause including unexplained time, largest first.
    pub fn all_causes(&self) -> Vec<(Kind, &str, u64)> {
        let mut v: Vec<_> = self.causes.iter().map(|(k, n, ns)| (*k, &**n, *ns)).collect();
        if self.unexplained > 0 {
            let at = v.partition_point(|c| c.2 >= self.unexplained);
            v.insert(at, (Kind::Unexplained, "", self.unexplained));
        }
        v
    }
}

/// A CPU's events come in order but for BPF programs nested in others
/// (an IRQ entered while a program ran): an event this much past a gap's end
/// means every event inside the gap has been seen.
pub const REORDER_NS: u64 = 1_000_000;

pub struct Engine {
    /// CPU number → index into `timelines` (None: not watched).
    slots: Vec<Option<usize>>,
    timelines: Vec<Timeline>,
    pending: VecDeque<Gap>,
    /// Per timeline: the earliest end of its pending gaps (u64::MAX: none).
    next_end: Vec<u64>,
    /// Gaps attributed as their CPU's events passed them, not yet handed out.
    done: VecDeque<Hiccup>,
    scratch: Vec<(Cause, u64)>,
    pub namer: Namer,
    /// Events from CPUs we do not watch (should stay 0: BPF filters them).
    pub foreign_events: u64,
}

impl Engine {
    /// `start`: CLOCK_MONOTONIC ns when tracing began; `window`: segments
    /// each CPU keeps at most.
    pub fn new(cpus: &[usize], start: u64, window: usize, namer: Namer) -> Self {
        let max = cpus.iter().copied().max().map_or(0, |m| m + 1);
        let mut slots = vec![None; max];
        for (i, &c) in cpus.iter().enumerate() {
            slots[c] = Some(i);
        }
        Self {
            slots,
            timelines: cpus.iter().map(|_| Timeline::new(start, window)).collect(),
            pending: VecDeque::with_capacity(4096),
            next_end: vec![u64::MAX; cpus.len()],
            done: VecDeque::with_capacity(64),
            scratch: Vec::with_capacity(32),
            namer,
            foreign_events: 0,
        }
    }

    fn slot(&self, cpu: u32) -> Option<usize> {
        self.slots.get(cpu as usize).copied().flatten()
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
        // Once the window is filling, attribute a gap as soon as its CPU's
        // events have passed it, while the window surely still holds it: a
        // consumer that fell behind drains a burst that would slide the
        // window past the gap before the drain's watermark allowed it.
        // (Otherwise the watermark does it, in batches that are cheaper.)
        if ev.ts >= self.next_end[i].saturating_add(REORDER_NS) && self.timelines[i].filling() {
            self.attribute_cpu(i, ev.ts - REORDER_NS);
        }
        self.timelines[i].on_event(ev);
    }

    pub fn on_gap(&mut self, gap: Gap) {
        if let Some(i) = self.slot(gap.cpu).filter(|_| gap.t1 > gap.t0) {
            self.pending.push_back(gap);
            self.next_end[i] = self.next_end[i].min(gap.t1);
        }
    }

    /// Attributes slot `i`'s pending gaps that ended by `upto` into `done`.
    fn attribute_cpu(&mut self, i: usize, upto: u64) {
        let mut done = std::mem::take(&mut self.done);
        self.take_pending(Some(i), upto, |h| done.push_back(h));
        self.done = done;
    }

    /// Attributes the pending gaps (of slot `only`, or all) that ended by
    /// `upto`, in order, and notes when the rest end.
    fn take_pending(&mut self, only: Option<usize>, upto: u64, mut out: impl FnMut(Hiccup)) {
        for (i, end) in self.next_end.iter_mut().enumerate() {
            if only.is_none_or(|o| o == i) {
                *end = u64::MAX;
            }
        }
        let mut k = 0;
        while k < self.pending.len() {
            let g = self.pending[k];
            let Some(i) = self.slot(g.cpu).filter(|&i| only.is_none_or(|o| o == i)) else {
                k += 1;
                continue;
            };
            if g.t1 <= upto {
                self.pending.remove(k);
                out(self.attribute(g, upto));
            } else {
                self.next_end[i] = self.next_end[i].min(g.t1);
                k += 1;
            }
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Attributes every pending gap that ended at or before `watermark` (all
    /// events up to it have been consumed), handing each to `out`.
    pub fn attribute_ready(&mut self, watermark: u64, mut out: impl FnMut(Hiccup)) {
        while let Some(h) = self.done.pop_front() {
            out(h);
        }
        self.take_pending(None, watermark, out);
    }

    fn attribute(&mut self, g: Gap, watermark: u64) -> Hiccup {
        let slot = self.slot(g.cpu).expect("pending gaps are on watched CPUs");
        self.scratch.clear();
        // The probe ran at both ends of its gap: that places switches into
        // it that no event reported.
        let tl = &mut self.timelines[slot];
        tl.probe_ran_at(g.t0);
        let mut unexplained = tl.charge(g.t0, g.t1, watermark, &mut self.scratch);
        tl.probe_ran_at(g.t1);
        let mut causes = Vec::with_capacity(self.scratch.len());
        for &(cause, ns) in &self.scratch {
            if cause.is_unexplained() {
                unexplained += ns;
            } else {
                let (kind, name) = self.namer.name(cause);
                causes.push((kind, name, ns));
            }
        }
        // Largest first; ties in a stable, readable order.
        causes.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        Hiccup { cpu: g.cpu, t0: g.t0, gap: g.t1 - g.t0, causes, unexplained }
    }

    /// Drops history no future gap can need: before `before[cpu]` (the
    /// probe's progress) and before every pending gap's start.
    pub fn prune(&mut self, cpu: u32, before: u64) {
        let Some(i) = self.slot(cpu) else { return };
        let oldest_pending = self.pending.iter().filter(|g| g.cpu == cpu).map(|g| g.t0).min();
        let t = oldest_pending.map_or(before, |p| p.min(before));
        self.timelines[i].prune(t);
    }

    /// (segments held, reordered events, evicted segments) per watched CPU.
    pub fn window_stats(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        self.timelines.iter().map(|t| (t.len(), t.reordered, t.evicted))
    }
}

#[cfg(test)]
mod tests;
