//! `jitterwatch --cpus N`: builds the run's source (its `Mode`'s), starts
//! the collector with it, runs the screen or waits headless, then stops
//! everything in order and prints the summary. The source is stopped on
//! every way out (the collector owns it; its probes stop when dropped), the
//! BPF links are dropped with the collector thread. `run` is the order of
//! the steps; each step is a function below.

mod end;
mod outputs;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cli::WatchArgs;
use crate::collector::{self, Collector, Ready};
use crate::doctor::Report;
use crate::mode::Mode;
use crate::say::say;
use crate::sink::outputs::Metrics;
use crate::snapshot::Snapshot;
use crate::source::{Source, Started};
use crate::{lifecycle, startup};

/// How often a run without a screen looks for a stop (a signal, a watched
/// process gone): within a tenth of a second, as the exits watcher does.
/// Each wake-up of this thread costs the housekeeping CPU ~50 µs on our VM,
/// so the 20 ms it was cost 0.27% of a CPU (BENCHMARKS.md figure 2 counts
/// it among our own threads). The run's end is slept to exactly.
const HEADLESS_WAIT: Duration = Duration::from_millis(100);

/// What the steps of a run share, decided before anything spins.
struct Plan {
    mode: Mode,
    serve: bool,
    /// The live screen shows.
    tui: bool,
    cpus: Vec<usize>,
    housekeeping: Vec<usize>,
    /// Once per run: the screen's hint line and the summary's hints.
    audit: Report,
}

/// `serve`: headless whatever stdout is, logging a line per CPU a minute.
pub fn run(args: WatchArgs, serve: bool) -> Result<i32> {
    let mode = Mode::of(&args)?;
    // Bound first: a bad address or a port in use fails before anything spins.
    let endpoint = args.prometheus.as_deref().map(crate::metrics::Endpoint::bind).transpose()?;
    if let Some(warning) = endpoint.as_ref().and_then(|ep| ep.exposure()) {
        say!("{warning}");
    }
    // Held until run returns (or the process dies: the kernel lifts it).
    let dma = args.dma_latency.map(|us| crate::dma_latency::hold(Path::new(crate::dma_latency::DEVICE), us)).transpose()?;
    if let Some(h) = &dma {
        say!("holding {} at {} µs for the run: no CPU enters an idle state slower to leave", crate::dma_latency::DEVICE, h.us);
    }
    let (plan, source, prep) = plan(&args, mode, serve)?;
    // Held until the process ends: after the source has stopped.
    let _locks = prep.locks;
    let opened = outputs::open(&args, &plan.cpus, plan.mode.method(), plan.tui)?;
    let metrics_slot = endpoint.as_ref().map(|_| crate::metrics::Slot::default());
    let metrics = metrics_slot.clone().map(|slot| Metrics::new(&plan.cpus, args.prometheus_top.into(), plan.mode.method().label(), slot));
    let sinks = opened.outputs;
    let (collector, ready, screen) = start_collector(&args, &plan, sinks.with_metrics(metrics), source, prep.namer)?;
    if let (Some(ep), Some(slot)) = (endpoint, metrics_slot) {
        let addr = ep.addr;
        ep.serve(slot, plan.housekeeping.clone())?;
        say!("Prometheus metrics at http://{addr}/metrics");
    }
    let started = Instant::now();
    let how = start(&collector, &ready)?;
    announce(&args, &plan, &how);
    let ui = show(&args, &plan, screen, &collector, started, how.found);
    let finished = collector.finish()?;
    ui?;
    end::finish(&args, &plan, finished, opened.summary_file)
}

/// The mode's CPUs and source, the checks before anything is loaded, and
/// the CPUs' locks (taken where a probe will spin).
fn plan(args: &WatchArgs, mode: Mode, serve: bool) -> Result<(Plan, Box<dyn Source>, startup::Prepared)> {
    let root = Path::new("/");
    let planned = mode.plan(root, args)?;
    let prep =
        startup::prepare(planned.cpus_arg.as_deref(), planned.spins(), crate::caps::Wants { rt: args.rt, bpf_stats: args.bpf_stats })?;
    let source = planned.source(root, args, &prep.cpus)?;
    let plan = Plan {
        mode,
        serve,
        tui: !serve && !args.no_tui && std::io::stdout().is_terminal(),
        cpus: prep.cpus.clone(),
        housekeeping: prep.housekeeping.clone(),
        audit: crate::doctor::audit(root, &prep.cpus),
    };
    Ok((plan, source, prep))
}

/// The collector with the run's source, attached (a kernel that refuses
/// fails the run here); where it reports the start, and where its
/// snapshots arrive when a screen or `serve` shows them.
fn start_collector(
    args: &WatchArgs,
    plan: &Plan,
    sinks: crate::sink::outputs::Outputs,
    source: Box<dyn Source>,
    namer: crate::engine::Namer,
) -> Result<(Collector, Receiver<Ready>, Option<Receiver<Snapshot>>)> {
    let (snapshots, screen) = if plan.tui || plan.serve {
        // Room for one frame in flight: the collector never waits on the screen.
        let (tx, rx) = mpsc::sync_channel(1);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let cfg = collector::Config {
        cpus: plan.cpus.clone(),
        housekeeping: plan.housekeeping.clone(),
        sinks: sinks.into_list(),
        bpf_stats: args.bpf_stats,
        snapshots,
        origins: !args.no_origins,
        wake_origins: args.wake_origins,
        stop_above: args.stop_above,
        fail_above: args.fail_above,
        stacks_above: args.stacks_above.unwrap_or(0),
        switch_event: args.switch_hook == crate::cli::SwitchHookArg::PerfEvent,
        own_tgid: std::process::id(),
        method: plan.mode.method(),
    };
    let collector = Collector::spawn(cfg, source, namer, ready_tx)?;
    match ready_rx.recv() {
        Ok(Ready::Attached(Ok(missing))) => startup::say_missing(&missing),
        // Failed to attach: its thread has ended with the error.
        Ok(Ready::Attached(Err(e))) => return Err(e),
        Ok(Ready::Started(_)) | Err(_) => return Err(stopped_early(collector)),
    }
    Ok((collector, ready_rx, screen))
}

/// The collector's own error, once it has ended before its time.
fn stopped_early(collector: Collector) -> anyhow::Error {
    collector.finish().err().unwrap_or_else(|| anyhow::anyhow!("the collector stopped early"))
}

/// Lets the source measure, and waits until it says how it started; one
/// that cannot (a threshold under the loop's floor) ends the run.
fn start(collector: &Collector, ready: &Receiver<Ready>) -> Result<Started> {
    let _ = collector.commands.send(collector::Command::Start);
    match ready.recv() {
        Ok(Ready::Started(r)) => r,
        Ok(Ready::Attached(_)) | Err(_) => Err(anyhow::anyhow!("the collector stopped before the run started")),
    }
}

/// The start-up lines: what is watched and how, where traces go.
fn announce(args: &WatchArgs, plan: &Plan, how: &Started) {
    for line in &how.notices {
        say!("{line}");
    }
    if !plan.tui {
        for line in &how.lines {
            say!("{line}");
        }
    }
    outputs::say_traces(args, how);
}

/// How long a run without a screen sleeps before it looks again, `elapsed`
/// into a run of `duration`: a tenth of a second, or what is left of it.
fn headless_nap(duration: Option<Duration>, elapsed: Duration) -> Duration {
    duration.map_or(HEADLESS_WAIT, |d| d.saturating_sub(elapsed)).min(HEADLESS_WAIT)
}

/// The screen, `serve`'s log, or a headless wait, until the run ends.
fn show(
    args: &WatchArgs,
    plan: &Plan,
    screen: Option<Receiver<Snapshot>>,
    collector: &Collector,
    started: Instant,
    found: Vec<(u32, String)>,
) -> Result<()> {
    match screen {
        Some(rx) if plan.serve => {
            crate::serve::wait(&rx, started, args.duration);
            Ok(())
        }
        Some(rx) => crate::tui::run(rx, collector.commands.clone(), &plan.cpus, args.duration, &plan.audit, !args.no_origins, found),
        None => {
            while !lifecycle::stop_requested() && args.duration.is_none_or(|d| started.elapsed() < d) {
                thread::sleep(headless_nap(args.duration, started.elapsed()));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_headless_run_wakes_ten_times_a_second_and_ends_on_time() {
        let ms = Duration::from_millis;
        assert_eq!(headless_nap(None, ms(5_000)), ms(100), "no duration: a tenth of a second");
        assert_eq!(headless_nap(Some(ms(3_000)), ms(1_000)), ms(100));
        assert_eq!(headless_nap(Some(ms(3_000)), ms(2_970)), ms(30), "the end is slept to exactly");
        assert_eq!(headless_nap(Some(ms(3_000)), ms(3_500)), Duration::ZERO, "past the end: no sleep");
    }
}
