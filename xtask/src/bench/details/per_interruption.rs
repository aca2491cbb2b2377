//! Section 3b: what one tick and one function-call IPI of the watched CPU
//! cost with jitterwatch attached, seen by a plain spin loop, beside the
//! kernel's hooks alone and nothing attached.

use std::fmt::Write;

use crate::bench::interruption::{Condition, PerInterruption};
use crate::bench::spread::Spread;

/// Section 3b of `p` (None: not measured), watched CPU `w`, housekeeping `h`.
pub fn section(o: &mut String, p: Option<&PerInterruption>, w: usize, h: usize) {
    let _ = writeln!(o, "\n### 3b. Per interruption, end to end\n");
    let Some(p) = p else {
        let _ = writeln!(o, "Not measured.");
        return;
    };
    let _ = writeln!(
        o,
        "A C loop spins on CPU {w} reading CLOCK_MONOTONIC and keeps every gap of 300 ns or more; a thread of the same \
         process on CPU {h} sends it a function-call IPI every 2 ms (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: one \
         cross-CPU call) and keeps when. A tick's gaps are those on the tick's period (the comb of 1/HZ that holds a gap in \
         nearly every slot), an IPI's those that begin within 60 µs of a send. Three conditions, alternated, {} runs of {} s \
         each: nothing attached; `jitterwatch --comm jwgaps --cpus {w}` (passive mode, every program) with \
         `JITTERWATCH_BPF_FLOOR=1` (every program returns at once: what the kernel's hooks and the BPF dispatch cost \
         alone); the same without it. Each run's gaps of a kind give their 25th percentile and median; the table has \
         the median of the runs' (the host adds noise of its own, so the low percentiles read the interruption \
         itself best). `self` is jitterwatch's own time per interruption by its programs' clock reads, from the \
         watched runs' CSVs (the `self: jitterwatch` cause of the rows that are one tick or one IPI).\n",
        p.reps, p.secs
    );
    let _ = writeln!(o, "| interruption | condition | p25 (ns) | p50 (ns) | gaps per run | added at p50 |\n|---|---|---|---|---|---|");
    let med = |v: &[f64]| Spread::of(v).median;
    for (kind, pick) in [("a tick with one hrtimer", 0usize), ("a function-call IPI with one call", 1)] {
        let q = |c: &Condition, k: usize| med(if pick == 0 { &c.tick[k] } else { &c.ipi[k] });
        let seen = |c: &Condition| med(if pick == 0 { &c.ticks_seen } else { &c.ipis_seen });
        let base = q(&p.none, 1);
        for (name, c) in [("nothing attached", &p.none), ("the hooks alone", &p.floor), ("jitterwatch", &p.watched)] {
            let added = if std::ptr::eq(c, &p.none) { String::new() } else { format!("{:+.0} ns", q(c, 1) - base) };
            let _ = writeln!(o, "| {kind} | {name} | {:.0} | {:.0} | {:.0} | {added} |", q(c, 0), q(c, 1), seen(c));
        }
    }
    let _ = writeln!(
        o,
        "\njitterwatch's own time by its clock reads (`self`): {} ns per tick, {} ns per IPI (median over the watched runs' rows).",
        p.self_tick.show(0),
        p.self_ipi.show(0)
    );
}
