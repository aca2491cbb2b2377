//! The wake-up probe's late wake-ups by part, in timerlat's terms: how much
//! of the lateness was the timer's (deadline to callback) and how much the
//! thread's (scheduling delay, return to user), and each part's largest
//! causes.

use crate::fastmap::Map;

use crate::cause::CauseId;
use crate::interval::Parts;

/// Causes kept per part; past it, the smallest newcomers go uncounted
/// there (the part's total stays exact).
const CAUSES: usize = 64;

pub const PART_NAMES: [&str; 3] = ["timer latency", "scheduling delay", "return to user"];

#[derive(Debug, Clone, Default)]
pub struct WakeParts {
    pub late: u64,
    pub total_ns: [u64; 3],
    pub max_ns: [u64; 3],
    /// Per part: the largest cause of each late wake-up, and its time.
    pub causes: [Map<CauseId, u64>; 3],
}

impl WakeParts {
    pub fn record(&mut self, p: &Parts) {
        self.late += 1;
        for (i, ns) in p.ns().into_iter().enumerate() {
            self.total_ns[i] += ns;
            self.max_ns[i] = self.max_ns[i].max(ns);
        }
        for (i, top) in p.top.iter().enumerate() {
            if let Some((cause, ns)) = top {
                let m = &mut self.causes[i];
                if let Some(n) = m.get_mut(cause) {
                    *n += ns;
                } else if m.len() < CAUSES {
                    m.insert(*cause, *ns);
                }
            }
        }
    }

    /// Part `i`'s largest causes, most time first.
    pub fn top(&self, i: usize, n: usize) -> Vec<(CauseId, u64)> {
        let mut v: Vec<(CauseId, u64)> = self.causes[i].iter().map(|(c, &ns)| (*c, ns)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::{Cause, Symbol};

    #[test]
    fn parts_add_up_and_name_their_causes() {
        let mut w = WakeParts::default();
        let idle = CauseId::of(&Cause::Idle(Symbol::from("C6")));
        let p = |t, s, u, top: [Option<(CauseId, u64)>; 3]| Parts { timer_ns: t, sched_ns: s, user_ns: u, top };
        w.record(&p(30, 5, 2, [Some((idle, 25)), None, None]));
        w.record(&p(60, 900, 3, [Some((CauseId::SLACK, 50)), Some((CauseId::UNEXPLAINED, 0)), None]));
        w.record(&p(40, 5, 2, [Some((idle, 35)), None, None]));
        assert_eq!((w.late, w.total_ns, w.max_ns), (3, [130, 910, 7], [60, 900, 3]));
        assert_eq!(w.top(0, 5), vec![(idle, 60), (CauseId::SLACK, 50)]);
    }
}
