//! The probe's own thread, once started: the floor's calibration, then
//! the hot loop on the chosen clock; gaps leave it on a cold path.

use std::sync::atomic::Ordering::Relaxed;

use super::floor::{FloorMeter, BLOCK};
use super::smi::SMI_MIN_GAP_NS;
use super::{bucket, ProbeConfig, ProbeShared, CALIBRATE_LOOPS, CALIBRATE_MAX_NS, CALIBRATE_NS, HIST_BUCKETS, PUBLISH_EVERY};
use crate::interval::{Interval, Source};
use crate::loop_clock::{Counter, LoopClock, Vdso};

/// The smallest threshold, in loop floors (the loop's period): a loop
/// iteration often takes up to twice it (a clock that steps coarser than
/// the loop), so anything lower reports the loop itself (`--threshold 0`
/// made millions of rows a second).
pub const MIN_FLOORS: u64 = 2;

/// How long the counter's rate is first measured against CLOCK_MONOTONIC;
/// the loop re-anchors it about once a second from then on.
const COUNTER_CALIBRATE_NS: u64 = 5_000_000;

pub(super) fn run(s: &ProbeShared, cfg: ProbeConfig) {
    let counter = cfg.counter.map(|_| {
        let start = Counter::begin();
        let until = crate::clock::now_ns() + COUNTER_CALIBRATE_NS;
        while crate::clock::now_ns() < until {
            std::hint::spin_loop();
        }
        Counter::finish(start)
    });
    match counter.flatten() {
        Some(counter) => {
            s.uses_counter.store(true, Relaxed);
            if let Some(state) = calibrate(s, cfg, counter) {
                let counter = hot(s, counter, state);
                s.tsc_drift_ns.store(counter.drift_ns(), Relaxed);
            }
        }
        None => {
            if let Some(state) = calibrate(s, cfg, Vdso) {
                hot(s, Vdso, state);
            }
        }
    }
}

/// Publishes between re-anchorings of the loop's clock (~1 s).
const REFINE_EVERY: u32 = 10_000;

/// What calibration hands the loop: the histogram and loop count so far,
/// the floor and the threshold in ns.
struct Calibrated {
    hist: [u64; HIST_BUCKETS],
    loops: u64,
    floor_ns: u64,
    threshold_ns: u64,
}

fn publish(s: &ProbeShared, hist: &[u64; HIST_BUCKETS], t_ns: u64, loops: u64) {
    for (a, &v) in s.hist.iter().zip(hist) {
        a.store(v, Relaxed);
    }
    s.progress.store(t_ns, Relaxed);
    s.loops.store(loops, Relaxed);
}

/// Iterations first run in blocks alone, for a first figure of the floor:
/// calibration proper then runs the hot loop's own path ([`fast_below`]),
/// so that it turns at the hot loop's speed.
const FIRST_LOOPS: u32 = 1 << 12;

/// The smallest difference of `clock`'s readings that converts to at
/// least `ns`.
fn first_units_of(clock: impl LoopClock, ns: u64) -> u64 {
    let mut u = clock.delta_units(ns);
    while u > 0 && clock.delta_ns(u - 1) >= ns {
        u -= 1;
    }
    while clock.delta_ns(u) < ns {
        u += 1;
    }
    u
}

/// The deltas, in `clock`'s units, that are the loop itself: under
/// [`MIN_FLOORS`] floors (and under `limit`, the threshold). They are
/// counted in a register, as one turn of the floor's log2 bucket, so that
/// the common iteration touches no memory and takes one predictable path.
/// A delta under the floor is not a faster turn (the loop cannot turn
/// faster than its period) but two reads the CPU ran closer together
/// (rdtsc is not serialising), next to a longer one; sent down the
/// histogram's path, they and their neighbours made the TSC loop's branch
/// mispredict about one iteration in five (11.5 ns a turn against 9.7 ns).
fn fast_below(clock: impl LoopClock, floor_ns: u64, limit: u64) -> u64 {
    first_units_of(clock, MIN_FLOORS.saturating_mul(floor_ns).min(1 << 40)).min(limit)
}

/// The floor of this loop on this CPU (its period, [`super::floor`]), and
/// the threshold from it; None if the threshold asked for is under
/// [`MIN_FLOORS`] floors.
fn calibrate(s: &ProbeShared, cfg: ProbeConfig, clock: impl LoopClock) -> Option<Calibrated> {
    let mut hist = [0u64; HIST_BUCKETS];
    let mut prev = clock.read();
    s.first_sample_ns.store(clock.to_ns(prev), Relaxed);
    // In the clock's units, as the hot loop runs: a conversion per
    // iteration would make the floor the conversion's.
    let end = prev + clock.delta_units(CALIBRATE_NS);
    let end_max = prev + clock.delta_units(CALIBRATE_MAX_NS);
    // A first floor from blocks alone (its deltas are counted as loops,
    // not in the histogram).
    let mut first = FloorMeter::new();
    for _ in 0..FIRST_LOOPS / BLOCK {
        let start = prev;
        for _ in 0..BLOCK {
            prev = clock.read();
        }
        first.add_block(prev - start);
    }
    let first_floor = first.floor_ns(|u| clock.delta_ns(u)).unwrap_or(1);
    let fast_bucket = bucket(first_floor);
    let fast_limit = fast_below(clock, first_floor, u64::MAX);
    let mut loops = u64::from(FIRST_LOOPS);
    let mut fast = 0u64;
    let mut meter = FloorMeter::new();
    let mut block_start = prev;
    let mut n = 0u32;
    loop {
        let t = clock.read();
        let d = t - prev;
        if d < fast_limit {
            fast += 1;
        } else {
            hist[bucket(clock.delta_ns(d))] += 1;
        }
        prev = t;
        n += 1;
        if n == BLOCK {
            n = 0;
            loops += u64::from(BLOCK);
            meter.add_block(t - block_start);
            block_start = t;
            if t >= end && (loops >= CALIBRATE_LOOPS || t >= end_max) {
                break;
            }
        }
    }
    hist[fast_bucket] += fast;
    let floor_ns = meter.floor_ns(|u| clock.delta_ns(u)).unwrap_or(1);
    let threshold_ns = super::threshold::Gate::cap(cfg.gate, cfg.threshold.ns(floor_ns));
    s.floor_ns.store(floor_ns, Relaxed);
    let refused = threshold_ns < MIN_FLOORS * floor_ns;
    s.refused.store(refused, Relaxed);
    s.threshold_ns.store(threshold_ns, Relaxed);
    publish(s, &hist, clock.to_ns(prev), loops);
    (!refused).then_some(Calibrated { hist, loops, floor_ns, threshold_ns })
}

/// The hot loop, in `clock`'s units; returns the clock as last anchored.
fn hot<C: LoopClock>(s: &ProbeShared, mut clock: C, c: Calibrated) -> C {
    let Calibrated { mut hist, mut loops, floor_ns, threshold_ns } = c;
    let threshold = clock.delta_units(threshold_ns);
    let mut n = 0u32;
    // The loop's own turns ([`fast_below`]) are counted in a register and
    // folded into the histogram on publish; longer deltas take the
    // histogram's path.
    let fast_bucket = bucket(floor_ns);
    let fast_limit = fast_below(clock, floor_ns, threshold);
    let mut fast = 0u64;
    let mut publishes = 0u32;
    let mut prev = clock.read();
    s.hot_loops.store(loops, Relaxed);
    s.hot_start_ns.store(clock.to_ns(prev), Relaxed);
    // The hot loop: one clock read, a compare, a register increment. The
    // stop flag and the figures are looked at every PUBLISH_EVERY
    // iterations (~100 µs), off the per-iteration path.
    loop {
        let t = clock.read();
        let d = t - prev;
        // Where the next delta starts: after a slow report, its end (the
        // report's own time is not a gap of the CPU's).
        let mut resume = t;
        if d < fast_limit {
            fast += 1;
        } else {
            hist[bucket(clock.delta_ns(d))] += 1;
            if d >= threshold {
                match report_gap(s, clock.to_ns(prev), clock.to_ns(t)) {
                    Reported::Stop => break,
                    Reported::Slow => resume = clock.read(),
                    Reported::Quick => {}
                }
            }
        }
        n += 1;
        if n == PUBLISH_EVERY {
            loops += n as u64;
            n = 0;
            hist[fast_bucket] += fast;
            fast = 0;
            publish(s, &hist, clock.to_ns(t), loops);
            if s.stop.load(Relaxed) || !still_on_cpu(s) {
                break;
            }
            publishes += 1;
            if publishes == REFINE_EVERY {
                publishes = 0;
                clock = clock.refine();
            }
        }
        prev = resume;
    }
    clock
}

/// How reporting a gap went.
#[derive(Debug, PartialEq, Eq)]
enum Reported {
    /// Queued, quickly.
    Quick,
    /// Queued after reading the SMI counter (a syscall): the loop resumes
    /// its measurement after it.
    Slow,
    /// The probe is no longer on its CPU: stop measuring.
    Stop,
}

/// The rare path, kept out of the loop's body. A gap is reported only if
/// the probe is still on its CPU: a CPU going offline moves the probe, and
/// the gap that spans the move (or any after it) measured another CPU.
/// Where the SMI counter can be read, a gap long enough to hold an SMI
/// carries the SMIs counted since the last read.
#[cold]
#[inline(never)]
fn report_gap(s: &ProbeShared, t0: u64, t1: u64) -> Reported {
    if !still_on_cpu(s) {
        return Reported::Stop;
    }
    let (smis, how) = match &s.smi {
        Some(c) if t1 - t0 >= SMI_MIN_GAP_NS => (c.since_last(), Reported::Slow),
        _ => (0, Reported::Quick),
    };
    let gap = Interval { cpu: s.cpu, t0, t1, source: Source::Probe, victim: None, smis, delivery: false };
    if s.queue.push(gap).is_err() {
        s.overflow.fetch_add(1, Relaxed);
    }
    how
}

/// Checked off the per-iteration path (on a gap, and every publish).
#[cold]
pub(super) fn still_on_cpu(s: &ProbeShared) -> bool {
    // SAFETY: sched_getcpu has no preconditions.
    let now = unsafe { libc::sched_getcpu() };
    if now < 0 || now as u32 == s.cpu {
        return true;
    }
    s.moved_off.store(true, Relaxed);
    // The run ends rather than report another CPU under this one's number.
    crate::lifecycle::request_stop();
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::smi::tests::{fixture, set};
    use crate::probe::{ProbeKind, SmiCounter};

    /// A probe's shared state on the CPU this test runs on, pinned there.
    fn shared_here() -> ProbeShared {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() } as u32;
        crate::sys::pin_to(&[cpu as usize]).unwrap();
        ProbeShared::new(cpu, ProbeKind::Spin)
    }

    #[test]
    fn a_gap_long_enough_carries_the_smis_counted_since_the_last_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = fixture(dir.path(), 7);
        let mut s = shared_here();
        s.smi = Some(SmiCounter::open(&p).unwrap());
        set(&p, 9);
        // Too short to hold an SMI: not read, nothing counted, loop goes on.
        assert_eq!(report_gap(&s, 0, SMI_MIN_GAP_NS - 1), Reported::Quick);
        assert_eq!(s.queue.pop().unwrap().smis, 0);
        assert_eq!(report_gap(&s, 0, 50_000), Reported::Slow);
        assert_eq!(s.queue.pop().unwrap().smis, 2);
        assert_eq!(report_gap(&s, 100_000, 150_000), Reported::Slow);
        assert_eq!(s.queue.pop().unwrap().smis, 0);
    }

    #[test]
    fn without_a_counter_gaps_carry_none() {
        let s = shared_here();
        assert_eq!(report_gap(&s, 0, 50_000), Reported::Quick);
        assert_eq!(s.queue.pop().unwrap().smis, 0);
    }
}
