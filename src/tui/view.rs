//! The reset: what was counted since a baseline snapshot. The collector's
//! `Stats` only grows; the view subtracts the baseline from each new
//! snapshot, so `r` shows zeros at once while collection carries on.

use hdrhistogram::Histogram;

use crate::attribution::Hiccup;
use crate::stats::{CpuStats, Dist, Stats};

/// `cur` minus `base` (`base` an earlier snapshot of the same collector).
/// Counts and histograms subtract; maxima come from what is left; the
/// recent worst stalls and the per-second worst keep only what is new.
pub fn since(cur: &Stats, base: &Stats) -> Stats {
    let mut v = cur.clone();
    v.start_ns = base.now_ns.max(cur.start_ns).min(cur.now_ns);
    v.events = cur.events.saturating_sub(base.events);
    v.consumer_cpu_ns = cur.consumer_cpu_ns.saturating_sub(base.consumer_cpu_ns);
    let same = |a: &Hiccup, b: &Hiccup| a.cpu == b.cpu && a.t0 == b.t0 && a.gap == b.gap;
    v.worst.retain(|h| !base.worst.iter().any(|b| same(h, b)));
    let worst = v.worst.clone();
    for c in &mut v.cpus {
        if let Some(b) = base.cpus.iter().find(|b| b.cpu == c.cpu) {
            let recent_max = worst.iter().filter(|h| h.cpu == c.cpu).map(|h| h.gap).max();
            subtract_cpu(c, b, recent_max);
        }
    }
    v.causes.retain(|k, c| {
        let Some(b) = base.causes.get(k) else { return true };
        c.count = c.count.saturating_sub(b.count);
        c.total_ns = c.total_ns.saturating_sub(b.total_ns);
        if c.count == 0 {
            return false;
        }
        let Some(dist) = dist_since(&c.dist, &b.dist) else { return true };
        let recent = || {
            worst
                .iter()
                .filter(|h| h.cpu == k.0)
                .flat_map(|h| h.all_causes())
                .filter(|&(kind, name, _)| kind == k.1 && name == &*k.2)
                .map(|c| c.2)
                .max()
        };
        c.max_ns = match &dist {
            Dist::Exact(xs) => xs.iter().copied().max().unwrap_or(0),
            // The old maximum may be gone: the largest value left, to the
            // histogram's precision, or exactly if among the recent worst.
            Dist::Hist(h) if c.max_ns <= b.max_ns => best_max(h, c.max_ns, recent()),
            Dist::Hist(_) => c.max_ns,
        };
        c.dist = dist;
        true
    });
    v
}

/// The samples recorded after `base`: exact samples are appended in
/// order, histograms subtract. None if `base` is not an earlier state.
fn dist_since(cur: &Dist, base: &Dist) -> Option<Dist> {
    Some(match (cur, base) {
        (Dist::Exact(c), Dist::Exact(b)) => Dist::Exact(c.get(b.len()..)?.to_vec()),
        (Dist::Hist(c), Dist::Hist(b)) => {
            let mut h = c.clone();
            h.subtract(&**b).ok()?;
            Dist::Hist(h)
        }
        (Dist::Hist(c), Dist::Exact(b)) => {
            let mut old = (**c).clone();
            old.reset();
            for &x in b {
                old.saturating_record(x.max(1));
            }
            let mut h = c.clone();
            h.subtract(&old).ok()?;
            Dist::Hist(h)
        }
        (Dist::Exact(_), Dist::Hist(_)) => return None,
    })
}

fn subtract_cpu(c: &mut CpuStats, b: &CpuStats, recent_max: Option<u64>) {
    c.hiccups = c.hiccups.saturating_sub(b.hiccups);
    c.stolen_ns = c.stolen_ns.saturating_sub(b.stolen_ns);
    c.explained_ns = c.explained_ns.saturating_sub(b.explained_ns);
    c.overflow = c.overflow.saturating_sub(b.overflow);
    c.drops = c.drops.saturating_sub(b.drops);
    for (x, y) in c.loop_hist.iter_mut().zip(&b.loop_hist) {
        *x = x.saturating_sub(*y);
    }
    // A second's worst is new if it beats what that second had at the reset.
    c.worst_per_sec.retain(|&(s, w)| !b.worst_per_sec.iter().any(|&(bs, bw)| bs == s && bw >= w));
    let subtracted = c.gaps.subtract(&b.gaps).is_ok();
    if c.hiccups == 0 {
        c.max_ns = 0;
        c.gaps.reset();
    } else if c.max_ns <= b.max_ns && subtracted {
        c.max_ns = best_max(&c.gaps, c.max_ns, recent_max);
    }
}

/// The largest value in `h` (no more than `cap`): exact when the largest
/// new value is among the recent worst stalls, else to `h`'s precision.
fn best_max(h: &Histogram<u64>, cap: u64, recent: Option<u64>) -> u64 {
    let m = h.max().min(cap);
    match recent {
        Some(w) if w >= h.lowest_equivalent(m) => w,
        _ => h.lowest_equivalent(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Kind;
    use std::sync::Arc;

    fn h(t0: u64, gap: u64) -> Hiccup {
        Hiccup { cpu: 1, t0, gap, causes: vec![(Kind::Task, Arc::from("hog[5]"), gap)], unexplained: 0 }
    }

    #[test]
    fn counts_only_what_came_after_the_baseline() {
        let mut s = Stats::new(&[1], 0);
        s.record(&h(100, 50_000));
        s.cpus[0].loop_hist[5] = 1000;
        s.events = 10;
        s.now_ns = 1_000_000_000;
        let base = s.clone();
        let v = since(&s, &base);
        assert_eq!((v.cpus[0].hiccups, v.cpus[0].max_ns, v.causes.len(), v.worst.len(), v.events), (0, 0, 0, 0, 0));
        assert_eq!((v.cpus[0].loop_hist[5], v.elapsed_ns(), v.cpus[0].pct(0.99)), (0, 0, 0));
        assert!(v.cpus[0].worst_per_sec.is_empty());

        s.record(&h(1_500_000_000, 7_000));
        s.cpus[0].loop_hist[5] = 1500;
        s.now_ns = 3_000_000_000;
        let v = since(&s, &base);
        let c = &v.cpus[0];
        assert_eq!((c.hiccups, c.stolen_ns, c.max_ns, c.loop_hist[5]), (1, 7_000, 7_000, 500));
        assert_eq!(c.worst_per_sec.iter().copied().collect::<Vec<_>>(), vec![(1, 7_000)]);
        assert_eq!((v.worst.len(), v.elapsed_ns()), (1, 2_000_000_000));
        let hog = v.causes.values().next().unwrap();
        assert_eq!((hog.count, hog.total_ns, hog.max_ns, hog.p99()), (1, 7_000, 7_000, 7_000));
    }

    #[test]
    fn frequent_causes_subtract_their_histograms() {
        let mut s = Stats::new(&[1], 0);
        for i in 0..50 {
            s.record(&h(i, 90_000));
        }
        let base = s.clone();
        for i in 50..100 {
            s.record(&h(i, 3_000));
        }
        // Past 64 samples the cause keeps a histogram; the baseline had exact samples.
        let v = since(&s, &base);
        let hog = v.causes.values().next().unwrap();
        assert!(matches!(hog.dist, Dist::Hist(_)));
        // The 90 µs maximum is gone; what is left, to the histogram's precision.
        assert_eq!(hog.count, 50);
        assert!((2_970..=3_030).contains(&hog.max_ns) && (2_970..=3_030).contains(&hog.p99()), "{} {}", hog.max_ns, hog.p99());
        let again = since(&s, &s.clone());
        assert!(again.causes.is_empty());
    }
}
