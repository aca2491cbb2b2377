//! Interrupt levels on a watched thread's CPU: an entry opens one, an exit
//! closes one; the stretch from the first entry to the last exit is the
//! thread's interruption, held as pending until what follows says whether
//! it continues (another entry within MERGE_NS) or ends.

use crate::interval::{Interval, Source};

use super::{Pending, Tracker, MERGE_NS};

impl Tracker {
    /// `what`: the kind of activity this is when it begins a stretch of
    /// its own (activity that continues a stretch keeps the stretch's kind:
    /// an IRQ's softirq at its exit is part of the interruption).
    pub(super) fn enter(&mut self, cpu: u32, ts: u64, what: Source, out: &mut dyn FnMut(Interval)) {
        let c = self.cpus[cpu as usize];
        let mut next = c;
        next.depth += 1;
        if c.depth == 0 {
            if let Some(tid) = c.running {
                next.start = match c.pending {
                    Some(p) if p.tid == tid && ts <= p.t1 + MERGE_NS => Some((p.t0, p.source)),
                    Some(p) => {
                        self.emit(out, cpu, p.t0, p.t1, p.source, p.tid);
                        Some((ts, what))
                    }
                    None => Some((ts, what)),
                };
                next.pending = None;
            }
        }
        self.cpus[cpu as usize] = next;
    }

    /// An interrupt level closes at `ts`; the last one ends the stretch.
    pub(super) fn exit(&mut self, cpu: u32, ts: u64) {
        let c = &mut self.cpus[cpu as usize];
        // An exit whose entry came before tracing began: nothing to close.
        c.depth = c.depth.saturating_sub(1);
        if c.depth == 0 {
            if let (Some((t0, source)), Some(tid)) = (c.start.take(), c.running) {
                c.pending = Some(Pending { t0, t1: ts.max(t0), tid, source });
            }
        }
    }

    /// The stretch the last level's exit left open goes out as an interval.
    pub(super) fn close_pending(&mut self, cpu: u32, out: &mut dyn FnMut(Interval)) {
        if let Some(p) = self.cpus[cpu as usize].pending.take() {
            self.emit(out, cpu, p.t0, p.t1, p.source, p.tid);
        }
    }
}
