//! The switches no program saw, as the next switch on the CPU reveals
//! them: a watched thread's switch out (a dropped record), or a task's
//! switch in (on our VMs no hook runs as the hypervisor agent's threads
//! switch out).

use crate::interval::Interval;
use crate::record::Task;

use super::super::thread::{Found, State};
use super::{Pending, Tracker};

impl Tracker {
    /// A switch out of `prev` while the tracker believed a watched thread
    /// ran here: that thread's switch out was not seen (a dropped record).
    /// It ran until at most `cut`, when prev came in; then it slept or
    /// waited, which its next wake-up or switch in will say.
    pub(super) fn unseen_switch_out(&mut self, cpu: u32, prev: u32, cut: u64, out: &mut dyn FnMut(Interval)) {
        let Some(w) = self.cpus[cpu as usize].running.filter(|&w| w != prev) else { return };
        {
            let c = &mut self.cpus[cpu as usize];
            if let Some((t0, source)) = c.start.take() {
                c.pending = Some(Pending { t0, t1: cut.max(t0), tid: w, source });
            }
            c.depth = 0;
            c.running = None;
        }
        self.close_pending(cpu, out);
        if let Some(t) = self.threads.get_mut(&w) {
            if let State::Running { cpu: on, since, .. } = t.state {
                if on == cpu {
                    let cut = cut.max(since);
                    t.info.books.ran(since, cut, None);
                    t.state = State::Unseen { cpu, since: cut };
                }
            }
        }
    }

    /// A switch out of `prev` at `ts` that the tracker did not know ran
    /// here: the switch into it was not seen. `arrived` (when the kernel
    /// says how long it had run) places that switch; else its last stretch
    /// is not in its books, and they say so.
    pub(super) fn unseen_switch_in(&mut self, cpu: u32, prev: &Task, (arrived, ts): (Option<u64>, u64), out: &mut dyn FnMut(Interval)) {
        if self.cpus[cpu as usize].running == Some(prev.pid) {
            return;
        }
        let Some(t) = self.thread(prev, cpu, Found::Switch) else { return };
        // Known before (not found just now): a switch in was missed.
        let known = t.info.books.from_ns.is_some() || !matches!(t.state, State::Sleeping);
        match arrived {
            Some(at) => {
                if known {
                    t.info.books.placed += 1;
                    // Asleep as far as we know: its wake-up was not seen
                    // either, and the wait before this switch is only in
                    // the kernel's books, read as it leaves.
                    t.info.books.unseen_wait = t.state == State::Sleeping && t.info.books.delay_seen.is_some();
                }
                // Not seen: what the kernel booked there is not known.
                self.switch_in(cpu, at, prev, None, out);
                self.claim_unowned(cpu, prev.pid, (at, ts));
            }
            None if known => {
                t.info.books.unplaced += 1;
                t.state = State::Sleeping;
            }
            None => {}
        }
    }
}
