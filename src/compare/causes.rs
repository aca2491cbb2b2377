//! Causes across runs: each run's time per cause per second of run (so
//! runs of different lengths compare), and what changed from the base:
//! causes that appeared, vanished, grew or shrank most.

use std::collections::HashMap;

use serde::Serialize;

use super::figures::Scope;
use super::input::Run;

/// A run's causes in a scope: `kind:name` → ns stolen per second of run.
pub fn rates(run: &Run, scope: &Scope) -> HashMap<String, f64> {
    // u128: each figure is a u64 read from a file, and they may add up
    // past u64 over the rows.
    let mut total: HashMap<u32, u128> = HashMap::new();
    for row in scope.rows(run).unwrap_or_default() {
        for &(k, ns) in &row.causes {
            *total.entry(k).or_default() += ns as u128;
        }
    }
    let secs = run.duration_s();
    total.into_iter().map(|(k, ns)| (run.keys[k as usize].clone(), ns as f64 / secs)).collect()
}

/// A run's time stolen per second of run, all causes together. Summed in
/// integers before the one division: a sum of the per-cause rates would
/// depend on the map's order in its last digit.
pub fn total_rate(run: &Run, scope: &Scope) -> f64 {
    let ns: u128 = scope.rows(run).unwrap_or_default().iter().flat_map(|row| row.causes.iter()).map(|&(_, ns)| ns as u128).sum();
    ns as f64 / run.duration_s()
}

/// The causes worth a row: the largest `n` of each run, largest first by
/// their largest rate in any run.
pub fn top(rates: &[HashMap<String, f64>], n: usize) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for r in rates {
        let mut mine: Vec<(&String, f64)> = r.iter().map(|(k, v)| (k, *v)).collect();
        mine.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        for (k, _) in mine.into_iter().take(n) {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let peak = |k: &String| rates.iter().filter_map(|r| r.get(k)).fold(0.0f64, |a, &b| a.max(b));
    keys.sort_by(|a, b| peak(b).total_cmp(&peak(a)).then_with(|| a.cmp(b)));
    keys
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change {
    pub cause: String,
    /// ns per second of run, in the base and in the other run.
    pub base_ns_per_s: f64,
    pub other_ns_per_s: f64,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Changes {
    pub appeared: Vec<Change>,
    pub vanished: Vec<Change>,
    pub grew: Vec<Change>,
    pub shrank: Vec<Change>,
}

/// What changed from `base` to `other`, each list largest change first,
/// `n` at most per list.
pub fn changes(base: &HashMap<String, f64>, other: &HashMap<String, f64>, n: usize) -> Changes {
    let mut c = Changes::default();
    let mut keys: Vec<&String> = base.keys().chain(other.keys().filter(|k| !base.contains_key(*k))).collect();
    keys.sort();
    for k in keys {
        let (b, o) = (base.get(k).copied(), other.get(k).copied());
        let ch = Change { cause: k.clone(), base_ns_per_s: b.unwrap_or(0.0), other_ns_per_s: o.unwrap_or(0.0) };
        match (b, o) {
            (None, Some(_)) => c.appeared.push(ch),
            (Some(_), None) => c.vanished.push(ch),
            (Some(b), Some(o)) if o > b => c.grew.push(ch),
            (Some(b), Some(o)) if o < b => c.shrank.push(ch),
            _ => {}
        }
    }
    let delta = |x: &Change| (x.other_ns_per_s - x.base_ns_per_s).abs();
    for list in [&mut c.appeared, &mut c.vanished, &mut c.grew, &mut c.shrank] {
        list.sort_by(|a, b| delta(b).total_cmp(&delta(a)).then_with(|| a.cause.cmp(&b.cause)));
        list.truncate(n);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: &[(&str, f64)]) -> HashMap<String, f64> {
        v.iter().map(|(k, r)| (k.to_string(), *r)).collect()
    }

    #[test]
    fn appeared_vanished_grew_shrank() {
        let base = m(&[("task:stress-ng", 5e6), ("irq:local_timer", 1e3), ("unexplained:", 2e3), ("work:vmstat_update", 10.0)]);
        let tuned = m(&[("irq:local_timer", 3e3), ("unexplained:", 1e3), ("task:cc1", 7.0), ("work:vmstat_update", 10.0)]);
        let c = changes(&base, &tuned, 5);
        assert_eq!(c.appeared.iter().map(|x| x.cause.as_str()).collect::<Vec<_>>(), ["task:cc1"]);
        assert_eq!(c.vanished.iter().map(|x| x.cause.as_str()).collect::<Vec<_>>(), ["task:stress-ng"]);
        assert_eq!(c.grew.iter().map(|x| x.cause.as_str()).collect::<Vec<_>>(), ["irq:local_timer"]);
        assert_eq!(c.shrank.iter().map(|x| x.cause.as_str()).collect::<Vec<_>>(), ["unexplained:"]);
        assert_eq!(c.vanished[0].base_ns_per_s, 5e6);
        assert_eq!(c.appeared[0].base_ns_per_s, 0.0);
    }

    #[test]
    fn top_takes_each_runs_largest() {
        let a = m(&[("x", 10.0), ("y", 5.0), ("z", 1.0)]);
        let b = m(&[("z", 100.0), ("x", 1.0)]);
        assert_eq!(top(&[a, b], 1), ["z", "x"]);
    }
}
