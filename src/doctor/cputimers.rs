//! What keeps a nohz_full CPU's tick that a run's `timer:tick_stop` names
//! but cannot point at. POSIX CPU timers on the watched CPUs' tasks: the
//! kernel keeps the tick running while a task there has one armed (tick
//! dependency POSIX_TIMER). The
//! timers a process made with timer_create are listed in
//! /proc/PID/timers; those on a CPU clock (CLOCK_PROCESS_CPUTIME_ID 2,
//! CLOCK_THREAD_CPUTIME_ID 3, or a clock from clock_getcpuclockid, which
//! is negative) are the ones that need the tick. setitimer's ITIMER_PROF
//! and ITIMER_VIRTUAL are not listed anywhere: a run names them only as
//! POSIX_TIMER.

use super::tasks::Thread;
use super::{finding, Ctx, Status};

const CHECK: &str = "timers";
const LISTED: usize = 8;

/// The CPU-clock timers listed in a /proc/PID/timers text.
pub(crate) fn cpu_clock_timers(text: &str) -> usize {
    text.lines()
        .filter_map(|l| l.strip_prefix("ClockID:"))
        .filter_map(|v| v.trim().parse::<i64>().ok())
        .filter(|&c| c == 2 || c == 3 || c < 0)
        .count()
}

/// Processes with a thread that runs, or can only run, on a watched
/// nohz_full CPU, and their CPU-clock timers.
pub(super) fn check(cx: &mut Ctx, threads: &[Thread], nohz: &[usize]) {
    let watched: Vec<usize> = cx.cpus.iter().copied().filter(|c| nohz.contains(c)).collect();
    if watched.is_empty() {
        return;
    }
    let on_watched =
        |t: &Thread| !t.kthread && (t.last_cpu.is_some_and(|c| watched.contains(&c)) || t.allowed.iter().all(|c| watched.contains(c)));
    let mut tgids: Vec<(u32, String)> = threads.iter().filter(|t| on_watched(t)).map(|t| (t.tgid, t.comm.clone())).collect();
    tgids.sort_by_key(|t| t.0);
    tgids.dedup_by_key(|t| t.0);
    let mut holders = Vec::new();
    for (tgid, comm) in &tgids {
        let Some(text) = cx.read_quiet(&format!("proc/{tgid}/timers")) else { continue };
        let n = cpu_clock_timers(&text);
        if n > 0 {
            holders.push(format!("{comm}[{tgid}]: {n} CPU-clock timer(s) in /proc/{tgid}/timers"));
        }
    }
    let cpus = Ctx::cpu_word(&watched);
    let f = if holders.is_empty() {
        finding(CHECK, "posix_cpu_timers", Status::Ok, format!("no POSIX CPU timer on the tasks of {cpus}"))
            .why("a task's timer on a CPU clock keeps its nohz_full CPU's tick running (POSIX_TIMER); setitimer's ITIMER_PROF/VIRTUAL are not listed, a run names them")
            .ev(format!("/proc/PID/timers of {} processes on {cpus}", tgids.len()))
    } else {
        let mut f = finding(CHECK, "posix_cpu_timers", Status::Warn, format!("POSIX CPU timers on {cpus} keep its tick running"))
            .why(crate::tick::why("POSIX_TIMER").unwrap_or_default())
            .fix(crate::tick::fix("POSIX_TIMER").unwrap_or_default());
        for h in holders.iter().take(LISTED) {
            f = f.ev(h.clone());
        }
        if holders.len() > LISTED {
            f = f.ev(format!("and {} more", holders.len() - LISTED));
        }
        f
    };
    cx.push(f);
}

/// Perf events open anywhere (PERF_EVENTS: a frequency-based sampling
/// event needs the tick of the CPUs it samples; which CPU an event is on
/// is not shown): the processes holding them, by their fds.
pub(super) fn perf_events(cx: &mut Ctx, threads: &[Thread], nohz: &[usize]) {
    if !cx.cpus.iter().any(|c| nohz.contains(c)) {
        return;
    }
    let me = (cx.root.canonicalize().ok().as_deref() == Some(std::path::Path::new("/"))).then(std::process::id);
    let mut tgids: Vec<(u32, &str)> =
        threads.iter().filter(|t| !t.kthread && Some(t.tgid) != me).map(|t| (t.tgid, t.comm.as_str())).collect();
    tgids.sort_by_key(|t| t.0);
    tgids.dedup_by_key(|t| t.0);
    let mut holders = Vec::new();
    for (tgid, comm) in tgids {
        let Ok(fds) = std::fs::read_dir(cx.root.join(format!("proc/{tgid}/fd"))) else { continue };
        let n = fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok()).filter(|l| l.as_os_str() == "anon_inode:[perf_event]").count();
        if n > 0 {
            holders.push(format!("{comm}[{tgid}]: {n} perf event(s)"));
        }
    }
    if holders.is_empty() {
        return;
    }
    let mut f = finding(CHECK, "perf_events", Status::Info, format!("perf events are open ({} processes)", holders.len()))
        .why("a frequency-based sampling event keeps the tick of the CPUs it samples (PERF_EVENTS); the kernel does not show which CPUs an event is on")
        .fix(crate::tick::fix("PERF_EVENTS").unwrap_or_default());
    for h in holders.iter().take(LISTED) {
        f = f.ev(h.clone());
    }
    cx.push(f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cpu_clocks_count() {
        let text = "ID: 0\nsignal: 14/0000000000000000\nnotify: signal/pid.42\nClockID: 1\n\
                    ID: 1\nsignal: 27/0000000000000000\nnotify: signal/pid.42\nClockID: 2\n\
                    ID: 2\nClockID: 3\nID: 3\nClockID: -6\nID: 4\nClockID: 0\nID: 5\nClockID: x\n";
        assert_eq!(cpu_clock_timers(text), 3);
        assert_eq!(cpu_clock_timers(""), 0);
    }
}
