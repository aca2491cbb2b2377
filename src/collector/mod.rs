//! The collector thread owns the data: the BPF objects, the engine, the
//! aggregates and the sinks. It drains the ring buffer on a short period
//! (no wakeups from the watched CPUs), and talks to the rest through one
//! channel each way: commands in (reset, stop), render-ready snapshots out
//! at the screen's rate. It runs on the housekeeping CPUs only.

mod drain;
mod own;
mod ring;
mod run;

use std::mem::MaybeUninit;
use std::sync::mpsc::{self, SyncSender};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::bpf::{Programs, Tracer};
use crate::engine::Namer;
use crate::outcome::Outcome;
use crate::sink::Sink;
use crate::snapshot::Snapshot;
use crate::source::{Ended, Source, Started};
use crate::stats::Stats;

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
    /// What the run measures (the aggregates' views ask it).
    pub method: crate::interval::Method,
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
                let r = run::collect(&tracer, cfg, source.as_mut(), namer, &rx, &ready);
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
