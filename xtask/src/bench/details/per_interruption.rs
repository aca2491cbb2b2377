//! Section 3b: what one interruption of each kind (tick, function-call IPI,
//! device IRQ, reschedule IPI, workqueue item; and the IPI again with warm
//! caches) of the watched CPU costs
//! with jitterwatch attached, seen by a plain spin loop, beside the
//! kernel's hooks alone and nothing attached.

use std::fmt::Write;

use crate::bench::interruption::{Kind, PerInterruption};
use crate::bench::spread::Spread;

/// Section 3b of `p` (None: not measured), watched CPU `w`, housekeeping `h`.
pub fn section(o: &mut String, p: Option<&PerInterruption>, w: usize, h: usize) {
    let _ = writeln!(o, "\n### 3b. Per interruption, end to end\n");
    let Some(p) = p else {
        let _ = writeln!(o, "Not measured.");
        return;
    };
    let routed = match &p.routed {
        Ok(irqs) => format!(
            "the NIC's interrupts that counted a burst of such datagrams, IRQ {}, routed to CPU {w} for the figure and put back after",
            irqs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
        Err(why) => format!("not measured here: {why}"),
    };
    let _ = writeln!(
        o,
        "A C loop spins on CPU {w} reading CLOCK_MONOTONIC and keeps every gap of 300 ns or more; a thread of the same \
         process on CPU {h} makes one interruption of CPU {w} every 1 ms, in turn, and keeps when: a function-call IPI \
         (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: one cross-CPU call); a UDP datagram to the default gateway's discard port, whose send completion the NIC signals \
         with an interrupt on CPU {w} and the NET_RX softirq reaps ({routed}); a reschedule IPI (a \
         signal to the loop, which runs on CPU {w}: the kernel kicks it with a reschedule IPI and the loop runs an empty \
         handler, without a switch); a workqueue item (a write to /proc/sys/vm/stat_refresh: a kworker \
         preempts the loop to run refresh_vm_stats, two switches and the item); and the function-call IPI twice, the \
         second sent 20 µs after the first returned (membarrier waits for the call to end on CPU {w}): the second finds \
         the lines the interruption and our programs touch still in CPU {w}'s caches, where every other kind finds them \
         as a millisecond of spinning and the host's pauses left them (no target: it says how much of the cold IPI's \
         cost is its cold caches; the first's gap is no kind's). A tick's gaps are those at its instants, \
         by the kernel's books (the phase from its tick timer's expiry in /proc/timer_list, read during the run; the \
         period from CPU {w}'s LOC count over the run, the nearest HZ), that begin within 10 µs of one or last past it \
         (a host pause the tick merged with); where the books say nothing, the comb of 1/HZ that holds a gap in nearly \
         every slot (the books gave the tick's instants in {} of {} runs); each send's, the longest gap that \
         begins within 60 µs of it (the IPIs, the kworker) or 400 µs (the NIC's completion, 50–150 µs after its send \
         here): the host's short pauses fall in the same windows. A send whose window also holds a tick or another \
         kind's window gives none. Three runs, alternated, {} times: nothing attached ({} s); `jitterwatch --comm jwgaps --cpus {w}` \
         (passive mode, every program) with `JITTERWATCH_BPF_FLOOR=1` (every program returns at once: what the kernel's \
         hooks and the BPF dispatch cost alone; {} s); and the paired run ({} s): jitterwatch loads its programs and \
         attaches none (`JITTERWATCH_BPF_UNATTACHED`), the loop links each of them itself ({} programs, by id with \
         `BPF_RAW_TRACEPOINT_OPEN`: the only links) and cycles through three windows of 50 ms, from user space on CPU \
         {w}, so each interruption is in one window whole: jitterwatch's `watched[{w}]` (its .bss, mmapped by map id) \
         on; off; and the links closed, opened again as the window ends (the system calls are no gap of the loop's). \
         Gaps that begin within {} ms of a window's opening are left out (the links' opening and closing leave work on \
         the CPU), within {} ms of the third's (what the kernel frees after the links closed runs on the CPU later). In the off windows every program is attached and returns at its first test; in the on windows they \
         do their work: the difference, within one run and 50 ms apart, is what our programs' work adds, free of the \
         host's drift from run to run, which is larger than the figure itself here. The off window less the third is \
         what the hooks alone add, returning at once, within the run too; the floor less nothing attached says the \
         same across runs, with that drift. (Up to v7 the third window opened a second link to each program instead: a \
         tracepoint with one probe calls it directly, with two through an iterator's indirect calls, so that figure \
         also held two indirect calls per tracepoint.) Each run's \
         gaps of a kind give their 25th percentile and median; the table has the median of the runs'. `self` is \
         jitterwatch's own time per interruption by its programs' clock reads, from the paired runs' CSVs (the `self: \
         jitterwatch` cause of the rows that are one interruption of the kind).\n",
        p.tick_books[0],
        p.tick_books[1],
        p.reps,
        p.secs,
        p.secs,
        3.0 * p.secs,
        Spread::of(&p.programs).show(0),
        crate::bench::interruption::SETTLE_NS / 1_000_000,
        crate::bench::interruption::SETTLE_UNATTACHED_NS / 1_000_000
    );
    let _ = writeln!(o, "| interruption | condition | p25 (ns) | p50 (ns) | gaps per run | added at p50 |\n|---|---|---|---|---|---|");
    let med = |v: &[f64]| Spread::of(v).median;
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        let q = |c: &crate::bench::interruption::Condition, i: usize| med(&c.q[k][i]);
        let base = q(&p.none, 1);
        let rows = [
            ("nothing attached", &p.none, None),
            ("the hooks alone", &p.floor, Some(base)),
            ("paired run, no hook (the loop's links closed)", &p.bare, None),
            ("paired run, not watched (hooks attached)", &p.off, Some(q(&p.bare, 1))),
            ("paired run, watched", &p.watched, Some(q(&p.off, 1))),
        ];
        for (name, c, against) in rows {
            let ns = |x: f64| if x.is_finite() { format!("{x:.0}") } else { "not measured".to_string() };
            let added =
                against
                    .map_or(String::new(), |b| if (q(c, 1) - b).is_finite() { format!("{:+.0} ns", q(c, 1) - b) } else { String::new() });
            let _ = writeln!(o, "| {} | {name} | {} | {} | {:.0} | {added} |", kind.describe(), ns(q(c, 0)), ns(q(c, 1)), med(&c.seen[k]));
        }
    }
    let show = |v: &Spread| if v.n == 0 { "not measured".to_string() } else { v.show(0) };
    let _ = writeln!(
        o,
        "\n| interruption | our programs' work, paired: p25 (ns) | p50 (ns) | the hooks alone, paired against no hook: p50 (ns) | `self` (ns) | charged to the kernel beyond no hook (ns, % of no hook) | `self`, % of what watching adds | our work ÷ the hooks alone |\n|---|---|---|---|---|---|---|---|"
    );
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        let [p25, p50] = &p.paired.0[k];
        let hooks = Spread::of(&p.hooks.0[k][1]);
        // The same figures the verdict reads (medians of the runs').
        let figure = |c: &str| {
            let m = |v: &[f64]| Spread::of(v).value();
            match c {
                "watched" => m(&p.watched.q[k][1]),
                "bare" => m(&p.bare.q[k][1]),
                "paired" => m(p50),
                "hooks" => m(&p.hooks.0[k][1]),
                _ => None,
            }
        };
        let own = p.own[k].value();
        let [kernel, share, work] = crate::bench::verdicts::per_interruption_shares(figure, own);
        let beyond = figure("watched").zip(figure("bare")).zip(own).map(|((w, b), s)| w - s - b);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.describe(),
            show(&Spread::of(p25)),
            show(&Spread::of(p50)),
            show(&hooks),
            show(&p.own[k]),
            beyond.zip(kernel).map_or("not measured".to_string(), |(ns, pct)| format!("{ns:+.0} ({pct:+.1}%)")),
            share.map_or("not measured".to_string(), |s| format!("{s:.0}%")),
            work.map_or("not measured".to_string(), |r| format!("{r:.2}")),
        );
    }
    let _ = writeln!(
        o,
        "\nThe paired columns are each paired run's watched window less its not-watched one (the hooks': its \
         not-watched window less the one with no hook), median [min–max] over the runs; `self` is the median over the paired runs' rows of that kind. \
         The last three are computed from the medians of the runs' figures, as the verdict reads them (issue 64's targets: \
         charged to the kernel at most 5% over no hook, `self` at least 80% of what watching adds, our work at most the hooks alone): \
         charged to the kernel beyond no hook is the paired run's watched p50 less `self`, less its no-hook p50 (the hooks' dispatch and \
         our work before our first clock read land there, never in `self`); what watching adds is the watched p50 less the no-hook p50."
    );
    dispatch(o, p);
    stages(o, p);
    kernel_books(o, p, w);
}

/// What jitterwatch priced a hook's dispatch at as it started (moved into
/// `self` before each of our records), beside what the hooks alone add a
/// firing on each kind: the pricing's error, kind by kind.
fn dispatch(o: &mut String, p: &PerInterruption) {
    let priced = Spread::of(&p.dispatch);
    if priced.n == 0 {
        let _ = writeln!(o, "\nA hook's dispatch as jitterwatch priced it at start: not measured.");
        return;
    }
    let mut per_kind = Vec::new();
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        let (Some(programs), Some(hooks)) = (kind.programs(), Spread::of(&p.hooks.0[k][1]).value()) else { continue };
        let firing = hooks / programs.len() as f64;
        let error = priced.value().map_or(String::new(), |d| format!(", priced {:+.0}%", 100.0 * (d - firing) / firing));
        per_kind.push(format!("{} {firing:.0} ns ({} firings{error})", kind.describe(), programs.len()));
    }
    let _ = writeln!(
        o,
        "\nA hook's dispatch as jitterwatch priced it at start (its summary's `overhead.dispatch`, each statistics run; \
         src/bpf/dispatch.rs): {} ns a firing, median [min–max] over {} runs. `self` holds that much before each of our records. \
         The hooks alone a firing, each kind (its paired p50 ÷ its programs): {}.",
        priced.show(0),
        priced.n,
        per_kind.join("; ")
    );
}

/// The same work as the kernel's BPF statistics count it: each program's
/// ns/run whole and returning at once, and their sums per interruption.
fn kernel_books(o: &mut String, p: &PerInterruption, w: usize) {
    let _ = writeln!(
        o,
        "
The kernel's books: two more runs in each round ({} s of the loop, not toggled), watched with `--bpf-stats` \
         (`kernel.bpf_stats_enabled`: run_time_ns / run_cnt per program), our programs doing their work, then returning \
         at once (`JITTERWATCH_BPF_FLOOR=1`). A program that only returns costs, in these books, the dispatch past the \
         hook plus the two clock reads the statistics add to every run: the whole less that is our programs' work as \
         the kernel counts it, beside the end-to-end figure above. ns/run is each run's whole-run figure (the loop's \
         interruptions and whatever else ran on CPU {} meanwhile), median [min–max] over the rounds.\n",
        p.secs, w
    );
    let _ =
        writeln!(o, "| program | runs | ns/run, whole | ns/run, returning at once | whole less returning (ns) |\n|---|---|---|---|---|");
    let [whole, floor] = &p.stats;
    // The kinds' programs only (the idle and wake-up programs run too).
    let in_a_kind = |name: &str| Kind::ALL.iter().filter_map(|k| k.programs()).flatten().any(|p| crate::bench::measure::is_prog(name, p));
    for w in whole.iter().filter(|w| in_a_kind(&w.name)) {
        let f = floor.iter().find(|f| f.name == w.name && f.ns_per_run.n > 0);
        let less = f.map(|f| w.ns_per_run.median - f.ns_per_run.median).filter(|x| x.is_finite());
        let _ = writeln!(
            o,
            "| {} | {:.0} | {} | {} | {} |",
            w.name,
            w.run_cnt.median,
            w.ns_per_run.show(0),
            f.map_or("not measured".to_string(), |f| f.ns_per_run.show(0)),
            less.map_or("not measured".to_string(), |x| format!("{x:.0}"))
        );
    }
    let _ = writeln!(
        o,
        "\n| interruption | its programs | kernel BPF stats, whole (ns) | returning at once (ns) | our programs' work by the books (ns) | end to end, paired p50 (ns) |\n|---|---|---|---|---|---|"
    );
    let sums = crate::bench::interruption::per_kind(whole, floor);
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        let Some(progs) = kind.programs() else { continue };
        let ns = |x: Option<f64>| x.map_or("not measured".to_string(), |x| format!("{x:.0}"));
        let paired = Spread::of(&p.paired.0[k][1]);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            kind.describe(),
            progs.join(", "),
            ns(sums[k].map(|s| s.whole)),
            ns(sums[k].map(|s| s.floor)),
            ns(sums[k].map(|s| s.work())),
            ns((paired.n > 0).then_some(paired.median))
        );
    }
}

/// Where our programs' work goes: the paired p50 with them stopped at each
/// stage, beside the whole of it.
fn stages(o: &mut String, p: &PerInterruption) {
    let _ = writeln!(
        o,
        "\nWhere that work goes: the same paired run ({} s) twice more in each round, with every per-interruption program \
         stopped at a stage (`JITTERWATCH_BPF_FLOOR`; the other programs, the context switch's among them, run whole): \
         `clock`, right after its clock read (the watched-CPU test, taking the CPU's batch and one clock read); \
         `append`, once its item has joined the batch (every item kept and the own-time sampling, but the batch is \
         dropped where it would be written). Each column is the paired p50, median [min–max] over the runs; the step \
         from one column to the next is that stage's share, read from separate runs, so within their spread.\n",
        2.0 * p.secs
    );
    let _ = writeln!(
        o,
        "| interruption | clock read (p50, ns) | + the append (p50, ns) | + the record's write: the whole work (p50, ns) |\n|---|---|---|---|"
    );
    let show = |v: &[f64]| if v.is_empty() { "not measured".to_string() } else { Spread::of(v).show(0) };
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            kind.describe(),
            show(&p.stages[0].0[k][1]),
            show(&p.stages[1].0[k][1]),
            show(&p.paired.0[k][1])
        );
    }
}
