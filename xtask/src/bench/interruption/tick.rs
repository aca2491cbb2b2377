//! Where the watched CPU's ticks fall, from the kernel's own books: the
//! tick's hrtimer expiry in /proc/timer_list gives its phase, and the
//! local-timer count of /proc/interrupts over the run gives HZ. A tick
//! runs on that grid for as long as the CPU is busy (it is re-armed a
//! period on each time, and a stopped tick restarts on the same grid),
//! so its instants are known without guessing them from the gaps: a
//! host pause that merges with a tick moves where the gap begins, never
//! the tick.

/// The periods a tick can have, ns (HZ 1000, 300, 250, 100), as the
/// kernel rounds them: (NSEC_PER_SEC + HZ / 2) / HZ.
pub const PERIODS: [(u64, u64); 4] = [(1000, 1_000_000), (300, 3_333_333), (250, 4_000_000), (100, 10_000_000)];

/// CPU `cpu`'s local timer interrupts so far (the `LOC` row of
/// /proc/interrupts; x86 only: None elsewhere).
pub fn local_timer_count(interrupts: &str, cpu: usize) -> Option<u64> {
    let row = interrupts.lines().find(|l| l.trim_start().starts_with("LOC:"))?;
    row.trim_start().strip_prefix("LOC:")?.split_whitespace().nth(cpu)?.parse().ok()
}

/// The expiry, CLOCK_MONOTONIC ns, of CPU `cpu`'s tick timer in
/// /proc/timer_list (`tick_nohz_handler` from 6.9, `tick_sched_timer`
/// before): the line after its entry, "# expires at SOFT-HARD nsecs".
pub fn tick_expiry(timer_list: &str, cpu: usize) -> Option<u64> {
    let header = format!("cpu: {cpu}");
    let mut lines = timer_list.lines().skip_while(|l| l.trim() != header).skip(1);
    let mut entry = false;
    for l in lines.by_ref() {
        if l.starts_with("cpu: ") {
            return None;
        }
        if entry {
            let at = l.trim_start().strip_prefix("# expires at ")?;
            return at.split(['-', ' ']).next()?.parse().ok();
        }
        entry = l.contains("tick_nohz_handler") || l.contains("tick_sched_timer");
    }
    None
}

/// The tick's period for `per_sec` local timer interrupts a second on a
/// busy CPU: the nearest HZ (its other timers add a few), or None if no
/// HZ is near (the tick was stopped or something else fired as often).
pub fn period_of(per_sec: f64) -> Option<u64> {
    let (hz, period) = PERIODS.into_iter().min_by(|a, b| (a.0 as f64 - per_sec).abs().total_cmp(&(b.0 as f64 - per_sec).abs()))?;
    ((per_sec - hz as f64).abs() <= 0.15 * hz as f64).then_some(period)
}

/// The tick's (period, phase) from both books: the LOC counts before and
/// after a run of `secs`, and an expiry read during it.
pub fn grid(loc: (u64, u64), secs: f64, expiry: u64) -> Option<(u64, u64)> {
    let period = period_of(loc.1.checked_sub(loc.0)? as f64 / secs)?;
    Some((period, expiry % period))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMER_LIST: &str = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 84725434048425 nsecs\n\n\
cpu: 0\n clock 0:\n  .base:               0000000000000000\n active timers:\n \
#0: <00000000aa83bb22>, tick_nohz_handler, S:01\n # expires at 84725436000000-84725436000000 nsecs [in 1951575 to 1951575 nsecs]\n\
cpu: 1\n clock 0:\n active timers:\n #0: <0000000011111111>, hrtimer_wakeup, S:01\n # expires at 84725435000500-84725435050500 nsecs [in 1 to 2 nsecs]\n \
#1: <0000000043b2192a>, tick_nohz_handler, S:01\n # expires at 84747796000000-84747796000000 nsecs [in 741032 to 741032 nsecs]\n";

    #[test]
    fn the_tick_timer_is_read_from_its_cpus_section_only() {
        assert_eq!(tick_expiry(TIMER_LIST, 1), Some(84_747_796_000_000));
        assert_eq!(tick_expiry(TIMER_LIST, 0), Some(84_725_436_000_000));
        assert_eq!(tick_expiry(TIMER_LIST, 2), None);
        // A CPU whose tick is stopped lists none: the next CPU's is not its.
        let stopped = TIMER_LIST.replace("#0: <00000000aa83bb22>, tick_nohz_handler", "#0: <00000000aa83bb22>, it_real_fn");
        assert_eq!(tick_expiry(&stopped, 0), None);
        // Before 6.9 the handler was tick_sched_timer.
        assert_eq!(tick_expiry(&TIMER_LIST.replace("tick_nohz_handler", "tick_sched_timer"), 1), Some(84_747_796_000_000));
    }

    #[test]
    fn the_local_timer_row_gives_each_cpus_count() {
        let text = "           CPU0       CPU1\n  0:         44          0   IO-APIC   2-edge      timer\n\
NMI:          0          0   Non-maskable interrupts\nLOC:   23462301   25955697   Local timer interrupts\n";
        assert_eq!(local_timer_count(text, 0), Some(23_462_301));
        assert_eq!(local_timer_count(text, 1), Some(25_955_697));
        assert_eq!(local_timer_count(text, 2), None);
        assert_eq!(local_timer_count("           CPU0\n", 0), None);
    }

    #[test]
    fn hz_is_the_nearest_and_only_if_near() {
        assert_eq!(period_of(254.0), Some(4_000_000));
        assert_eq!(period_of(1003.0), Some(1_000_000));
        assert_eq!(period_of(301.0), Some(3_333_333));
        assert_eq!(period_of(99.0), Some(10_000_000));
        // A stopped tick, or another timer as often as the tick.
        assert_eq!(period_of(3.0), None);
        assert_eq!(period_of(520.0), None);
        assert_eq!(grid((1000, 1762), 3.0, 84_747_796_000_123), Some((4_000_000, 123)));
        assert_eq!(grid((1000, 999), 3.0, 0), None);
    }
}
