//! Thin wrappers over the few syscalls jitterwatch needs.

use std::io;

pub fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Pins the calling thread to `cpus`.
pub fn pin_to(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data, zero is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET bounds-checks against the set size.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: a valid set of the size we pass.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SCHED_FIFO at `prio` for the calling thread.
pub fn set_fifo(prio: i32) -> io::Result<()> {
    set_fifo_of(0, prio)
}

/// SCHED_FIFO at `prio` for thread `tid` (0: the calling thread).
pub fn set_fifo_of(tid: u32, prio: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: prio };
    // SAFETY: a valid param; an unknown tid is an error return, not UB.
    if unsafe { libc::sched_setscheduler(tid as libc::pid_t, libc::SCHED_FIFO, &p) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the running kernel is PREEMPT_RT (softirqs and IRQ handlers run
/// in threads): /sys/kernel/realtime where the kernel has it, else the
/// build string every RT kernel carries (`#1 SMP PREEMPT_RT ...`).
pub fn preempt_rt() -> bool {
    std::fs::read_to_string("/sys/kernel/realtime").is_ok_and(|s| s.trim() == "1")
        || std::fs::read_to_string("/proc/sys/kernel/version").is_ok_and(|v| v.split_whitespace().any(|w| w == "PREEMPT_RT"))
}
