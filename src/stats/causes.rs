//! Per-CPU × cause aggregates: the samples of each cause, and the cap that
//! folds stale causes so pid churn cannot grow them without end.

use crate::fastmap::Map;

use hdrhistogram::Histogram;

use super::{histogram, CauseKey};
use crate::cause::CauseId;

/// Causes kept per CPU. Past it, a quarter is folded: tasks into one
/// `comm[*]` entry per program, the rest into `(others)` of their kind, so
/// pid churn (a build, a fork storm) cannot grow memory without end, and
/// the totals still add up. Even with a histogram each (~36 KB), a CPU's
/// causes stay under ~5 MB.
/// (BENCHMARKS.md states this bound: xtask/src/bench/report.rs.)
pub const MAX_CAUSES: usize = 128;

/// Samples kept exactly before a cause gets a histogram. Most causes (one
/// short-lived task each) never get there, so memory stays small when pids
/// churn; the frequent ones get an HdrHistogram.
const EXACT_SAMPLES: usize = 64;

#[derive(Clone)]
pub enum Dist {
    Exact(Vec<u64>),
    Hist(Box<Histogram<u64>>),
}

impl Dist {
    fn record(&mut self, v: u64) {
        match self {
            Dist::Exact(xs) if xs.len() < EXACT_SAMPLES => xs.push(v),
            Dist::Exact(xs) => {
                let mut h = histogram(2);
                for &x in xs.iter().chain([&v]) {
                    h.saturating_record(x.max(1));
                }
                *self = Dist::Hist(Box::new(h));
            }
            Dist::Hist(h) => h.saturating_record(v.max(1)),
        }
    }

    /// Adds `other`'s samples to these.
    fn merge(&mut self, other: Dist) {
        match other {
            Dist::Exact(xs) => xs.into_iter().for_each(|x| self.record(x)),
            Dist::Hist(mut h) => {
                match self {
                    Dist::Exact(xs) => xs.iter().for_each(|&x| h.saturating_record(x.max(1))),
                    Dist::Hist(mine) => {
                        h.add(&**mine).expect("histograms of the same bounds");
                    }
                }
                *self = Dist::Hist(h);
            }
        }
    }

    /// The value at quantile q: nearest rank, exact on the samples, or as
    /// [`super::quantile`] reads the histogram, at most `max`.
    pub fn quantile(&self, q: f64, max: u64) -> u64 {
        match self {
            Dist::Exact(xs) if xs.is_empty() => 0,
            Dist::Exact(xs) => {
                let mut v = xs.clone();
                v.sort_unstable();
                let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
                v[rank - 1]
            }
            Dist::Hist(h) => super::quantile(h, q, max),
        }
    }
}

/// Start times kept per frequent cause, for what recurs (periodic.rs):
/// the most recent, in a ring allocated once.
pub const STARTS: usize = 4096;

/// The most recent start times of one cause.
#[derive(Clone)]
pub struct Starts {
    pub at: Vec<u64>,
    next: usize,
}

impl Starts {
    fn push(&mut self, t: u64) {
        if self.at.len() < STARTS {
            self.at.push(t);
        } else {
            self.at[self.next] = t;
            self.next = (self.next + 1) % STARTS;
        }
    }
}

#[derive(Clone)]
pub struct CauseStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub dist: Dist,
    pub last_seen_ns: u64,
    /// Once the cause is frequent (as it gets a histogram): its recent starts.
    pub starts: Option<Box<Starts>>,
    /// Its period as last looked for, and when (the collector's clock).
    pub period: Option<super::periodic::Period>,
    pub period_looked_ns: u64,
    /// `--stacks-above`: its kernel stack in the stall where it took the
    /// most with one (that time, the frames innermost first).
    pub stack: Option<(u64, std::sync::Arc<[crate::cause::Symbol]>)>,
}

impl Default for CauseStats {
    fn default() -> Self {
        Self {
            count: 0,
            total_ns: 0,
            max_ns: 0,
            dist: Dist::Exact(Vec::new()),
            last_seen_ns: 0,
            starts: None,
            period: None,
            period_looked_ns: 0,
            stack: None,
        }
    }
}

impl CauseStats {
    pub fn p99(&self) -> u64 {
        self.dist.quantile(0.99, self.max_ns)
    }

    pub(super) fn add(&mut self, ns: u64, at: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        self.dist.record(ns);
        self.last_seen_ns = at;
        match &mut self.starts {
            Some(s) => s.push(at),
            // Allocated once, when the cause is frequent enough to recur.
            None if self.count >= EXACT_SAMPLES as u64 => {
                let mut s = Box::new(Starts { at: Vec::with_capacity(STARTS), next: 0 });
                s.push(at);
                self.starts = Some(s);
            }
            None => {}
        }
    }

    /// Its stack in a stall where it took `ns`: kept if it took the most.
    pub(super) fn note_stack(&mut self, ns: u64, frames: &std::sync::Arc<[crate::cause::Symbol]>) {
        if self.stack.as_ref().is_none_or(|(most, _)| ns >= *most) {
            self.stack = Some((ns, frames.clone()));
        }
    }

    /// Takes in a folded cause's figures.
    fn absorb(&mut self, other: CauseStats) {
        if let Some((ns, frames)) = &other.stack {
            self.note_stack(*ns, frames);
        }
        self.count += other.count;
        self.total_ns += other.total_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.last_seen_ns = self.last_seen_ns.max(other.last_seen_ns);
        self.dist.merge(other.dist);
        // Two causes' starts are not one cause's rhythm: the folded one's
        // are dropped, and its period looked for again.
        self.period_looked_ns = 0;
    }
}

/// Folds a quarter of `cpu`'s causes into `(others)` of their kind: the
/// least recently seen, sparing the largest quarter by total time, so
/// that neither a big old culprit nor a small steady one (the tick) loses
/// its name to pid churn. Rare: once per MAX_CAUSES / 4 new causes.
pub(super) fn fold_stale(causes: &mut Map<CauseKey, CauseStats>, cpu: u32) -> usize {
    let mut mine: Vec<(&CauseKey, &CauseStats)> = causes.iter().filter(|(k, _)| k.cpu == cpu && k.cause.folded().is_some()).collect();
    mine.sort_unstable_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then_with(|| a.0.cmp(b.0)));
    let mut rest = mine.split_off((MAX_CAUSES / 4).min(mine.len()));
    rest.sort_unstable_by(|a, b| a.1.last_seen_ns.cmp(&b.1.last_seen_ns).then_with(|| a.0.cmp(b.0)));
    let fold: Vec<CauseKey> = rest.into_iter().take(MAX_CAUSES / 4).map(|(k, _)| *k).collect();
    for key in fold {
        let (Some(gone), Some(into)) = (causes.remove(&key), key.cause.folded()) else { continue };
        causes.entry(CauseKey { cpu, cause: into }).or_default().absorb(gone);
    }
    // A program folded here takes in its other pids too: one cause.
    let programs: Vec<CauseId> =
        causes.keys().filter(|k| k.cpu == cpu && k.cause.is_task() && k.cause.task_pid().is_none()).map(|k| k.cause).collect();
    for program in programs {
        absorb_pids(causes, cpu, program);
    }
    // What is left for this CPU: the cap counts on from here.
    causes.keys().filter(|k| k.cpu == cpu).count()
}

/// Moves every `comm[pid]` entry of `cpu` into its program's `comm[*]`:
/// once a program has been folded (its pids came and went faster than the
/// cap), a view shows it once, not as `qemu[*]` beside `qemu[23769]`.
pub(super) fn absorb_pids(causes: &mut Map<CauseKey, CauseStats>, cpu: u32, program: CauseId) {
    let pids: Vec<CauseKey> =
        causes.keys().filter(|k| k.cpu == cpu && k.cause.task_pid().is_some() && k.cause.program() == Some(program)).cloned().collect();
    for key in pids {
        if let Some(gone) = causes.remove(&key) {
            causes.entry(CauseKey { cpu, cause: program }).or_default().absorb(gone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_is_exact_then_a_histogram() {
        let mut d = Dist::Exact(Vec::new());
        assert_eq!(d.quantile(0.99, 0), 0);
        for v in 1..=100u64 {
            d.record(v * 1000);
        }
        assert!(matches!(d, Dist::Hist(_)));
        let p99 = d.quantile(0.99, 100_000);
        assert!((98_000..=100_000).contains(&p99), "{p99}");
        // The top of the largest value's bucket lies above it: never said.
        assert!(d.quantile(1.0, u64::MAX) > 100_000 && d.quantile(1.0, 100_000) == 100_000);
        let mut e = Dist::Exact(Vec::new());
        for v in [5, 1, 9, 3] {
            e.record(v);
        }
        assert_eq!((e.quantile(0.5, 9), e.quantile(0.99, 9)), (3, 9));
    }
}
