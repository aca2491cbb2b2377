//! Section 2: jitterwatch's cost to the CPU it does not watch, end to end
//! beside bpftrace and a bare spinning vCPU, then by parts.

use std::fmt::Write;

use crate::bench::figures::Figures;
use crate::bench::machine::CONDITIONS;
use crate::bench::results::{NoPart, Results};
use crate::bench::util::Grouped;
use crate::bench::verdicts::{unwatched_parts, unwatched_total};

/// Section 2 of the run `r` (whose figures are `fig`), watching CPU `w`
/// with CPU `h` the unwatched one. Its parts table needs figure 3's
/// programs (r.bpf) as well as the machine cost.
pub fn section(o: &mut String, r: &Results, fig: &Figures, w: usize, h: usize) {
    let m = &r.machine;
    // The hook jitterwatch took in this run (seen by its program's runs on CPU h).
    let tp = r.bpf.switch_everywhere();
    let where_switch = if tp {
        format!("jitterwatch's switch program, on the sched_switch tracepoint, runs on every CPU and returns at once on CPU {h}")
    } else {
        format!("jitterwatch's switch program hangs on a perf event of CPU {w} only")
    };
    let (taken, other) = if tp {
        (
            format!(
                "jitterwatch takes switches from the sched_switch tracepoint (the default): every switch of CPU {h} runs its \
                 program, which returns after one array lookup. Measured by a ping-pong on CPU {h} in ~5 ms batches with a \
                 sched_switch program that returns at once unless it runs on CPU {w} attached for every other batch"
            ),
            format!("the software switch event opened on CPU {w} only (`--switch-hook perf-event`: CPU {h} never enters BPF for a switch and pays a lookup in perf's per-CPU event hash) {}", m.hook_pct.show(2)),
        )
    } else {
        (
            format!(
                "jitterwatch takes switches from a software perf event opened on CPU {w} only (`--switch-hook perf-event`): \
                 CPU {h} never enters BPF for a switch and pays a lookup in perf's per-CPU event hash. Measured by a ping-pong \
                 on CPU {h} in ~5 ms batches with that event opened on CPU {w} for every other batch"
            ),
            format!("a sched_switch program that returns at once unless it runs on CPU {w} (the default hook) {}", m.hook_tp_pct.show(2)),
        )
    };
    let taken_pct = r.taken_hook();
    let _ = writeln!(o, "\n## 2. Cost to the rest of the machine\n");
    let _ = writeln!(
        o,
        "`taskset -c {h} perf bench sched pipe -l {}` (two tasks ping-ponging through a pipe, ~2 context switches \
         per op, on the unwatched CPU {h}, ~1.5 s a run) in five conditions: alone; while `jitterwatch --cpus {w} --no-tui` \
         watches CPU {w}; while bpftrace attaches the same tracepoints ({} of them, `tracepoint:` probes, each filtered \
         with `/cpu == {w}/`, action `@[probe] = count()`); while the bare C loop of figure 1 spins on CPU {w} with no \
         tracing (what a busy vCPU alone costs its sibling on this host); and alone again. Each repetition runs the five \
         back to back in a rotating order (ABCDE, BCDEA, …), {} repetitions. Ratios are per repetition, against the mean \
         of that repetition's two alone runs; \"alone again / alone\" is the null control: its spread is what this host's \
         noise alone produces. The tracers are attached before perf starts and stopped after it ends. Every \
         sched_switch on CPU {h} enters bpftrace's program (which returns early); {where_switch}, and its collector \
         polls from CPU {h}.\n",
        m.loops, r.bt_probes, m.reps
    );
    let _ = writeln!(o, "| condition | ops/s | ratio to alone (paired) | cost (median) | best run / best alone |\n|---|---|---|---|---|");
    for (c, name) in CONDITIONS.iter().enumerate() {
        let _ = writeln!(
            o,
            "| {name} | {} | {} | {:.2}% | {:.4} |",
            Grouped(m.ops[c]),
            m.ratio[c].show(4),
            pct(m.ratio[c].median),
            m.best_ratio[c]
        );
    }
    let _ = writeln!(
        o,
        "\nNull control, alone again / alone: {}. Events seen on CPU {w} meanwhile: jitterwatch {}, bpftrace {} \
         (the tracers were live; bpftrace runs longer, and CPU {w} idles under it while jitterwatch's probe spins).",
        m.null.show(4),
        Grouped(m.jw_events),
        Grouped(m.bt_events)
    );

    let _ = writeln!(
        o,
        "\nThe end-to-end ratios cannot resolve 1% on this host (the null control above). The figure is therefore \
         made of parts, each measured with far less noise:\n\n\
         | part | % of CPU {h} | how |\n|---|---|---|\n\
         | jitterwatch's own threads (collector, main) | {} | /proc/PID/task/*/schedstat during its perf runs; they \
         live on the housekeeping CPUs |\n\
         | the context-switch hook | {} (null {}): {} | {taken}, each such batch against its two neighbours, 300 pairs \
         a run ({} runs); null: the same harness opening nothing. The alternatives, by the same harness: {other}; a \
         sched_switch tracepoint perf event opened \
         on CPU {w} only, its samples written to a ring there, no BPF (its perf probe runs on every CPU, and on CPU {h} \
         returns at the CPU's empty list of events) {}, but on CPU {w} itself, where it builds and writes each record, \
         {} ns a switch (the same harness pinned to CPU {w}, both ends of its ping-pong there; our switch program: {} \
         ns a run, figure 3's kernel stats); the same event with a BPF program that returns 0 (a tracepoint's \
         programs are the tracepoint's, not a CPU's: CPU {h} builds the record and runs it) {}; a dummy event on CPU {w} \
         asking for switch records (the scheduler's perf hooks turned on for every CPU) {}. The cheapest here: {}. \
         What the two hooks jitterwatch can use cost CPU {w} itself, their programs returning at once (the same \
         harness pinned to CPU {w}), ns a switch: the switch event {}, the sched_switch program {} |\n\
         | BPF programs' early returns | {:.2} | figure 3 with the load on CPU {h}: Σ runs × ns/run over the run time \
         (the tracepoints jitterwatch keeps: IRQs, softirqs, timers, IPIs, and the IPI and work senders; the switch \
         program is the hook's part above); an upper bound. Not counted: `--wake-origins` (off by default) adds \
         on_waking's {:.2} |\n\
         | **total** | **{}** | a part that is unresolved leaves the total unresolved |\n\
         | a bare spinning vCPU, end to end (not in the total) | {:.1} (null ±{:.1}) | the C loop of figure 1 on CPU {w}, no \
         tracing: what any spin probe costs its sibling vCPU on this host, whoever's probe it is |\n\
         | bpftrace, its BPF programs alone | {} | `kernel.bpf_stats_enabled=1`, Σ run_time_ns of its programs \
         (bpftool prog show) over a perf run's wall time: a lower bound of its cost, since building each \
         tracepoint record for perf is not counted |\n",
        m.jw_threads_pct.show(2),
        taken_pct.show(2),
        m.hook_null_pct.show(2),
        match r.hook() {
            Ok(v) => format!("counted as {v:.2}"),
            Err(NoPart::BelowNull(why)) => format!("unresolved: {why}"),
            Err(NoPart::NotMeasured) => "not measured".into(),
        },
        taken_pct.n,
        m.hook_tpevent_pct.show(2),
        m.tpevent_watched_ns.show(0),
        r.bpf.switch_ns().0.map_or("not measured".into(), |ns| format!("{ns:.0}")),
        m.hook_tpevent_bpf_pct.show(2),
        m.hook_switchrec_pct.show(2),
        m.cheapest_hook().unwrap_or("none measured"),
        m.perf_bpf_watched_ns.show(0),
        m.tp_watched_ns.show(0),
        r.bpf.busy_pct_unwatched(),
        r.bpf.opt_in_pct_unwatched(),
        shown(unwatched_total(unwatched_parts(fig))),
        m.spin_cost_pct(),
        100.0 * (m.null.max - m.null.min) / 2.0,
        m.bt_bpf_pct.show(2)
    );
}

/// Throughput lost, % of the alone runs, from a ratio to them.
fn pct(ratio: f64) -> f64 {
    100.0 * (1.0 - ratio)
}

/// The total by parts, or "unresolved" while a part is.
fn shown(v: Option<f64>) -> String {
    v.map_or_else(|| "unresolved".to_string(), |v| format!("{v:.2}"))
}
