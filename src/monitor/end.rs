//! The end of a run: the summary with what happened on the way (as the
//! source ended: threads gone, probes stuck, CPUs offline), written where it was asked for, and
//! the exit status.

use std::io::Write;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::Plan;
use crate::cli::WatchArgs;
use crate::collector::Finished;
use crate::lifecycle;
use crate::summary::Summary;

/// The exit status of a run ended by --stop-above, or one that went to
/// its end with a stall at or over --fail-above.
pub const STOPPED_ON_STALL: i32 = 3;

/// Writes the summary (to its file, then stdout), lingers for a last
/// scrape, and says how the run ended.
pub(super) fn finish(args: &WatchArgs, plan: &Plan, run: Finished, file: Option<PathBuf>) -> Result<i32> {
    let stopped = run.outcome.stopped_on.is_some() || run.outcome.broken.as_ref().is_some_and(|b| b.count > 0);
    let (mut summary, failure) = summarize(plan, run);
    // Printed whatever happens to its file: drawn from memory.
    let mut written = Ok(());
    if let Some(path) = file {
        summary.csv =
            args.csv.as_deref().map(|c| std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf()).to_string_lossy().into_owned());
        let mut json = Vec::new();
        summary.write_json(&mut json)?;
        // Whole or not at all: a temporary file renamed over it.
        written =
            crate::output::write_whole(&path, &json).map_err(|e| anyhow::anyhow!("cannot write the run summary {}: {e}", path.display()));
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
    let failure = match (failure, written) {
        (f, Ok(())) => f,
        (None, Err(e)) => Some(e.to_string()),
        (Some(f), Err(e)) => Some(format!("{f}; {e}")),
    };
    match failure {
        // The summary above covers the run up to then; the exit says it was cut short.
        Some(note) => Err(anyhow::anyhow!(note)),
        // Like a test that failed its bound: scripts tell it from a clean end.
        None if stopped => Ok(STOPPED_ON_STALL),
        None => Ok(0),
    }
}

/// The summary with its notes, and why the run fails though it measured
/// (a CPU gone offline, an output that could not be written), if it does.
fn summarize(plan: &Plan, run: Finished) -> (Summary, Option<String>) {
    let Finished { stats, outcome, ended } = run;
    let mut summary = Summary::from_stats(&stats, &outcome).with_hints(&plan.audit);
    summary.clocks = Some(crate::summary::Clocks { start: lifecycle::main_start_clocks(), end: crate::clock::ClockPair::now() });
    summary.notes.extend(ended.notes);
    let failed = outcome.failed.iter().map(|why| format!("the run ended early: {why}"));
    let failure: Vec<String> = ended.failure.into_iter().chain(failed).collect();
    summary.notes.extend(failure.iter().cloned());
    (summary, (!failure.is_empty()).then(|| failure.join("; ")))
}
