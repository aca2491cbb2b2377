//! `jitterwatch --cpus N`: starts the probes and the collector, runs the
//! screen or waits headless, then stops everything in order and prints the
//! summary. The probes are stopped on every way out (probe::Probes), the
//! BPF links are dropped with the collector thread. `run` is the order of
//! the steps; each step is a function below.

mod end;
mod outputs;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cli::{LoopClockArg, WatchArgs};
use crate::collector::{self, Collector};
use crate::doctor::Report;
use crate::mode::Mode;
use crate::probe::{Probe, ProbeConfig, ProbeKind, Probes, Threshold, MIN_FLOORS, STOP_BOUND};
use crate::say::say;
use crate::sink::outputs::Metrics;
use crate::snapshot::Snapshot;
use crate::{cpulist, lifecycle, passive, startup};

/// What the steps of a run share, decided before anything spins.
struct Plan {
    mode: Mode,
    serve: bool,
    /// The live screen shows.
    tui: bool,
    cpus: Vec<usize>,
    housekeeping: Vec<usize>,
    /// Passive mode: the threads the filter found, and their CPUs.
    target: Option<passive::Target>,
    /// --threshold, or how each probe chooses its own.
    rule: Threshold,
    /// Passive mode's threshold (the probes keep their own).
    passive_threshold: u64,
    /// Once per run: the screen's hint line and the summary's hints.
    audit: Report,
}

/// `serve`: headless whatever stdout is, logging a line per CPU a minute.
pub fn run(args: WatchArgs, serve: bool) -> Result<i32> {
    let mode = Mode::of(&args)?;
    // Bound first: a bad address or a port in use fails before anything spins.
    let endpoint = args.prometheus.as_deref().map(crate::metrics::Endpoint::bind).transpose()?;
    // Held until run returns (or the process dies: the kernel lifts it).
    let dma = args.dma_latency.map(|us| crate::dma_latency::hold(Path::new(crate::dma_latency::DEVICE), us)).transpose()?;
    if let Some(h) = &dma {
        say!("holding {} at {} µs for the run: no CPU enters an idle state slower to leave", crate::dma_latency::DEVICE, h.us);
    }
    let (plan, prep) = plan(&args, mode, serve)?;
    // Held until the process ends: after the probes have stopped.
    let _locks = prep.locks;
    let opened = outputs::open(&args, &plan.cpus, plan.mode.is_passive(), plan.tui)?;
    let mut probes = spawn_probes(&args, &plan)?;
    let metrics_slot = endpoint.as_ref().map(|_| crate::metrics::Slot::default());
    let metrics = metrics_slot.clone().map(|slot| Metrics::new(&plan.cpus, args.prometheus_top.into(), plan.mode.label(), slot));
    let sinks = opened.outputs;
    let (collector, screen) = start_collector(&args, &plan, sinks.with_metrics(metrics), &probes, prep.namer)?;
    // Passive mode: a thread already running on an isolated CPU may never
    // switch, so /proc says where the found threads are now that tracing is on.
    let at_attach = plan.target.as_ref().map(|t| passive::at_attach(Path::new("/"), t));
    if let Some(a) = &at_attach {
        let _ = collector.commands.send(collector::Command::Seed(a.running.clone(), crate::clock::now_ns()));
    }
    if let (Some(ep), Some(slot)) = (endpoint, metrics_slot) {
        let addr = ep.addr;
        ep.serve(slot, plan.housekeeping.clone())?;
        say!("Prometheus metrics at http://{addr}/metrics");
    }
    probes.start();
    let started = Instant::now();
    check_thresholds(&probes)?;
    let exited = plan.target.as_ref().map(passive::watch_exits);
    announce(&args, &plan, &probes, at_attach.as_ref());
    let ui = show(&args, &plan, screen, &collector, started, at_attach.as_ref());
    let moved: Vec<u32> = probes.iter().filter(|p| p.shared.moved_off.load(Relaxed)).map(|p| p.shared.cpu).collect();
    let stuck = probes.stop(STOP_BOUND);
    let stats = collector.finish()?;
    ui?;
    end::finish(&args, &plan, &stats, end::Ended { exited, stuck, moved }, opened.summary_file)
}

/// The mode's CPUs and threads, the checks before anything is loaded, and
/// the CPUs' locks (taken where a probe will spin).
fn plan(args: &WatchArgs, mode: Mode, serve: bool) -> Result<(Plan, startup::Prepared)> {
    let root = Path::new("/");
    let target = match &mode {
        Mode::Passive(filter) => Some(passive::target(root, filter.clone(), args.cpus.as_deref())?),
        Mode::Spin | Mode::Wakeup { .. } => None,
    };
    let cpus_arg = match &target {
        Some(t) => Some(cpulist::Display(&t.cpus).to_string()),
        None => args.cpus.clone(),
    };
    // Passive mode does not spin on the CPUs: it takes no lock on them.
    let prep = startup::prepare(cpus_arg.as_deref(), target.is_none())?;
    let rule = args.threshold.unwrap_or(Threshold::Default);
    let plan = Plan {
        mode,
        serve,
        tui: !serve && !args.no_tui && std::io::stdout().is_terminal(),
        cpus: prep.cpus.clone(),
        housekeeping: prep.housekeeping.clone(),
        target,
        rule,
        // Passive mode and the wake-up probe keep their own defaults (auto too).
        passive_threshold: rule.given().unwrap_or(passive::DEFAULT_THRESHOLD_NS),
        audit: crate::doctor::audit(root, &prep.cpus),
    };
    Ok((plan, prep))
}

/// A probe on each CPU (none in passive mode), not started yet.
fn spawn_probes(args: &WatchArgs, plan: &Plan) -> Result<Probes> {
    let kind = match plan.mode {
        Mode::Passive(_) => return Ok(Probes::new(Vec::new())),
        Mode::Spin => ProbeKind::Spin,
        Mode::Wakeup { period_ns } => ProbeKind::Wakeup { period_ns },
    };
    // The wake-up probe reads clock_gettime once per wake-up: no TSC.
    let tsc = kind == ProbeKind::Spin
        && match args.clock {
            LoopClockArg::Vdso => false,
            LoopClockArg::Tsc | LoopClockArg::Auto => match crate::loop_clock::tsc_usable(Path::new("/")) {
                Ok(()) => true,
                Err(why) => {
                    let asked = if args.clock == LoopClockArg::Tsc { "--clock tsc" } else { "the TSC (the default clock)" };
                    say!("{asked}: {why}; the probe reads clock_gettime instead");
                    false
                }
            },
        };
    let cfg = ProbeConfig { kind, timer_slack_ns: args.timer_slack, threshold: plan.rule, rt_prio: args.rt, tsc };
    Ok(Probes::new(plan.cpus.iter().map(|&c| Probe::spawn(c as u32, cfg)).collect::<Result<Vec<_>>>()?))
}

/// The collector, attached (a kernel that refuses fails the run here), and
/// where its snapshots arrive when a screen or `serve` shows them.
fn start_collector(
    args: &WatchArgs,
    plan: &Plan,
    mut sinks: crate::sink::outputs::Outputs,
    probes: &Probes,
    namer: crate::engine::Namer,
) -> Result<(Collector, Option<Receiver<Snapshot>>)> {
    if let Some(r) = sinks.recorder.as_mut() {
        let shared = probes.shared();
        let passive_threshold = plan.target.as_ref().map(|_| plan.passive_threshold);
        r.read_thresholds(move |cpu| match passive_threshold {
            Some(thr) => thr,
            None => shared.iter().find(|p| p.cpu == cpu).map_or(0, |p| p.threshold_ns.load(Relaxed)),
        });
    }
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
        passive: plan.target.as_ref().map(|t| {
            passive::Tracker::new(t.filter.clone(), &plan.cpus, plan.passive_threshold).softirqs_in_threads(crate::sys::preempt_rt())
        }),
        origins: !args.no_origins,
        wake_origins: args.wake_origins,
        stop_above: args.stop_above,
    };
    let collector = Collector::spawn(cfg, probes.shared(), namer, ready_tx)?;
    match ready_rx.recv() {
        Ok(Ok(missing)) => startup::say_missing(&missing),
        // Failed to attach: its thread has ended with the error.
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(collector.finish().err().unwrap_or_else(|| anyhow::anyhow!("the collector stopped early"))),
    }
    Ok((collector, screen))
}

/// Waits for the probes' thresholds; a given one under the loop's floor
/// ends the run. Said once, with the first CPU's reason for the others':
/// an SMI count that cannot be read.
fn check_thresholds(probes: &Probes) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && probes.iter().any(|p| p.shared.threshold_ns.load(Relaxed) == 0) {
        thread::sleep(Duration::from_millis(5));
    }
    if let Some(p) = probes.iter().find(|p| p.shared.refused.load(Relaxed)) {
        let (floor, thr) = (p.shared.floor_ns.load(Relaxed), p.shared.threshold_ns.load(Relaxed));
        anyhow::bail!(
            "--threshold {thr}ns is under {MIN_FLOORS} × CPU {}'s loop floor ({floor} ns): every loop would be a hiccup; use at least {}ns, or leave it out for the default",
            p.shared.cpu,
            MIN_FLOORS * floor
        );
    }
    if let Some(why) = probes.iter().find_map(|p| p.smi_unread.as_ref()) {
        say!("SMI count not read: {why}; SMIs stay unexplained");
    }
    Ok(())
}

/// The start-up lines: what is watched and how, where traces go.
fn announce(args: &WatchArgs, plan: &Plan, probes: &Probes, at_attach: Option<&passive::AtAttach>) {
    match (&plan.mode, &plan.target, at_attach) {
        (_, Some(t), Some(a)) => {
            for line in passive::start_lines(t, a, plan.passive_threshold) {
                say!("{line}");
            }
        }
        (Mode::Wakeup { period_ns }, _, _) if !plan.tui => {
            let how =
                if plan.rule.given().is_some() { "as given" } else { "twice the median latency of its first 100 ms, at least 10 µs" };
            let thr: Vec<String> = probes
                .iter()
                .map(|p| {
                    let slack = p.shared.wake.as_ref().map_or(0, |w| w.slack_ns.load(Relaxed));
                    let ns = crate::units::ns;
                    format!("CPU {}: late above {}, timer slack {}", p.shared.cpu, ns(p.shared.threshold_ns.load(Relaxed)), ns(slack))
                })
                .collect();
            say!(
                "wake-up probe: sleeps {} at a time and reports a wake-up later than its threshold ({how}); {}",
                crate::units::ns(*period_ns),
                thr.join("; ")
            );
        }
        _ if !plan.tui => {
            for p in probes.iter() {
                let (floor, thr) = (p.shared.floor_ns.load(Relaxed), p.shared.threshold_ns.load(Relaxed));
                say!("watching CPU {}: {}", p.shared.cpu, plan.rule.describe(floor, thr));
            }
        }
        _ => {}
    }
    outputs::say_traces(args, probes, plan.passive_threshold, plan.mode.is_passive());
}

/// The screen, `serve`'s log, or a headless wait, until the run ends.
fn show(
    args: &WatchArgs,
    plan: &Plan,
    screen: Option<Receiver<Snapshot>>,
    collector: &Collector,
    started: Instant,
    at_attach: Option<&passive::AtAttach>,
) -> Result<()> {
    match screen {
        Some(rx) if plan.serve => {
            crate::serve::wait(&rx, started, args.duration);
            Ok(())
        }
        Some(rx) => {
            let found = crate::tui::found_threads(plan.target.as_ref(), at_attach);
            crate::tui::run(rx, collector.commands.clone(), &plan.cpus, args.duration, &plan.audit, !args.no_origins, found)
        }
        None => {
            while !lifecycle::stop_requested() && args.duration.is_none_or(|d| started.elapsed() < d) {
                thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }
    }
}
