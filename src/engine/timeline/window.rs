//! Reading a CPU's window: what each cause had inside a stall (the
//! handlers' stretches capped where no event can hold them), the segments
//! over a stretch, and forgetting what no stall can need any more.

use super::super::context::{Context, Segment};
use super::Timeline;

/// The longest an interrupt handler (a device IRQ, a vector, a csd
/// callback, an hrtimer callback, an NMI) is taken to run in one stretch
/// with no event of its own. Past it, the time is one no kernel event can
/// hold: the host handling the vCPU's exit (its timer's re-arm, an
/// emulated device's register) or firmware, charged as unexplained, not
/// to the handler. Measured on our VM (docs/host-and-smi.md): in 20 s of
/// CPU 1 under a sockperf server beside a TCG VM, the longest whole
/// handler, entry to exit with its callbacks, was a tick's 597 µs (6,396
/// ticks; a function-call IPI 213 µs of 94k, an hrtimer callback 131 µs),
/// while a host pause inside a tick read 17.6 ms. Softirqs (NET_RX may
/// take its 2 ms budget; 1.2 ms there) and work items are not capped.
pub const HANDLER_MAX_NS: u64 = 1_000_000;

/// Of a stretch of `ctx` that began at `start`, the part inside [from, to)
/// charged to it: all of it, but for an interrupt handler's time past
/// [`HANDLER_MAX_NS`] from its start.
fn handler_part(ctx: Context, start: u64, from: u64, to: u64) -> u64 {
    let capped = matches!(ctx, Context::Irq(_) | Context::Vector(_) | Context::Csd(_) | Context::Timer(_) | Context::Nmi(_));
    let end = if capped { to.min(start.saturating_add(HANDLER_MAX_NS)) } else { to };
    end.saturating_sub(start.max(from))
}

/// Reschedule IPIs' arrivals kept (the oldest go first): a wake-up's wait
/// is looked up within a few ms of its end.
const RESCHED_KEPT: usize = 256;

impl Timeline {
    /// Adds the time each cause had inside [t0, t1) to `out` (merging equal
    /// causes). `now` bounds the open segment: events up to it have been seen.
    /// Returns the time no segment covers.
    pub fn charge(&self, t0: u64, t1: u64, now: u64, out: &mut Vec<(Context, u64)>) -> u64 {
        if t1 <= t0 {
            return 0;
        }
        let mut covered = 0;
        let mut add = |ctx: Context, ns: u64| {
            if ns == 0 {
                return;
            }
            covered += ns;
            match out.iter_mut().find(|(c, _)| *c == ctx) {
                Some((_, n)) => *n += ns,
                None => out.push((ctx, ns)),
            }
        };
        self.spill.charge(t0, t1, &mut add);
        let first = self.first_ending_after(t0);
        for s in self.segments.range(first..) {
            if s.start >= t1 {
                break;
            }
            add(s.ctx, handler_part(s.ctx, s.start, t0, s.end.min(t1)));
        }
        // The open segment: from the last event up to what has been drained.
        let open_end = now.min(t1);
        if open_end > self.last.max(t0) {
            add(self.top(), handler_part(self.top(), self.last, t0, open_end));
        }
        (t1 - t0) - covered
    }

    /// The window's segments overlapping [t0, t1), in order.
    pub fn segments_in(&self, t0: u64, t1: u64) -> impl Iterator<Item = &Segment> {
        let first = self.first_ending_after(t0);
        self.segments.range(first..).take_while(move |s| s.start < t1)
    }

    /// The open segment: since when, and what runs (no event has closed it).
    pub fn open(&self) -> (u64, Context) {
        (self.last, self.top())
    }

    /// The index of the first segment that ends after `t`, searched from
    /// the last such answer (stalls are charged in the order they ended).
    pub(super) fn first_ending_after(&self, t: u64) -> usize {
        let hint = self.last_found.get().saturating_sub(self.popped);
        let i = super::super::recent::first_not_before(self.segments.len(), hint, |i| self.segments[i].end <= t);
        self.last_found.set(self.popped + i);
        i
    }

    /// Forgets segments that ended before `t`.
    pub fn prune(&mut self, t: u64) {
        while self.segments.front().is_some_and(|s| s.end <= t) {
            self.segments.pop_front();
            self.popped += 1;
        }
        while self.resched.front().is_some_and(|&at| at <= t) {
            self.resched.pop_front();
        }
        if self.spill.to <= t {
            self.spill.clear();
        }
    }

    /// A reschedule IPI arrived at `ts` (its vector's entry). Kept apart
    /// from the segments: its handler may be shorter than the dispatch
    /// priced before its exit, which then leaves no segment of its own.
    pub(super) fn resched_at(&mut self, ts: u64) {
        if self.resched.len() == RESCHED_KEPT {
            self.resched.pop_front();
        }
        self.resched.push_back(ts);
    }

    /// When the first reschedule IPI after `t0` and before `t1` arrived.
    pub fn resched_after(&self, t0: u64, t1: u64) -> Option<u64> {
        self.resched.iter().copied().find(|&at| at > t0 && at < t1)
    }

    /// Segments held in the window.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.segments.len()
    }

    /// Half full or more: events are coming faster than pruning frees room.
    pub fn filling(&self) -> bool {
        self.segments.len() >= self.cap / 2
    }
}
