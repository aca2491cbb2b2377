//! The spin-probe: one thread pinned to each watched CPU reads the clock in
//! a tight loop and hands every gap at or over the threshold to the
//! collector through a lock-free bounded queue. Inside the loop: no
//! allocation, no lock, no syscall (clock_gettime is the vDSO).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use crate::interval::Interval;

pub mod floor;
mod smi;
mod spin;
pub mod threshold;
mod wakeup;
pub use smi::SmiCounter;
pub use spin::MIN_FLOORS;
pub use threshold::Threshold;
pub use wakeup::{Latency, WakeStats};

pub const HIST_BUCKETS: usize = 64;
/// Gaps the queue holds before overflowing (counted, never blocking).
const QUEUE_LEN: usize = 1 << 16;
/// Loop iterations between publishing the histogram and progress.
const PUBLISH_EVERY: u32 = 4096;
/// How long the probe measures its own floor before recording gaps: at
/// least this long and [`CALIBRATE_LOOPS`] iterations, at most
/// [`CALIBRATE_MAX_NS`] (a CPU shared with a busy task).
const CALIBRATE_NS: u64 = 20_000_000;
const CALIBRATE_LOOPS: u64 = 1 << 20;
const CALIBRATE_MAX_NS: u64 = 1_000_000_000;

/// log2 bucket of a loop delta: 0 for 0 ns, k for [2^(k-1), 2^k).
#[inline(always)]
pub fn bucket(d: u64) -> usize {
    ((64 - d.leading_zeros()) as usize).min(HIST_BUCKETS - 1)
}

/// What a probe shares with the collector. Written by the probe with plain
/// relaxed stores; read by whoever wants a figure.
pub struct ProbeShared {
    pub cpu: u32,
    pub queue: ArrayQueue<Interval>,
    pub overflow: AtomicU64,
    pub hist: [AtomicU64; HIST_BUCKETS],
    /// The last clock reading published: no future gap starts before it.
    pub progress: AtomicU64,
    /// The loop's floor: its period when nothing takes the CPU (a low
    /// percentile of its iteration time during calibration; [`floor`]).
    pub floor_ns: AtomicU64,
    pub threshold_ns: AtomicU64,
    pub loops: AtomicU64,
    /// Clock reading of the first measured sample (0 until then).
    pub first_sample_ns: AtomicU64,
    /// Where the loop proper (after calibration) began, with the loop count
    /// then: with the gaps reported since, the loop's period between them.
    pub hot_start_ns: AtomicU64,
    pub hot_loops: AtomicU64,
    pub tid: AtomicU32,
    /// The threshold asked for was under [`MIN_FLOORS`] × the floor: the
    /// probe measured its floor and stopped (every loop would be a hiccup).
    pub refused: AtomicBool,
    /// The probe found itself on another CPU (its CPU went offline and
    /// the kernel moved it): it stopped measuring, and asked the run to end.
    pub moved_off: AtomicBool,
    /// With the CPU's counter as its clock: the counter's distance from
    /// CLOCK_MONOTONIC when the loop ended, ns (i64::MIN: not measured).
    pub tsc_drift_ns: AtomicI64,
    /// The loop reads the CPU's counter (calibrated), not clock_gettime.
    pub uses_counter: AtomicBool,
    /// The wake-up probe's latencies (None for the spin probe).
    pub wake: Option<WakeStats>,
    /// The CPU's SMI counter, where it can be read (the spin probe only).
    pub smi: Option<SmiCounter>,
    /// Set to make the probe leave its loop.
    stop: AtomicBool,
}

impl ProbeShared {
    pub fn new(cpu: u32, kind: ProbeKind) -> Self {
        Self {
            wake: match kind {
                ProbeKind::Spin => None,
                ProbeKind::Wakeup { period_ns } => Some(WakeStats::new(period_ns)),
            },
            smi: None,
            cpu,
            queue: ArrayQueue::new(QUEUE_LEN),
            overflow: AtomicU64::new(0),
            hist: std::array::from_fn(|_| AtomicU64::new(0)),
            progress: AtomicU64::new(0),
            floor_ns: AtomicU64::new(u64::MAX),
            threshold_ns: AtomicU64::new(0),
            loops: AtomicU64::new(0),
            first_sample_ns: AtomicU64::new(0),
            hot_start_ns: AtomicU64::new(0),
            hot_loops: AtomicU64::new(0),
            tid: AtomicU32::new(0),
            refused: AtomicBool::new(false),
            moved_off: AtomicBool::new(false),
            tsc_drift_ns: AtomicI64::new(i64::MIN),
            uses_counter: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        }
    }

    /// Mean loop period between hiccups (ns), once the loop proper has run,
    /// given the gaps it reported (`gaps` of them, `gap_ns` in all).
    pub fn quiet_mean_ns(&self, gap_ns: u64, gaps: u64) -> Option<f64> {
        let start = self.hot_start_ns.load(Relaxed);
        if start == 0 {
            return None;
        }
        let span = self.progress.load(Relaxed).saturating_sub(start);
        let loops = self.loops.load(Relaxed).saturating_sub(self.hot_loops.load(Relaxed));
        mean_between_gaps(span, loops, gap_ns, gaps)
    }

    pub fn histogram(&self) -> [u64; HIST_BUCKETS] {
        std::array::from_fn(|i| self.hist[i].load(Relaxed))
    }
}

/// What the probe thread does on its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// Reads the clock in a tight loop: every gap is time taken from it.
    Spin,
    /// Sleeps to a deadline every period: how late it wakes.
    Wakeup { period_ns: u64 },
}

#[derive(Debug, Clone, Copy)]
pub struct ProbeConfig {
    pub kind: ProbeKind,
    /// The wake-up probe's timer slack, when set (PR_SET_TIMERSLACK).
    pub timer_slack_ns: Option<u64>,
    /// How the threshold is chosen (the spin probe: [`Threshold`]; the
    /// wake-up probe has its own default, and takes only a given value).
    pub threshold: Threshold,
    /// `--fail-above`/`--stop-above`: a default threshold is lowered to it.
    pub gate: Option<threshold::Gate>,
    /// SCHED_FIFO priority, when asked for.
    pub rt_prio: Option<i32>,
    /// Read the CPU's counter in the loop instead of clock_gettime (checked
    /// usable): its name, `tsc` or `cntvct`.
    pub counter: Option<&'static str>,
}

pub struct Probe {
    pub shared: Arc<ProbeShared>,
    /// Why the spin probe has no SMI counter for its CPU, the line said
    /// (None: it has, or it is the wake-up probe).
    pub smi_unread: Option<String>,
    handle: thread::JoinHandle<()>,
    go: Option<mpsc::Sender<()>>,
}

impl Probe {
    /// Spawns a probe for `cpu`, pinned and set up before this returns. It
    /// blocks until `start` and runs until stopped (`Probes::stop`); stopped
    /// without `start`, it exits without measuring.
    pub fn spawn(cpu: u32, cfg: ProbeConfig) -> anyhow::Result<Self> {
        let mut shared = ProbeShared::new(cpu, cfg.kind);
        let mut smi_unread = None;
        if cfg.kind == ProbeKind::Spin {
            match SmiCounter::for_cpu(cpu) {
                Ok(c) => shared.smi = Some(c),
                Err(why) => smi_unread = Some(why.line()),
            }
        }
        let shared = Arc::new(shared);
        let (ready_tx, ready_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let s = shared.clone();
        let handle = thread::Builder::new().name(format!("jw-probe-{cpu}")).spawn(move || {
            s.tid.store(crate::sys::gettid(), Relaxed);
            let setup = setup(cpu, cfg);
            if let (Ok(()), Some(w)) = (&setup, &s.wake) {
                wakeup::setup(cfg, w);
            }
            let ok = setup.is_ok();
            let _ = ready_tx.send(setup);
            if ok && go_rx.recv().is_ok() && !s.stop.load(Relaxed) {
                match &s.wake {
                    None => spin::run(&s, cfg),
                    Some(w) => wakeup::run(&s, cfg, w),
                }
            }
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self { shared, smi_unread, handle, go: Some(go_tx) }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => anyhow::bail!("the probe thread for CPU {cpu} died while starting"),
        }
    }
}

/// The probes of a run. However they end (return, error, panic unwinding
/// through the owner), they are stopped: no thread is left spinning.
pub struct Probes(Vec<Probe>);

/// How long stopping may take before the rest of the run goes on without
/// a probe (it is left to the process's exit).
pub const STOP_BOUND: Duration = Duration::from_millis(500);

impl Probes {
    pub fn new(probes: Vec<Probe>) -> Self {
        Probes(probes)
    }

    pub fn shared(&self) -> Vec<Arc<ProbeShared>> {
        self.0.iter().map(|p| p.shared.clone()).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Probe> {
        self.0.iter()
    }

    /// Lets the probes begin measuring.
    pub fn start(&mut self) {
        for p in &mut self.0 {
            if let Some(go) = p.go.take() {
                let _ = go.send(());
            }
        }
    }

    /// Asks every probe to stop, without waiting for them (`poll_stop`
    /// says when they have; `stop` waits).
    pub fn ask_stop(&mut self) {
        for p in &mut self.0 {
            p.shared.stop.store(true, Relaxed);
            p.go.take();
        }
    }

    /// `waited` after `ask_stop`: whether every probe has ended. From half
    /// of `bound` on, each still running is raised to SCHED_FIFO 99, so a
    /// probe starved by a busy task on its CPU gets it and sees the flag
    /// (raised again at each poll: a thread already there stays there).
    pub fn poll_stop(&self, waited: Duration, bound: Duration) -> bool {
        let mut running = self.0.iter().filter(|p| !p.handle.is_finished()).peekable();
        if running.peek().is_none() {
            return true;
        }
        if waited >= bound / 2 {
            for p in running {
                let _ = crate::sys::set_fifo_of(p.shared.tid.load(Relaxed), 99);
            }
        }
        false
    }

    /// Stops every probe and waits for them within `bound`, whatever their
    /// scheduling: a probe starved by a busy task on its CPU cannot see the
    /// flag, so halfway through, any still running is raised to SCHED_FIFO
    /// 99 to get the CPU. Returns the CPUs whose probe had not stopped.
    pub fn stop(&mut self, bound: Duration) -> Vec<u32> {
        self.ask_stop();
        let start = Instant::now();
        while !self.poll_stop(start.elapsed(), bound) && start.elapsed() < bound {
            thread::sleep(Duration::from_millis(1));
        }
        let (done, stuck): (Vec<Probe>, Vec<Probe>) = self.0.drain(..).partition(|p| p.handle.is_finished());
        for p in done {
            let _ = p.handle.join();
        }
        // Detached: the thread ends with the process (it measures nothing
        // more that anyone reads).
        stuck.iter().map(|p| p.shared.cpu).collect()
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        self.stop(STOP_BOUND);
    }
}

fn setup(cpu: u32, cfg: ProbeConfig) -> anyhow::Result<()> {
    crate::sys::pin_to(&[cpu as usize]).map_err(|e| anyhow::anyhow!("cannot pin the probe to CPU {cpu}: {e}"))?;
    if let Some(prio) = cfg.rt_prio {
        crate::sys::set_fifo(prio).map_err(|e| match e.raw_os_error() {
            // Checked at start-up: here when a seccomp filter refuses it.
            Some(libc::EPERM) => anyhow::anyhow!(
                "needs CAP_SYS_NICE for --rt: the kernel refused the probe SCHED_FIFO {prio} (or a seccomp filter did: systemd's RestrictRealtime=yes): grant it, or leave --rt out"
            ),
            _ => anyhow::anyhow!("cannot make the probe SCHED_FIFO {prio}: {e}"),
        })?;
    }
    // Prefault the stack the loop will use, so no page fault lands in it.
    let mut stack = [0u8; 64 * 1024];
    for b in stack.iter_mut().step_by(4096) {
        *b = 1;
    }
    std::hint::black_box(&stack);
    Ok(())
}

/// The mean of the loop deltas under the threshold: a `span` of `loops`
/// deltas, `gaps` of which (summing `gap_ns`) were hiccups. Unlike the plain
/// mean it does not depend on how often something stole the CPU.
pub fn mean_between_gaps(span: u64, loops: u64, gap_ns: u64, gaps: u64) -> Option<f64> {
    let n = loops.checked_sub(gaps).filter(|&n| n > 0)?;
    Some(span.saturating_sub(gap_ns) as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 2);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(1024), 11);
        assert_eq!(bucket(u64::MAX), HIST_BUCKETS - 1);
    }

    #[test]
    fn the_mean_between_gaps_leaves_the_gaps_out() {
        // 1000 deltas over 30 µs, two of them gaps of 5 µs each.
        assert_eq!(mean_between_gaps(30_000, 1000, 10_000, 2), Some(20_000.0 / 998.0));
        assert_eq!(mean_between_gaps(30_000, 1000, 0, 0), Some(30.0));
        assert_eq!(mean_between_gaps(30_000, 2, 10_000, 2), None);
        assert_eq!(mean_between_gaps(0, 0, 0, 0), None);
    }
}
