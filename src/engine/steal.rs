//! The hypervisor's share of a stall. A guest kernel with a paravirt steal
//! clock (KVM, Xen, VMware) learns how long the host ran something else
//! while this vCPU was runnable; the BPF side reports each CPU's reading as
//! it moves. The host updates the clock when the vCPU runs again, and the
//! kernel reads it at its next rq clock update (the tick that fell due
//! during the pause, at the latest), so an increment arrives just after the
//! stall that holds the pause. Stalls are therefore held a little
//! ([`HOLD_NS`]) before they are handed out, and each increment is charged
//! to the unexplained time of the held stalls it may have accrued in: the
//! largest unexplained first (a host pause is one long stretch with no
//! kernel event, not a share of every small one), never more than a
//! stall's unexplained time. What does not fit accrued outside any stall
//! (pauses shorter than the threshold, or inside a named cause).
//! Pure logic: no BPF, no threads.

use std::collections::VecDeque;

use crate::cause::CauseId;
use crate::interval::Hiccup;

/// How long a stall waits for the steal increment that may follow it:
/// longer than a tick at HZ=100 plus a drain period.
pub const HOLD_NS: u64 = 20_000_000;

/// One CPU's steal clock, as its events reported it.
#[derive(Debug, Default)]
pub struct Steal {
    /// The first and latest readings (None: no reading yet).
    first: Option<u64>,
    last: u64,
    /// The CPU's latest two event times (the steal records excluded).
    last_ts: u64,
    before_last_ts: u64,
    /// The earliest time the next increment may have accrued from: the
    /// event before the one that carried the previous reading (the kernel
    /// read that value somewhere in between).
    since: u64,
    increments: VecDeque<Increment>,
    held: VecDeque<Hiccup>,
    /// Indices into `held`, reused while placing an increment.
    order: Vec<usize>,
    pub totals: StealTotals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Increment {
    from: u64,
    at: u64,
    ns: u64,
}

/// What one CPU's steal clock said over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StealTotals {
    /// The clock's first and last readings (ns since boot).
    pub clock_first_ns: u64,
    pub clock_last_ns: u64,
    /// Charged to stalls as `host`.
    pub host_ns: u64,
    /// Accrued outside any stall's unexplained time (or after its stall was
    /// handed out).
    pub outside_ns: u64,
    /// Increments split over more than one stall.
    pub shared: u64,
}

impl StealTotals {
    /// Every increment seen after the first reading.
    pub fn seen_ns(&self) -> u64 {
        self.clock_last_ns - self.clock_first_ns
    }
}

impl Steal {
    /// A steal clock that has moved since boot: stalls wait for its
    /// increments. Without one (bare metal, or no steal clock) nothing is
    /// held and nothing changes.
    pub fn active(&self) -> bool {
        self.last > 0
    }

    /// Whether any reading came (the kernel reads a steal clock).
    pub fn read(&self) -> bool {
        self.first.is_some()
    }

    /// Every other event of this CPU, in its order.
    pub fn saw(&mut self, ts: u64) {
        self.before_last_ts = self.last_ts;
        self.last_ts = ts;
    }

    /// The clock read `ns` at `ts` (the time of the event before it).
    pub fn on_reading(&mut self, ts: u64, ns: u64) {
        let Some(_) = self.first else {
            self.first = Some(ns);
            self.last = ns;
            self.totals.clock_first_ns = ns;
            self.totals.clock_last_ns = ns;
            self.since = self.before(ts);
            return;
        };
        if ns > self.last {
            self.increments.push_back(Increment { from: self.since, at: ts, ns: ns - self.last });
        }
        // A clock that went back (a hypervisor reset) is a new baseline.
        self.last = ns;
        self.totals.clock_last_ns = self.totals.clock_last_ns.max(ns);
        self.since = self.before(ts);
    }

    /// The event before the one at `ts` that carried a reading.
    fn before(&self, ts: u64) -> u64 {
        if self.last_ts == ts {
            self.before_last_ts
        } else {
            self.last_ts
        }
    }

    /// Whether a stall attributed on this CPU waits for its increment: if
    /// the clock is active and it has unexplained time the increment could
    /// go to; else it is handed out at once. Most stalls are wholly explained (99.6% in
    /// passive mode on a TCP ping-pong): handed out while their lists are
    /// still in cache, they cost the sinks a third less, and a stall may
    /// reach the sinks before an earlier one still held (by [`HOLD_NS`]
    /// at most).
    pub fn holds(&self, h: &Hiccup) -> bool {
        self.active() && h.unexplained > 0
    }

    /// A stall [`Self::holds`] said to keep.
    pub fn hold(&mut self, h: Hiccup) {
        self.held.push_back(h);
    }

    /// Charges the increments that arrived by `watermark`, then hands out
    /// the stalls that waited long enough (all of them when `finishing`).
    pub fn release(&mut self, watermark: u64, finishing: bool, out: &mut impl FnMut(Hiccup)) {
        while let Some(inc) = self.increments.front().copied().filter(|i| finishing || i.at <= watermark) {
            self.increments.pop_front();
            self.place(inc);
        }
        while let Some(h) = self.held.front() {
            if !finishing && h.t0 + h.gap + HOLD_NS > watermark {
                break;
            }
            out(self.held.pop_front().expect("a held stall"));
        }
    }

    /// Charges one increment to the held stalls its window overlaps.
    fn place(&mut self, inc: Increment) {
        self.order.clear();
        let overlaps = |h: &Hiccup| h.t0 < inc.at && h.t0 + h.gap > inc.from && h.unexplained > 0;
        self.order.extend(self.held.iter().enumerate().filter(|(_, h)| overlaps(h)).map(|(k, _)| k));
        let held = &self.held;
        // Largest unexplained first; the earlier stall on a tie.
        self.order.sort_by(|&a, &b| held[b].unexplained.cmp(&held[a].unexplained).then(a.cmp(&b)));
        let mut left = inc.ns;
        let mut charged = 0;
        for &k in &self.order {
            if left == 0 {
                break;
            }
            let h = &mut self.held[k];
            let take = left.min(h.unexplained);
            charge_host(h, take);
            left -= take;
            charged += 1;
        }
        self.totals.host_ns += inc.ns - left;
        self.totals.outside_ns += left;
        if charged > 1 {
            self.totals.shared += 1;
        }
    }
}

/// Moves `ns` of `h`'s unexplained time to the `host` cause.
fn charge_host(h: &mut Hiccup, ns: u64) {
    h.unexplained -= ns;
    match h.causes.iter_mut().find(|(c, _)| *c == CauseId::HOST) {
        Some((_, t)) => *t += ns,
        None => h.causes.push((CauseId::HOST, ns)),
    }
    // Largest first, ties in a stable order, as the engine hands them out.
    h.causes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}
