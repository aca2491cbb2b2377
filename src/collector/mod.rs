//! The collector thread owns the data: the BPF objects, the engine, the
//! aggregates and the sinks. It drains the ring buffer on a short period
//! (no wakeups from the watched CPUs), and talks to the rest through one
//! channel each way: commands in (reset, stop), render-ready snapshots out
//! at the screen's rate. It runs on the housekeeping CPUs only.

mod drain;
mod ring;

use std::mem::MaybeUninit;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::bpf::{Programs, Tracer};
use crate::clock::{now_ns, thread_cpu_ns};
use crate::engine::{Engine, Namer, Stacks};
use crate::outcome::Outcome;
use crate::sink::{Sink, Sinks};
use crate::snapshot::Snapshot;
use crate::source::{Ended, Source, Started};
use crate::stats::{Counters, CpuCounters, Stats};

pub use drain::{Drain, EventSource, MARGIN_NS};

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
    /// Let the source measure.
    Start,
    /// Start the aggregates afresh.
    Reset,
    /// Stop the source, drain what is left, explain it, finish.
    Stop,
}

pub struct Config {
    pub cpus: Vec<usize>,
    pub housekeeping: Vec<usize>,
    /// Every output besides the aggregates (sink/).
    pub sinks: Vec<Box<dyn Sink>>,
    pub bpf_stats: bool,
    /// Where snapshots go, when a screen shows them.
    pub snapshots: Option<SyncSender<Snapshot>>,
    /// Trace who sends IPIs, queues work and wakes tasks onto the CPUs.
    pub origins: bool,
    /// And who wakes tasks onto them (a program on every wake-up).
    pub wake_origins: bool,
    /// --stop-above: the first stall at or over it ends the run.
    pub stop_above: Option<u64>,
    /// --fail-above: stalls at or over it fail the run at its end.
    pub fail_above: Option<u64>,
    /// --stacks-above: stalls at or over it carry their culprit's kernel
    /// stack (0: off).
    pub stacks_above: u64,
    /// --switch-hook perf-event.
    pub switch_event: bool,
    /// jitterwatch's own process: its threads' time on a watched CPU is
    /// `self` (passive mode may share every CPU with them).
    pub own_tgid: u32,
}

/// What the collector tells the main thread as the run begins.
pub enum Ready {
    /// Attached (or failed to): the tracepoints this kernel lacks.
    Attached(Result<Vec<&'static str>>),
    /// The source measures (or cannot).
    Started(Result<Started>),
}

/// What the collector hands back at the end.
pub struct Finished {
    /// The final aggregates.
    pub stats: Stats,
    /// What the run came to besides (the stall that stopped it, traces).
    pub outcome: Outcome,
    /// How the source ended.
    pub ended: Ended,
}

pub struct Collector {
    pub commands: mpsc::Sender<Command>,
    thread: thread::JoinHandle<Result<Finished>>,
}

impl Collector {
    /// Starts the collector with the run's source. It reports on `ready`
    /// once attached (or failed), and once the source has started after
    /// [`Command::Start`]; it runs until told to stop (or until every
    /// command sender is gone), and returns the final aggregates and how
    /// the source ended.
    pub fn spawn(cfg: Config, mut source: Box<dyn Source>, namer: Namer, ready: mpsc::Sender<Ready>) -> Result<Self> {
        let (commands, rx) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("jw-collector".into())
            .spawn(move || {
                crate::sys::pin_to(&cfg.housekeeping).context("cannot pin the collector to the unwatched CPUs")?;
                let mut storage = MaybeUninit::uninit();
                let programs = Programs {
                    origins: cfg.origins,
                    wake_origins: cfg.wake_origins,
                    stacks_above_ns: cfg.stacks_above,
                    switch_event: cfg.switch_event,
                    ..source.programs()
                };
                let tracer = match Tracer::attach(&mut storage, &cfg.cpus, programs) {
                    Ok(t) => t,
                    Err(e) => {
                        let msg = e.to_string();
                        let _ = ready.send(Ready::Attached(Err(e.into())));
                        anyhow::bail!(msg);
                    }
                };
                let stats_fd = match cfg.bpf_stats.then(enable_bpf_stats).transpose() {
                    Ok(fd) => fd,
                    Err(e) => {
                        let msg = e.to_string();
                        let _ = ready.send(Ready::Attached(Err(e)));
                        anyhow::bail!(msg);
                    }
                };
                let _ = ready.send(Ready::Attached(Ok(tracer.missing.clone())));
                let r = collect(&tracer, cfg, source.as_mut(), namer, &rx, &ready);
                drop(stats_fd);
                r
            })
            .context("cannot start the collector thread")?;
        Ok(Collector { commands, thread })
    }

    /// Tells the collector to finish and waits for what it hands back.
    pub fn finish(self) -> Result<Finished> {
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

fn collect(
    tracer: &Tracer<'_>,
    mut cfg: Config,
    source: &mut dyn Source,
    namer: Namer,
    rx: &Receiver<Command>,
    ready: &mpsc::Sender<Ready>,
) -> Result<Finished> {
    let attach_ns = now_ns();
    let mut engine = Engine::new(&cfg.cpus, attach_ns, WINDOW, namer);
    engine.set_own_tgid(cfg.own_tgid);
    engine.set_dispatch_ns(tracer.dispatch.map_or(0, |d| d.ns), tracer.dispatch.map_or(0, |d| d.warm_ns));
    if cfg.stacks_above > 0 {
        let map = tracer.stacks()?;
        engine.set_stacks(Stacks::new(cfg.stacks_above, Box::new(move |id| map.take(id))));
    }
    source.attach(attach_ns, &mut engine);
    let mut ring = ring::Ring::open(tracer)?;
    let mut sinks =
        Sinks::new(Stats::new(&cfg.cpus, attach_ns), std::mem::take(&mut cfg.sinks), cfg.stop_above).failing_above(cfg.fail_above);
    sinks.start(attach_ns);
    let mut drain = Drain::new(engine, sinks, attach_ns);
    // Until the source says when its measuring began.
    let mut started = false;
    // Until it says how it started, after Command::Start.
    let mut starting = false;
    let mut thresholds: Vec<u64> = vec![0; cfg.cpus.len()];
    let mut ended = None;
    let mut stop_asked = false;
    let mut own = Own {
        // What came before (loading and attaching, the ring buffer's
        // set-up) is set-up; the consumer's own cost counts from here.
        setup_cpu_ns: thread_cpu_ns(),
        missing: tracer.missing.clone(),
        switch_hook: tracer.switch_hook.to_string(),
        dispatch: tracer.dispatch,
        // None where the kernel cannot have them (no file without
        // CONFIG_NO_HZ_FULL: None) or has none ("(null)").
        nohz_full: crate::cpulist::read_file(std::path::Path::new("/sys/devices/system/cpu/nohz_full")).ok(),
        ..Own::default()
    };
    let mut next_snapshot = attach_ns;
    loop {
        let mut last = false;
        loop {
            match rx.try_recv() {
                Ok(Command::Start) => {
                    source.start();
                    starting = true;
                }
                Ok(Command::Reset) => drain.sinks.stats.reset(now_ns()),
                Ok(Command::Stop) | Err(TryRecvError::Disconnected) => last = true,
                Err(TryRecvError::Empty) => break,
            }
            if last {
                break;
            }
        }
        if starting {
            if let Some(r) = source.started() {
                starting = false;
                let failed = r.is_err();
                let _ = ready.send(Ready::Started(r));
                // The run ends: the main thread says why.
                last |= failed;
            }
        }
        if last {
            // The source stops first (its last intervals are reported), then
            // the kernel stops producing (a storm could outrun the reader for
            // ever); records stamped before that are committed meanwhile.
            // While the source's threads see the request (a probe starved by
            // a storm on its CPU waits for its boost, a quarter of a second),
            // the ring is drained as before: else the storm fills it.
            source.stopping();
            while !source.stopped() {
                drain.step(&mut ring, source, now_ns(), false)?;
                thread::sleep(POLL);
            }
            ended = Some(source.stop());
            tracer.unwatch()?;
            thread::sleep(Duration::from_nanos(MARGIN_NS));
        }
        // A CPU's threshold, as its source chose it, to the sinks that
        // follow it (the flight recorder's default --trace-above).
        for (i, &cpu) in cfg.cpus.iter().enumerate() {
            let t = source.threshold(cpu as u32);
            if t != thresholds[i] {
                thresholds[i] = t;
                drain.sinks.on_threshold(cpu as u32, t);
            }
        }
        let now = now_ns();
        let seen = drain.step(&mut ring, source, now, last)?;
        if (drain.sinks.outcome.stopped_on.is_some() || !drain.sinks.outcome.failed.is_empty()) && !stop_asked {
            // --stop-above, or an output failed (a full disk): the run ends
            // as on SIGINT (the stall's trace is written by the drains that
            // follow; the summary covers the run until now).
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
            if let Some(t) = source.start_ns() {
                drain.sinks.stats.start_ns = t;
                started = true;
            }
        }
        own.note_ticks(tracer, &cfg.cpus);
        let snapshot_due = cfg.snapshots.is_some() && drained >= next_snapshot;
        if snapshot_due || drain.sinks.wants_counters(drained) || last {
            next_snapshot = drained + SNAPSHOT_NS;
            let raw = own.counters(&drain, tracer, &cfg.cpus, &*source, cfg.bpf_stats);
            drain.sinks.on_counters(raw, drained, last);
            source.report(drained, &mut drain.sinks.stats);
            drain.sinks.stats.look_for_periods(drained, last);
            if let Some(tx) = cfg.snapshots.as_ref() {
                // Never wait on the screen: a frame it has not taken yet is enough.
                let _ = tx.try_send(Snapshot::of(&drain.sinks.stats));
            }
            own.lag_ns = 0;
        }
        if last {
            let (stats, outcome) = drain.sinks.finish(now_ns(), &mut drain.engine.namer);
            return Ok(Finished { stats, outcome, ended: ended.unwrap_or_default() });
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
    /// The tick's verdicts as the programs tallied them (a read of their
    /// memory, no system call): after every drain, because the programs'
    /// memory is cleared as they stop watching, before the last counters.
    fn note_ticks(&mut self, tracer: &Tracer<'_>, cpus: &[usize]) {
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
    fn counters(&mut self, drain: &Drain, tracer: &Tracer<'_>, cpus: &[usize], source: &dyn Source, bpf_stats: bool) -> Counters {
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
