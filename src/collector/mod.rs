//! The collector thread owns the data: the BPF objects, the engine, the
//! aggregates and the sinks. It drains the ring buffer on a short period
//! (no wakeups from the watched CPUs), and talks to the rest through one
//! channel each way: commands in (reset, stop), render-ready snapshots out
//! at the screen's rate. It runs on the housekeeping CPUs only.

mod drain;
mod ring;

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::bpf::{Programs, Tracer};
use crate::clock::{now_ns, thread_cpu_ns};
use crate::engine::{Engine, Namer};
use crate::interval::Interval;
use crate::passive::Tracker;
use crate::probe::ProbeShared;
use crate::sink::{Sink, Sinks};
use crate::snapshot::Snapshot;
use crate::stats::{Counters, CpuCounters, Stats};

pub use drain::{Drain, EventSource, IntervalSource, MARGIN_NS};

/// How often the ring buffer is drained: often under load, less when quiet
/// (each wakeup costs the housekeeping CPU a little).
pub const POLL: Duration = Duration::from_millis(2);
const POLL_QUIET: Duration = Duration::from_millis(20);
/// Fewer records than this in a drain counts as quiet.
const QUIET_RECORDS: usize = 256;
/// How often a snapshot goes to the screen (its frame rate).
const SNAPSHOT_NS: u64 = 100_000_000;
/// Segments each CPU's timeline keeps at most.
pub const WINDOW: usize = 1 << 16;

/// What the screen or main thread asks of the collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Start the aggregates afresh.
    Reset,
    /// The sources have stopped: drain what is left, explain it, finish.
    Stop,
    /// Passive mode: the watched threads /proc showed running on watched
    /// CPUs once tracing began, and when that was read.
    Seed(Vec<crate::passive::Seed>, u64),
}

pub struct Config {
    pub cpus: Vec<usize>,
    pub housekeeping: Vec<usize>,
    /// Every output besides the aggregates (sink/).
    pub sinks: Vec<Box<dyn Sink>>,
    pub bpf_stats: bool,
    /// Where snapshots go, when a screen shows them.
    pub snapshots: Option<SyncSender<Snapshot>>,
    /// Passive mode: the watched threads' intervals, from the events.
    pub passive: Option<Tracker>,
    /// Trace who sends IPIs, queues work and wakes tasks onto the CPUs.
    pub origins: bool,
    /// And who wakes tasks onto them (a program on every wake-up).
    pub wake_origins: bool,
    /// --stop-above: the first stall at or over it ends the run.
    pub stop_above: Option<u64>,
}

/// What the collector says once attached: tracepoints this kernel lacks.
pub type Ready = Result<Vec<&'static str>>;

pub struct Collector {
    pub commands: mpsc::Sender<Command>,
    thread: thread::JoinHandle<Result<Stats>>,
}

impl Collector {
    /// Starts the collector. It reports on `ready` once attached (or
    /// failed), runs until told to stop (or until every command sender is
    /// gone), and returns the final aggregates.
    pub fn spawn(cfg: Config, probes: Vec<Arc<ProbeShared>>, namer: Namer, ready: mpsc::Sender<Ready>) -> Result<Self> {
        let (commands, rx) = mpsc::channel();
        // The wake-up probe's own wake-ups say when its timer woke it.
        let wakeups = cfg.passive.is_some() || probes.iter().any(|p| p.wake.is_some());
        let thread = thread::Builder::new()
            .name("jw-collector".into())
            .spawn(move || {
                crate::sys::pin_to(&cfg.housekeeping).context("cannot pin the collector to the unwatched CPUs")?;
                let mut storage = MaybeUninit::uninit();
                let programs = Programs { passive: cfg.passive.is_some(), wakeups, origins: cfg.origins, wake_origins: cfg.wake_origins };
                let tracer = match Tracer::attach(&mut storage, &cfg.cpus, programs) {
                    Ok(t) => t,
                    Err(e) => {
                        let msg = e.to_string();
                        let _ = ready.send(Err(e.into()));
                        anyhow::bail!(msg);
                    }
                };
                let stats_fd = match cfg.bpf_stats.then(enable_bpf_stats).transpose() {
                    Ok(fd) => fd,
                    Err(e) => {
                        let msg = e.to_string();
                        let _ = ready.send(Err(e));
                        anyhow::bail!(msg);
                    }
                };
                let _ = ready.send(Ok(tracer.missing.clone()));
                let r = collect(&tracer, cfg, &probes, namer, &rx);
                drop(stats_fd);
                r
            })
            .context("cannot start the collector thread")?;
        Ok(Collector { commands, thread })
    }

    /// Tells the collector to finish and waits for its final aggregates.
    pub fn finish(self) -> Result<Stats> {
        let _ = self.commands.send(Command::Stop);
        self.thread.join().map_err(|_| anyhow::anyhow!("the collector thread panicked"))?
    }
}

/// Kernel BPF run-time statistics stay on while the returned fd is open.
fn enable_bpf_stats() -> Result<std::os::fd::OwnedFd> {
    // SAFETY: a plain syscall wrapper; a non-negative return is a new fd we own.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        anyhow::bail!("--bpf-stats: the kernel refused to enable BPF statistics ({})", std::io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: fd is valid and owned by nobody else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// The probes as a source of intervals.
struct Probes<'a>(&'a [Arc<ProbeShared>]);

impl IntervalSource for Probes<'_> {
    fn take(&self, out: &mut dyn FnMut(Interval)) {
        for p in self.0 {
            while let Some(iv) = p.queue.pop() {
                out(iv);
            }
        }
    }

    fn horizons(&self, out: &mut dyn FnMut(u32, u64)) {
        for p in self.0 {
            out(p.cpu, p.progress.load(Relaxed));
        }
    }
}

fn collect(tracer: &Tracer<'_>, mut cfg: Config, probes: &[Arc<ProbeShared>], namer: Namer, rx: &Receiver<Command>) -> Result<Stats> {
    let attach_ns = now_ns();
    let mut engine = Engine::new(&cfg.cpus, attach_ns, WINDOW, namer);
    for p in probes {
        engine.set_probe_tids(p.cpu, &[p.tid.load(Relaxed)]);
        if let Some(w) = &p.wake {
            engine.set_probe_slack(p.cpu, w.slack_ns.load(Relaxed));
        }
    }
    let mut ring = ring::Ring::open(tracer)?;
    let passive = cfg.passive.take();
    let passive_threshold = passive.as_ref().map(Tracker::threshold);
    // Without probes the run starts when tracing does.
    let mut started = passive.is_some();
    let mut sinks = Sinks::new(Stats::new(&cfg.cpus, attach_ns), std::mem::take(&mut cfg.sinks), cfg.stop_above);
    sinks.start(attach_ns);
    let mut drain = Drain::new(engine, sinks, attach_ns, passive);
    let mut stop_asked = false;
    let mut own = Own {
        // What came before (loading and attaching, the ring buffer's
        // set-up) is set-up; the consumer's own cost counts from here.
        setup_cpu_ns: thread_cpu_ns(),
        missing: tracer.missing.clone(),
        switch_hook: tracer.switch_hook.to_string(),
        passive_threshold,
        ..Own::default()
    };
    let mut next_snapshot = attach_ns;
    loop {
        let mut last = false;
        loop {
            match rx.try_recv() {
                Ok(Command::Reset) => drain.sinks.stats.reset(now_ns()),
                Ok(Command::Seed(seeds, at)) => drain.seed(&seeds, at),
                Ok(Command::Stop) | Err(TryRecvError::Disconnected) => last = true,
                Err(TryRecvError::Empty) => break,
            }
            if last {
                break;
            }
        }
        if last {
            // Stop producing (a storm could outrun the reader for ever), then
            // let records stamped before that be committed.
            tracer.unwatch()?;
            thread::sleep(Duration::from_nanos(MARGIN_NS));
        }
        let now = now_ns();
        let seen = drain.step(&mut ring, &Probes(probes), now, last)?;
        if drain.sinks.stats.stopped_on.is_some() && !stop_asked {
            // --stop-above: the run ends as on SIGINT (the stall's trace is
            // written by the drains that follow).
            stop_asked = true;
            crate::lifecycle::request_stop();
        }
        let drained = now_ns();
        if let Some(oldest) = seen.oldest_ts {
            own.lag_ns = own.lag_ns.max(drained.saturating_sub(oldest));
            own.lag_max_ns = own.lag_max_ns.max(own.lag_ns);
            if own.first_event_ns == 0 {
                own.first_event_ns = oldest;
            }
        }
        if !started {
            // Elapsed time counts from the probes' first sample.
            if let Some(t) = probes.iter().map(|p| p.first_sample_ns.load(Relaxed)).filter(|&t| t != 0).min() {
                drain.sinks.stats.start_ns = t;
                started = true;
            }
        }
        let snapshot_due = cfg.snapshots.is_some() && drained >= next_snapshot;
        if snapshot_due || drain.sinks.wants_counters(drained) || last {
            next_snapshot = drained + SNAPSHOT_NS;
            let raw = own.counters(&drain, tracer, probes, cfg.bpf_stats);
            drain.sinks.on_counters(raw, drained, last);
            drain.update_threads(drained);
            if let Some(tx) = cfg.snapshots.as_ref() {
                // Never wait on the screen: a frame it has not taken yet is enough.
                let _ = tx.try_send(Snapshot::of(&drain.sinks.stats));
            }
            own.lag_ns = 0;
        }
        if last {
            return drain.sinks.finish(now_ns(), &mut drain.engine.namer);
        }
        thread::sleep(if seen.records < QUIET_RECORDS { POLL_QUIET } else { POLL });
    }
}

/// What the collector counts of itself.
#[derive(Default)]
struct Own {
    setup_cpu_ns: u64,
    lag_ns: u64,
    lag_max_ns: u64,
    first_event_ns: u64,
    missing: Vec<&'static str>,
    switch_hook: String,
    passive_threshold: Option<u64>,
    /// The kernel's drop counters as last read, and how often a read failed:
    /// a failed read keeps the last counts (a lower bound), never zeros.
    drops: Vec<u64>,
    drop_read_failures: u64,
}

impl Own {
    /// Every count as its source keeps it, since the start.
    fn counters(&mut self, drain: &Drain, tracer: &Tracer<'_>, probes: &[Arc<ProbeShared>], bpf_stats: bool) -> Counters {
        match tracer.drops() {
            Ok(d) => self.drops = d,
            Err(_) => self.drop_read_failures += 1,
        }
        let drops = &self.drops;
        let window = drain.engine.window_stats();
        let stats = &drain.sinks.stats;
        let mut c = Counters {
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
            drop_read_failures: self.drop_read_failures,
            prog_stats: if bpf_stats { tracer.prog_stats() } else { Vec::new() },
            cpus: probes
                .iter()
                .map(|p| {
                    let floor = p.floor_ns.load(Relaxed);
                    let (loops, first) = (p.loops.load(Relaxed), p.first_sample_ns.load(Relaxed));
                    // The gaps it reported are the hiccups counted (all of
                    // them by the last drain, but those lost to a full queue),
                    // over the whole run like its loop counts.
                    let (stolen, hiccups) = stats.run_gaps(p.cpu);
                    CpuCounters {
                        cpu: p.cpu,
                        threshold_ns: p.threshold_ns.load(Relaxed),
                        floor_ns: if floor == u64::MAX { 0 } else { floor },
                        loop_mean_ns: if loops > 0 && first > 0 {
                            p.progress.load(Relaxed).saturating_sub(first) as f64 / loops as f64
                        } else {
                            0.0
                        },
                        loop_quiet_mean_ns: p.quiet_mean_ns(stolen, hiccups).unwrap_or(0.0),
                        loop_hist: p.histogram(),
                        overflow: p.overflow.load(Relaxed),
                        drops: drops.get(p.cpu as usize).copied().unwrap_or(0),
                        tsc_drift_ns: Some(p.tsc_drift_ns.load(Relaxed)).filter(|&d| d != i64::MIN),
                        tsc: p.uses_tsc.load(Relaxed),
                        wakeup: p.wake.as_ref().and_then(|w| w.latency()),
                        steal: drain.engine.steal_totals(p.cpu),
                    }
                })
                .collect(),
        };
        // Passive mode has no probe: each CPU's row carries the threshold
        // and the kernel's drop count.
        if let Some(thr) = self.passive_threshold {
            c.cpus = stats
                .cpus
                .iter()
                .map(|s| CpuCounters {
                    threshold_ns: thr,
                    drops: drops.get(s.cpu as usize).copied().unwrap_or(0),
                    steal: drain.engine.steal_totals(s.cpu),
                    ..CpuCounters::new(s.cpu)
                })
                .collect();
        }
        c
    }
}
