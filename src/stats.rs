//! Aggregates per CPU and per CPU × cause. Owned by the collector thread;
//! readers (TUI, summary) get a clone published at a few Hz, so the hot
//! path never waits on them.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::attribution::Hiccup;
use crate::cause::Kind;
use crate::probe::HIST_BUCKETS;

mod causes;
pub use causes::{CauseKey, CauseStats, Dist, MAX_CAUSES, OTHERS};

/// Highest value the histograms track: one minute, in ns.
const HIST_MAX: u64 = 60_000_000_000;
/// Worst-gap-per-second history kept for the sparkline.
const SPARK_SECS: usize = 300;
/// Recent worst stalls kept with their breakdown.
const WORST_KEPT: usize = 32;
/// How long a stall stays among the "recent worst".
const WORST_AGE_NS: u64 = 60_000_000_000;
fn histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX, sigfig).expect("valid histogram bounds")
}

#[derive(Clone)]
pub struct CpuStats {
    pub cpu: u32,
    pub threshold_ns: u64,
    pub floor_ns: u64,
    /// Mean probe loop period, ns (time measured / iterations).
    pub loop_mean_ns: f64,
    /// Mean loop period between hiccups (gaps left out), ns; 0: not yet.
    pub loop_quiet_mean_ns: f64,
    pub hiccups: u64,
    pub stolen_ns: u64,
    pub explained_ns: u64,
    pub max_ns: u64,
    pub gaps: Histogram<u64>,
    /// log2 histogram of every loop delta, from the probe.
    pub loop_hist: [u64; HIST_BUCKETS],
    /// (second since start, worst gap in it), oldest first.
    pub worst_per_sec: VecDeque<(u64, u64)>,
    pub overflow: u64,
    pub drops: u64,
}

impl CpuStats {
    fn new(cpu: u32) -> Self {
        Self {
            cpu,
            threshold_ns: 0,
            floor_ns: 0,
            loop_mean_ns: 0.0,
            loop_quiet_mean_ns: 0.0,
            hiccups: 0,
            stolen_ns: 0,
            explained_ns: 0,
            max_ns: 0,
            // 2 significant digits: percentiles to 1%, in a histogram small
            // enough (~35 KB) to stay in cache and to clone 10 times a second.
            gaps: histogram(2),
            loop_hist: [0; HIST_BUCKETS],
            worst_per_sec: VecDeque::with_capacity(SPARK_SECS),
            overflow: 0,
            drops: 0,
        }
    }

    pub fn pct(&self, q: f64) -> u64 {
        if self.hiccups == 0 {
            0
        } else {
            self.gaps.value_at_quantile(q)
        }
    }
}

#[derive(Clone)]
pub struct Stats {
    /// CLOCK_MONOTONIC ns when the probes began measuring.
    pub start_ns: u64,
    /// Latest time the aggregates cover.
    pub now_ns: u64,
    pub cpus: Vec<CpuStats>,
    pub causes: HashMap<CauseKey, CauseStats>,
    pub worst: Vec<Hiccup>,
    pub events: u64,
    /// Consumer lag: age of the oldest record at the drain that read it,
    /// worst over the last publish period.
    pub lag_ns: u64,
    /// Worst consumer lag over the whole run.
    pub lag_max_ns: u64,
    /// CPU time the collector thread (the ring-buffer consumer, attribution
    /// and CSV) has used since it began draining, and before that (loading
    /// and attaching the BPF programs), ns.
    pub consumer_cpu_ns: u64,
    pub setup_cpu_ns: u64,
    /// CLOCK_MONOTONIC ns of the first event drained (0: none yet).
    pub first_event_ns: u64,
    /// Events stamped slightly out of order on their CPU (clamped), and
    /// timeline segments evicted because a window was full (summed per cause).
    pub reordered_events: u64,
    pub evicted_segments: u64,
    pub missing_tracepoints: Vec<&'static str>,
    /// How context switches are hooked (see bpf::SwitchHook).
    pub switch_hook: String,
    /// Per-program BPF run statistics (with --bpf-stats).
    pub prog_stats: Vec<crate::bpf::ProgStat>,
    /// Shared empty name of unexplained time (no allocation per hiccup).
    unexplained_name: Arc<str>,
    /// Entries each CPU has in `causes`, kept for the cap.
    cause_entries: HashMap<u32, usize>,
}

impl Stats {
    pub fn new(cpus: &[usize], start_ns: u64) -> Self {
        Self {
            start_ns,
            now_ns: start_ns,
            cpus: cpus.iter().map(|&c| CpuStats::new(c as u32)).collect(),
            causes: HashMap::new(),
            worst: Vec::with_capacity(WORST_KEPT + 1),
            events: 0,
            lag_ns: 0,
            lag_max_ns: 0,
            consumer_cpu_ns: 0,
            setup_cpu_ns: 0,
            first_event_ns: 0,
            reordered_events: 0,
            evicted_segments: 0,
            missing_tracepoints: Vec::new(),
            switch_hook: String::new(),
            prog_stats: Vec::new(),
            unexplained_name: Arc::from(""),
            cause_entries: HashMap::new(),
        }
    }

    pub fn cpu_mut(&mut self, cpu: u32) -> Option<&mut CpuStats> {
        self.cpus.iter_mut().find(|c| c.cpu == cpu)
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.now_ns.saturating_sub(self.start_ns)
    }

    pub fn stolen_pct(&self, c: &CpuStats) -> f64 {
        let e = self.elapsed_ns();
        if e == 0 {
            0.0
        } else {
            100.0 * c.stolen_ns as f64 / e as f64
        }
    }

    pub fn per_sec(&self, n: u64) -> f64 {
        let e = self.elapsed_ns();
        if e == 0 {
            0.0
        } else {
            n as f64 * 1e9 / e as f64
        }
    }

    pub fn record(&mut self, h: &Hiccup) {
        let start = self.start_ns;
        let Some(c) = self.cpu_mut(h.cpu) else { return };
        c.hiccups += 1;
        c.stolen_ns += h.gap;
        c.explained_ns += h.explained();
        c.max_ns = c.max_ns.max(h.gap);
        c.gaps.saturating_record(h.gap.max(1));
        let sec = h.t0.saturating_sub(start) / 1_000_000_000;
        match c.worst_per_sec.back_mut() {
            Some((s, w)) if *s == sec => *w = (*w).max(h.gap),
            _ => {
                if c.worst_per_sec.len() == SPARK_SECS {
                    c.worst_per_sec.pop_front();
                }
                c.worst_per_sec.push_back((sec, h.gap));
            }
        }
        let named = h.causes.iter().map(|(k, n, ns)| (*k, n.clone(), *ns));
        let unexplained = (h.unexplained > 0).then(|| (Kind::Unexplained, self.unexplained_name.clone(), h.unexplained));
        for (kind, name, ns) in named.chain(unexplained) {
            let key = (h.cpu, kind, name);
            // One lookup for a cause already known (the common case).
            if let Some(s) = self.causes.get_mut(&key) {
                s.add(ns, h.t0);
                continue;
            }
            let entries = self.cause_entries.entry(h.cpu).or_default();
            if *entries >= MAX_CAUSES {
                *entries = causes::fold_stale(&mut self.causes, h.cpu);
            }
            *entries += 1;
            self.causes.entry(key).or_default().add(ns, h.t0);
        }
        self.note_worst(h);
    }

    fn note_worst(&mut self, h: &Hiccup) {
        let cutoff = h.t0.saturating_sub(WORST_AGE_NS);
        self.worst.retain(|w| w.t0 >= cutoff);
        if self.worst.len() == WORST_KEPT && self.worst.last().is_some_and(|w| w.gap >= h.gap) {
            return;
        }
        let at = self.worst.partition_point(|w| w.gap >= h.gap);
        self.worst.insert(at, h.clone());
        self.worst.truncate(WORST_KEPT);
    }

    /// Causes of one CPU (or all), by total time, largest first.
    pub fn top_causes(&self, cpu: Option<u32>) -> Vec<(&CauseKey, &CauseStats)> {
        let mut v: Vec<_> = self.causes.iter().filter(|(k, _)| cpu.is_none_or(|c| k.0 == c)).collect();
        v.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then_with(|| a.0.cmp(b.0)));
        v
    }

    /// Forgets everything counted so far (the TUI's reset), keeping setup.
    pub fn reset(&mut self, now: u64) {
        let mut fresh = Stats::new(&[], now);
        fresh.cpus =
            self.cpus.iter().map(|c| CpuStats { threshold_ns: c.threshold_ns, floor_ns: c.floor_ns, ..CpuStats::new(c.cpu) }).collect();
        fresh.missing_tracepoints = std::mem::take(&mut self.missing_tracepoints);
        fresh.switch_hook = std::mem::take(&mut self.switch_hook);
        *self = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(cpu: u32, t0: u64, parts: &[(Kind, &str, u64)], unexplained: u64) -> Hiccup {
        let causes: Vec<_> = parts.iter().map(|&(k, n, ns)| (k, Arc::from(n), ns)).collect();
        let gap = causes.iter().map(|c| c.2).sum::<u64>() + unexplained;
        Hiccup { cpu, t0, gap, causes, unexplained }
    }

    #[test]
    fn aggregates_per_cpu_and_cause() {
        let mut s = Stats::new(&[1, 3], 0);
        s.record(&h(1, 1_000, &[(Kind::Task, "hog[5]", 200)], 20));
        s.record(&h(1, 2_000_000_000, &[(Kind::Task, "hog[5]", 300), (Kind::Irq, "24:eth0", 50)], 0));
        s.record(&h(3, 10, &[], 1000));
        s.now_ns = 10_000_000_000;
        let c1 = &s.cpus[0];
        assert_eq!((c1.hiccups, c1.stolen_ns, c1.max_ns, c1.explained_ns), (2, 570, 350, 550));
        assert_eq!(c1.worst_per_sec, VecDeque::from(vec![(0, 220), (2, 350)]));
        let hog = &s.causes[&(1, Kind::Task, Arc::from("hog[5]"))];
        assert_eq!((hog.count, hog.total_ns, hog.max_ns, hog.last_seen_ns), (2, 500, 300, 2_000_000_000));
        assert_eq!(hog.p99(), 300);
        let top: Vec<_> = s.top_causes(Some(1)).iter().map(|(k, _)| k.2.to_string()).collect();
        assert_eq!(top, vec!["hog[5]", "24:eth0", ""]);
        assert_eq!(s.top_causes(Some(3))[0].0 .1, Kind::Unexplained);
        assert!((s.stolen_pct(&s.cpus[0]) - 570.0 / 1e8).abs() < 1e-12);
        assert!((s.per_sec(3) - 0.3).abs() < 1e-9);
    }

    #[test]
    fn pid_churn_folds_stale_causes_into_others() {
        let mut s = Stats::new(&[1], 0);
        let big = 1_000_000;
        s.record(&h(1, 0, &[(Kind::Task, "hog[5]", big)], 0));
        // 1000 short-lived tasks, each seen in 70 hiccups (a histogram each),
        // bigger than the tick that keeps coming between them.
        for pid in 0..1000u64 {
            for i in 0..70 {
                s.record(&h(1, pid * 100 + i, &[(Kind::Task, &format!("cc1[{}]", 1000 + pid), 10 + pid)], 0));
            }
            s.record(&h(1, pid * 100 + 80, &[(Kind::Timer, "tick_nohz_handler", 5)], 0));
        }
        let kept = s.causes.keys().filter(|k| k.0 == 1).count();
        assert!(kept <= MAX_CAUSES, "{kept} causes kept");
        assert_eq!(s.cause_entries[&1], kept);
        // Totals still add up, and the large cause survived.
        let total: u64 = s.causes.values().map(|c| c.total_ns).sum();
        assert_eq!(total, s.cpus[0].stolen_ns);
        assert_eq!(s.causes[&(1, Kind::Task, Arc::from("hog[5]"))].total_ns, big);
        assert_eq!(s.causes[&(1, Kind::Timer, Arc::from("tick_nohz_handler"))].count, 1000);
        assert!(s.causes.contains_key(&(1, Kind::Task, Arc::from("cc1[1999]"))), "the latest task keeps its name");
        // Folded tasks share their program's entry.
        let others = &s.causes[&(1, Kind::Task, Arc::from("cc1[*]"))];
        assert!(others.count > 0 && matches!(others.dist, Dist::Hist(_)));
        assert_eq!(s.causes.values().map(|c| c.count).sum::<u64>(), 71_001);
    }

    #[test]
    fn keeps_the_worst_recent_stalls() {
        let mut s = Stats::new(&[1], 0);
        for i in 0..100u64 {
            s.record(&h(1, i, &[], i + 1));
        }
        assert_eq!(s.worst.len(), WORST_KEPT);
        assert_eq!(s.worst[0].gap, 100);
        // A minute later the old ones have aged out.
        s.record(&h(1, 2 * WORST_AGE_NS, &[], 5));
        assert_eq!(s.worst.len(), 1);
        s.reset(7);
        assert_eq!((s.cpus[0].hiccups, s.causes.len(), s.start_ns), (0, 0, 7));
    }
}
