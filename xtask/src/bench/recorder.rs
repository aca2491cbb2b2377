//! Figure 4b: what the flight recorder (--trace-dir) costs the consumer:
//! its ns per event with the recorder on and off, runs alternated under
//! the same load, and the most memory one CPU's events took against the cap.

use std::fmt::Write as _;

use anyhow::Result;

use super::capacity::{storm, Load};
use super::measure::Ctx;
use super::util::{self, num, Spread};

pub struct Run {
    pub load: Load,
    pub on: bool,
    pub events_per_sec: f64,
    pub ns_per_event: f64,
    /// The recorder's figures (NaN when off).
    pub peak_bytes: f64,
    pub cap_bytes: f64,
    pub written: f64,
    pub largest_bytes: f64,
}

pub fn recorder(cx: &Ctx) -> Result<Vec<Run>> {
    let secs = if cx.quick { 1.5 } else { 3.0 };
    let dir = tempfile_dir()?;
    let mut runs = Vec::new();
    for load in [Load::PerfPipe, storm()] {
        for rep in 0..cx.reps(3) {
            // Alternated, so a drift of the host falls on both.
            let order = if rep % 2 == 0 { [false, true] } else { [true, false] };
            for on in order {
                let _bg = load.start(cx, secs as u64 + 10)?;
                let d = dir.to_string_lossy().into_owned();
                let extra: Vec<&str> = if on { vec!["--trace-dir", &d] } else { vec![] };
                let v = util::jw_run(&cx.bin, cx.watched, secs, &extra, None)?.json;
                let r = Run {
                    load,
                    on,
                    events_per_sec: num(&v, "/events_per_sec"),
                    ns_per_event: num(&v, "/overhead/consumer_ns_per_event"),
                    peak_bytes: num(&v, "/traces/peak_bytes"),
                    cap_bytes: num(&v, "/traces/cap_bytes"),
                    written: num(&v, "/traces/written"),
                    largest_bytes: num(&v, "/traces/largest_bytes"),
                };
                println!(
                    "bench:   {:<44} recorder {:<3} {:>9.0} events/s, consumer {:.0} ns/event",
                    load.describe(),
                    if on { "on" } else { "off" },
                    r.events_per_sec,
                    r.ns_per_event
                );
                runs.push(r);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(runs)
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("jw-bench-traces-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// The figure's section of BENCHMARKS.md.
pub fn section(o: &mut String, runs: &[Run], watched: usize) {
    let _ = writeln!(o, "\n### 4b. The flight recorder's cost\n");
    let _ = writeln!(
        o,
        "The runs of figure 4's method (3 s each, load on CPU {watched}) with `--trace-dir DIR` (default --trace-above: 10 × the \
         threshold, so up to 10 traces are written in each run) and without, alternated. Consumer ns/event is the collector \
         thread's CPU time over the events drained: with the recorder, each event's copy into its CPU's ring and each \
         trace's window copied out; building and encoding a trace is the writer thread's work, not counted here. Peak is \
         the most memory one CPU's kept events took (the cap is per CPU).\n"
    );
    let _ = writeln!(o, "| load | recorder | events/s | consumer ns/event | peak memory / cap | traces written | largest trace |\n|---|---|---|---|---|---|---|");
    let mut loads: Vec<String> = runs.iter().map(|r| r.load.describe()).collect();
    loads.dedup();
    for load in loads {
        for on in [false, true] {
            let rs: Vec<&Run> = runs.iter().filter(|r| r.load.describe() == load && r.on == on).collect();
            let s = |f: fn(&Run) -> f64| Spread::of(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
            let mib = |x: f64| x / (1024.0 * 1024.0);
            let (mem, written, largest) = if on {
                let peak = s(|r| r.peak_bytes);
                (
                    format!(
                        "{:.1} MiB [{:.1}–{:.1}] / {:.0} MiB",
                        mib(peak.median),
                        mib(peak.min),
                        mib(peak.max),
                        mib(s(|r| r.cap_bytes).max)
                    ),
                    s(|r| r.written).show(0),
                    format!("{:.0} KiB", s(|r| r.largest_bytes).max / 1024.0),
                )
            } else {
                ("–".into(), "–".into(), "–".into())
            };
            let _ = writeln!(
                o,
                "| {load} | {} | {} | {} | {mem} | {written} | {largest} |",
                if on { "on" } else { "off" },
                s(|r| r.events_per_sec).show(0),
                s(|r| r.ns_per_event).show(0)
            );
        }
    }
}
