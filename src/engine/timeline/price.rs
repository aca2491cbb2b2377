//! What a firing of our hooks costs before its program's first clock read
//! (the kernel's dispatch: bpf::Dispatch, priced at start), for each
//! record our programs timed. Cold, as an interruption finds the lines
//! after the host ran; warm for a switch that follows our last switch
//! record within [`WARM_GAP_NS`] with nothing of ours between (a storm of
//! yields: back to back, as the warm calibration calls are).

/// A switch this soon after the end of our last switch program finds its
/// lines warm. A yield storm switches every 1-2 µs here; an interruption's
/// records are never switches, and a switch after one is priced cold.
pub const WARM_GAP_NS: u64 = 5_000;

use super::super::context::Context;
use super::Timeline;

#[derive(Debug, Clone, Copy, Default)]
pub struct Price {
    /// Cold and warm, ns (0: nothing priced, nothing moved).
    pub cold_ns: u64,
    pub warm_ns: u64,
    /// Where our last timed program ended, and whether it was a switch's.
    last: Option<(u64, bool)>,
}

impl Price {
    pub fn new(cold_ns: u64, warm_ns: u64) -> Self {
        Price { cold_ns, warm_ns: warm_ns.min(cold_ns), last: None }
    }

    /// The dispatch before the record at `ts` whose program ran `own_ns`
    /// (a switch's: `switch`), and that record noted as our last.
    pub fn of(&mut self, ts: u64, own_ns: u64, switch: bool) -> u64 {
        let warm = switch && self.last.is_some_and(|(end, sw)| sw && ts.saturating_sub(end) <= WARM_GAP_NS);
        self.last = Some((ts + own_ns, switch));
        if warm {
            self.warm_ns
        } else {
            self.cold_ns
        }
    }
}

impl Timeline {
    /// Our program that wrote an event at `ts` was dispatched `ns` before
    /// it (its first clock read): that stretch is jitterwatch's, not what
    /// ran before it or what the event begins. Never before time already
    /// charged.
    pub(super) fn dispatched(&mut self, ts: u64, ns: u64) {
        let from = ts.saturating_sub(ns).max(self.last);
        if from < ts {
            self.close(from);
            self.push_segment(from, ts, Context::Own);
            self.last = ts;
        }
    }

    /// Our program that wrote the event at `ts` ran `ns` from then on: that
    /// stretch is jitterwatch's, whatever it interrupted or began (the next
    /// event's program starts after it ended).
    pub(super) fn own(&mut self, ts: u64, ns: u32) {
        self.close(ts);
        let end = ts + u64::from(ns);
        self.push_segment(ts, end, Context::Own);
        self.last = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_right_after_our_last_switch_is_warm_anything_else_cold() {
        let mut p = Price::new(136, 50);
        assert_eq!(p.of(1_000, 100, true), 136, "the first");
        assert_eq!(p.of(2_000, 100, true), 50, "a yield storm's next switch");
        assert_eq!(p.of(3_000, 100, false), 136, "an interruption's record");
        assert_eq!(p.of(4_000, 100, true), 136, "a switch after an interruption");
        assert_eq!(p.of(20_000, 100, true), 136, "a switch long after the last");
        assert_eq!(Price::new(40, 90).warm_ns, 40, "never warmer than cold's opposite");
    }
}
