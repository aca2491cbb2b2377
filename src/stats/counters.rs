//! What the probes, the kernel and jitterwatch itself count: loop
//! histograms, ring-buffer drops, queue overflows, events, the consumer's
//! CPU. Their sources count from the start; a reset subtracts what they
//! were at the time, so every view shows counts since the reset.

use crate::bpf::ProgStat;
use crate::probe::HIST_BUCKETS;

#[derive(Debug, Clone, PartialEq)]
pub struct CpuCounters {
    pub cpu: u32,
    /// The threshold its source reports intervals by (a fact, not a
    /// count: never reset).
    pub threshold_ns: u64,
    pub overflow: u64,
    pub drops: u64,
    /// The steal clock over the whole run (None: no reading came).
    pub steal: Option<crate::engine::StealTotals>,
    /// The kernel's verdicts on stopping the tick (None: not read).
    pub tick: Option<crate::tick::Tally>,
    /// What only the run's source counts for this CPU: every view matches
    /// on it (none asks the mode).
    pub own: SourceFigures,
}

/// The figures one source alone has for a CPU.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceFigures {
    /// The spin probe's loop.
    Spin(SpinFigures),
    /// The wake-up probe's latencies.
    Wakeup(WakeFigures),
    /// Passive mode counts nothing per CPU of its own: its figures are
    /// per watched thread (`Stats::threads`).
    Passive,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpinFigures {
    /// The loop's floor as measured at start (a fact: never reset).
    pub floor_ns: u64,
    /// Mean loop period, ns (time measured / iterations).
    pub loop_mean_ns: f64,
    /// Mean loop period between hiccups (gaps left out), ns; 0: not yet.
    pub loop_quiet_mean_ns: f64,
    /// log2 histogram of every loop delta.
    pub hist: [u64; HIST_BUCKETS],
    /// The probe read the CPU's counter: its distance from CLOCK_MONOTONIC
    /// when it stopped, ns (None: vDSO clock, or not stopped yet).
    pub tsc_drift_ns: Option<i64>,
    /// The counter the loop read (`tsc`, `cntvct`); None: the vDSO.
    pub counter: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WakeFigures {
    /// The smallest latency seen: where the spin probe's floor stands.
    pub min_ns: u64,
    /// log2 histogram of every wake-up's latency.
    pub hist: [u64; HIST_BUCKETS],
    /// Its latencies over the whole run (a reset does not clear them;
    /// None: no wake-up yet).
    pub latency: Option<crate::probe::Latency>,
}

/// Nothing measured yet.
impl Default for SpinFigures {
    fn default() -> Self {
        Self { floor_ns: 0, loop_mean_ns: 0.0, loop_quiet_mean_ns: 0.0, hist: [0; HIST_BUCKETS], tsc_drift_ns: None, counter: None }
    }
}

/// Nothing measured yet.
impl Default for WakeFigures {
    fn default() -> Self {
        Self { min_ns: 0, hist: [0; HIST_BUCKETS], latency: None }
    }
}

impl SourceFigures {
    /// What stands where the spin probe's floor goes: its floor, the
    /// wake-up probe's smallest latency; 0 for passive mode.
    pub fn floor_ns(&self) -> u64 {
        match self {
            SourceFigures::Spin(s) => s.floor_ns,
            SourceFigures::Wakeup(w) => w.min_ns,
            SourceFigures::Passive => 0,
        }
    }

    /// A probe's log2 histogram: loop gaps, or wake-up latencies.
    pub fn hist(&self) -> Option<&[u64; HIST_BUCKETS]> {
        match self {
            SourceFigures::Spin(s) => Some(&s.hist),
            SourceFigures::Wakeup(w) => Some(&w.hist),
            SourceFigures::Passive => None,
        }
    }

    fn hist_mut(&mut self) -> Option<&mut [u64; HIST_BUCKETS]> {
        match self {
            SourceFigures::Spin(s) => Some(&mut s.hist),
            SourceFigures::Wakeup(w) => Some(&mut w.hist),
            SourceFigures::Passive => None,
        }
    }

    pub fn spin(&self) -> Option<&SpinFigures> {
        match self {
            SourceFigures::Spin(s) => Some(s),
            _ => None,
        }
    }

    /// The wake-up probe's latencies, once it has any.
    pub fn latency(&self) -> Option<&crate::probe::Latency> {
        match self {
            SourceFigures::Wakeup(w) => w.latency.as_ref(),
            _ => None,
        }
    }
}

impl CpuCounters {
    pub fn new(cpu: u32) -> Self {
        Self { cpu, threshold_ns: 0, overflow: 0, drops: 0, steal: None, tick: None, own: SourceFigures::Passive }
    }

    fn since(&self, base: &CpuCounters) -> CpuCounters {
        let mut c = self.clone();
        if let (Some(h), Some(b)) = (c.own.hist_mut(), base.own.hist()) {
            for (x, b) in h.iter_mut().zip(b) {
                *x = x.saturating_sub(*b);
            }
        }
        c.overflow = c.overflow.saturating_sub(base.overflow);
        c.drops = c.drops.saturating_sub(base.drops);
        c
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub events: u64,
    /// CPU time of the collector thread (ring-buffer consumer, attribution,
    /// sinks) since it began draining, and before that (BPF load and
    /// attach), ns.
    pub consumer_cpu_ns: u64,
    pub setup_cpu_ns: u64,
    /// Consumer lag: age of the oldest record at the drain that read it,
    /// worst over the last snapshot period, and worst over the run.
    pub lag_ns: u64,
    pub lag_max_ns: u64,
    /// CLOCK_MONOTONIC ns of the first event drained (0: none yet).
    pub first_event_ns: u64,
    /// Events stamped slightly out of order on their CPU (clamped), and
    /// timeline segments evicted because a window was full.
    pub reordered_events: u64,
    pub evicted_segments: u64,
    pub missing_tracepoints: Vec<&'static str>,
    /// Reads of the kernel's drop counters that failed (the counts shown
    /// are then the last read: lower bounds).
    pub drop_read_failures: u64,
    /// How context switches are hooked (see bpf::SwitchHook).
    pub switch_hook: String,
    /// Per-program BPF run statistics (with --bpf-stats).
    pub prog_stats: Vec<ProgStat>,
    /// One hook firing's dispatch as priced at start, moved into `self`
    /// before each of our records (None: not priced).
    pub dispatch: Option<crate::bpf::Dispatch>,
    pub cpus: Vec<CpuCounters>,
}

impl Counters {
    pub fn new(cpus: &[usize]) -> Self {
        Self { cpus: cpus.iter().map(|&c| CpuCounters::new(c as u32)).collect(), ..Self::default() }
    }

    /// These counts less those of `base` (an earlier reading of the same
    /// sources); facts are kept as they are.
    pub fn since(&self, base: &Counters) -> Counters {
        let mut c = self.clone();
        c.events = c.events.saturating_sub(base.events);
        c.consumer_cpu_ns = c.consumer_cpu_ns.saturating_sub(base.consumer_cpu_ns);
        c.reordered_events = c.reordered_events.saturating_sub(base.reordered_events);
        c.evicted_segments = c.evicted_segments.saturating_sub(base.evicted_segments);
        for p in &mut c.prog_stats {
            if let Some(b) = base.prog_stats.iter().find(|b| b.name == p.name) {
                p.run_cnt = p.run_cnt.saturating_sub(b.run_cnt);
                p.run_time_ns = p.run_time_ns.saturating_sub(b.run_time_ns);
            }
        }
        c.cpus = self.cpus.iter().map(|p| base.cpus.iter().find(|b| b.cpu == p.cpu).map_or_else(|| p.clone(), |b| p.since(b))).collect();
        c
    }

    pub fn drops(&self) -> u64 {
        self.cpus.iter().map(|c| c.drops).sum()
    }

    pub fn overflows(&self) -> u64 {
        self.cpus.iter().map(|c| c.overflow).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_subtract_and_facts_stay() {
        let mut base = Counters::new(&[1]);
        base.events = 100;
        base.cpus[0].drops = 3;
        let spin = |n| SourceFigures::Spin(SpinFigures { hist: std::array::from_fn(|k| if k == 5 { n } else { 0 }), ..Default::default() });
        base.cpus[0].own = spin(1000);
        base.prog_stats = vec![ProgStat { name: "p".into(), run_cnt: 10, run_time_ns: 1000 }];
        let mut now = base.clone();
        now.events = 150;
        now.cpus[0].drops = 5;
        now.cpus[0].own = spin(1500);
        now.cpus[0].threshold_ns = 200;
        now.prog_stats[0].run_cnt = 30;
        let d = now.since(&base);
        assert_eq!((d.events, d.cpus[0].drops, d.cpus[0].own.hist().unwrap()[5], d.cpus[0].threshold_ns), (50, 2, 500, 200));
        assert_eq!((d.prog_stats[0].run_cnt, d.drops()), (20, 2));
    }
}
