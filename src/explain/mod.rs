//! `jitterwatch explain OPS RUN.csv…`: which stalls made each slow
//! operation slow. OPS is the application's own log of its operations
//! (ops.rs); each RUN a CSV jitterwatch wrote, its summary beside it
//! (stalls.rs). The operations are put on the runs' clock (here), the
//! slow ones matched to the stalls that overlap them (overlap.rs,
//! model.rs), and the answer written as text, JSON (write.rs) and a chart
//! (chart.rs). docs/explain.md says how to read it.

mod chart;
mod model;
pub mod ops;
mod overlap;
mod stalls;
#[cfg(test)]
mod tests;
mod write;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::output::Ident;
use crate::sanitize::visible;
use crate::summary::Clocks;

pub use model::SLOWEST_PCT;

/// The clock the operations log is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogClock {
    /// CLOCK_MONOTONIC, the runs' own (sockperf --no-rdtsc, clock_gettime(CLOCK_MONOTONIC), time.monotonic_ns())
    Monotonic,
    /// CLOCK_REALTIME, the wall clock (gettimeofday, date +%s.%N): put on the runs' clock by their summaries
    Realtime,
}

impl LogClock {
    fn name(self) -> &'static str {
        match self {
            LogClock::Monotonic => "CLOCK_MONOTONIC",
            LogClock::Realtime => "CLOCK_REALTIME",
        }
    }
}

#[derive(Debug)]
pub struct Options {
    pub ops: PathBuf,
    pub runs: Vec<PathBuf>,
    pub columns: ops::Columns,
    pub clock: LogClock,
    pub above_ns: Option<u64>,
    pub top: usize,
    pub json: bool,
    pub svg: Option<PathBuf>,
    pub png: Option<PathBuf>,
}

/// What the writers need: the log's name and shape, what was found, the
/// stalls it points into, and the notes.
pub struct Report {
    pub ops_file: String,
    pub format: &'static str,
    pub clock: &'static str,
    pub operations: u64,
    pub chosen: String,
    pub found: model::Found,
    pub stalls: stalls::Stalls,
    pub notes: Vec<String>,
    pub top: usize,
}

pub fn run(o: Options, out: &mut dyn Write) -> Result<i32> {
    // Buffered: a JSON of a million operations is tens of millions of lines.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let code = answer(o, &mut out)?;
    out.flush()?;
    Ok(code)
}

fn answer(o: Options, out: &mut dyn Write) -> Result<i32> {
    check_outputs(&o)?;
    let log = ops::read(&o.ops, &o.columns)?;
    let mut stalls = stalls::read(&o.runs)?;
    let mut notes = log.notes;
    notes.append(&mut stalls.notes);
    let ops_file = visible(&o.ops.display().to_string()).into_owned();
    let mut ops = log.ops;
    if o.clock == LogClock::Realtime {
        let Some(c) = stalls.windows.iter().find_map(|w| w.clocks) else {
            bail!("--clock realtime needs the runs' clocks, which their summaries do not hold (no NAME.summary.json beside the CSV, or one written before jitterwatch read both clocks): log on CLOCK_MONOTONIC instead");
        };
        let moved = (c.end.offset_ns() - c.start.offset_ns()).unsigned_abs();
        if moved > 1_000_000 {
            notes.push(format!(
                "the wall clock moved {} against CLOCK_MONOTONIC during the run (NTP?): times placed by the clocks at its two ends",
                crate::units::ns(moved as u64)
            ));
        }
        ops.iter_mut().for_each(|op| *op = ops::Op { start_ns: to_monotonic(op.start_ns, &c), end_ns: to_monotonic(op.end_ns, &c) });
    }
    let slow = match o.above_ns {
        Some(ns) => model::Slow::Above(ns),
        None => model::Slow::SlowestPct(SLOWEST_PCT),
    };
    let Some(found) = model::find(&ops, &mut stalls, slow) else {
        bail!("{}", no_overlap(&ops_file, &ops, &stalls, o.clock));
    };
    let chosen = match o.above_ns {
        Some(ns) => format!("at or over --above {}", crate::units::ns(ns)),
        None => format!("the slowest {SLOWEST_PCT}%, at or over {}", crate::units::ns(found.above_ns)),
    };
    let report = Report {
        ops_file,
        format: log.format,
        clock: o.clock.name(),
        operations: ops.len() as u64,
        chosen,
        found,
        stalls,
        notes,
        top: o.top,
    };
    if o.json {
        write::json(&report, out)?;
    } else {
        write::text(&report, out)?;
    }
    if let Some(p) = &o.svg {
        chart::svg(&report, p)?;
    }
    if let Some(p) = &o.png {
        chart::png(&report, p)?;
    }
    Ok(0)
}

/// A wall-clock time on the runs' CLOCK_MONOTONIC: less the difference of
/// the two clocks, which moves only if the wall clock was set during the
/// run (then taken between its two readings in proportion).
pub fn to_monotonic(t: u64, c: &Clocks) -> u64 {
    let (s, e) = (c.start, c.end);
    let (os, oe) = (s.offset_ns(), e.offset_ns());
    let off = if e.realtime_ns <= s.realtime_ns || t <= s.realtime_ns {
        os
    } else if t >= e.realtime_ns {
        oe
    } else {
        os + (oe - os) * (t - s.realtime_ns) as i128 / (e.realtime_ns - s.realtime_ns) as i128
    };
    (t as i128 - off).max(0) as u64
}

/// The one line for a log that lies outside every run.
fn no_overlap(ops_file: &str, ops: &[ops::Op], stalls: &stalls::Stalls, clock: LogClock) -> String {
    let s = |ns: u64| format!("{:.3}", ns as f64 / 1e9);
    let (first, last) = (ops.iter().map(|o| o.start_ns).min().unwrap_or(0), ops.iter().map(|o| o.end_ns).max().unwrap_or(0));
    let (a, b) = (stalls.windows.iter().map(|w| w.start_ns).min().unwrap_or(0), stalls.windows.iter().map(|w| w.end_ns).max().unwrap_or(0));
    let hint = match clock {
        LogClock::Monotonic => {
            "sockperf: run its client with --no-rdtsc (its default clock counts from its own start); a wall-clock log: --clock realtime"
        }
        LogClock::Realtime => "is the log on CLOCK_MONOTONIC? then leave out --clock realtime",
    };
    format!(
        "no operation of {ops_file} lies in the runs: they span {} s to {} s on CLOCK_MONOTONIC, the runs {} s to {} s ({hint})",
        s(first),
        s(last),
        s(a),
        s(b)
    )
}

/// Refuses a chart that would overwrite an input, or two charts to one
/// file, before anything is read or written.
fn check_outputs(o: &Options) -> Result<()> {
    let mut inputs: Vec<(Ident, String)> = vec![(Ident::of(&o.ops), "the operations log".to_string())];
    for r in &o.runs {
        inputs.push((Ident::of(r), "a run's CSV".to_string()));
        inputs.push((Ident::of(&crate::summary::sidecar(r)), "a run's summary".to_string()));
    }
    let charts: Vec<(&str, &PathBuf)> =
        [("--svg", &o.svg), ("--png", &o.png)].into_iter().filter_map(|(k, p)| Some((k, p.as_ref()?))).collect();
    for (i, &(opt, p)) in charts.iter().enumerate() {
        let shown = visible(&p.display().to_string()).into_owned();
        let id = Ident::of(p);
        if let Some((_, what)) = inputs.iter().find(|(k, _)| k.same(&id)) {
            bail!("cannot write the chart {shown}: it is {what} (refused: the chart would replace it)");
        }
        if charts[..i].iter().any(|(_, q)| Ident::of(q).same(&id)) {
            bail!("--svg and {opt} name one file, {shown}: give each its own");
        }
    }
    Ok(())
}
