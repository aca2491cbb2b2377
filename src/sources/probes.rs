//! The spin probe and the wake-up probe as a run's [`Source`]: a probe
//! thread on each watched CPU, spawned (pinned, set up) before tracing
//! begins and let go at `start`; its gaps or late wake-ups come through
//! its lock-free queue, and its progress is each CPU's horizon.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::bpf::Programs;
use crate::engine::Engine;
use crate::interval::Interval;
use crate::probe::threshold::Gate;
use crate::probe::{Probe, ProbeConfig, ProbeKind, ProbeShared, Probes, Threshold, MIN_FLOORS, STOP_BOUND};
use crate::say::say;
use crate::source::{Ended, Intervals, Source, Started};
use crate::stats::{CpuCounters, SourceFigures, SpinFigures, Stats, WakeFigures};

/// How long `started` waits for every probe's threshold (its floor is
/// measured over 20 ms to 1 s) before the run goes on without it.
const THRESHOLDS_WITHIN: Duration = Duration::from_secs(2);

pub struct ProbeSource {
    kind: ProbeKind,
    rule: Threshold,
    /// `--fail-above`/`--stop-above`, which lowers a default threshold.
    gate: Option<Gate>,
    probes: Probes,
    shared: Vec<Arc<ProbeShared>>,
    /// Why the spin probe has no SMI count, as said (once).
    smi_unread: Option<String>,
    /// When `start` let the probes go.
    started_at: Option<Instant>,
    /// When it was asked to stop (`stopping`).
    stopping_at: Option<Instant>,
    /// The counter the spin probe was asked to read (it may still fall
    /// back to clock_gettime: see `uses_counter`).
    counter: Option<&'static str>,
}

impl ProbeSource {
    /// A probe on each of `cpus`, set up, not measuring yet.
    pub fn spawn(cpus: &[usize], cfg: ProbeConfig) -> Result<Self> {
        let (kind, rule, gate) = (cfg.kind, cfg.threshold, cfg.gate);
        let probes = Probes::new(cpus.iter().map(|&c| Probe::spawn(c as u32, cfg)).collect::<Result<Vec<_>>>()?);
        let smi_unread = probes.iter().find_map(|p| p.smi_unread.clone());
        Ok(ProbeSource {
            kind,
            rule,
            gate,
            shared: probes.shared(),
            probes,
            smi_unread,
            started_at: None,
            stopping_at: None,
            counter: cfg.counter,
        })
    }

    /// The lines a headless run starts with: each CPU's rule.
    fn lines(&self) -> Vec<String> {
        let ns = crate::units::ns;
        match self.kind {
            ProbeKind::Wakeup { period_ns } => {
                let how = match (self.rule.given(), self.gate) {
                    (Some(_), _) => "as given".to_string(),
                    (None, None) => "twice the median latency of its first 100 ms, at least 10 µs".to_string(),
                    (None, Some(g)) => {
                        format!("twice the median latency of its first 100 ms, at least 10 µs and at most {} {}", g.flag, ns(g.ns))
                    }
                };
                let each: Vec<String> = self
                    .shared
                    .iter()
                    .map(|p| {
                        let slack = p.wake.as_ref().map_or(0, |w| w.slack_ns.load(Relaxed));
                        format!("CPU {}: late above {}, timer slack {}", p.cpu, ns(p.threshold_ns.load(Relaxed)), ns(slack))
                    })
                    .collect();
                vec![format!(
                    "wake-up probe: sleeps {} at a time and reports a wake-up later than its threshold ({how}); {}",
                    ns(period_ns),
                    each.join("; ")
                )]
            }
            ProbeKind::Spin => self
                .shared
                .iter()
                .map(|p| {
                    let (floor, thr) = (p.floor_ns.load(Relaxed), p.threshold_ns.load(Relaxed));
                    let lowered = if thr == 0 { String::new() } else { Gate::lowered(self.gate, self.rule.ns(floor)) };
                    format!("watching CPU {}: {}{lowered}", p.cpu, self.rule.describe(floor, thr))
                })
                .collect(),
        }
    }
}

impl Intervals for ProbeSource {
    fn horizons(&self, _upto: u64, out: &mut dyn FnMut(u32, u64)) {
        for p in &self.shared {
            out(p.cpu, p.progress.load(Relaxed));
        }
    }

    fn take(&mut self, out: &mut dyn FnMut(Interval)) {
        for p in &self.shared {
            while let Some(iv) = p.queue.pop() {
                out(iv);
            }
        }
    }
}

impl Source for ProbeSource {
    fn programs(&self) -> Programs {
        // The wake-up probe's own wake-ups say when its timer woke it.
        Programs { wakeups: matches!(self.kind, ProbeKind::Wakeup { .. }), ..Programs::default() }
    }

    fn attach(&mut self, _at: u64, engine: &mut Engine) {
        for p in &self.shared {
            engine.set_probe_tids(p.cpu, &[p.tid.load(Relaxed)]);
            if let Some(w) = &p.wake {
                engine.set_probe_slack(p.cpu, w.slack_ns.load(Relaxed));
            }
        }
    }

    fn start(&mut self) {
        self.probes.start();
        self.started_at = Some(Instant::now());
    }

    /// Once every probe has its threshold (or the wait is over): a given
    /// threshold under the loop's floor ends the run, said with the first
    /// CPU's figures.
    fn started(&mut self) -> Option<Result<Started>> {
        let waited = self.started_at?.elapsed();
        if waited < THRESHOLDS_WITHIN && self.shared.iter().any(|p| p.threshold_ns.load(Relaxed) == 0) {
            return None;
        }
        if let Some(p) = self.shared.iter().find(|p| p.refused.load(Relaxed)) {
            let (floor, thr) = (p.floor_ns.load(Relaxed), p.threshold_ns.load(Relaxed));
            if let Some(g) = self.gate.filter(|g| g.ns == thr && self.rule.given().is_none()) {
                return Some(Err(anyhow::anyhow!(
                    "{} {}ns is under {MIN_FLOORS} × CPU {}'s loop floor ({floor} ns): the threshold lowered to it would make every loop a hiccup; gate at {}ns or more",
                    g.flag,
                    g.ns,
                    p.cpu,
                    MIN_FLOORS * floor
                )));
            }
            return Some(Err(anyhow::anyhow!(
                "--threshold {thr}ns is under {MIN_FLOORS} × CPU {}'s loop floor ({floor} ns): every loop would be a hiccup; use at least {}ns, or leave it out for the default",
                p.cpu,
                MIN_FLOORS * floor
            )));
        }
        let notices = self.smi_unread.iter().cloned().collect();
        let thresholds = self.shared.iter().map(|p| (p.cpu, p.threshold_ns.load(Relaxed))).collect();
        Some(Ok(Started { notices, lines: self.lines(), found: Vec::new(), thresholds, shared_threshold: None }))
    }

    fn start_ns(&self) -> Option<u64> {
        // Elapsed time counts from the probes' first sample.
        self.shared.iter().map(|p| p.first_sample_ns.load(Relaxed)).filter(|&t| t != 0).min()
    }

    fn threshold(&self, cpu: u32) -> u64 {
        self.shared.iter().find(|p| p.cpu == cpu).map_or(0, |p| p.threshold_ns.load(Relaxed))
    }

    fn counters(&self, c: &mut CpuCounters, stats: &Stats) {
        let Some(p) = self.shared.iter().find(|p| p.cpu == c.cpu) else { return };
        let floor = p.floor_ns.load(Relaxed);
        let (loops, first) = (p.loops.load(Relaxed), p.first_sample_ns.load(Relaxed));
        // The gaps it reported are the hiccups counted (all of them by the
        // last drain, but those lost to a full queue), over the whole run
        // like its loop counts.
        let (stolen, hiccups) = stats.run_gaps(p.cpu);
        c.threshold_ns = p.threshold_ns.load(Relaxed);
        c.overflow = p.overflow.load(Relaxed);
        let floor_ns = if floor == u64::MAX { 0 } else { floor };
        c.own = match &p.wake {
            // The wake-up probe keeps its smallest latency as its floor.
            Some(w) => SourceFigures::Wakeup(WakeFigures { min_ns: floor_ns, hist: p.histogram(), latency: w.latency() }),
            None => SourceFigures::Spin(SpinFigures {
                floor_ns,
                loop_mean_ns: if loops > 0 && first > 0 {
                    p.progress.load(Relaxed).saturating_sub(first) as f64 / loops as f64
                } else {
                    0.0
                },
                loop_quiet_mean_ns: p.quiet_mean_ns(stolen, hiccups).unwrap_or(0.0),
                hist: p.histogram(),
                tsc_drift_ns: Some(p.tsc_drift_ns.load(Relaxed)).filter(|&d| d != i64::MIN),
                counter: if p.uses_counter.load(Relaxed) { self.counter } else { None },
            }),
        };
    }

    fn stopping(&mut self) {
        self.probes.ask_stop();
        self.stopping_at.get_or_insert_with(Instant::now);
    }

    fn stopped(&mut self) -> bool {
        let waited = self.stopping_at.map_or(STOP_BOUND, |t| t.elapsed());
        waited >= STOP_BOUND || self.probes.poll_stop(waited, STOP_BOUND)
    }

    fn stop(&mut self) -> Ended {
        // Read before they stop: a probe moved off its CPU stopped there.
        let offline: Vec<usize> = self.shared.iter().filter(|p| p.moved_off.load(Relaxed)).map(|p| p.cpu as usize).collect();
        let failure = (!offline.is_empty()).then(|| {
            format!(
                "CPU {} went offline during the run: its probe stopped measuring there, and the run ended (bring it back online and run again)",
                crate::cpulist::Display(&offline)
            )
        });
        // One bound in all: what `stopping` already waited counts.
        let left = STOP_BOUND.saturating_sub(self.stopping_at.map_or(Duration::ZERO, |t| t.elapsed()));
        let notes = self
            .probes
            .stop(left)
            .into_iter()
            .map(|cpu| {
                let note = format!(
                    "the probe on CPU {cpu} had not stopped {} ms after it was asked (starved by a task on its CPU?): the summary ends without it",
                    STOP_BOUND.as_millis()
                );
                say!("{note}");
                note
            })
            .collect();
        Ended { notes, failure }
    }
}
