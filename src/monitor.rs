//! `jitterwatch --cpus N`: starts the probes and the collector, runs the
//! screen or waits headless, then stops everything in order and prints the
//! summary. The probes are stopped on every way out (probe::Probes), the
//! BPF links are dropped with the collector thread.

use crate::say::say;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cli::{LoopClockArg, ProbeArg, WatchArgs};
use crate::collector::{self, Collector};
use crate::export::CsvSink;
use crate::probe::{Probe, ProbeConfig, ProbeKind, Probes, Threshold, MIN_FLOORS, STOP_BOUND};
use crate::sink::outputs::{Metrics, Outputs};

/// The wake-up probe's period unless --period says otherwise (cyclictest's -i 1000).
const DEFAULT_PERIOD_NS: u64 = 1_000_000;
use crate::summary::Summary;
use crate::{cpulist, lifecycle, passive, startup};

/// `serve`: headless whatever stdout is, logging a line per CPU a minute.
pub fn run(args: WatchArgs, serve: bool) -> Result<i32> {
    if args.probe != ProbeArg::Wakeup && (args.period.is_some() || args.timer_slack.is_some()) {
        anyhow::bail!("--period and --timer-slack are the wake-up probe's: add --probe wakeup");
    }
    // Bound first: a bad address or a port in use fails before anything spins.
    let endpoint = args.prometheus.as_deref().map(crate::metrics::Endpoint::bind).transpose()?;
    let root = Path::new("/");
    let filter = args.passive_filter();
    let target = match &filter {
        Some(f) => Some(passive::target(root, f.clone(), args.cpus.as_deref())?),
        None => None,
    };
    let cpus_arg = match &target {
        Some(t) => Some(cpulist::Display(&t.cpus).to_string()),
        None => args.cpus.clone(),
    };
    // Passive mode does not spin on the CPUs: it takes no lock on them.
    let prep = startup::prepare(cpus_arg.as_deref(), target.is_none())?;
    let cpus = prep.cpus;
    // Held until the process ends: after the probes have stopped.
    let _locks = prep.locks;
    let tui = !serve && !args.no_tui && std::io::stdout().is_terminal();
    let csv = args.csv.as_deref().map(CsvSink::create).transpose()?;
    // Opened now so that a path that cannot be written fails before the run.
    let summary_file = match args.summary_json.clone().or_else(|| args.csv.as_deref().map(crate::summary::sidecar)) {
        Some(p) => Some((crate::output::create(&p, "the run summary")?, p)),
        None => None,
    };
    let (recorder, whole) = traces(&args, &cpus, target.is_some(), tui)?;
    // Once per run: the screen's hint line and the summary's hints.
    let audit = crate::doctor::audit(root, &cpus);

    // Passive mode runs no probe, so it has no loop clock to choose.
    // The wake-up probe reads clock_gettime once per wake-up: no TSC.
    let tsc = target.is_none()
        && args.probe == ProbeArg::Spin
        && match args.clock {
            LoopClockArg::Vdso => false,
            LoopClockArg::Tsc | LoopClockArg::Auto => match crate::loop_clock::tsc_usable(root) {
                Ok(()) => true,
                Err(why) => {
                    let asked = if args.clock == LoopClockArg::Tsc { "--clock tsc" } else { "the TSC (the default clock)" };
                    say!("{asked}: {why}; the probe reads clock_gettime instead");
                    false
                }
            },
        };
    let kind = match args.probe {
        ProbeArg::Spin => ProbeKind::Spin,
        ProbeArg::Wakeup => ProbeKind::Wakeup { period_ns: args.period.unwrap_or(DEFAULT_PERIOD_NS) },
    };
    let rule = args.threshold.unwrap_or(Threshold::Default);
    let cfg = ProbeConfig { kind, timer_slack_ns: args.timer_slack, threshold: rule, rt_prio: args.rt, tsc };
    let mut probes = match target {
        Some(_) => Probes::new(Vec::new()),
        None => Probes::new(cpus.iter().map(|&c| Probe::spawn(c as u32, cfg)).collect::<Result<Vec<_>>>()?),
    };
    // Passive mode and the wake-up probe keep their own defaults (auto too).
    let threshold = rule.given().unwrap_or(passive::DEFAULT_THRESHOLD_NS);
    let tracker = target.as_ref().map(|t| passive::Tracker::new(t.filter.clone(), &cpus, threshold));
    let metrics_slot = endpoint.as_ref().map(|_| crate::metrics::Slot::default());
    let mut recorder = recorder;
    if let Some(r) = recorder.as_mut() {
        let shared = probes.shared();
        let passive_threshold = target.as_ref().map(|_| threshold);
        r.read_thresholds(move |cpu| match passive_threshold {
            Some(thr) => thr,
            None => shared.iter().find(|p| p.cpu == cpu).map_or(0, |p| p.threshold_ns.load(Relaxed)),
        });
    }
    let mode = if target.is_some() {
        "passive"
    } else if matches!(kind, ProbeKind::Wakeup { .. }) {
        "wakeup"
    } else {
        "probe"
    };
    let housekeeping = prep.housekeeping.clone();
    let (snapshots, screen) = if tui || serve {
        // Room for one frame in flight: the collector never waits on the screen.
        let (tx, rx) = mpsc::sync_channel(1);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let collector = Collector::spawn(
        collector::Config {
            cpus: cpus.clone(),
            housekeeping: prep.housekeeping,
            sinks: Outputs {
                csv,
                metrics: metrics_slot.clone().map(|slot| Metrics::new(&cpus, args.prometheus_top.into(), mode, slot)),
                recorder,
                whole,
            }
            .into_list(),
            bpf_stats: args.bpf_stats,
            snapshots,
            passive: tracker,
            origins: !args.no_origins,
            wake_origins: args.wake_origins,
            stop_above: args.stop_above,
        },
        probes.shared(),
        prep.namer,
        ready_tx,
    )?;
    match ready_rx.recv() {
        Ok(Ok(missing)) => startup::say_missing(&missing),
        // Failed to attach: its thread has ended with the error.
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(collector.finish().err().unwrap_or_else(|| anyhow::anyhow!("the collector stopped early"))),
    }
    // Passive mode: a thread already running on an isolated CPU may never
    // switch, so /proc says where the found threads are now that tracing is on.
    let at_attach = target.as_ref().map(|t| passive::at_attach(root, t));
    if let Some(a) = &at_attach {
        let _ = collector.commands.send(crate::collector::Command::Seed(a.running.clone(), crate::clock::now_ns()));
    }
    if let (Some(ep), Some(slot)) = (endpoint, metrics_slot) {
        let addr = ep.addr;
        ep.serve(slot, housekeeping)?;
        say!("Prometheus metrics at http://{addr}/metrics");
    }
    probes.start();
    let started = Instant::now();
    wait_for_thresholds(&probes);
    if let Some(p) = probes.iter().find(|p| p.shared.refused.load(Relaxed)) {
        let (floor, thr) = (p.shared.floor_ns.load(Relaxed), p.shared.threshold_ns.load(Relaxed));
        anyhow::bail!(
            "--threshold {thr}ns is under {MIN_FLOORS} × CPU {}'s loop floor ({floor} ns): every loop would be a hiccup; use at least {}ns, or leave it out for the default",
            p.shared.cpu,
            MIN_FLOORS * floor
        );
    }
    // Once for the run, once it is running (an error stays one line):
    // the first CPU's reason stands for the others'.
    if let Some(why) = probes.iter().find_map(|p| p.smi_unread.as_ref()) {
        say!("SMI count not read: {why}; SMIs stay unexplained");
    }
    let exited = target.as_ref().map(passive::watch_exits);
    if let (Some(t), Some(a)) = (&target, &at_attach) {
        for line in passive::start_lines(t, a, threshold) {
            say!("{line}");
        }
    } else if let (ProbeKind::Wakeup { period_ns }, false) = (kind, tui) {
        let how = if rule.given().is_some() { "as given" } else { "2 × the median latency of the first 100 ms, at least 10 µs" };
        let thr: Vec<String> = probes
            .iter()
            .map(|p| {
                let slack = p.shared.wake.as_ref().map_or(0, |w| w.slack_ns.load(Relaxed));
                format!("{}: {} ns (timer slack {} ns)", p.shared.cpu, p.shared.threshold_ns.load(Relaxed), slack)
            })
            .collect();
        say!(
            "wake-up probe on CPU {} every {}; threshold ({how}) {}",
            cpulist::Display(&cpus),
            crate::units::ns(period_ns),
            thr.join(", ")
        );
    } else if !tui {
        for p in probes.iter() {
            let (floor, thr) = (p.shared.floor_ns.load(Relaxed), p.shared.threshold_ns.load(Relaxed));
            say!("watching CPU {}: {}", p.shared.cpu, rule.describe(floor, thr));
        }
    }

    say_traces(&args, &probes, threshold, target.is_some());
    let ui = match screen {
        Some(rx) if serve => {
            crate::serve::wait(&rx, started, args.duration);
            Ok(())
        }
        Some(rx) => {
            let found = crate::tui::found_threads(target.as_ref(), at_attach.as_ref());
            crate::tui::run(rx, collector.commands.clone(), &cpus, args.duration, &audit, !args.no_origins, found)
        }
        None => {
            wait_headless(started, args.duration);
            Ok(())
        }
    };

    let moved: Vec<u32> = probes.iter().filter(|p| p.shared.moved_off.load(Relaxed)).map(|p| p.shared.cpu).collect();
    let stuck = probes.stop(STOP_BOUND);
    let stats = collector.finish()?;
    ui?;

    let mut summary = Summary::from_stats(&stats).with_hints(&audit);
    if let Some(note) = exited.and_then(|e| e.note()) {
        summary.notes.push(note);
    }
    if target.is_some() {
        summary.mode = "passive";
        summary.notes.push(passive::HOST_PAUSES.to_string());
    }
    for cpu in stuck {
        let note = format!(
            "the probe on CPU {cpu} had not stopped {} ms after it was asked (starved by a task on its CPU?): the summary ends without it",
            STOP_BOUND.as_millis()
        );
        say!("{note}");
        summary.notes.push(note);
    }
    let offline = (!moved.is_empty()).then(|| {
        format!(
            "CPU {} went offline during the run: its probe stopped measuring there, and the run ended (bring it back online and run again)",
            cpulist::Display(&moved.iter().map(|&c| c as usize).collect::<Vec<_>>())
        )
    });
    if let Some(note) = &offline {
        summary.notes.push(note.clone());
    }
    if let Some((file, path)) = summary_file {
        summary.csv =
            args.csv.as_deref().map(|c| std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf()).to_string_lossy().into_owned());
        let mut w = std::io::BufWriter::new(file);
        summary
            .write_json(&mut w)
            .and_then(|()| w.flush())
            .map_err(|e| anyhow::anyhow!("cannot write the run summary {}: {e}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        summary.write_json(&mut out)?;
    } else {
        summary.write_text(&mut out)?;
    }
    out.flush()?;
    if let Some(d) = args.prometheus_linger {
        // The final figures were published as the collector finished.
        let until = Instant::now() + d;
        while Instant::now() < until && !lifecycle::stop_requested() {
            thread::sleep(Duration::from_millis(20));
        }
    }
    match offline {
        // The summary above covers the run up to then; the exit says it was cut short.
        Some(note) => Err(anyhow::anyhow!(note)),
        // Like a test that failed its bound: scripts tell it from a clean end.
        None if stats.stopped_on.is_some() => Ok(STOPPED_ON_STALL),
        None => Ok(0),
    }
}

/// The exit status of a run ended by --stop-above.
pub const STOPPED_ON_STALL: i32 = 3;

/// The longest --trace-keep: the recorder's memory cap bounds it anyway.
const MAX_KEEP_NS: u64 = 10_000_000_000;
const DEFAULT_KEEP_NS: u64 = 50_000_000;

/// The flight recorder and the recording, ready before anything spins (a
/// directory or file that cannot be written fails the run here).
fn traces(
    args: &WatchArgs,
    cpus: &[usize],
    passive: bool,
    tui: bool,
) -> Result<(Option<crate::trace::FlightRecorder>, Option<crate::trace::Whole>)> {
    let recorder = match &args.trace_dir {
        Some(dir) => {
            let keep_ns = args.trace_keep.unwrap_or(DEFAULT_KEEP_NS);
            if keep_ns > MAX_KEEP_NS {
                anyhow::bail!(
                    "--trace-keep {} is over 10s: traces are for the moments around a stall (use --record for a whole run)",
                    crate::units::ns(keep_ns)
                );
            }
            let opts = crate::trace::Options {
                dir: dir.clone(),
                keep_ns,
                above_ns: args.trace_above,
                max_per_minute: args.trace_max,
                format: args.trace_format,
                passive,
                announce: !tui,
            };
            Some(crate::trace::FlightRecorder::new(opts, cpus)?)
        }
        None => None,
    };
    let whole = match &args.record {
        Some(path) => Some(crate::trace::Whole::new(path, args.trace_format, cpus, passive, crate::clock::now_ns())?),
        None => None,
    };
    Ok((recorder, whole))
}

/// One line each for the flight recorder and the recording, once the
/// thresholds are known (the default --trace-above follows them).
fn say_traces(args: &WatchArgs, probes: &Probes, passive_threshold: u64, passive: bool) {
    if let Some(dir) = &args.trace_dir {
        let above = match args.trace_above {
            Some(a) => crate::units::ns(a),
            None if passive => format!(
                "{} ({} × the threshold)",
                crate::units::ns(crate::trace::ABOVE_THRESHOLDS * passive_threshold),
                crate::trace::ABOVE_THRESHOLDS
            ),
            None => {
                let each: Vec<String> = probes
                    .iter()
                    .map(|p| {
                        format!(
                            "{}: {}",
                            p.shared.cpu,
                            crate::units::ns(crate::trace::ABOVE_THRESHOLDS * p.shared.threshold_ns.load(Relaxed))
                        )
                    })
                    .collect();
                format!("{} × the threshold ({})", crate::trace::ABOVE_THRESHOLDS, each.join(", "))
            }
        };
        say!(
            "flight recorder: stalls at or above {above} traced into {} ({}, at most {} a minute); each CPU keeps its last {} of events, at most {:.0} MiB",
            crate::sanitize::visible(&dir.display().to_string()),
            args.trace_format.extension(),
            args.trace_max,
            crate::units::ns(args.trace_keep.unwrap_or(DEFAULT_KEEP_NS)),
            crate::trace::cap_mib()
        );
    }
    if let Some(path) = &args.record {
        say!(
            "recording the whole run into {} (at most {} MiB of events: a longer run is cut there)",
            crate::sanitize::visible(&path.display().to_string()),
            crate::trace::RECORD_CAP_BYTES >> 20
        );
    }
}

fn wait_for_thresholds(probes: &Probes) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && probes.iter().any(|p| p.shared.threshold_ns.load(Relaxed) == 0) {
        thread::sleep(Duration::from_millis(5));
    }
}

fn wait_headless(started: Instant, duration: Option<Duration>) {
    while !lifecycle::stop_requested() {
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
}
