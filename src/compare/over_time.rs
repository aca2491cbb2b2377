//! Percentiles over the run's time, not over its hiccups: the chance that
//! a moment of the run (a message arriving, a packet landing) lies inside
//! a gap of at least X. Percentiles over hiccups answer "of the gaps that
//! crossed the threshold, how large were they", which rises when tuning
//! removes the small ones; over time, a run whose hiccups are a subset of
//! another's (same length) is never above it, at any percentile.
//!
//! Exact from the rows: with the gaps sorted, the time spent in gaps of at
//! least X is a suffix sum. The chart's curve is this function sampled on
//! one grid for every run, and `compare --json` carries those points.

use serde::Serialize;

/// One run's gaps sorted ascending, with their suffix sums: `tail[i]` is
/// the time in gaps `i..` (u128: gaps read from a file may add up past u64).
pub struct TimeDist<'a> {
    sorted: &'a [u64],
    tail: Vec<u128>,
    /// The CPU time the scope spans, ns (the run's duration on each CPU).
    span_ns: f64,
}

impl<'a> TimeDist<'a> {
    pub fn new(sorted: &'a [u64], span_ns: f64) -> Self {
        let mut tail = vec![0u128; sorted.len() + 1];
        for i in (0..sorted.len()).rev() {
            tail[i] = tail[i + 1] + sorted[i] as u128;
        }
        TimeDist { sorted, tail, span_ns }
    }

    /// The share of the run's time inside any hiccup.
    pub fn stolen_share(&self) -> f64 {
        self.tail[0] as f64 / self.span_ns
    }

    /// The gap a moment of the run lies in at the `share`-from-the-top of
    /// its time (1 - p for the p-th percentile): the smallest gap X such
    /// that the time in gaps larger than X is at most `share` of the run.
    /// None where that moment lies outside every hiccup (under the
    /// threshold), which is the case when all hiccups add up to no more
    /// than `share`.
    pub fn at_share(&self, share: f64) -> Option<u64> {
        self.within(share * self.span_ns)
    }

    /// At the `ppm`-th percentile (parts per million) of the run's time;
    /// the share's time computed so that a whole number of ns stays whole.
    pub fn at_ppm(&self, ppm: u64) -> Option<u64> {
        self.within((1_000_000 - ppm.min(1_000_000)) as f64 * self.span_ns / 1e6)
    }

    /// The gap the top `budget` ns of the run's time ends in.
    fn within(&self, budget: f64) -> Option<u64> {
        // tail is non-increasing: the last index whose suffix exceeds the
        // budget is the gap the budget ends in.
        let over = self.tail.partition_point(|&t| t as f64 > budget);
        (over > 0).then(|| self.sorted[over - 1])
    }
}

/// Percentiles of the run's time in the table, parts per million.
pub const TIME_PERCENTILES: [(&str, u64); 4] =
    [("time 99%", 990_000), ("time 99.9%", 999_000), ("time 99.99%", 999_900), ("time 99.999%", 999_990)];

/// One plotted point: x is the percentile on the chart's axis, in nines
/// (-log10(1 - p): 2 is 99%, 3 is 99.9%).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub nines: f64,
    pub percentile: f64,
    pub gap_ns: u64,
}

/// The x axis every run's curve is sampled on, in nines.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Axis {
    pub from_nines: f64,
    pub to_nines: f64,
}

/// Samples on the axis: fine at every nine alike, as the axis is logarithmic.
const STEPS: usize = 400;
/// The axis never goes past 9 nines (a moment in 10⁹ of the run).
const MAX_NINES: f64 = 9.0;

/// The axis for these runs: from the whole nine below where the earliest
/// curve starts (the runs' largest share of time in hiccups) to the whole
/// nine past where the last one reaches its largest gap, at least 2 nines
/// wide, 0 to 5 when no run has a hiccup.
pub fn axis(dists: &[TimeDist]) -> Axis {
    let with = || dists.iter().filter(|d| !d.sorted.is_empty());
    let nines = |share: f64| -share.clamp(1e-12, 1.0).log10();
    // A hair of slack: log10 of a power of ten may land just off the nine.
    let from = with().map(|d| (nines(d.stolen_share()) + 1e-9).floor()).reduce(f64::min);
    let to = with().map(|d| (nines(*d.sorted.last().unwrap() as f64 / d.span_ns) - 1e-9).ceil()).reduce(f64::max);
    match (from, to) {
        (Some(f), Some(t)) => {
            let from = f.clamp(0.0, MAX_NINES - 2.0);
            Axis { from_nines: from, to_nines: t.clamp(from + 2.0, MAX_NINES) }
        }
        _ => Axis { from_nines: 0.0, to_nines: 5.0 },
    }
}

/// One run's curve on `axis`: the points where a moment lies in a hiccup.
pub fn curve(d: &TimeDist, axis: Axis) -> Vec<Point> {
    (0..=STEPS)
        .filter_map(|s| {
            let nines = axis.from_nines + (axis.to_nines - axis.from_nines) * s as f64 / STEPS as f64;
            let share = 10f64.powf(-nines);
            d.at_share(share).map(|gap_ns| Point { nines, percentile: 100.0 * (1.0 - share), gap_ns })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_computed_run() {
        // 1 s of run: gaps of 1, 2, 3 and 4 ms, 10 ms in all (1%).
        let g = [1_000_000, 2_000_000, 3_000_000, 4_000_000];
        let d = TimeDist::new(&g, 1e9);
        assert_eq!(d.stolen_share(), 0.01);
        // The top 0.4% of the time is in the 4 ms gap; the next 0.3% in 3 ms.
        assert_eq!(d.at_share(0.001), Some(4_000_000));
        assert_eq!(d.at_share(0.004), Some(3_000_000), "exactly the 4 ms gap's time: the next moment is in 3 ms");
        assert_eq!(d.at_share(0.0069), Some(3_000_000));
        assert_eq!(d.at_share(0.0095), Some(1_000_000));
        // Beyond 1% of the time, moments lie outside every hiccup.
        assert_eq!(d.at_share(0.01), None);
        assert_eq!(d.at_share(0.5), None);
        assert_eq!(d.at_ppm(999_000), Some(4_000_000));
        assert_eq!(d.at_ppm(990_000), None);
        assert_eq!(TimeDist::new(&[], 1e9).at_share(1e-9), None);
    }

    #[test]
    fn a_run_with_a_subset_of_the_hiccups_is_never_drawn_above() {
        // The README's case: tuning removes the small gaps (8x fewer), the
        // large ones stay. Over hiccups its tail rises; over time it cannot.
        let mut all: Vec<u64> = (0..8_000u64).map(|i| 2_000 + (i * 7_919) % 20_000).collect();
        all.extend([900_000, 1_500_000, 4_000_000]);
        all.sort_unstable();
        // Its smaller half removed.
        let subset: Vec<u64> = all[all.len() / 2..].to_vec();
        let (a, b) = (TimeDist::new(&all, 60e9), TimeDist::new(&subset, 60e9));
        let ax = axis(&[TimeDist::new(&all, 60e9), TimeDist::new(&subset, 60e9)]);
        let (ca, cb) = (curve(&a, ax), curve(&b, ax));
        assert!(!cb.is_empty() && cb.len() <= ca.len());
        for p in &cb {
            let q = ca.iter().find(|q| q.nines == p.nines).expect("the base has a point wherever the subset does");
            assert!(p.gap_ns <= q.gap_ns, "{p:?} above {q:?}");
        }
        // And the hiccup percentiles, which this module replaces on the chart, do rise.
        let p99 = |v: &[u64]| super::super::figures::nearest_rank(v, 990_000).unwrap();
        assert!(p99(&subset) > p99(&all));
    }

    #[test]
    fn the_axis_spans_where_the_curves_are() {
        // 1% stolen (2 nines) to a largest gap of 4 ms in 1 s (2.4 nines).
        let g = [1_000_000, 2_000_000, 3_000_000, 4_000_000];
        let ax = axis(&[TimeDist::new(&g, 1e9)]);
        assert_eq!(ax, Axis { from_nines: 2.0, to_nines: 4.0 });
        let c = curve(&TimeDist::new(&g, 1e9), ax);
        assert_eq!(c.first().unwrap().gap_ns, 1_000_000, "at 99.0%: the smallest gap's moments");
        assert_eq!(c.last().unwrap().gap_ns, 4_000_000);
        assert!(c.windows(2).all(|w| w[0].gap_ns <= w[1].gap_ns && w[0].nines < w[1].nines));
        // 10 µs in a minute: 6.8 nines; 10 ns, 9.8, clamped to 9.
        let ax = axis(&[TimeDist::new(&[10_000], 60e9)]);
        assert_eq!((ax.from_nines, ax.to_nines), (6.0, 8.0));
        let ax = axis(&[TimeDist::new(&[10], 60e9)]);
        assert_eq!((ax.from_nines, ax.to_nines), (7.0, 9.0));
        assert_eq!(axis(&[TimeDist::new(&[], 1e9)]), Axis { from_nines: 0.0, to_nines: 5.0 });
    }
}
