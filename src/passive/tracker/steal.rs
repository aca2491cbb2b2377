//! The hypervisor's steal clock on a watched CPU, as the kernel leaves it
//! out of a thread's run time (schedstat's first field): each advance is
//! the share of the task that ran here meanwhile. A run the kernel's own
//! count covers (its switch in was read) has it left out already; a run
//! counted by the clock (found running, renamed, a switch in no hook saw)
//! must leave it out here, or a host pause inside it reads as the
//! thread's run (12.5 ms over schedstat's 1.49 s once on CI: a renamed
//! thread, four unseen switches in, the host's pause in one of them).

use super::super::thread::State;
use super::Tracker;

/// Steal advances read while no watched thread was known to run here,
/// since the last switch seen: (when read, how much). A switch in that no
/// hook saw, placed later, claims those read after it.
#[derive(Default, Clone, Copy)]
pub(super) struct Unowned {
    seen: [(u64, u64); 4],
    n: usize,
}

impl Unowned {
    fn push(&mut self, ts: u64, ns: u64) {
        if self.n < self.seen.len() {
            self.seen[self.n] = (ts, ns);
            self.n += 1;
        } else {
            // Readings change only as the runqueue's clock is updated, a
            // few times a tick at most: past four, the last one keeps the
            // sum (claimed with it or not at all).
            self.seen[self.n - 1].1 += ns;
        }
    }

    /// The advances read at or after `from`, taken out.
    fn take_from(&mut self, from: u64) -> u64 {
        let mut sum = 0;
        for (ts, ns) in &mut self.seen[..self.n] {
            if *ts >= from {
                sum += std::mem::take(ns);
            }
        }
        sum
    }
}

impl Tracker {
    /// The runqueue's steal clock read `ns` at `ts`: its advance since the
    /// last reading is time the hypervisor took while the task that ran
    /// here meanwhile had the CPU. The clock moves when the runqueue's
    /// clock is updated, as __schedule() does before a switch, so a
    /// reading taken with a switch (the same time) closes the stretch of
    /// the task that switched out.
    pub(super) fn steal(&mut self, cpu: u32, ts: u64, ns: u64) {
        let c = &mut self.cpus[cpu as usize];
        let Some(last) = c.steal.replace(ns) else { return };
        let advance = ns.saturating_sub(last);
        let closing = ts == c.last_switch;
        let who = if closing { c.left } else { c.running };
        let Some(t) = who.and_then(|tid| self.threads.get_mut(&tid)) else {
            c.unowned.push(ts, advance);
            return;
        };
        let b = &mut t.info.books;
        let (by_clock, run) = if closing {
            (b.last_run_by_clock, b.last_run)
        } else {
            match t.state {
                // As Tracker::switch will count this run at its switch out.
                State::Running { since, whole, .. } => (!whole || b.runtime_seen.is_none(), (since, ts)),
                _ => (false, (ts, ts)),
            }
        };
        b.stole(advance, by_clock, run);
    }

    /// A switch into `tid` at `at` that no hook saw, placed as it leaves
    /// at `until`: the steal read here since is its run's (counted by the
    /// clock).
    pub(super) fn claim_unowned(&mut self, cpu: u32, tid: u32, (at, until): (u64, u64)) {
        let ns = self.cpus[cpu as usize].unowned.take_from(at);
        if let Some(t) = self.threads.get_mut(&tid) {
            t.info.books.stole(ns, true, (at, until));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Unowned;

    #[test]
    fn only_what_was_read_after_the_switch_is_claimed_once() {
        let mut u = Unowned::default();
        u.push(10, 1);
        u.push(20, 2);
        u.push(30, 4);
        assert_eq!(u.take_from(20), 6);
        assert_eq!(u.take_from(0), 1, "the rest, once");
    }

    #[test]
    fn past_four_readings_the_last_keeps_the_sum() {
        let mut u = Unowned::default();
        for (ts, ns) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16)] {
            u.push(ts, ns);
        }
        assert_eq!(u.take_from(4), 24);
        assert_eq!(u.take_from(0), 7);
    }
}
