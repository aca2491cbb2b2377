//! The clocks jitterwatch reads, in one place: CLOCK_MONOTONIC, which is
//! what `bpf_ktime_get_ns()` stamps kernel events with (so the probe's
//! gaps and the kernel's events line up), and a thread's own CPU time.

/// CLOCK_MONOTONIC in ns (the vDSO: no syscall).
#[inline(always)]
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in ns since the epoch: only to place an application's
/// wall-clock log beside a run (`ClockPair`), never to time anything.
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME read together: a log on either clock
/// goes onto the other by their difference (`jitterwatch explain`). The
/// monotonic reading is the middle of two around the realtime one, so the
/// pair is as exact as one clock read (tens of ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClockPair {
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

impl ClockPair {
    pub fn now() -> Self {
        let a = now_ns();
        let realtime_ns = realtime_ns();
        let b = now_ns();
        ClockPair { monotonic_ns: a + (b - a) / 2, realtime_ns }
    }

    /// CLOCK_REALTIME less CLOCK_MONOTONIC, ns (it is positive on any
    /// machine whose clock is set past 1970 plus its uptime).
    pub fn offset_ns(&self) -> i128 {
        self.realtime_ns as i128 - self.monotonic_ns as i128
    }
}

/// CPU time the calling thread has used, ns.
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[inline(always)]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; both clocks exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn clocks_move_forward() {
        let (a, b) = (super::now_ns(), super::now_ns());
        assert!(b >= a && a > 0);
        assert!(super::thread_cpu_ns() > 0);
    }

    #[test]
    fn a_pair_is_read_together() {
        let p = super::ClockPair::now();
        let q = super::ClockPair::now();
        // Two pairs read back to back differ alike on both clocks (unless
        // the wall clock is stepped just then: a 1 ms allowance).
        let drift = (q.offset_ns() - p.offset_ns()).abs();
        assert!(drift < 1_000_000, "{p:?} {q:?}");
        assert!(p.offset_ns() > 0);
    }
}
