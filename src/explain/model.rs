//! What `explain` finds: the slow operations (those at or over `--above`,
//! else the slowest 1% of those inside the runs), each with the stalls
//! that overlap it and its time shared among them; and for the run, the
//! slow operations' time by cause and by thread. Pure: the log and the
//! stalls in, ids and ns out; names are looked up by the writers.

use std::collections::HashMap;
use std::ops::Range;

use super::ops::Op;
use super::overlap::{self, Index, Scratch};
use super::stalls::Stalls;

/// The share of the slowest operations taken when no `--above` is given.
pub const SLOWEST_PCT: f64 = 1.0;

/// Time credited to one cause or one thread over the slow operations, and
/// how many of them it touched.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub ns: u64,
    pub operations: u64,
    /// Of those, how many it holds for at least half of their latency.
    pub half: u64,
}

/// One stall inside one slow operation: its overlap, the operation's ns
/// it is credited with, and those ns by cause (`Found::shares[causes]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InOp {
    pub stall: u32,
    pub overlap_ns: u64,
    pub credit_ns: u64,
    pub causes: Range<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowOp {
    /// Its row in the log, from 0, in the order the operations began.
    pub index: u64,
    /// On the runs' clock (CLOCK_MONOTONIC).
    pub op: Op,
    pub covered_ns: u64,
    /// Its stalls: `Found::parts[stalls]`.
    pub stalls: Range<u32>,
}

#[derive(Debug, Default)]
pub struct Found {
    pub in_runs: u64,
    pub above_ns: u64,
    /// Slowest first.
    pub slow: Vec<SlowOp>,
    pub slow_ns: u64,
    pub explained_ns: u64,
    /// By key (into `Stalls::keys`), most time first.
    pub by_cause: Vec<(u32, Tally)>,
    /// By thread (into `Stalls::threads`), most time first.
    pub by_thread: Vec<(u32, Tally)>,
    /// Slow operations partly outside every run's window.
    pub reaching_out: u64,
    /// Slow operations with time no stall covers.
    pub uncovered_ops: u64,
    /// Slow operations no stall covers for at least half of their latency.
    pub uncovered_half: u64,
    /// Every slow operation's stalls, one after another (a vector each
    /// would be a million allocations at `--above 0`).
    pub parts: Vec<InOp>,
    /// Every part's ns by cause: (key, ns).
    pub shares: Vec<(u32, u64)>,
}

impl Found {
    pub fn stalls_of(&self, op: &SlowOp) -> &[InOp] {
        &self.parts[op.stalls.start as usize..op.stalls.end as usize]
    }

    pub fn causes_of(&self, p: &InOp) -> &[(u32, u64)] {
        &self.shares[p.causes.start as usize..p.causes.end as usize]
    }
}

/// How the slow operations are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slow {
    Above(u64),
    SlowestPct(f64),
}

/// `ops` on the runs' clock, against `stalls` (sorted in place). None when
/// no operation lies in any run's window.
pub fn find(ops: &[Op], stalls: &mut Stalls, slow: Slow) -> Option<Found> {
    let windows: Vec<(u64, u64)> = stalls.windows.iter().map(|w| (w.start_ns, w.end_ns)).collect();
    let inside = |o: &Op| windows.iter().any(|&(a, b)| o.start_ns < b && o.end_ns > a);
    let within = |o: &Op| windows.iter().any(|&(a, b)| o.start_ns >= a && o.end_ns <= b);
    let mut lat: Vec<u64> = ops.iter().filter(|o| inside(o)).map(Op::latency_ns).collect();
    if lat.is_empty() {
        return None;
    }
    let in_runs = lat.len() as u64;
    let above_ns = match slow {
        Slow::Above(ns) => ns,
        Slow::SlowestPct(pct) => {
            let n = lat.len();
            let take = ((n as f64 * pct / 100.0).ceil() as usize).clamp(1, n);
            let (_, &mut nth, _) = lat.select_nth_unstable(n - take);
            nth
        }
    };
    drop(lat);
    let index = Index::new(&mut stalls.stalls);
    let mut scratch = Scratch::default();
    let mut found = Found { in_runs, above_ns, ..Found::default() };
    let mut by_cause: HashMap<u32, Tally> = HashMap::new();
    let mut by_thread: HashMap<u32, Tally> = HashMap::new();
    let (mut causes_seen, mut threads_seen) = (Vec::new(), Vec::new());
    for (i, &op) in ops.iter().enumerate() {
        if op.latency_ns() < above_ns || !inside(&op) {
            continue;
        }
        found.reaching_out += u64::from(!within(&op));
        let covered = overlap::explain(op, &stalls.stalls, &index, &mut scratch);
        let first = found.parts.len() as u32;
        causes_seen.clear();
        threads_seen.clear();
        for p in scratch.parts() {
            let s = stalls.stalls[p.stall as usize];
            let from = found.shares.len() as u32;
            overlap::share(stalls.causes_of(&s), p.credit_ns, |k, ns| {
                found.shares.push((k, ns));
                by_cause.entry(k).or_default().ns += ns;
                causes_seen.push((k, ns));
            });
            by_thread.entry(s.thread).or_default().ns += p.credit_ns;
            threads_seen.push((s.thread, p.credit_ns));
            let causes = from..found.shares.len() as u32;
            found.parts.push(InOp { stall: p.stall, overlap_ns: p.overlap_ns, credit_ns: p.credit_ns, causes });
        }
        let lat = op.latency_ns();
        for (seen, map) in [(&mut causes_seen, &mut by_cause), (&mut threads_seen, &mut by_thread)] {
            tally_once(seen, map, lat);
        }
        found.uncovered_half += u64::from((lat - covered) * 2 >= lat);
        found.slow_ns += op.latency_ns();
        found.explained_ns += covered;
        found.uncovered_ops += u64::from(covered < op.latency_ns());
        let stalls = first..found.parts.len() as u32;
        found.slow.push(SlowOp { index: i as u64, op, covered_ns: covered, stalls });
    }
    found.slow.sort_by(|a, b| b.op.latency_ns().cmp(&a.op.latency_ns()).then(a.index.cmp(&b.index)));
    found.by_cause = ranked(by_cause);
    found.by_thread = ranked(by_thread);
    Some(found)
}

/// Each cause (or thread) met in one operation, `seen` as (id, ns) pairs:
/// one operation more for it, and one more held for half of `lat` where
/// its ns in it reach that.
fn tally_once(seen: &mut [(u32, u64)], map: &mut HashMap<u32, Tally>, lat: u64) {
    seen.sort_unstable_by_key(|s| s.0);
    for run in seen.chunk_by(|a, b| a.0 == b.0) {
        let t = map.entry(run[0].0).or_default();
        t.operations += 1;
        t.half += u64::from(run.iter().map(|s| s.1).sum::<u64>() * 2 >= lat);
    }
}

/// Most time first; ties by id (the order names were first met), so the
/// output never depends on a map's order.
fn ranked(m: HashMap<u32, Tally>) -> Vec<(u32, Tally)> {
    let mut v: Vec<(u32, Tally)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then(a.0.cmp(&b.0)));
    v
}
