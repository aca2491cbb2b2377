//! `jitterwatch --cpus N`: starts the probes and the collector, runs the
//! TUI or waits headless, then stops everything in order and prints the
//! summary. Every error path stops the probes and detaches BPF.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cli::WatchArgs;
use crate::export::CsvSink;
use crate::kallsyms::Kallsyms;
use crate::lifecycle::{self, PROBES_STOP};
use crate::probe::{Probe, ProbeConfig};
use crate::stats::Stats;
use crate::summary::Summary;
use crate::{checks, collector, cpulist, sys};

/// Set once the probes have stopped: the collector's cue for its last drain.
static PROBES_DONE: AtomicBool = AtomicBool::new(false);

pub fn run(args: WatchArgs) -> Result<i32> {
    let root = Path::new("/");
    let cpus = checks::watched_cpus(root, args.cpus.as_deref())?;
    checks::privileges()?;
    checks::btf(root)?;
    checks::no_other_probe(root, &cpus)?;
    let housekeeping = checks::housekeeping(&checks::online_cpus(root)?, &cpus);
    // Every thread spawned from here inherits this; probes re-pin themselves.
    sys::pin_to(&housekeeping).context("cannot pin jitterwatch to the unwatched CPUs")?;
    let tui = !args.no_tui && std::io::stdout().is_terminal();

    let csv = args.csv.as_deref().map(CsvSink::create).transpose()?;
    let kallsyms = Kallsyms::load(Path::new("/proc/kallsyms")).unwrap_or_else(|_| Kallsyms::empty());

    let cfg = ProbeConfig { threshold_ns: args.threshold, rt_prio: args.rt };
    let mut probes = Vec::new();
    for &c in &cpus {
        match Probe::spawn(c as u32, cfg, &PROBES_STOP) {
            Ok(p) => probes.push(p),
            Err(e) => {
                abort(probes);
                return Err(e);
            }
        }
    }

    let publish = Arc::new(Mutex::new(Stats::new(&cpus, 0)));
    let (ready_tx, ready_rx) = mpsc::channel();
    let collector = collector::spawn(
        collector::Config { cpus: cpus.clone(), housekeeping, csv, bpf_stats: args.bpf_stats, live: tui },
        probes.iter().map(|p| p.shared.clone()).collect(),
        kallsyms,
        ready_tx,
        publish.clone(),
        &PROBES_DONE,
    );
    let missing = match ready_rx.recv() {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            abort(probes);
            let _ = collector.join();
            return Err(e);
        }
        Err(_) => {
            abort(probes);
            return Err(collector
                .join()
                .map_err(|_| anyhow::anyhow!("the collector thread panicked"))?
                .err()
                .unwrap_or_else(|| anyhow::anyhow!("the collector stopped early")));
        }
    };
    if !missing.is_empty() {
        eprintln!("jitterwatch: not traced, this kernel lacks: {}", missing.join(", "));
    }
    for p in &mut probes {
        p.start();
    }
    let started = Instant::now();
    wait_for_thresholds(&probes);
    if !tui {
        let thr: Vec<String> = probes
            .iter()
            .map(|p| {
                format!("{}: {} ns (loop floor {} ns)", p.shared.cpu, p.shared.threshold_ns.load(Relaxed), p.shared.floor_ns.load(Relaxed))
            })
            .collect();
        eprintln!("jitterwatch: watching CPU {}; threshold {}", cpulist::Display(&cpus), thr.join(", "));
    }

    let ui: Result<()> = if tui {
        crate::tui::run(&publish, &cpus, args.duration)
    } else {
        wait_headless(started, args.duration);
        Ok(())
    };

    PROBES_STOP.store(true, Relaxed);
    for p in probes {
        p.join();
    }
    PROBES_DONE.store(true, Relaxed);
    let stats = collector.join().map_err(|_| anyhow::anyhow!("the collector thread panicked"))??;
    ui?;

    let summary = Summary::from_stats(&stats).with_hints(&crate::doctor::audit(root, &cpus));
    let mut out = std::io::stdout().lock();
    if args.json {
        summary.write_json(&mut out)?;
    } else {
        summary.write_text(&mut out)?;
    }
    out.flush()?;
    Ok(0)
}

/// Error path: the probes leave (unstarted ones never measure).
fn abort(probes: Vec<Probe>) {
    PROBES_STOP.store(true, Relaxed);
    for p in probes {
        p.join();
    }
}

fn wait_for_thresholds(probes: &[Probe]) {
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
