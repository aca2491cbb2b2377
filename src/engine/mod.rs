//! The engine: explains intervals from any source by what ran on their CPU.
//! Each CPU's kernel events build its timeline; an interval is attributed
//! once the event stream has been drained past its end (the watermark, or
//! its CPU's own events passing it), and charged to causes by exclusive
//! time. Pure logic: no BPF, no threads.

mod attribute;
mod context;
mod cpu;
mod freq;
mod namer;
mod origins;
mod recent;
mod spill;
mod stacks;
mod steal;
mod timeline;
mod wakeup;

use std::collections::VecDeque;

use crate::interval::{Hiccup, Interval};
use crate::record::{Event, OriginKind, Payload};

pub use context::Context;
use cpu::CpuState;
pub use namer::{IdleStates, Namer};
pub use stacks::Stacks;
pub use steal::StealTotals;

/// A CPU's events come in order but for BPF programs nested in others
/// (an IRQ entered while a program ran): an event this much past a gap's end
/// means every event inside the gap has been seen.
pub const REORDER_NS: u64 = 1_000_000;

/// Hiccups kept for reuse once the sinks have seen them: their cause and
/// origin lists keep their capacity, so explaining a stall allocates
/// nothing once warmed up. Those held for a steal reading come back in
/// bursts, [`steal::HOLD_NS`] later; a burst beyond this is freed.
const SPARE_HICCUPS: usize = 4096;

pub struct Engine {
    /// CPU number → index into `cpus`.
    slots: crate::slots::CpuSlots,
    /// Each watched CPU's state, by slot.
    cpus: Vec<CpuState>,
    /// The gaps being explained now, reused.
    ready: Vec<Interval>,
    /// Gaps attributed as their CPU's events passed them, not yet handed out.
    done: VecDeque<Hiccup>,
    scratch: Vec<(Context, u64)>,
    /// The part of a preempting wake-up before its IPI arrived (attribute.rs).
    before: Vec<(Context, u64)>,
    /// Hiccups handed out and seen, for reuse (see [`SPARE_HICCUPS`]).
    spare: Vec<Hiccup>,
    /// The stall being explained at the watermark, reused.
    current: Hiccup,
    pub namer: Namer,
    /// Events from CPUs we do not watch (should stay 0: BPF filters them).
    pub foreign_events: u64,
    /// The sources have stopped: nothing waits for a later steal reading.
    finishing: bool,
    /// `--stacks-above`: where stacks come from (None: off).
    stacks: Option<Stacks>,
}

impl Engine {
    /// `start`: CLOCK_MONOTONIC ns when tracing began; `window`: segments
    /// each CPU keeps at most.
    pub fn new(cpus: &[usize], start: u64, window: usize, namer: Namer) -> Self {
        Self {
            slots: crate::slots::CpuSlots::new(cpus),
            cpus: cpus.iter().map(|_| CpuState::new(start, window)).collect(),
            ready: Vec::with_capacity(256),
            done: VecDeque::with_capacity(64),
            scratch: Vec::with_capacity(32),
            before: Vec::with_capacity(32),
            spare: Vec::with_capacity(SPARE_HICCUPS),
            current: Hiccup::default(),
            namer,
            foreign_events: 0,
            finishing: false,
            stacks: None,
        }
    }

    /// Gives stalls of `stacks.above_ns` or more the stack of their
    /// largest cause (a task), read through `stacks`.
    pub fn set_stacks(&mut self, stacks: Stacks) {
        self.stacks = Some(stacks);
    }

    fn slot(&self, cpu: u32) -> Option<usize> {
        self.slots.get(cpu)
    }

    /// The wake-up probe's timer slack on `cpu`, ns.
    pub fn set_probe_slack(&mut self, cpu: u32, slack_ns: u64) {
        if let Some(i) = self.slot(cpu) {
            self.cpus[i].slack = slack_ns;
        }
    }

    pub fn set_probe_tids(&mut self, cpu: u32, tids: &[u32]) {
        if let Some(i) = self.slot(cpu) {
            self.cpus[i].timeline.set_probe_tids(tids);
        }
    }

    /// jitterwatch's own process (its pid): its threads' time on a
    /// watched CPU is its own (`self`), not a task's.
    pub fn set_own_tgid(&mut self, tgid: u32) {
        for c in &mut self.cpus {
            c.timeline.set_own_tgid(tgid);
        }
    }

    /// One hook firing's dispatch, ns, cold and warm (bpf::Dispatch): the
    /// time before each of our records that our programs cannot time is
    /// `self` (timeline/price.rs says which price a record takes).
    pub fn set_dispatch_ns(&mut self, cold: u64, warm: u64) {
        for c in &mut self.cpus {
            c.timeline.dispatch = timeline::Price::new(cold, warm);
        }
    }

    pub fn on_event(&mut self, ev: &Event) {
        let Some(i) = self.slot(ev.cpu) else {
            self.foreign_events += 1;
            return;
        };
        let c = &mut self.cpus[i];
        if let Payload::IrqEntry { irq, name } = &ev.payload {
            self.namer.note_irq(*irq, name);
        }
        // Written by the CPU that changed it: not this CPU's order or counts.
        if let Payload::Freq { khz } = ev.payload {
            c.freqs.on_change(ev.ts, khz);
            return;
        }
        if let Payload::Steal { ns } = ev.payload {
            c.steal.on_reading(ev.ts, ns);
            return;
        }
        // Written by the sender's CPU (in this CPU's order only if it is this one).
        if let Payload::Origin { kind, sender, from_cpu, callsite, func, woken } = ev.payload {
            let task = origins::RawSender::Task { comm: sender.comm, pid: sender.pid, tgid: sender.tgid, cpu: from_cpu };
            // Sent from this CPU at interrupt level (a timer queueing work,
            // an interrupt waking a task): that context sent it, not the
            // task it interrupted.
            let raw = match c.timeline.current() {
                ctx @ (Context::Irq(_)
                | Context::Softirq(_)
                | Context::Timer(_)
                | Context::Vector(_)
                | Context::Csd(_)
                | Context::Nmi(_))
                    if from_cpu == ev.cpu =>
                {
                    origins::RawSender::Local(ctx)
                }
                _ => task,
            };
            let key = if kind == OriginKind::Wake { u64::from(woken) } else { func };
            c.origins.push(origins::Sent { ts: ev.ts, kind, key, sender: raw, callsite });
            return;
        }
        // Wake-ups are written on other CPUs: their counts are not this
        // CPU's. The wake-up probe's own (in its timer's callback) end its
        // timer latency.
        if let Payload::Wakeup { task, .. } = &ev.payload {
            c.on_wakeup(task.pid, ev.ts);
            c.timeline.on_event(ev);
            return;
        }
        c.steal.saw(ev.ts);
        // Before anything is attributed up to this event: the stretch since
        // the CPU's previous record is not known.
        c.on_dropped(ev.dropped, ev.ts);
        if let Payload::IrqAction { irq, handler, thread_fn } = ev.payload {
            self.namer.note_irq_action(irq, handler, thread_fn);
            return;
        }
        // Read now, whatever stall it is for: reading frees its entry.
        if let Payload::Stack { pid, id } = ev.payload {
            if let Some(frames) = self.stacks.as_mut().and_then(|s| s.take(id)) {
                c.stacks.push(ev.ts, pid, frames);
            }
            return;
        }
        // Once the window is filling, attribute a gap as soon as its CPU's
        // events have passed it, while the window surely still holds it: a
        // consumer that fell behind drains a burst that would slide the
        // window past the gap before the drain's watermark allowed it.
        // (Otherwise the watermark does it, in batches that are cheaper.)
        if ev.ts >= c.next_end().saturating_add(REORDER_NS) && c.timeline.filling() {
            self.attribute_cpu(i, ev.ts - REORDER_NS);
        }
        // (Borrowed again: attributing used the whole engine.)
        self.cpus[i].timeline.on_event(ev);
    }

    /// The kernel's count of `cpu`'s dropped events, read at `at` after a
    /// drain that emptied the ring buffer: drops after the CPU's last
    /// record (which no record carries yet) mark the time up to `at`.
    pub fn on_drop_total(&mut self, cpu: u32, total: u64, at: u64) {
        let Some(i) = self.slot(cpu) else { return };
        // The records carry the low 32 bits of the same counter.
        self.cpus[i].on_dropped(total as u32, at);
    }

    pub fn on_interval(&mut self, gap: Interval) {
        if let Some(i) = self.slot(gap.cpu).filter(|_| gap.t1 > gap.t0) {
            self.cpus[i].queue(gap);
        }
    }

    /// When slot `i`'s next pending gap ends (u64::MAX: none pending).
    #[cfg(test)]
    fn next_end(&self, i: usize) -> u64 {
        self.cpus[i].next_end()
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
        for (i, c) in self.cpus.iter_mut().enumerate() {
            if only.is_none_or(|o| o == i) {
                while let Some(g) = c.pending.pop_front_if(|g| g.t1 <= upto) {
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
    /// wait for a reading (and `h` replaced by a spare): a stall (272 bytes)
    /// moves only when it is held.
    fn hand_out(&mut self, h: &mut Hiccup, out: &mut impl FnMut(&Hiccup)) {
        let i = self.slots.get(h.cpu).expect("hiccups are on watched CPUs");
        let steal = &mut self.cpus[i].steal;
        if steal.holds(h) {
            let next = self.spare.pop().unwrap_or_default();
            steal.hold(std::mem::replace(h, next));
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
        for c in &mut self.cpus {
            c.steal.release(watermark, self.finishing, &mut |h| {
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
        self.slot(cpu).map(|i| &self.cpus[i].steal).filter(|s| s.read()).map(|s| s.totals)
    }

    /// Drops history no future gap can need: before `before[cpu]` (the
    /// probe's progress) and before every pending gap's start.
    pub fn prune(&mut self, cpu: u32, before: u64) {
        if let Some(i) = self.slot(cpu) {
            self.cpus[i].prune(before);
        }
    }

    /// How the timelines' windows have fared, over all watched CPUs.
    pub fn window_stats(&self) -> WindowStats {
        self.cpus
            .iter()
            .map(|c| &c.timeline)
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
