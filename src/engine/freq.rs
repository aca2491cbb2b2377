//! A watched CPU's frequency changes (`cpu_frequency`), kept so that a
//! stall can say the frequency changed inside it, from → to kHz: a governor
//! left on powersave is a classic source of slow loops and late wake-ups.
//! The changes are written by whichever CPU made them, so they arrive out
//! of the watched CPU's order and change no context on its timeline.

use std::collections::VecDeque;

/// Changes kept per CPU (governors change a few times a second at most).
const KEEP: usize = 64;

#[derive(Debug, Default)]
pub struct FreqLog {
    /// (when, new kHz), oldest first.
    changes: VecDeque<(u64, u32)>,
}

impl FreqLog {
    pub fn on_change(&mut self, ts: u64, khz: u32) {
        if self.changes.len() == KEEP {
            self.changes.pop_front();
        }
        // From several changing CPUs, not quite in order: keep it sorted.
        let at = self.changes.partition_point(|c| c.0 <= ts);
        self.changes.insert(at, (ts, khz));
    }

    /// The changes inside `[t0, t1)`: the frequency before the first (None
    /// when not known) and after the last; None without a change.
    pub fn within(&self, t0: u64, t1: u64) -> Option<(Option<u32>, u32)> {
        let first = self.changes.partition_point(|c| c.0 < t0);
        let last = self.changes.range(first..).take_while(|c| c.0 < t1).last()?;
        let before = first.checked_sub(1).map(|i| self.changes[i].1);
        Some((before, last.1))
    }

    /// Forgets changes no stall can still need: before `t`, but the last
    /// one (it says the frequency at `t`).
    pub fn prune(&mut self, t: u64) {
        while self.changes.len() > 1 && self.changes[1].0 <= t {
            self.changes.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_inside_a_stall_says_from_and_to() {
        let mut f = FreqLog::default();
        assert_eq!(f.within(0, 100), None);
        f.on_change(50, 800_000);
        assert_eq!(f.within(0, 100), Some((None, 800_000)), "the frequency before is not known");
        f.on_change(200, 2_400_000);
        f.on_change(150, 1_200_000);
        assert_eq!(f.within(140, 300), Some((Some(800_000), 2_400_000)));
        assert_eq!(f.within(160, 190), None);
        f.prune(210);
        assert_eq!(f.within(250, 400), None);
        f.on_change(300, 800_000);
        assert_eq!(f.within(250, 400), Some((Some(2_400_000), 800_000)), "the last change before is kept");
    }
}
