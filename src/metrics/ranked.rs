//! A bounded label set for one CPU's causes. Prometheus keeps every label
//! combination it ever saw as a series, so a fork storm of uniquely named
//! tasks must not become a storm of series: only the `k` causes that stole
//! the most recently (an exponentially decayed total) get their own series;
//! the rest add to one `(others)` series per kind. Every series is a
//! monotonic counter: a cause's own series counts from when it got one (its
//! earlier time went to its kind's `(others)`), so the series of a CPU
//! always add up to its total. Pure logic: no clock, no I/O.

use std::collections::HashMap;
use std::hash::Hash;

/// Causes tracked (ranked) per CPU beyond those exported; past it, new
/// causes go straight to `(others)` until the next evaluation prunes.
pub const MAX_TRACKED: usize = 512;

/// How fast a cause's rank forgets: its decayed total halves every ten
/// minutes, so a new culprit gets a series within minutes of appearing.
pub const HALF_LIFE_SECS: f64 = 600.0;

#[derive(Debug, Clone)]
struct Entry {
    decayed: f64,
    /// Since the last evaluation.
    pending: u64,
    /// Its series' value (ns, stalls), if it has one.
    exported: Option<(u64, u64)>,
}

#[derive(Debug)]
pub struct Ranked<K> {
    k: usize,
    tracked: HashMap<K, Entry>,
    /// Per kind: what causes without a series of their own stole (ns, stalls).
    others: Vec<(u64, u64)>,
}

impl<K: Hash + Eq + Clone + Ord> Ranked<K> {
    /// `k` series of their own at most; `kinds` kinds of cause.
    pub fn new(k: usize, kinds: usize) -> Self {
        Self { k, tracked: HashMap::with_capacity(k * 2), others: vec![(0, 0); kinds] }
    }

    fn exported(&self) -> usize {
        self.tracked.values().filter(|e| e.exported.is_some()).count()
    }

    /// `key` (of kind index `kind`) stole `ns` in one stall. A new cause
    /// gets a series at once while fewer than `k` have one.
    pub fn add(&mut self, key: &K, kind: usize, ns: u64) {
        fn bump(v: &mut (u64, u64), ns: u64) {
            v.0 += ns;
            v.1 += 1;
        }
        if let Some(e) = self.tracked.get_mut(key) {
            e.pending += ns;
            match &mut e.exported {
                Some(v) => bump(v, ns),
                None => bump(&mut self.others[kind], ns),
            }
            return;
        }
        if self.tracked.len() >= MAX_TRACKED {
            bump(&mut self.others[kind], ns);
            return;
        }
        let room = self.exported() < self.k;
        if !room {
            bump(&mut self.others[kind], ns);
        }
        self.tracked.insert(key.clone(), Entry { decayed: 0.0, pending: ns, exported: room.then_some((ns, 1)) });
    }

    /// Folds the time since the last evaluation (`dt` seconds) into the
    /// ranks, gives the top `k` a series (the others lose theirs), and
    /// forgets the least of the rest when the table is full.
    pub fn evaluate(&mut self, dt: f64) {
        let keep = (-dt.max(0.0) * std::f64::consts::LN_2 / HALF_LIFE_SECS).exp();
        for e in self.tracked.values_mut() {
            e.decayed = e.decayed * keep + e.pending as f64;
            e.pending = 0;
        }
        let mut order: Vec<(&K, f64, bool)> = self.tracked.iter().map(|(k, e)| (k, e.decayed, e.exported.is_some())).collect();
        // Highest rank first; a tie keeps the one that has a series, then
        // the key's order, so evaluations are stable.
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then_with(|| a.0.cmp(b.0)));
        let top: Vec<K> = order.iter().take(self.k).map(|(k, _, _)| (*k).clone()).collect();
        let full = self.tracked.len() >= MAX_TRACKED;
        let forget: Vec<K> = if full { order.iter().skip(MAX_TRACKED / 2).map(|(k, _, _)| (*k).clone()).collect() } else { Vec::new() };
        for (key, e) in self.tracked.iter_mut() {
            let wanted = top.contains(key);
            match (&e.exported, wanted) {
                (None, true) => e.exported = Some((0, 0)),
                (Some(_), false) => e.exported = None,
                _ => {}
            }
        }
        for key in forget.iter().filter(|k| !top.contains(k)) {
            self.tracked.remove(key);
        }
    }

    /// The series: each cause with one and its value, then each kind's
    /// `(others)` (kind index, value) where it is not zero.
    #[allow(clippy::type_complexity)]
    pub fn series(&self) -> (Vec<(&K, (u64, u64))>, Vec<(usize, (u64, u64))>) {
        let mut own: Vec<(&K, (u64, u64))> = self.tracked.iter().filter_map(|(k, e)| e.exported.map(|v| (k, v))).collect();
        own.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(b.0)));
        let others = self.others.iter().enumerate().filter(|(_, v)| v.1 > 0).map(|(i, &v)| (i, v)).collect();
        (own, others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(r: &Ranked<String>) -> u64 {
        let (own, others) = r.series();
        own.iter().map(|s| s.1 .0).sum::<u64>() + others.iter().map(|s| s.1 .0).sum::<u64>()
    }

    #[test]
    fn the_first_k_get_series_the_rest_go_to_others() {
        let mut r = Ranked::new(2, 3);
        r.add(&"a".to_string(), 0, 10);
        r.add(&"b".to_string(), 1, 20);
        r.add(&"c".to_string(), 1, 5);
        r.add(&"a".to_string(), 0, 1);
        let (own, others) = r.series();
        assert_eq!(own.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), vec![("b", (20, 1)), ("a", (11, 2))]);
        assert_eq!(others, vec![(1, (5, 1))]);
        assert_eq!(total(&r), 36);
    }

    #[test]
    fn a_new_culprit_takes_a_series_from_a_fading_one_and_counters_never_go_back() {
        let mut r = Ranked::new(1, 1);
        let (old, new) = ("old".to_string(), "new".to_string());
        r.add(&old, 0, 100);
        r.evaluate(1.0);
        let mut last = (100, 0);
        // `new` steals more every second; `old` nothing more.
        for s in 0..5 {
            r.add(&new, 0, 1000);
            r.evaluate(1.0);
            let (own, others) = r.series();
            let own_v = own.first().map_or(0, |x| x.1 .0);
            let other_v = others.first().map_or(0, |x| x.1 .0);
            assert!(other_v >= last.1, "(others) went back at second {s}");
            last = (own_v, other_v);
        }
        let (own, _) = r.series();
        assert_eq!(own[0].0, &new, "the culprit of now has the series");
        // Its first second went to (others), the rest is its own.
        assert_eq!(own[0].1, (4000, 4));
        // old's series is gone (its 100 ns with it); new's first second is in (others).
        assert_eq!(total(&r), 5000);
    }

    #[test]
    fn a_storm_of_unique_names_stays_bounded() {
        let mut r = Ranked::new(10, 1);
        for i in 0..100_000u32 {
            r.add(&format!("task{i}"), 0, 1 + (i % 7) as u64);
            if i % 1000 == 0 {
                r.evaluate(1.0);
            }
        }
        r.evaluate(1.0);
        let (own, others) = r.series();
        assert!(own.len() <= 10 && others.len() <= 1);
        assert!(r.tracked.len() <= MAX_TRACKED);
        let want: u64 = (0..100_000u32).map(|i| 1 + (i % 7) as u64).sum();
        assert!(total(&r) <= want);
    }
}
