//! A context switch on a watched CPU: the run of the thread that leaves
//! booked (by the kernel's own count where its switch in was read), the
//! wait it begins, and the wait that ends for the thread that comes in,
//! emitted and booked beside the kernel's run_delay.

use crate::interval::{Interval, Source};
use crate::record::Task;

use super::super::thread::{unwrap32, Found, State};
use super::kernel_wait::KernelWait;
use super::{Pending, Tracker, JOIN_NS, TASK_DEAD};

impl Tracker {
    /// With each task, the kernel's run_delay as read at this switch.
    pub(super) fn switch(
        &mut self,
        cpu: u32,
        ts: u64,
        (prev, prev_state, prev_delay, prev_runtime): (&Task, u32, Option<u32>, u32),
        (next, next_delay, next_runtime): (&Task, Option<u32>, u32),
        out: &mut dyn FnMut(Interval),
    ) {
        // The thread's last interruption led to this preemption: one gap.
        let joined = match self.cpus[cpu as usize].pending {
            Some(p)
                if p.source == Source::Interrupted
                    && prev_state == 0
                    && p.tid == prev.pid
                    && self.cpus[cpu as usize].start.is_none()
                    && ts <= p.t1 + JOIN_NS =>
            {
                self.cpus[cpu as usize].pending = None;
                Some(p.t0)
            }
            _ => None,
        };
        self.close_pending(cpu, out);
        {
            let c = &mut self.cpus[cpu as usize];
            // A switch leaves no interrupt frame open; an interruption in
            // progress ends with the thread's run.
            if let (Some((t0, source)), Some(tid)) = (c.start.take(), c.running) {
                c.pending = Some(Pending { t0, t1: ts.max(t0), tid, source });
            }
            c.depth = 0;
            c.running = None;
            c.switched = true;
        }
        self.close_pending(cpu, out);
        if let Some(t) = self.thread(prev, cpu, Found::Switch) {
            let mut ran_for = 0;
            match t.state {
                State::Running { since, whole, .. } => {
                    // The kernel's run time then and now; a run begun
                    // before the window counts only the clock's part.
                    let seen = t.info.books.runtime_seen.take().filter(|_| whole);
                    let kernel = seen.map(|r| unwrap32(prev_runtime.wrapping_sub(r), ts.saturating_sub(since)));
                    t.info.books.ran(since, ts, kernel);
                    ran_for = ts.saturating_sub(since);
                }
                // Found at its switch out: its window begins here.
                _ => t.info.books.seen(ts),
            }
            // Whatever it waits for next is in the window.
            t.info.books.kernel_delay(prev_delay, true);
            // TASK_RUNNING (0): switched out while it still wanted the CPU.
            t.state = if prev_state == 0 {
                State::Preempted { cpu, since: ts, from: joined.unwrap_or(ts) }
            } else if prev_state & TASK_DEAD != 0 {
                State::Exited
            } else {
                State::Sleeping
            };
            self.cpus[cpu as usize].waiting = (prev_state == 0).then_some(prev.pid);
            if prev_state == 0 {
                self.cpus[cpu as usize].kernel_wait = Some(KernelWait::new(prev.pid, ran_for));
            }
        }
        // Another task switched in while a watched one waits here: osnoise's
        // thread noise, one per task run.
        if let Some(w) = self.cpus[cpu as usize].waiting.filter(|&w| w != next.pid) {
            if let Some(t) = self.threads.get_mut(&w) {
                t.info.classes.thread += 1;
            }
        }
        self.switch_in(cpu, ts, next, next_delay, out);
        if let Some(t) = self.threads.get_mut(&next.pid) {
            t.info.books.runtime_seen = Some(next_runtime);
        }
    }

    /// `task` runs on `cpu` from `ts`: the wait that ends here is emitted
    /// and booked. `delay`: its run_delay before the kernel books that
    /// wait (None: not read, or the switch was not seen).
    pub(super) fn switch_in(&mut self, cpu: u32, ts: u64, task: &Task, delay: Option<u32>, out: &mut dyn FnMut(Interval)) {
        let Some(t) = self.thread(task, cpu, Found::Switch) else { return };
        if let Some(from) = t.info.last_cpu.filter(|&f| f != cpu) {
            match t.info.migrations.iter_mut().find(|m| m.0 == from && m.1 == cpu) {
                Some(m) => m.2 += 1,
                None => t.info.migrations.push((from, cpu, 1)),
            }
        }
        t.info.last_cpu = Some(cpu);
        // Asleep as far as we know, inside its window: its wake-up was not
        // seen (a waker no hook runs for), but the wait that ends here is
        // in the window, and the kernel's books give it at the next reading.
        let unseen_wake = t.state == State::Sleeping && t.info.books.from_ns.is_some();
        let waited = match t.state {
            State::Preempted { cpu: on, since, from } => Some((on, since, from, Source::Preempted)),
            State::Woken { cpu: on, at, from } => Some((on, at, from, Source::Wakeup)),
            // No wake-up came: it was runnable all along.
            State::Unseen { cpu: on, since } => Some((on, since, since, Source::Preempted)),
            State::Running { cpu: on, .. } => {
                // Its switch out there was not seen, nor when: that run
                // and any wait after it are not in its books.
                t.info.books.unplaced += 1;
                if self.cpus[on as usize].running == Some(task.pid) {
                    self.cpus[on as usize].running = None;
                }
                None
            }
            State::Sleeping | State::Exited => {
                t.info.books.seen(ts);
                None
            }
        };
        let t = self.threads.get_mut(&task.pid).expect("found above");
        // A wake-up whose wait the kernel booked less than half of, by its
        // own run_delay: its runqueue clock stopped at the wake-up, which
        // it does when the wake-up preempts what runs (wakeup_preempt()).
        let preempting = match (waited, delay, t.info.books.delay_seen) {
            (Some((_, at, _, Source::Wakeup)), Some(d), Some(seen)) => u64::from(d.wrapping_sub(seen)) * 2 < ts.saturating_sub(at),
            _ => false,
        };
        t.state = State::Running { cpu, since: ts, whole: true };
        if matches!(waited, Some((.., Source::Wakeup))) {
            t.info.classes.wakeups += 1;
        }
        if let Some((on, since, _, source)) = waited {
            t.info.books.queued(since, ts, source == Source::Wakeup);
            // What of the kernel's wait it ran, and of ours the kernel did not
            // book as waiting (Books::kernel_stale_ns, kernel_short_ns).
            if let Some(w) = self.cpus[on as usize].kernel_wait.take().filter(|w| w.tid == task.pid && on == cpu) {
                if source == Source::Preempted {
                    t.info.books.booked.kernel_stale_ns += w.stale(ts - since);
                    t.info.books.booked.kernel_short_ns += w.short(ts - since);
                }
            }
        }
        // The wait that ends here is in the window if one began before it;
        // else the window begins now, after it.
        t.info.books.kernel_delay(delay, waited.is_some() || unseen_wake);
        if unseen_wake && t.info.books.delay_seen.is_some() {
            t.info.books.unseen_wait = true;
        }
        let tid = task.pid;
        self.cpus[cpu as usize].running = Some(tid);
        if let Some((on, ..)) = waited {
            let w = &mut self.cpus[on as usize].waiting;
            if *w == Some(tid) {
                *w = None;
            }
        }
        if let Some((on, _, from, source)) = waited {
            self.emit_delivered(out, on, (from, ts.max(from)), source, tid, preempting);
        }
    }
}
