//! The clocks jitterwatch reads, in one place: CLOCK_MONOTONIC, which is
//! what `bpf_ktime_get_ns()` stamps kernel events with (so the probe's
//! gaps and the kernel's events line up), and a thread's own CPU time.

/// CLOCK_MONOTONIC in ns (the vDSO: no syscall).
#[inline(always)]
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
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
}
