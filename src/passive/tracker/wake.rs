//! Where a wake-up's wait begins: the enqueue, which the kernel's books
//! of the wait start from, placed by the reschedule IPI the waker sent
//! before its tracepoint fired; and where the wake-up itself began.

use crate::record::Task;

use super::Tracker;

/// A reschedule IPI sent this long before a wake-up's tracepoint, from the
/// waker's CPU, was sent by that wake-up: its send is a VM exit of 8-16 µs
/// on our VMs (under 1 µs on hardware); anything older is another's.
pub(super) const RESCHED_NS: u64 = 50_000;

impl Tracker {
    /// A wake-up of `task` onto `target` seen at its `sched_wakeup` (`ts`,
    /// on `waker`'s CPU): when it began (its `sched_waking`: the waker's
    /// search for a CPU, the enqueue, the IPI) and when the task was
    /// queued, where the kernel's books of its wait begin. The tracepoint
    /// fires after the enqueue; on the target CPU itself (a wake-up queued
    /// to it by IPI, or a local one) just after it. From another CPU, the
    /// waker enqueues and then, to preempt, sends the reschedule IPI, a VM
    /// exit on our VMs: 8-16 µs between the enqueue and the tracepoint,
    /// booked by the kernel as waiting (or, preempting, as run). That IPI's
    /// send, seen between the wake-up's start and its tracepoint on the
    /// waker's CPU, places the enqueue (it follows it by a few hundred ns):
    /// the waker's CPU runs the wake-up with interrupts off, so the last
    /// reschedule IPI it sent there before this wake-up's record, and after
    /// the record of the one before, is this one's if it is recent
    /// ([`RESCHED_NS`]; with `--wake-origins`, if it follows this
    /// wake-up's start). Without origin records (`--no-origins`) the
    /// enqueue is the tracepoint's time.
    pub(super) fn wake_edges(&self, task: &Task, target: u32, waker: u32, ts: u64) -> (u64, u64) {
        let Some(c) = self.cpus.get(target as usize) else { return (ts, ts) };
        let began = c.waking.filter(|&(tid, from, at)| tid == task.pid && from == waker && at <= ts).map(|w| w.2);
        let queued = match c.resched {
            Some((from, at)) if waker != target && from == waker && at <= ts && ts - at <= RESCHED_NS && began.is_none_or(|b| at >= b) => {
                at
            }
            _ => ts,
        };
        (began.unwrap_or(queued), queued)
    }
}
