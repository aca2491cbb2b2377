//! Section 1: the probe's loop floor and periods beside a bare C
//! clock_gettime loop's, and the same with `--clock tsc` where the TSC is
//! usable.

use std::fmt::Write;

use super::START;
use crate::bench::measure::Floor;

/// Section 1, its heading first: the details start here.
pub fn section(o: &mut String, f: &Floor, w: usize) {
    let _ = writeln!(o, "{START}\n");
    let _ = writeln!(
        o,
        "A minimal C loop (`clock_gettime(CLOCK_MONOTONIC)` in a tight loop, gcc -O2, `taskset -c {w}`) \
         runs {} s and reports its floor, found as the probe finds its own (over its first 20 ms and at least \
         1,048,576 turns, the 5th percentile of 64-turn blocks' mean turn: docs/threshold.md), its mean period, \
         and its mean period between hiccups (deltas ≥ 8 × the floor left out); \
         `jitterwatch --cpus {w} --duration {}s --threshold auto --json` (the same 8 × floor rule) runs next to it, in alternating order, {} times, and reports \
         the same as `cpus[].loop_floor_ns`, `loop_mean_ns` and `loop_quiet_mean_ns`. The plain mean includes every \
         host vCPU pause, and those vary from one second to the next on a VM, so it mostly measures the host; \
         the period between hiccups is the loop's own speed, and with the floor it is what the target is \
         judged on.\n",
        f.secs, f.secs, f.reps
    );
    let _ = writeln!(o, "| | C loop (limit) | jitterwatch probe | ratio |\n|---|---|---|---|");
    let _ = writeln!(o, "| loop floor, ns | {} | {} | {} |", f.c_floor.show(1), f.jw_floor.show(0), f.ratio_floor.show(3));
    let _ = writeln!(o, "| mean period between hiccups, ns | {} | {} | {} |", f.c_quiet.show(2), f.jw_quiet.show(2), f.ratio_quiet.show(3));
    let _ = writeln!(o, "| mean period with the pauses, ns | {} | {} | {} |", f.c_mean.show(2), f.jw_mean.show(2), f.ratio_mean.show(3));
    let _ = writeln!(o, "| auto threshold, ns | | {} | |", f.threshold.show(0));
    match &f.tsc {
        Some(t) => {
            let _ = writeln!(
                o,
                "\nWith `--clock tsc` (a third run in each repetition; the loop reads RDTSC, converted to CLOCK_MONOTONIC \
                 on its cold paths), against the same C loop:\n\n\
                 | | C loop | jitterwatch, TSC | ratio |\n|---|---|---|---|\n\
                 | loop floor, ns | {} | {} | {} |\n\
                 | mean period between hiccups, ns | {} | {} | {} |\n\
                 | auto threshold, ns | | {} | |\n\
                 | TSC − CLOCK_MONOTONIC at the end, ns | | {} | |",
                f.c_floor.show(1),
                t.floor.show(0),
                t.ratio_floor.show(3),
                f.c_quiet.show(2),
                t.quiet.show(2),
                t.ratio_quiet.show(3),
                t.threshold.show(0),
                t.drift.show(0)
            );
        }
        None => {
            let _ = writeln!(o, "\n`--clock tsc`: not measured (jitterwatch fell back to the vDSO clock on this machine).");
        }
    }
}
