//! Figure 7: many CPUs, by replay. `jitterwatch replay-bench --cpus N`
//! replays synthetic per-CPU streams (ticks, IRQs, softirqs, work items,
//! IPIs, switch storms, a probe gap per tick) through the real decoder,
//! engine and aggregates in one thread, pinned to the housekeeping CPU, and
//! prints the events per second of its CPU time and the memory it grew by
//! per CPU. This machine has two CPUs; users have 64 to 256.

use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;

use super::measure::Ctx;
use super::util::{self, Spread};

/// The sizes replayed.
pub const SIZES: [usize; 4] = [1, 8, 64, 256];

#[derive(Debug, Clone)]
pub struct Row {
    pub cpus: usize,
    pub events: f64,
    /// Events per second of the consumer thread's CPU time.
    pub per_core: Spread,
    /// Bytes the engine and aggregates grew by, per watched CPU.
    pub mem_per_cpu: Spread,
    /// The stream, as replay-bench describes it: events and gaps per CPU
    /// per second, switches per storm.
    pub stream: (f64, f64, f64),
}

pub fn replay(cx: &Ctx) -> Result<Vec<Row>> {
    let reps = cx.reps(3);
    let mut rows = Vec::new();
    for n in SIZES {
        // At least 100k events per CPU, so each CPU's window and aggregates
        // reach their steady state.
        let events = (n as u64 * 100_000).max(if cx.quick { 2_000_000 } else { 10_000_000 });
        let (mut rate, mut mem, mut seen, mut stream) = (vec![], vec![], 0.0, (f64::NAN, f64::NAN, f64::NAN));
        for _ in 0..reps {
            let out = util::output(Command::new("taskset").args(["-c", &cx.house.to_string()]).arg(&cx.bin).args([
                "replay-bench",
                "--cpus",
                &n.to_string(),
                "--events",
                &events.to_string(),
            ]))?;
            let v: Value = serde_json::from_str(out.trim()).with_context(|| format!("replay-bench printed {out:?}"))?;
            rate.push(util::num(&v, "/events_per_core_sec"));
            mem.push(util::num(&v, "/memory_per_cpu_bytes"));
            seen = util::num(&v, "/events");
            stream =
                (util::num(&v, "/stream_events_per_cpu_sec"), util::num(&v, "/stream_gaps_per_cpu_sec"), util::num(&v, "/storm_switches"));
        }
        println!(
            "bench:   {n} CPUs: {:.2} M events/s per core, {:.0} KiB per CPU",
            Spread::of(&rate).median / 1e6,
            Spread::of(&mem).median / 1024.0
        );
        rows.push(Row { cpus: n, events: seen, per_core: Spread::of(&rate), mem_per_cpu: Spread::of(&mem), stream });
    }
    Ok(rows)
}

/// The figure's section of BENCHMARKS.md.
pub fn markdown(rows: &[Row], house: usize) -> String {
    let mut o = String::from("\n## 7. Many CPUs, by replay\n\n");
    let (rate, gaps, storm) = rows.first().map_or((f64::NAN, f64::NAN, f64::NAN), |r| r.stream);
    o += &format!(
        "`jitterwatch replay-bench --cpus N` (hidden; src/replay.rs), pinned to CPU {house}: each CPU's stream repeats a \
         10 ms cycle of {} events/s (per ms: the tick as LOCAL_TIMER, its hrtimer and the TIMER softirq; a \
         device IRQ and NET_RX; a call-function IPI with its csd callback; a switch to a kworker running \
         `vmstat_update` and back; in one ms of ten, a storm of {storm} switches), encoded as the BPF programs write \
         records and decoded by the real decoder, with a probe gap over each tick and each kworker slice ({} \
         gaps/s per CPU), through the real engine, attribution and aggregates (no CSV). Events per second of \
         the thread's CPU time; memory is VmHWM after the replay less VmRSS before the engine was built (the \
         replayed input excluded), per CPU. At 1 CPU the process's fixed part dominates, so the memory target is \
         judged at 64 and 256.\n\n",
        util::grouped(rate),
        util::grouped(gaps)
    );
    o += "| CPUs | events replayed | events/s per core (M) | memory per CPU (KiB) |\n|---|---|---|---|\n";
    for r in rows {
        let m = Spread {
            n: r.mem_per_cpu.n,
            median: r.mem_per_cpu.median / 1024.0,
            min: r.mem_per_cpu.min / 1024.0,
            max: r.mem_per_cpu.max / 1024.0,
        };
        let e = Spread { n: r.per_core.n, median: r.per_core.median / 1e6, min: r.per_core.min / 1e6, max: r.per_core.max / 1e6 };
        o += &format!("| {} | {} | {} | {} |\n", r.cpus, util::grouped(r.events), e.show(2), m.show(0));
    }
    o += "\nNot measured here: the cost of reserving in one ring buffer from many CPUs at once (this machine has two; \
          figure 4's capacity is one CPU's storm). One buffer serves every CPU today; per-CPU buffers wait for a \
          machine where that contention can be measured.\n";
    o
}
