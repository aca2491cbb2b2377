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
         nearly every slot), an IPI's those that begin within 60 µs of a send. Three runs, alternated, {} times: nothing \
         attached ({} s); `jitterwatch --comm jwgaps --cpus {w}` (passive mode, every program) with \
         `JITTERWATCH_BPF_FLOOR=1` (every program returns at once: what the kernel's hooks and the BPF dispatch cost \
         alone; {} s); and the paired run ({} s): jitterwatch watching while the loop itself turns jitterwatch's \
         `watched[{w}]` (its .bss, mmapped by map id) off and on every 50 ms, from user space on CPU {w}, so each \
         interruption is seen whole or not at all. In the paired run's off windows every program is attached and \
         returns at its first test; in its on windows they do their work: the difference, within one run and \
         50 ms apart, is what our programs' work adds, free of the host's drift from run to run, which is larger \
         than the figure itself here. The hooks' dispatch is read from the separate runs only (the floor less \
         nothing attached), with that drift. Each run's gaps of a kind give their 25th percentile and median; the \
         table has the median of the runs'. `self` is jitterwatch's own time per interruption by its programs' clock \
         reads, from the paired runs' CSVs (the `self: jitterwatch` cause of the rows that are one tick or one IPI).\n",
        p.reps,
        p.secs,
        p.secs,
        2.0 * p.secs
    );
    let _ = writeln!(o, "| interruption | condition | p25 (ns) | p50 (ns) | gaps per run | added at p50 |\n|---|---|---|---|---|---|");
    let med = |v: &[f64]| Spread::of(v).median;
    for (kind, pick) in [("a tick with one hrtimer", 0usize), ("a function-call IPI with one call", 1)] {
        let q = |c: &Condition, k: usize| med(if pick == 0 { &c.tick[k] } else { &c.ipi[k] });
        let seen = |c: &Condition| med(if pick == 0 { &c.ticks_seen } else { &c.ipis_seen });
        let base = q(&p.none, 1);
        let rows = [
            ("nothing attached", &p.none, None),
            ("the hooks alone", &p.floor, Some(base)),
            ("paired run, not watched (hooks attached)", &p.off, None),
            ("paired run, watched", &p.watched, Some(q(&p.off, 1))),
        ];
        for (name, c, against) in rows {
            let added = against.map_or(String::new(), |b| format!("{:+.0} ns", q(c, 1) - b));
            let _ = writeln!(o, "| {kind} | {name} | {:.0} | {:.0} | {:.0} | {added} |", q(c, 0), q(c, 1), seen(c));
        }
    }
    let paired = |v: &[Vec<f64>; 2]| format!("{} at p25, {} at p50", Spread::of(&v[0]).show(0), Spread::of(&v[1]).show(0));
    let _ = writeln!(
        o,
        "\nWhat our programs' work adds, each paired run's watched less not watched, median [min–max] over the runs: \
         a tick {} ns; an IPI {} ns.",
        paired(&p.paired.tick),
        paired(&p.paired.ipi)
    );
    let _ = writeln!(
        o,
        "\njitterwatch's own time by its clock reads (`self`): {} ns per tick, {} ns per IPI (median over the paired runs' rows).",
        p.self_tick.show(0),
        p.self_ipi.show(0)
    );
}
