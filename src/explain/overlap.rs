//! Which stalls lie inside one operation, and how its time is shared
//! among them. Pure: stalls and operations in, ns out.
//!
//! An operation's time is cut at every stall boundary inside it. A piece
//! no stall covers is "not on the watched threads". A piece k stalls
//! cover at once (the server preempted while the client takes an IRQ) is
//! split evenly among the k, so that what the stalls explain plus what
//! none covers is the operation's latency exactly: the tail's budget adds
//! up. A stall's share goes to its causes in proportion to their ns in
//! the stall (the CSV says how much of the stall each cause took, not
//! where in it), with every ns placed: integer division, the remainder to
//! the first (largest) cause.

use std::ops::Range;

use super::ops::Op;
use super::stalls::Stall;

/// The stalls sorted by thread, then start, with each thread's range and
/// the running largest end (a thread's stalls do not overlap, so a search
/// back from an operation's end stops at once; two runs of one thread
/// would overlap, and are still found).
pub struct Index {
    threads: Vec<Range<usize>>,
    max_end: Vec<u64>,
}

impl Index {
    /// Sorts `stalls` in place.
    pub fn new(stalls: &mut [Stall]) -> Index {
        stalls.sort_unstable_by_key(|s| (s.thread, s.start_ns, s.end_ns));
        let mut threads: Vec<Range<usize>> = Vec::new();
        let mut max_end: Vec<u64> = Vec::with_capacity(stalls.len());
        for (i, s) in stalls.iter().enumerate() {
            match threads.last_mut() {
                Some(r) if stalls[r.start].thread == s.thread => {
                    r.end = i + 1;
                    max_end.push(max_end[i - 1].max(s.end_ns));
                }
                _ => {
                    threads.push(i..i + 1);
                    max_end.push(s.end_ns);
                }
            }
        }
        Index { threads, max_end }
    }

    /// The stalls that overlap `[from, to)`, each with its overlap.
    pub fn overlapping(&self, stalls: &[Stall], from: u64, to: u64, out: &mut Vec<(u32, u64, u64)>) {
        for r in &self.threads {
            let list = &stalls[r.clone()];
            let mut j = list.partition_point(|s| s.start_ns < to);
            while j > 0 {
                j -= 1;
                if self.max_end[r.start + j] <= from {
                    break;
                }
                let s = &list[j];
                let (a, b) = (s.start_ns.max(from), s.end_ns.min(to));
                if a < b {
                    out.push(((r.start + j) as u32, a, b));
                }
            }
        }
    }
}

/// One stall's part in an operation: how long it overlaps it, and the ns
/// of the operation it is credited with (less, where others overlap too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub stall: u32,
    pub overlap_ns: u64,
    pub credit_ns: u64,
}

/// Buffers reused from one operation to the next (a million operations
/// allocate nothing each), and the last operation's parts.
#[derive(Default)]
pub struct Scratch {
    found: Vec<(u32, u64, u64)>,
    edges: Vec<(u64, bool, usize)>,
    active: Vec<usize>,
    parts: Vec<Part>,
}

impl Scratch {
    /// The parts of the operation `explain` last saw, in the order the
    /// stalls began.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }
}

/// What the stalls cover of `op` (their union); each stall's part is left
/// in `scratch.parts()`.
pub fn explain(op: Op, stalls: &[Stall], index: &Index, scratch: &mut Scratch) -> u64 {
    let Scratch { found, edges, active, parts } = scratch;
    found.clear();
    index.overlapping(stalls, op.start_ns, op.end_ns, found);
    found.sort_unstable_by_key(|&(i, a, _)| (a, i));
    parts.clear();
    parts.extend(found.iter().map(|&(i, a, b)| Part { stall: i, overlap_ns: b - a, credit_ns: 0 }));
    // The sweep: an end before a start at one instant, so that abutting
    // stalls never count as overlapping.
    edges.clear();
    for (k, &(_, a, b)) in found.iter().enumerate() {
        edges.push((a, true, k));
        edges.push((b, false, k));
    }
    edges.sort_unstable_by_key(|&(t, start, k)| (t, start, k));
    active.clear();
    let mut covered = 0;
    let mut at = op.start_ns;
    for &(t, start, k) in edges.iter() {
        let piece = t - at;
        if piece > 0 && !active.is_empty() {
            covered += piece;
            let n = active.len() as u64;
            for (i, &p) in active.iter().enumerate() {
                parts[p].credit_ns += piece / n + u64::from((i as u64) < piece % n);
            }
        }
        at = t;
        if start {
            active.push(k);
        } else if let Some(pos) = active.iter().position(|&p| p == k) {
            active.remove(pos);
        }
    }
    covered
}

/// `credit` ns of a stall shared among its causes (`(key, ns)`, largest
/// first, adding up to the stall's length), each ns placed once.
pub fn share(causes: &[(u32, u64)], credit: u64, mut out: impl FnMut(u32, u64)) {
    let total: u64 = causes.iter().map(|c| c.1).sum();
    if causes.is_empty() || credit == 0 {
        return;
    }
    if total == 0 {
        out(causes[0].0, credit);
        return;
    }
    let part = |ns: u64| (ns as u128 * credit as u128 / total as u128) as u64;
    let given: u64 = causes.iter().map(|c| part(c.1)).sum();
    for (i, &(k, ns)) in causes.iter().enumerate() {
        let v = part(ns) + if i == 0 { credit - given } else { 0 };
        if v > 0 {
            out(k, v);
        }
    }
}
