//! Segments a full timeline window pushed out, summed per context: a
//! stall longer than the window keeps its totals, only not their order.

use super::context::{Context, Segment};

/// Distinct contexts the spill keeps as they are; past it, new ones are
/// folded (tasks by program, the rest by kind), and past twice as many,
/// programs by kind too: bounded whatever the pid churn, and no known time
/// is ever called unexplained.
pub const SPILL_CAUSES: usize = 256;

/// Segments the full window pushed out, summed per cause over
/// [from, to). They lie after the probe last ran (older ones are pruned
/// first, and a probe segment starts the spill afresh), so they belong to
/// a gap still open: a stall longer than the window keeps its totals per
/// cause, and loses only their order.
#[derive(Debug, Default)]
pub struct Spill {
    pub from: u64,
    pub to: u64,
    pub by_cause: Vec<(Context, u64)>,
    /// The entry the last segment went to: storms alternate few causes.
    hint: usize,
}

impl Spill {
    pub fn new() -> Self {
        Spill { by_cause: Vec::with_capacity(SPILL_CAUSES), ..Spill::default() }
    }

    pub fn add(&mut self, s: Segment) {
        if s.ctx == Context::Probe {
            // The probe ran until s.end: no gap reaches back past it.
            self.clear();
            self.from = s.end;
            self.to = s.end;
            return;
        }
        if self.by_cause.is_empty() {
            self.from = s.start;
        }
        self.to = s.end;
        let ns = s.end - s.start;
        let at = match self.by_cause.get(self.hint) {
            Some(e) if e.0 == s.ctx => Some(self.hint),
            _ => self.by_cause.iter().position(|e| e.0 == s.ctx),
        };
        let mut cause = s.ctx;
        let mut at = at;
        for cap in [SPILL_CAUSES, 2 * SPILL_CAUSES] {
            if at.is_none() && self.by_cause.len() >= cap {
                cause = cause.folded();
                at = self.by_cause.iter().position(|e| e.0 == cause);
            }
        }
        match at {
            Some(i) => {
                self.by_cause[i].1 += ns;
                self.hint = i;
            }
            None => {
                self.by_cause.push((cause, ns));
                self.hint = self.by_cause.len() - 1;
            }
        }
    }

    pub fn clear(&mut self) {
        self.by_cause.clear();
        self.hint = 0;
    }

    /// Each cause's share of [t0, t1): exact when the gap covers the whole
    /// spill (the usual case), pro rata when it covers part of it.
    pub fn charge(&self, t0: u64, t1: u64, mut add: impl FnMut(Context, u64)) {
        let (lo, hi) = (t0.max(self.from), t1.min(self.to));
        if self.by_cause.is_empty() || hi <= lo {
            return;
        }
        let (part, span) = ((hi - lo) as u128, (self.to - self.from) as u128);
        for &(cause, ns) in &self.by_cause {
            add(cause, if part == span { ns } else { (ns as u128 * part / span) as u64 });
        }
    }
}
