//! The wake-up probe (`--probe wakeup`): the probe thread sleeps to an
//! absolute deadline every period (`clock_nanosleep(CLOCK_MONOTONIC,
//! TIMER_ABSTIME)`, as cyclictest does) and measures how late it runs.
//! Every latency goes into a histogram of 1 µs buckets (cyclictest's
//! resolution); one at or over the threshold is an interval from the
//! deadline to the clock read after the sleep, which the engine explains
//! like any gap. Nothing in the loop allocates or locks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::{ProbeConfig, ProbeShared};
use crate::interval::{Interval, Source};

/// Latencies are counted in 1 µs buckets up to this; longer ones in one
/// overflow bucket (their maximum is kept exactly).
pub const HIST_US: usize = 10_000;
/// Calibration: the wake-ups of the first 100 ms (at least 5), before
/// the threshold is known.
const CALIBRATE_NS: u64 = 100_000_000;
const CALIBRATE_MIN: usize = 5;
/// The default threshold: twice the median latency of the calibration,
/// and never under this.
const THRESHOLD_MIN_NS: u64 = 10_000;

/// What the wake-up probe counts, shared with the collector (single
/// writer: the probe; relaxed loads elsewhere).
pub struct WakeStats {
    pub period_ns: u64,
    /// The probe thread's timer slack (PR_GET_TIMERSLACK), ns.
    pub slack_ns: AtomicU64,
    pub wakeups: AtomicU64,
    pub sum_ns: AtomicU64,
    pub min_ns: AtomicU64,
    pub max_ns: AtomicU64,
    /// `[i]`: latencies in [i, i+1) µs; the last one, everything longer.
    pub hist_us: Box<[AtomicU64]>,
}

/// The wake-up latencies in cyclictest's terms, read at one moment.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Latency {
    pub period_ns: u64,
    pub slack_ns: u64,
    pub wakeups: u64,
    pub min_ns: u64,
    pub avg_ns: f64,
    pub max_ns: u64,
    /// Nearest rank in 1 µs buckets (the bucket's upper end; the maximum
    /// itself when it falls in the overflow bucket).
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
}

impl WakeStats {
    pub fn new(period_ns: u64) -> Self {
        WakeStats {
            period_ns,
            slack_ns: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
            hist_us: (0..=HIST_US).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    #[inline]
    fn record(&self, lat: u64) {
        // One writer: load-and-store is enough, and costs no locked op.
        let bump = |a: &AtomicU64, by: u64| a.store(a.load(Relaxed) + by, Relaxed);
        bump(&self.wakeups, 1);
        bump(&self.sum_ns, lat);
        if lat < self.min_ns.load(Relaxed) {
            self.min_ns.store(lat, Relaxed);
        }
        if lat > self.max_ns.load(Relaxed) {
            self.max_ns.store(lat, Relaxed);
        }
        bump(&self.hist_us[((lat / 1000) as usize).min(HIST_US)], 1);
    }

    /// None before the first wake-up.
    pub fn latency(&self) -> Option<Latency> {
        let n = self.wakeups.load(Relaxed);
        if n == 0 {
            return None;
        }
        let max = self.max_ns.load(Relaxed);
        let counts: Vec<u64> = self.hist_us.iter().map(|a| a.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let at = |ppm: u64| -> u64 {
            let rank = (ppm as u128 * total as u128).div_ceil(1_000_000).max(1) as u64;
            let mut seen = 0;
            for (i, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return if i == HIST_US { max } else { ((i as u64 + 1) * 1000).min(max) };
                }
            }
            max
        };
        Some(Latency {
            period_ns: self.period_ns,
            slack_ns: self.slack_ns.load(Relaxed),
            wakeups: n,
            min_ns: self.min_ns.load(Relaxed),
            avg_ns: self.sum_ns.load(Relaxed) as f64 / n as f64,
            max_ns: max,
            p50_ns: at(500_000),
            p99_ns: at(990_000),
            p999_ns: at(999_000),
        })
    }
}

fn now() -> u64 {
    crate::clock::now_ns()
}

/// Sleeps until `deadline` (CLOCK_MONOTONIC ns), through signals.
fn sleep_until(deadline: u64) {
    let ts = libc::timespec { tv_sec: (deadline / 1_000_000_000) as libc::time_t, tv_nsec: (deadline % 1_000_000_000) as libc::c_long };
    loop {
        // SAFETY: a valid timespec; no remainder is asked for with TIMER_ABSTIME.
        let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if r != libc::EINTR {
            return;
        }
    }
}

/// On the probe thread, before it starts: sets its timer slack if asked
/// (after the scheduling policy, which resets it for SCHED_FIFO) and
/// keeps what the kernel says it is, for the engine's `slack` cause.
pub(super) fn setup(cfg: ProbeConfig, w: &WakeStats) {
    if let Some(slack) = cfg.timer_slack_ns {
        // SAFETY: PR_SET_TIMERSLACK takes the slack in ns as its argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong, 0, 0, 0) };
    }
    // SAFETY: PR_GET_TIMERSLACK has no arguments and returns the slack.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    w.slack_ns.store(slack.max(0) as u64, Relaxed);
}

pub(super) fn run(s: &ProbeShared, cfg: ProbeConfig, w: &WakeStats) {
    let period = w.period_ns;
    let start = now();
    s.first_sample_ns.store(start, Relaxed);
    let mut next = start + period;
    let mut calibration: Vec<u64> = Vec::with_capacity(256);
    let mut threshold = cfg.threshold.given().unwrap_or(u64::MAX);
    let calibrate_until = start + CALIBRATE_NS;
    let mut loops = 0u64;
    if let Some(t) = cfg.threshold.given() {
        s.threshold_ns.store(t, Relaxed);
    }
    while !s.stop.load(Relaxed) {
        sleep_until(next);
        let t = now();
        let lat = t.saturating_sub(next);
        w.record(lat);
        // The screen's log2 histogram shows latencies where the spin probe's
        // loop gaps go (one writer: a plain load and store).
        let b = &s.hist[super::bucket(lat)];
        b.store(b.load(Relaxed) + 1, Relaxed);
        loops += 1;
        if lat >= threshold {
            if !super::spin::still_on_cpu(s) {
                break;
            }
            let gap = Interval { cpu: s.cpu, t0: next, t1: t, source: Source::WakeupProbe, victim: None, smis: 0, delivery: false };
            if s.queue.push(gap).is_err() {
                s.overflow.fetch_add(1, Relaxed);
            }
        } else if threshold == u64::MAX {
            // Calibrating (the default threshold): only the first 100 ms.
            calibration.push(lat);
            if t >= calibrate_until && calibration.len() >= CALIBRATE_MIN {
                calibration.sort_unstable();
                threshold = crate::probe::threshold::Gate::cap(cfg.gate, (2 * calibration[calibration.len() / 2]).max(THRESHOLD_MIN_NS));
                s.threshold_ns.store(threshold, Relaxed);
                s.hot_start_ns.store(t, Relaxed);
            }
        }
        // The smallest latency stands for the floor; no interval reported
        // later starts before the next deadline.
        s.floor_ns.store(w.min_ns.load(Relaxed).max(1), Relaxed);
        s.loops.store(loops, Relaxed);
        s.progress.store(t, Relaxed);
        // Deadlines already past are skipped (as cyclictest does): the
        // latency is measured from the one the sleep was for.
        next += period;
        while next <= t {
            next += period;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{ProbeKind, ProbeShared};

    /// The loop for real, unpinned, for `ms`: what it counted and queued.
    fn run_for(threshold_ns: u64, ms: u64) -> ProbeShared {
        let s = ProbeShared::new(0, ProbeKind::Wakeup { period_ns: 1_000_000 });
        let cfg = ProbeConfig {
            kind: ProbeKind::Wakeup { period_ns: 1_000_000 },
            timer_slack_ns: Some(1),
            threshold: crate::probe::Threshold::Given(threshold_ns),
            gate: None,
            rt_prio: None,
            counter: None,
        };
        std::thread::scope(|sc| {
            sc.spawn(|| {
                // On its CPU, as a probe is (it stops when moved off it).
                crate::sys::pin_to(&[0]).unwrap();
                let w = s.wake.as_ref().unwrap();
                setup(cfg, w);
                run(&s, cfg, w)
            });
            std::thread::sleep(std::time::Duration::from_millis(ms));
            s.stop.store(true, Relaxed);
        });
        s
    }

    /// Woken on time (within a threshold no wake-up reaches): counted, never
    /// reported; with a threshold every wake-up passes, each is reported
    /// from its deadline.
    #[test]
    fn on_time_wakeups_are_counted_not_reported() {
        let s = run_for(1_000_000_000, 60);
        let w = s.wake.as_ref().unwrap().latency().unwrap();
        assert!(w.wakeups >= 20, "{w:?}");
        assert_eq!((s.queue.len(), w.slack_ns), (0, 1));
        let s = run_for(1, 30);
        let n = s.wake.as_ref().unwrap().wakeups.load(Relaxed);
        let gaps: Vec<Interval> = std::iter::from_fn(|| s.queue.pop()).collect();
        // 30 periods: some wake-ups, or the checks below check nothing.
        assert!(n >= 10, "only {n} wake-ups in 30 ms");
        assert_eq!(gaps.len() as u64, n);
        assert!(gaps.iter().all(|g| g.source == Source::WakeupProbe && g.t1 > g.t0), "{gaps:?}");
        assert!(gaps.windows(2).all(|p| p[1].t0 - p[0].t0 >= 1_000_000), "one deadline a period");
    }

    #[test]
    fn latency_in_cyclictest_terms() {
        let w = WakeStats::new(1_000_000);
        assert_eq!(w.latency(), None);
        // 1..=100 µs, plus 7.5 µs: p50 in the 50 µs bucket, p99 in the 99 µs one.
        for us in 1..=100u64 {
            w.record(us * 1000 + 500);
        }
        let l = w.latency().unwrap();
        assert_eq!((l.wakeups, l.min_ns, l.max_ns), (100, 1_500, 100_500));
        assert_eq!(l.avg_ns, 51_000.0);
        assert_eq!((l.p50_ns, l.p99_ns, l.p999_ns), (51_000, 100_000, 100_500));
        // Past the histogram: the maximum, exactly.
        w.record(25_000_000);
        assert_eq!(w.latency().unwrap().p999_ns, 25_000_000);
    }
}
