//! A watched thread's wait on a runqueue as the kernel books it, for
//! Books::kernel_stale_ns: wakeup_preempt() skips the runqueue clock's
//! update, so the kernel books the thread's run up to its preemption as
//! waiting. The kernel's length of the wait is the run time it books for
//! the tasks that ran meanwhile (each switch record's `prev_ran_ns`); what
//! it exceeds the wait we saw by, up to what the thread had run, is stale.
//! What it falls short of ours by is Books::kernel_short_ns: the switch
//! came after the kernel last read its clock (a host pause there).

/// Set at the thread's preempted switch out, on its CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct KernelWait {
    /// The thread.
    pub tid: u32,
    /// The kernel's run time of the tasks that have run since (None once
    /// one's is not known).
    ran_since: Option<u64>,
    /// How long the thread had run before: what of it the kernel can have
    /// booked as waiting, at most (0 if not known).
    ran_for: u64,
}

impl KernelWait {
    pub fn new(tid: u32, ran_for: u64) -> KernelWait {
        KernelWait { tid, ran_since: Some(0), ran_for }
    }

    /// A task switched out on the thread's CPU after running `ran_ns` by
    /// the kernel's clock (0 or u32::MAX: not known).
    pub fn ran(&mut self, tid: u32, ran_ns: u32) {
        if tid != self.tid {
            self.ran_since = self.ran_since.filter(|_| ran_ns > 0 && ran_ns < u32::MAX).map(|s| s + u64::from(ran_ns));
        }
    }

    /// The thread is back after waiting `waited` ns by our clock: what of
    /// its run the kernel booked as waiting (0 if not known).
    pub fn stale(self, waited: u64) -> u64 {
        self.ran_since.map_or(0, |kernel| kernel.saturating_sub(waited).min(self.ran_for))
    }

    /// The thread is back after waiting `waited` ns by our clock: what of
    /// that wait the kernel booked to the tasks that ran meanwhile, as
    /// their run (0 if not known). Their run ends where `__schedule()` read
    /// the runqueue clock, ours at the switch's tracepoint: a host pause
    /// between the two (69 µs seen here in a 79 µs wait) is our wait and
    /// the next task's run by the kernel's books.
    pub fn short(self, waited: u64) -> u64 {
        self.ran_since.map_or(0, |kernel| waited.saturating_sub(kernel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_wait_beyond_ours_is_stale_up_to_the_threads_run() {
        let mut w = KernelWait::new(7, 50_000);
        w.ran(9, 120_000);
        w.ran(7, 999_000); // the thread's own switch: not the kernel's wait
        w.ran(10, 30_000);
        assert_eq!(w.stale(130_000), 20_000, "150 µs booked, 130 µs seen");
        assert_eq!(w.stale(10_000), 50_000, "never more than the thread had run");
        assert_eq!(w.stale(200_000), 0);
        assert_eq!(w.short(130_000), 0, "the kernel's wait is the longer");
        assert_eq!(w.short(200_000), 50_000, "150 µs booked, 200 µs seen");
    }

    #[test]
    fn one_unknown_run_leaves_it_unknown() {
        for unknown in [0, u32::MAX] {
            let mut w = KernelWait::new(7, 50_000);
            w.ran(9, 120_000);
            w.ran(10, unknown);
            w.ran(11, 30_000);
            assert_eq!(w.stale(1_000), 0, "{unknown}");
            assert_eq!(w.short(1_000_000), 0, "{unknown}");
        }
    }
}
