//! Section 3: the BPF programs' run time per event on the watched CPU, and
//! with the load on the other.

use std::fmt::Write;

use crate::bench::measure::BpfCost;
use crate::bench::util::{grouped, Grouped};

/// Section 3, with the load on the watched CPU `w`, then on CPU `h`.
pub fn section(o: &mut String, b: &BpfCost, w: usize, h: usize) {
    let _ = writeln!(o, "\n## 3. Cost on a watched CPU: BPF run time per event\n");
    let _ = writeln!(
        o,
        "`jitterwatch --cpus {w} --bpf-stats --duration {}s` while `taskset -c {w} perf bench sched pipe -T` runs \
         on the watched CPU ({} events/s), {} repetitions; then the same with the load on CPU {h} instead \
         (so most runs take the early return for an unwatched CPU). `ns_per_run` is the kernel's \
         run_time_ns / run_cnt (`kernel.bpf_stats_enabled`, which itself adds two clock reads per run). \
         Counts include runs on every CPU.\n",
        b.secs,
        Grouped(b.watched_events_per_sec),
        b.reps
    );
    let _ = writeln!(
        o,
        "| program | runs (load on {w}) | ns/run (load on {w}) | runs (load on {h}) | ns/run (load on {h}) |\n|---|---|---|---|---|"
    );
    for p in &b.watched {
        let other = b.unwatched.iter().find(|q| q.name == p.name);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            p.name,
            grouped(p.run_cnt.median),
            p.ns_per_run.show(0),
            other.map_or("".into(), |q| grouped(q.run_cnt.median)),
            other.map_or("".into(), |q| q.ns_per_run.show(0))
        );
    }

    let inside: Vec<String> = b
        .inside_irq()
        .into_iter()
        .map(|(what, ns)| format!("{what}: {}", ns.map_or("not measured (a program did not run)".to_string(), |n| format!("{n:.0} ns"))))
        .collect();
    let (plain, stacked) = b.switch_ns();
    let show = |x: Option<f64>| x.map_or("not measured".to_string(), |n| format!("{n:.0} ns/run"));
    let _ = writeln!(
        o,
        "\n`--stacks-above` (the same load on CPU {w}, `--stacks-above 1ns`, so every switch out of it takes a kernel stack; \
         by default only a run of DUR or more does): the switch program {} with a stack at each switch, against {} without{}.",
        show(stacked),
        show(plain),
        match (plain, stacked) {
            (Some(p), Some(s)) => format!(": one stack costs {:.0} ns", s - p),
            _ => String::new(),
        }
    );
    let _ = writeln!(
        o,
        "\nWhat our programs add inside one interrupt on the watched CPU (the medians above, summed over the programs it \
         runs; the stats' own clock reads included): {}.",
        inside.join("; ")
    );
}
