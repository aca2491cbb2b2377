//! What the collector counts of itself and reads from the kernel between
//! drains: its own cost and lag, the kernel's drop counters, the tick's
//! verdicts; and the run's counters built from them.

use crate::bpf::Tracer;
use crate::clock::thread_cpu_ns;
use crate::source::Source;
use crate::stats::{Counters, CpuCounters};

use super::Drain;

/// What the collector counts of itself.
#[derive(Default)]
pub(super) struct Own {
    setup_cpu_ns: u64,
    lag_ns: u64,
    lag_max_ns: u64,
    first_event_ns: u64,
    missing: Vec<&'static str>,
    switch_hook: String,
    dispatch: Option<crate::bpf::Dispatch>,
    /// The kernel's drop counters as last read, and how often a read failed:
    /// a failed read keeps the last counts (a lower bound), never zeros.
    drops: Vec<u64>,
    drop_read_failures: u64,
    /// The tick's verdicts per watched CPU as last read: kept, because the
    /// programs' memory is cleared as they stop watching.
    ticks: Vec<Option<crate::tick::Tally>>,
    /// The nohz_full CPUs, read once (the tick's state means something
    /// else on the others); None: the kernel cannot have any.
    nohz_full: Option<Vec<usize>>,
}

impl Own {
    /// Counting from now: what came before (loading and attaching, the
    /// ring buffer's set-up) is set-up; the consumer's own cost counts
    /// from here.
    pub fn new(tracer: &Tracer<'_>) -> Self {
        Own {
            setup_cpu_ns: thread_cpu_ns(),
            missing: tracer.missing.clone(),
            switch_hook: tracer.switch_hook.to_string(),
            dispatch: tracer.dispatch,
            // None where the kernel cannot have them (no file without
            // CONFIG_NO_HZ_FULL: None) or has none ("(null)").
            nohz_full: crate::cpulist::read_file(std::path::Path::new("/sys/devices/system/cpu/nohz_full")).ok(),
            ..Own::default()
        }
    }

    /// A drain ended at `drained` whose oldest event was stamped `oldest`:
    /// the consumer's lag behind the kernel.
    pub fn drained(&mut self, oldest: Option<u64>, drained: u64) {
        if let Some(oldest) = oldest {
            self.lag_ns = self.lag_ns.max(drained.saturating_sub(oldest));
            self.lag_max_ns = self.lag_max_ns.max(self.lag_ns);
            if self.first_event_ns == 0 {
                self.first_event_ns = oldest;
            }
        }
    }

    /// The lag is reported per snapshot: the next one counts anew.
    pub fn reported(&mut self) {
        self.lag_ns = 0;
    }

    /// The tick's verdicts as the programs tallied them (a read of their
    /// memory, no system call): after every drain, because the programs'
    /// memory is cleared as they stop watching, before the last counters.
    pub fn note_ticks(&mut self, tracer: &Tracer<'_>, cpus: &[usize]) {
        let ticks = tracer.ticks(cpus);
        if self.ticks.len() != ticks.len() {
            self.ticks = vec![None; ticks.len()];
        }
        for ((kept, now), cpu) in self.ticks.iter_mut().zip(ticks).zip(cpus) {
            let (nohz_full, nohz_capable) = (self.nohz_full.as_ref().is_some_and(|l| l.contains(cpu)), self.nohz_full.is_some());
            let now = now.map(|n| crate::tick::Tally { nohz_full, nohz_capable, ..n });
            // Never fewer verdicts than before: a read after the clear.
            if now.is_some_and(|n| kept.is_none_or(|k| n.verdicts() >= k.verdicts())) {
                *kept = now;
            }
        }
    }

    /// Every count as its source keeps it, since the start: the kernel's
    /// and the collector's here, each CPU's source's by the source.
    pub fn counters(&mut self, drain: &Drain, tracer: &Tracer<'_>, cpus: &[usize], source: &dyn Source, bpf_stats: bool) -> Counters {
        match tracer.drops() {
            Ok(d) => self.drops = d,
            Err(_) => self.drop_read_failures += 1,
        }
        self.note_ticks(tracer, cpus);
        let window = drain.engine.window_stats();
        let stats = &drain.sinks.stats;
        Counters {
            events: drain.events,
            // This runs on the collector thread: the consumer's own cost.
            consumer_cpu_ns: thread_cpu_ns().saturating_sub(self.setup_cpu_ns),
            setup_cpu_ns: self.setup_cpu_ns,
            lag_ns: self.lag_ns,
            lag_max_ns: self.lag_max_ns,
            first_event_ns: self.first_event_ns,
            reordered_events: window.reordered,
            evicted_segments: window.evicted,
            missing_tracepoints: self.missing.clone(),
            switch_hook: self.switch_hook.clone(),
            dispatch: self.dispatch,
            drop_read_failures: self.drop_read_failures,
            prog_stats: if bpf_stats { tracer.prog_stats() } else { Vec::new() },
            cpus: cpus
                .iter()
                .enumerate()
                .map(|(i, &cpu)| {
                    let cpu = cpu as u32;
                    let mut c = CpuCounters {
                        drops: self.drops.get(cpu as usize).copied().unwrap_or(0),
                        steal: drain.engine.steal_totals(cpu),
                        tick: self.ticks.get(i).copied().flatten(),
                        ..CpuCounters::new(cpu)
                    };
                    source.counters(&mut c, stats);
                    c
                })
                .collect(),
        }
    }
}
