//! What recurs: whether a cause's stalls start on a fixed period, and
//! which. Pure logic on start times (CLOCK_MONOTONIC ns).
//!
//! The method: bursts (starts closer than [`BURST_NS`]) are one event;
//! for each candidate period the events' phases (start mod period) are
//! counted in a sliding twentieth of the period, and the fullest twentieth
//! is the share of events phase-locked there (a twentieth by chance).
//! A period is said when that share is both large (at least twice chance)
//! and far beyond chance for that many events (a binomial z of at least
//! [`MIN_Z`], which the candidates and windows scanned cannot reach on
//! Poisson arrivals).
//!
//! The candidates: round periods (timers are set in round units: a host's
//! 1 ms or 4 ms tick, firmware polling at 10 or 100 ms), this kernel's own
//! tick period, and the period the intervals between events vote for
//! (for periods that are not round), refined to the phase's precision.
//! Events phase-locked at P are phase-locked at every divisor of P too
//! (the phase mod P/2 folds P's bins onto each other), so of the periods
//! that keep the largest share, the longest is the one said; a multiple
//! of P keeps the share only when the events recur at that multiple.

use serde::Serialize;

/// Starts closer than this continue one burst (a host pause in pieces).
pub const BURST_NS: u64 = 20_000;
/// Events needed before a period can be said.
pub const MIN_EVENTS: usize = 64;
/// Periods are looked for between these (and within a sixteenth of the
/// events' span: a period must recur at least 16 times to be seen).
const MIN_PERIOD_NS: u64 = 50_000;
const MAX_PERIOD_NS: u64 = 1_000_000_000;
/// The binomial z a share must reach (the scan tries ~40 candidates × 40
/// windows: z 6 by chance is ~1e-9 each).
pub const MIN_Z: f64 = 6.0;
/// Bins per period; a twentieth is two adjacent bins.
const BINS: usize = 40;
/// Of the periods that keep at least this part of the best share, the
/// longest is said.
const KEEPS: f64 = 0.85;

/// A period found in one cause's starts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Period {
    pub period_ns: u64,
    /// The share of events (bursts merged) whose start falls in the
    /// fullest twentieth of the period's phase: 0.05 is chance.
    pub share: f64,
    /// Where in the period that twentieth begins, ns after a multiple of
    /// the period (CLOCK_MONOTONIC's zero).
    pub phase_ns: u64,
    /// Events looked at.
    pub events: usize,
}

/// A kernel's tick at CONFIG_HZ 300 (the others, 100, 250 and 1000,
/// are round): 3.333 ms.
const HZ300_NS: u64 = 3_333_333;
/// The longest period the intervals vote on: a ring of a few thousand
/// starts holds few intervals longer than this.
const MAX_VOTED_NS: u64 = 100_000_000;

/// Round periods, ns: 1-2-2.5-4-5 steps from 50 µs to 1 s.
fn round_periods() -> impl Iterator<Item = u64> {
    let mut decade = 10_000u64;
    std::iter::from_fn(move || {
        decade *= 10;
        (decade <= 1_000_000_000).then_some(decade)
    })
    .flat_map(|d| [d / 2, d, d * 2, d * 5 / 2, d * 4])
    .filter(|&p| (MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&p))
}

/// Sorts `starts` and keeps each burst's first start.
fn events(starts: &mut [u64]) -> Vec<u64> {
    starts.sort_unstable();
    let mut out = Vec::with_capacity(starts.len());
    let mut last: Option<u64> = None;
    for &t in starts.iter() {
        if last.is_none_or(|l| t > l + BURST_NS) {
            out.push(t);
        }
        last = Some(t);
    }
    out
}

/// The fullest twentieth of the phase at `period`: (events in it, where it begins).
///
/// Called for every candidate on every event (hundreds of candidates ×
/// 4,096 starts at a run's end), so no division per event: each start's
/// phase is its offset from the first (exact in f64 below 2^53 ns, 104
/// days) plus the first's phase, its quotient by the period from a
/// multiplication by the reciprocal (off by at most one, corrected), and
/// its bin from a fixed-point scale. Before, a u64 remainder and a u128
/// division per event made one look at a cause ~80 ms.
fn fullest(ev: &[u64], period: u64) -> (usize, u64) {
    let mut bins = [0usize; BINS];
    let Some(&t0) = ev.first() else { return (0, 0) };
    let r0 = t0 % period;
    let inv = 1.0 / period as f64;
    // bin = phase × BINS / period, as (phase × scale) >> 32: phase < period
    // ≤ 2^30 and scale ≤ BINS × 2^32 / MIN_PERIOD_NS < 2^22, so no overflow.
    let scale = ((BINS as u64) << 32) / period;
    for &t in ev {
        let x = t - t0 + r0;
        let q = (x as f64 * inv) as u64;
        let mut ph = x.wrapping_sub(q.wrapping_mul(period)) as i64;
        if ph < 0 {
            ph += period as i64;
        } else if ph >= period as i64 {
            ph -= period as i64;
        }
        let b = ((ph as u64 * scale) >> 32) as usize;
        bins[b.min(BINS - 1)] += 1;
    }
    // Of two windows as full, the one whose first bin holds more: its
    // start is nearer where the events begin.
    let best = (0..BINS).max_by_key(|&i| (bins[i] + bins[(i + 1) % BINS], bins[i], std::cmp::Reverse(i))).unwrap_or(0);
    (bins[best] + bins[(best + 1) % BINS], period * best as u64 / BINS as u64)
}

fn z(count: usize, n: usize) -> f64 {
    let p = 2.0 / BINS as f64;
    (count as f64 - n as f64 * p) / (n as f64 * p * (1.0 - p)).sqrt()
}

/// How many of the sorted `d` are below `x`, from `*at` (what was below a
/// smaller x) forward.
fn advance(d: &[f64], at: &mut usize, x: f64) -> usize {
    while *at < d.len() && d[*at] < x {
        *at += 1;
    }
    *at
}

/// The period the intervals between consecutive events vote for: the
/// candidate (on a fine log grid) whose multiples hold the most intervals
/// beyond what the intervals' spread puts there by chance, refined by
/// least squares. None when no candidate stands out.
fn voted(ev: &[u64], max_period: u64) -> Option<u64> {
    let mut d: Vec<u64> = ev.windows(2).map(|w| w[1] - w[0]).collect();
    d.sort_unstable();
    const K: u64 = 16;
    let df: Vec<f64> = d.iter().map(|&x| x as f64).collect();
    // The candidates grow, and with them every window's ends (fixed
    // multiples of the candidate): one cursor per end, each only moving
    // forward over the sorted intervals, counts what lies below it. The
    // whole scan is then linear, not a binary search per end per candidate
    // (about 10,000 candidates × 34 ends).
    // Ends: [2k−2] = k·p − p/40 and [2k−1] = k·p + p/40 for k = 1..=K, then
    // p/2 and (K + 1/2)·p (what chance puts there: a twentieth of the
    // intervals within half a period of each multiple, one range).
    const ENDS: usize = 2 * K as usize + 2;
    let mut below = [0usize; ENDS];
    let mut score = |p: f64| {
        let mut obs = 0usize;
        for k in 1..=K {
            let c = k as f64 * p;
            let i = 2 * (k as usize - 1);
            let lo = advance(&df, &mut below[i], c - p / 40.0);
            let hi = advance(&df, &mut below[i + 1], c + p / 40.0);
            obs += hi - lo;
        }
        let lo = advance(&df, &mut below[ENDS - 2], p / 2.0);
        let hi = advance(&df, &mut below[ENDS - 1], (K as f64 + 0.5) * p);
        let exp = (hi - lo) as f64 / 20.0;
        (obs as f64 - exp) / (exp.max(1.0) * 0.95).sqrt()
    };
    // Steps fine enough that a 16th multiple stays within its window.
    let ratio = 1.0 + 1.0 / (80.0 * K as f64);
    let mut p = MIN_PERIOD_NS as f64;
    let mut best = (0.0f64, 0.0f64);
    while p <= max_period as f64 {
        let s = score(p);
        if s > best.0 {
            best = (s, p);
        }
        p *= ratio;
    }
    if best.0 < MIN_Z {
        return None;
    }
    let p = best.1;
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for &x in &d {
        let k = (x as f64 / p).round();
        if (1.0..=K as f64).contains(&k) && (x as f64 - k * p).abs() <= p / 40.0 {
            num += k * x as f64;
            den += k * k;
        }
    }
    (den > 0.0).then(|| (num / den).round() as u64)
}

/// The period of these starts (any order; sorted in place), if they have
/// one.
pub fn detect(starts: &mut [u64]) -> Option<Period> {
    let ev = events(starts);
    if ev.len() < MIN_EVENTS {
        return None;
    }
    let span = ev[ev.len() - 1] - ev[0];
    let max_period = (span / 16).min(MAX_PERIOD_NS);
    let mut candidates: Vec<u64> = round_periods().chain([HZ300_NS]).filter(|&p| p >= MIN_PERIOD_NS && p <= max_period).collect();
    if let Some(v) = voted(&ev, max_period.min(MAX_VOTED_NS)) {
        // The intervals' vote is good to ~2e-4 (its windows let chance
        // intervals in); the phase over the whole span needs a fortieth of
        // the period over all its cycles. So the best phase is searched
        // within 1e-3 of the vote, in steps that move the last event's
        // phase by a fortieth of the period (at most REFINE of them).
        const REFINE: f64 = 2_000.0;
        let cycles = (span / v).max(1) as f64;
        let step = (1.0 / (BINS as f64 * cycles)).max(2e-3 / REFINE);
        let steps = (1e-3 / step).ceil() as i64;
        let best = (-steps..=steps)
            .map(|j| (v as f64 * (1.0 + j as f64 * step)).round() as u64)
            .filter(|&p| p >= MIN_PERIOD_NS)
            .max_by_key(|&p| fullest(&ev, p).0);
        // A round period within the vote's precision is that period: the
        // refined one would only win the tie by being a hair longer.
        candidates.extend(best.filter(|&b| !candidates.iter().any(|&c| b.abs_diff(c) * 1_000 <= c)));
    }
    let n = ev.len();
    let found: Vec<(u64, usize, u64)> = candidates
        .into_iter()
        .filter(|&p| p >= MIN_PERIOD_NS)
        .map(|p| {
            let (c, phase) = fullest(&ev, p);
            (p, c, phase)
        })
        .filter(|&(_, c, _)| c * BINS >= 2 * 2 * n && z(c, n) >= MIN_Z)
        .collect();
    let best = found.iter().map(|f| f.1).max()?;
    let &(period_ns, c, phase_ns) = found.iter().filter(|f| f.1 as f64 >= KEEPS * best as f64).max_by_key(|f| f.0)?;
    Some(Period { period_ns, share: c as f64 / n as f64, phase_ns, events: n })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small generator (xorshift): the tests are the same on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
        /// An exponential interval of mean `mean` ns.
        fn exp(&mut self, mean: f64) -> u64 {
            (-mean * (1.0 - self.unit()).ln()) as u64
        }
    }

    /// Poisson arrivals at `rate` per s over `secs`.
    fn poisson(r: &mut Rng, rate: f64, secs: f64, from: u64) -> Vec<u64> {
        let mut t = from;
        let mut v = Vec::new();
        while t < from + (secs * 1e9) as u64 {
            t += r.exp(1e9 / rate).max(1);
            v.push(t);
        }
        v
    }

    /// `share` of the periods from `from` get an event within `jitter` ns
    /// after `phase`.
    fn locked(r: &mut Rng, period: u64, phase: u64, jitter: u64, share: f64, secs: f64, from: u64) -> Vec<u64> {
        let first = from / period + 1;
        let mut v = Vec::new();
        for k in first..first + (secs * 1e9) as u64 / period {
            if r.unit() < share {
                v.push(k * period + phase + r.next() % jitter.max(1));
            }
        }
        v
    }

    #[test]
    fn no_period_in_poisson_arrivals() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for (rate, secs) in [(1_000.0, 10.0), (300.0, 30.0), (5_000.0, 2.0), (100.0, 60.0)] {
            for _ in 0..5 {
                let mut v = poisson(&mut r, rate, secs, 1_000_000_123);
                assert_eq!(detect(&mut v), None, "{rate}/s over {secs} s");
            }
        }
    }

    #[test]
    fn a_tick_every_4_ms_among_noise_is_said_as_4_ms_not_a_divisor() {
        // As on our VM: 17% of the unexplained stalls fall just before the
        // kernel's 4 ms tick, the rest at random; the 1 ms phase shows
        // them too (every 4 ms boundary is a 1 ms one).
        let mut r = Rng(42);
        let mut v = poisson(&mut r, 900.0, 10.0, 5_000_000_000);
        v.extend(locked(&mut r, 4_000_000, 3_990_000, 10_000, 0.8, 10.0, 5_000_000_000));
        let p = detect(&mut v).expect("a period");
        assert_eq!(p.period_ns, 4_000_000, "{p:?}");
        assert!(p.share > 0.15 && p.share < 0.35, "{p:?}");
        // The fullest twentieth begins a bin or two before the boundary.
        assert!((3_800_000..=3_900_000).contains(&p.phase_ns), "{p:?}");
    }

    #[test]
    fn a_period_every_millisecond_is_1_ms() {
        // Events at a random half of the 1 ms boundaries: 2 ms and 4 ms
        // hold a half and a quarter of them at one phase; 1 ms holds all.
        let mut r = Rng(7);
        let mut v = poisson(&mut r, 400.0, 10.0, 0);
        v.extend(locked(&mut r, 1_000_000, 0, 5_000, 0.5, 10.0, 0));
        let p = detect(&mut v).expect("a period");
        assert_eq!(p.period_ns, 1_000_000, "{p:?}");
    }

    #[test]
    fn a_period_that_is_not_round_is_found_by_the_intervals() {
        // 1.37 ms: no round candidate; the intervals vote for it.
        let mut r = Rng(99);
        let mut v = locked(&mut r, 1_370_000, 200_000, 3_000, 0.6, 8.0, 0);
        v.extend(poisson(&mut r, 200.0, 8.0, 0));
        let p = detect(&mut v).expect("a period");
        assert!((p.period_ns as i64 - 1_370_000).abs() < 200, "{p:?}");
        assert!(p.share > 0.5, "{p:?}");
    }

    #[test]
    fn a_round_period_is_said_round() {
        // The tick every 4 ms, all of it: the intervals vote for 4 ms to a
        // few hundred ns, and that is 4 ms, not 4.000146 ms.
        let mut r = Rng(11);
        let mut v = locked(&mut r, 4_000_000, 1_800_000, 400, 1.0, 3.0, 0);
        let p = detect(&mut v).expect("a period");
        assert_eq!(p.period_ns, 4_000_000, "{p:?}");
    }

    #[test]
    fn bursts_are_one_event_and_few_events_say_nothing() {
        let mut v: Vec<u64> = (0..50u64).flat_map(|k| [k * 1_000_000, k * 1_000_000 + 3_000, k * 1_000_000 + 9_000]).collect();
        assert_eq!(events(&mut v.clone()).len(), 50);
        assert_eq!(detect(&mut v), None, "50 events: under MIN_EVENTS");
    }

    #[test]
    fn the_round_periods() {
        let r: Vec<u64> = round_periods().collect();
        assert_eq!(&r[..6], [50_000, 100_000, 200_000, 250_000, 400_000, 500_000]);
        assert!(r.contains(&1_000_000) && r.contains(&4_000_000) && r.contains(&10_000_000) && r.contains(&1_000_000_000));
    }
}
