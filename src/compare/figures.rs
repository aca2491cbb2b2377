//! The figures users publish for a run, computed from its rows exactly
//! (not from bucketed histograms): mean, min, percentiles, max, count,
//! hiccups/s, % of time stolen, % of the stolen time named.

use serde::Serialize;

use super::input::{Row, Run};
use super::over_time::{TimeDist, TIME_PERCENTILES};

/// What part of a run a column covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Cpu(u32),
    /// Passive mode's watched threads of one name (as the CSV shows it).
    Thread(String),
}

impl Scope {
    pub fn title(&self) -> String {
        match self {
            Scope::All => "all CPUs".to_string(),
            Scope::Cpu(c) => format!("CPU {c}"),
            Scope::Thread(t) => format!("threads {t}"),
        }
    }

    /// The run's rows in this scope, or None where the run did not watch it.
    pub fn rows<'a>(&self, run: &'a Run) -> Option<Vec<&'a Row>> {
        match self {
            Scope::All => Some(run.rows.iter().collect()),
            Scope::Cpu(c) => Some(run.by_cpu.get(c)?.rows.iter().map(|&i| &run.rows[i]).collect()),
            Scope::Thread(t) => {
                let id = run.victims.iter().position(|v| v == t)? as u32;
                Some(run.rows.iter().filter(|r| r.victim == Some(id)).collect())
            }
        }
    }

    /// The CPU time the scope spans: the run's duration on each CPU it covers.
    pub fn span_ns(&self, run: &Run) -> f64 {
        let cpus = match self {
            Scope::All => run.meta.cpus.len().max(1),
            Scope::Cpu(_) | Scope::Thread(_) => 1,
        };
        run.meta.duration_ns as f64 * cpus as f64
    }
}

/// Percentiles in the order users tabulate them, in parts per million.
pub const PERCENTILES: [(&str, u64); 5] = [("50%", 500_000), ("90%", 900_000), ("99%", 990_000), ("99.9%", 999_000), ("99.99%", 999_900)];

/// One run's figures over one scope. With no hiccups, the gap statistics
/// are None (there is no gap to describe), never 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub count: u64,
    pub mean_ns: Option<f64>,
    pub min_ns: Option<u64>,
    /// At each of PERCENTILES.
    pub percentiles_ns: Vec<Option<u64>>,
    pub max_ns: Option<u64>,
    /// At each of TIME_PERCENTILES of the run's time (over_time.rs): the
    /// gap a moment of the run lies in; None: outside every hiccup.
    pub time_percentiles_ns: Vec<Option<u64>>,
    pub hiccups_per_sec: f64,
    pub stolen_pct: f64,
    /// None when nothing was stolen.
    pub explained_pct: Option<f64>,
}

/// The nearest-rank percentile (the smallest gap that at least `ppm` per
/// million of the gaps do not exceed), on gaps sorted ascending.
pub fn nearest_rank(sorted: &[u64], ppm: u64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u128;
    let rank = (ppm as u128 * n).div_ceil(1_000_000).max(1);
    Some(sorted[(rank - 1).min(n - 1) as usize])
}

pub fn figures(run: &Run, scope: &Scope) -> Option<Figures> {
    let rows = scope.rows(run)?;
    let mut gaps: Vec<u64> = rows.iter().map(|r| r.gap_ns).collect();
    gaps.sort_unstable();
    let total: u128 = gaps.iter().map(|&g| g as u128).sum();
    let named: u128 = rows.iter().map(|r| r.named_ns as u128).sum();
    let n = gaps.len();
    let over_time = TimeDist::new(&gaps, scope.span_ns(run));
    Some(Figures {
        count: n as u64,
        mean_ns: (n > 0).then(|| total as f64 / n as f64),
        min_ns: gaps.first().copied(),
        percentiles_ns: PERCENTILES.iter().map(|&(_, ppm)| nearest_rank(&gaps, ppm)).collect(),
        max_ns: gaps.last().copied(),
        time_percentiles_ns: TIME_PERCENTILES.iter().map(|&(_, ppm)| over_time.at_ppm(ppm)).collect(),
        hiccups_per_sec: n as f64 / run.duration_s(),
        stolen_pct: 100.0 * total as f64 / scope.span_ns(run),
        explained_pct: (total > 0).then(|| 100.0 * named as f64 / total as f64),
    })
}

/// The gaps of a run's scope, sorted: the chart's distribution.
pub fn sorted_gaps(run: &Run, scope: &Scope) -> Vec<u64> {
    let mut g: Vec<u64> = scope.rows(run).unwrap_or_default().iter().map(|r| r.gap_ns).collect();
    g.sort_unstable();
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_against_a_hand_computed_list() {
        // 1..=10: the 50th percentile is the 5th value, the 90th the 9th,
        // anything above 90% the 10th.
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(nearest_rank(&v, 500_000), Some(5));
        assert_eq!(nearest_rank(&v, 900_000), Some(9));
        assert_eq!(nearest_rank(&v, 910_000), Some(10));
        assert_eq!(nearest_rank(&v, 999_900), Some(10));
        assert_eq!(nearest_rank(&v, 0), Some(1));
        assert_eq!(nearest_rank(&[], 500_000), None);
        // 1000 values: the 99.9th is the 999th, the 99.99th the 1000th.
        let v: Vec<u64> = (1..=1000).map(|x| x * 10).collect();
        assert_eq!(nearest_rank(&v, 990_000), Some(9_900));
        assert_eq!(nearest_rank(&v, 999_000), Some(9_990));
        assert_eq!(nearest_rank(&v, 999_900), Some(10_000));
    }
}
