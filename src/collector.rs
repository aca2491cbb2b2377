//! The collector thread: owns the BPF objects, drains the ring buffer on a
//! short period (no wakeups from the watched CPUs), feeds the timelines,
//! pairs the probes' gaps with them, records the aggregates and the CSV,
//! and publishes a copy of the aggregates for readers. Runs on the
//! housekeeping CPUs only.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io::BufWriter;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::attribution::Engine;
use crate::bpf::Tracer;
use crate::cause::Namer;
use crate::events::Event;
use crate::export::CsvSink;
use crate::kallsyms::Kallsyms;
use crate::probe::{now_ns, ProbeShared};
use crate::stats::Stats;

/// How often the ring buffer is drained: often under load, less when quiet
/// (each wakeup costs the housekeeping CPU a little).
pub const POLL: Duration = Duration::from_millis(2);
const POLL_QUIET: Duration = Duration::from_millis(20);
/// Fewer records than this in a drain counts as quiet.
const QUIET_RECORDS: u64 = 256;
/// Records read per drain at most, so a producer faster than the reader
/// cannot keep it in one drain for ever; and a quarter of WINDOW, so a gap
/// reported while a drain runs is still in the window at the next one.
const MAX_PER_DRAIN: usize = 1 << 14;
/// Records reserved before a drain but not yet committed block it for at
/// most a few µs; a gap is attributed once the drain is this far past it.
const MARGIN_NS: u64 = 1_000_000;
/// How often aggregates are published for readers.
const PUBLISH_NS: u64 = 100_000_000;
/// Segments each CPU's timeline keeps at most.
const WINDOW: usize = 1 << 16;

pub struct Config {
    pub cpus: Vec<usize>,
    pub housekeeping: Vec<usize>,
    pub csv: Option<CsvSink<BufWriter<File>>>,
    pub bpf_stats: bool,
    /// A live view reads the published aggregates; without one, they are
    /// only needed at the end (publishing clones every histogram).
    pub live: bool,
}

/// What the collector says once attached: tracepoints this kernel lacks.
pub type Ready = Result<Vec<&'static str>>;

/// Starts the collector. It reports on `ready` once attached (or failed),
/// runs until `done` is set (after the probes have stopped), does a last
/// drain so every gap is attributed, and returns the final aggregates.
pub fn spawn(
    cfg: Config,
    probes: Vec<Arc<ProbeShared>>,
    kallsyms: Kallsyms,
    ready: mpsc::Sender<Ready>,
    publish: Arc<Mutex<Stats>>,
    done: &'static AtomicBool,
) -> thread::JoinHandle<Result<Stats>> {
    thread::Builder::new()
        .name("jw-collector".into())
        .spawn(move || {
            crate::sys::pin_to(&cfg.housekeeping).context("cannot pin the collector to the unwatched CPUs")?;
            let mut storage = MaybeUninit::uninit();
            let tracer = match Tracer::attach(&mut storage, &cfg.cpus) {
                Ok(t) => t,
                Err(e) => {
                    let msg = e.to_string();
                    let _ = ready.send(Err(e.into()));
                    anyhow::bail!(msg);
                }
            };
            let stats_fd = cfg.bpf_stats.then(enable_bpf_stats).transpose()?;
            let missing = tracer.missing.clone();
            let _ = ready.send(Ok(missing.clone()));
            let r = collect(&tracer, cfg, &probes, kallsyms, &publish, done, missing);
            drop(stats_fd);
            if r.is_err() {
                // Nothing left to measure for: stop the run, not just this thread.
                crate::lifecycle::request_stop();
            }
            r
        })
        .expect("spawning the collector thread")
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
    probes: &[Arc<ProbeShared>],
    kallsyms: Kallsyms,
    publish: &Mutex<Stats>,
    done: &AtomicBool,
    missing: Vec<&'static str>,
) -> Result<Stats> {
    let attach_ns = now_ns();
    let engine = RefCell::new(Engine::new(&cfg.cpus, attach_ns, WINDOW, Namer::new(kallsyms)));
    for p in probes {
        engine.borrow_mut().set_probe_tids(p.cpu, &[p.tid.load(Relaxed)]);
    }
    let events = Cell::new(0u64);
    let undecodable = Cell::new(0u64);
    let oldest = Cell::new(u64::MAX);
    let rb = tracer.ring_buffer(|data| {
        match Event::decode(data) {
            Ok(ev) => {
                events.set(events.get() + 1);
                oldest.set(oldest.get().min(ev.ts));
                engine.borrow_mut().on_event(&ev);
            }
            Err(_) => undecodable.set(undecodable.get() + 1),
        }
        0
    })?;

    let mut stats = Stats::new(&cfg.cpus, attach_ns);
    stats.missing_tracepoints = missing;
    stats.switch_hook = tracer.switch_hook.to_string();
    // What came before (loading and attaching, the ring buffer's set-up) is
    // set-up; the consumer's own cost counts from here.
    stats.setup_cpu_ns = crate::sys::thread_cpu_ns();
    let mut csv_err = None;
    let mut next_publish = attach_ns;
    let mut watermark = attach_ns;
    let mut started = false;
    loop {
        let last = done.load(Relaxed);
        if last {
            // Stop producing (a storm could outrun the reader for ever), then
            // let records stamped before that be committed.
            tracer.unwatch()?;
            thread::sleep(Duration::from_nanos(MARGIN_NS));
        }
        // Gaps first: the drain then attributes each as its CPU's events
        // pass it (attribution::Engine::on_event).
        {
            let mut eng = engine.borrow_mut();
            for p in probes {
                while let Some(g) = p.queue.pop() {
                    eng.on_gap(g);
                }
            }
        }
        let drain_start = now_ns();
        oldest.set(u64::MAX);
        let before = events.get();
        loop {
            let n = rb.consume_raw_n(MAX_PER_DRAIN);
            if n < 0 {
                return Err(std::io::Error::from_raw_os_error(-n)).context("reading the ring buffer");
            }
            // The last drain empties the buffer; the others take one batch.
            if !last || (n as usize) < MAX_PER_DRAIN {
                break;
            }
        }
        let drained_records = events.get() - before;
        // A capped drain that filled its batch may have left older records
        // behind: only an emptied buffer moves the watermark.
        let exhausted = drained_records < MAX_PER_DRAIN as u64 || last;
        let drained = now_ns();
        if oldest.get() != u64::MAX {
            let lag = drained.saturating_sub(oldest.get());
            stats.lag_ns = stats.lag_ns.max(lag);
            stats.lag_max_ns = stats.lag_max_ns.max(lag);
            if stats.first_event_ns == 0 {
                stats.first_event_ns = oldest.get();
            }
        }
        let mut eng = engine.borrow_mut();
        for p in probes {
            while let Some(g) = p.queue.pop() {
                eng.on_gap(g);
            }
        }
        if exhausted {
            watermark = if last { drain_start } else { drain_start.saturating_sub(MARGIN_NS) };
        }
        eng.attribute_ready(watermark, |h| {
            stats.record(&h);
            if let (Some(csv), None) = (cfg.csv.as_mut(), &csv_err) {
                if let Err(e) = csv.write(&h) {
                    csv_err = Some(e);
                }
            }
        });
        for p in probes {
            eng.prune(p.cpu, p.progress.load(Relaxed).min(watermark));
        }
        (stats.reordered_events, stats.evicted_segments) = eng.window_stats().fold((0, 0), |(r, e), (_, tr, te)| (r + tr, e + te));
        drop(eng);
        if let Some(e) = csv_err.take() {
            return Err(e).context("writing the CSV");
        }

        if !started {
            // Elapsed time counts from the probes' first sample.
            let first = probes.iter().map(|p| p.first_sample_ns.load(Relaxed)).filter(|&t| t != 0).min();
            if let Some(t) = first {
                stats.start_ns = t;
                started = true;
            }
        }
        if (cfg.live && drained >= next_publish) || last {
            next_publish = drained + PUBLISH_NS;
            refresh(&mut stats, tracer, probes, events.get(), drained, cfg.bpf_stats);
            if let Ok(mut g) = publish.try_lock() {
                g.clone_from(&stats);
            }
            stats.lag_ns = 0;
        }
        if last {
            break;
        }
        thread::sleep(if drained_records < QUIET_RECORDS { POLL_QUIET } else { POLL });
    }
    if let Some(csv) = cfg.csv.as_mut() {
        csv.flush().context("writing the CSV")?;
    }
    Ok(stats)
}

/// Figures the probes and the kernel keep, copied into the aggregates.
fn refresh(stats: &mut Stats, tracer: &Tracer<'_>, probes: &[Arc<ProbeShared>], events: u64, now: u64, bpf_stats: bool) {
    stats.events = events;
    stats.now_ns = now;
    // refresh() runs on the collector thread: this is the consumer's own cost.
    stats.consumer_cpu_ns = crate::sys::thread_cpu_ns().saturating_sub(stats.setup_cpu_ns);
    let drops = tracer.drops().unwrap_or_default();
    for p in probes {
        if let Some(c) = stats.cpu_mut(p.cpu) {
            c.threshold_ns = p.threshold_ns.load(Relaxed);
            let floor = p.floor_ns.load(Relaxed);
            c.floor_ns = if floor == u64::MAX { 0 } else { floor };
            c.loop_hist = p.histogram();
            let (loops, first) = (p.loops.load(Relaxed), p.first_sample_ns.load(Relaxed));
            if loops > 0 && first > 0 {
                c.loop_mean_ns = p.progress.load(Relaxed).saturating_sub(first) as f64 / loops as f64;
            }
            // The gaps it reported are the hiccups counted (all of them by
            // the last refresh; but those lost to a full queue).
            c.loop_quiet_mean_ns = p.quiet_mean_ns(c.stolen_ns, c.hiccups).unwrap_or(0.0);
            c.overflow = p.overflow.load(Relaxed);
            c.drops = drops.get(p.cpu as usize).copied().unwrap_or(0);
        }
    }
    if bpf_stats {
        stats.prog_stats = tracer.prog_stats();
    }
}
