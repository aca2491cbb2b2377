//! BENCHMARKS.md's sections 1 to 8: how each figure of one run was
//! measured, with every number of that run. They need the run's full
//! results, which the history does not keep; the summary and the history
//! tables come from the history (report.rs).

use std::fmt::Write;

use super::capacity::Policy;
use super::figures::Figures;
use super::machine::CONDITIONS;
use super::results::{Machine, NoPart, Results};
use super::util::{grouped, Grouped};
use super::verdicts::{unwatched_parts, unwatched_total};

/// The heading the details start with.
pub const START: &str = "## 1. Probe floor";

/// Sections 1 to 8 of the run `r` on `mc`, whose figures are `fig`.
pub fn markdown(mc: &Machine, r: &Results, fig: &Figures) -> String {
    let mut o = String::new();
    let w = mc.watched;
    let h = mc.house;
    let f = &r.floor;
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

    let m = &r.machine;
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
         sched_switch on CPU {h} enters bpftrace's program (which returns early); jitterwatch's switch program hangs \
         on a perf event of CPU {w} only, and its collector polls from CPU {h}.\n",
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
         | the context-switch hook | {} (null {}): {} | jitterwatch takes switches from a software perf event opened on \
         CPU {w} only: CPU {h} never enters BPF for a switch and pays a lookup in perf's per-CPU event hash. \
         Measured by a ping-pong on CPU {h} in ~5 ms batches with that event opened on CPU {w} for every other \
         batch, each such batch against its two neighbours, 300 pairs a run ({} runs); null: the same harness \
         opening nothing. The alternative, a sched_switch program that returns at once unless it runs on CPU {w} (the \
         fallback where the event cannot be opened), costs {} by the same harness: the event is the cheaper hook |\n\
         | BPF programs' early returns | {:.2} | figure 3 with the load on CPU {h}: Σ runs × ns/run over the run time \
         (the tracepoints jitterwatch keeps: IRQs, softirqs, timers, IPIs, and the IPI and work senders); an upper \
         bound. Not counted: `--wake-origins` (off by default) adds on_waking's {:.2} |\n\
         | **total** | **{}** | a part that is unresolved leaves the total unresolved |\n\
         | a bare spinning vCPU, end to end (not in the total) | {:.1} (null ±{:.1}) | the C loop of figure 1 on CPU {w}, no \
         tracing: what any spin probe costs its sibling vCPU on this host, whoever's probe it is |\n\
         | bpftrace, its BPF programs alone | {} | `kernel.bpf_stats_enabled=1`, Σ run_time_ns of its programs \
         (bpftool prog show) over a perf run's wall time: a lower bound of its cost, since building each \
         tracepoint record for perf is not counted |\n",
        m.jw_threads_pct.show(2),
        m.hook_pct.show(2),
        m.hook_null_pct.show(2),
        match r.hook() {
            Ok(v) => format!("counted as {v:.2}"),
            Err(NoPart::BelowNull(why)) => format!("unresolved: {why}"),
            Err(NoPart::NotMeasured) => "not measured".into(),
        },
        m.hook_pct.n,
        m.hook_tp_pct.show(2),
        r.bpf.busy_pct_unwatched(),
        r.bpf.opt_in_pct_unwatched(),
        shown(unwatched_total(unwatched_parts(fig))),
        m.spin_cost_pct(),
        100.0 * (m.null.max - m.null.min) / 2.0,
        m.bt_bpf_pct.show(2)
    );

    let b = &r.bpf;
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
    let _ = writeln!(
        o,
        "\nWhat our programs add inside one interrupt on the watched CPU (the medians above, summed over the programs it \
         runs; the stats' own clock reads included): {}.",
        inside.join("; ")
    );

    let c = &r.cap;
    let _ = writeln!(o, "\n## 4. Ring-buffer capacity\n");
    let _ = writeln!(
        o,
        "Context-switch storms pinned to CPU {w} (each hand-off is one context-switch record), stepped up then down, \
         jitterwatch running {} s in each; `events_per_sec`, `overhead.ringbuf_drops` and the consumer thread's CPU \
         time (`overhead.consumer_cpu_ns`, CLOCK_THREAD_CPUTIME_ID of the collector, which drains the ring buffer, \
         attributes and aggregates) from its summary. A SCHED_OTHER storm shares CPU {w} with the spinning probe \
         (nice 0), which caps its rate; the {} storms leave the probe {}, so the watched CPU itself bounds the \
         rate. Last, the consumer is starved on purpose: a SCHED_FIFO busy loop on CPU {h} for 100 and 400 ms \
         under {}, to show what lies beyond the buffer.\n",
        c.secs,
        Policy::strong().describe(),
        match Policy::strong() {
            Policy::Nice => "~1% of the CPU (RT throttling is off here: a SCHED_FIFO storm would starve it)",
            _ => "RT throttling's share",
        },
        super::capacity::storm().describe()
    );
    let _ = writeln!(
        o,
        "| load on CPU {w} | consumer starved | events/s | events | drops | max consumer lag | consumer CPU | consumer ns/event |\n\
         |---|---|---|---|---|---|---|---|"
    );
    for run in &c.runs {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.1} ms | {:.1}% | {:.0} |",
            run.load.describe(),
            if run.stall_ms == 0 { "–".into() } else { format!("{} ms", run.stall_ms) },
            grouped(run.events_per_sec),
            grouped(run.events),
            grouped(run.drops),
            run.lag_max_ms,
            run.consumer_cpu_pct,
            run.consumer_ns_per_event
        );
    }
    let _ = writeln!(
        o,
        "\nHighest rate drained with zero drops: **{} events/s**; highest reached: {} events/s; \
         largest consumer lag (oldest event of a drain to the end of that drain) in any run: {:.1} ms.{}",
        grouped(c.max_clean),
        grouped(c.max_rate),
        c.lag_max_ms,
        if c.max_rate < 500_000.0 { " This VM's watched CPU did not produce 500k events/s." } else { "" }
    );
    if let Some(top) = c.runs.iter().filter(|r| r.stall_ms == 0).max_by(|a, b| a.events_per_sec.total_cmp(&b.events_per_sec)) {
        if top.consumer_ns_per_event > 0.0 {
            let _ = writeln!(
                o,
                "\nIn that fastest run the consumer spent {:.0} ns of CPU per event ({:.1}% of CPU {h}): at that cost \
                 one housekeeping CPU would drain about {:.1} million events/s, an extrapolation the watched CPU here cannot \
                 load-test. Beyond the consumer's speed, the buffer (sized in bpf/jitterwatch.bpf.c) absorbs a \
                 consumer stall as long as its record count over the event rate; the starved runs above show that \
                 bound.",
                top.consumer_ns_per_event,
                top.consumer_cpu_pct,
                1e3 / top.consumer_ns_per_event
            );
        }
    }

    super::recorder::section(&mut o, &r.recorder, w);
    match &r.mix {
        Some(m) => o += &super::passive::markdown(m, w),
        None => o += "\n### 4c. The collector at a real app's mix (passive mode)\n\nNot measured.\n",
    }

    let me = &r.mem;
    let _ = writeln!(o, "\n## 5. Memory\n");
    let _ = writeln!(
        o,
        "`jitterwatch --cpus {w} --duration {}s` under {} on CPU {w} ({} events/s, {} drops, consumer lag ≤ {:.1} ms). \
         VmRSS sampled from /proc/PID/status every 100 ms ({} samples), with the threads' CPU time from /proc/PID/task/*/schedstat; VmHWM is the last one read before exit.\n",
        me.secs,
        me.load.describe(),
        grouped(me.events_per_sec),
        grouped(me.drops),
        me.lag_max_ms,
        me.mem.samples
    );
    let (anon, file, shmem) = me.mem.at_max;
    let _ = writeln!(o, "| | |\n|---|---|");
    let _ = writeln!(o, "| peak VmRSS | {:.1} MiB |", me.mem.max_rss_kb as f64 / 1024.0);
    let _ = writeln!(o, "| VmHWM | {:.1} MiB |", me.mem.hwm_kb as f64 / 1024.0);
    let _ = writeln!(
        o,
        "| at the peak: RssAnon / RssFile / RssShmem | {:.1} / {:.1} / {:.1} MiB |",
        anon as f64 / 1024.0,
        file as f64 / 1024.0,
        shmem as f64 / 1024.0
    );
    let _ = writeln!(
        o,
        "| VmRSS at 25% of the run → at the end | {:.1} → {:.1} MiB |",
        me.rss_early_kb as f64 / 1024.0,
        me.rss_end_kb as f64 / 1024.0
    );
    let _ = writeln!(o, "| CPU time of the non-probe threads (housekeeping) | {:.1}% of one CPU |", me.house_cpu_pct);
    let _ = writeln!(
        o,
        "| spawn to exit, when its stdout closed (asked: {:.0} s) | {:.1} s{} |",
        me.secs,
        me.wall_s,
        if me.wall_s > me.secs + 3.0 { " — **did not stop at --duration**" } else { "" }
    );
    let _ = writeln!(o, "| spawn to reaped, when wait() returned | {:.1} s |", me.reaped_s);
    if me.reaped_s > me.wall_s + 1.0 {
        let _ = writeln!(
            o,
            "\nThe bench's wait() returned {:.1} s after jitterwatch had exited: the kernel spun in \
             release_task → proc_invalidate_siblings_dcache → shrink_dcache_parent (seen in /proc/PID/stack of \
             the reaper) until the storm on CPU {} ended. It happens when /proc/PID/task/*/ files of the exiting \
             process were read, as this sampler does; reaping without that sampling is prompt. Earlier \
             BENCHMARKS.md runs counted this as jitterwatch's run time.",
            me.reaped_s - me.wall_s,
            w
        );
    }
    let _ = writeln!(
        o,
        "\nWhat bounds it: the BPF ring buffer is a fixed mapping (its size is set in bpf/jitterwatch.bpf.c), the \
         probe's gap queue and each CPU's timeline are fixed-capacity windows (the timeline's overflow is summed per \
         cause into at most 256 entries), and the aggregates are HdrHistograms per CPU and per cause, with at most \
         128 causes per CPU: past that the least recently seen quarter is folded (tasks into `comm[*]`, the rest into \
         `(others)`), so pid churn \
         cannot grow it either (each cause's histogram is ~36 KB once it has over 64 samples: under 5 MB per CPU \
         in the worst case). None grows with the event count; a flat VmRSS from 25% of the run to its end is the \
         check."
    );

    let s = &f.startup;
    let _ = writeln!(o, "\n## 6. Start-up\n");
    let _ = writeln!(
        o,
        "The bench reads CLOCK_MONOTONIC just before spawning `jitterwatch --cpus {w}` (the runs of figure 1, {} of them) \
         and subtracts it from the summary's `overhead.main_start_ns`, `first_sample_ns` (the probe's first clock read) \
         and `first_event_ns` (the timestamp of the first kernel event drained).\n",
        s.to_first_sample.n
    );
    let _ = writeln!(o, "| from exec to | ms |\n|---|---|");
    let _ = writeln!(o, "| main() | {} |", s.to_main.show(1));
    let _ = writeln!(o, "| first probe sample | {} |", s.to_first_sample.show(1));
    let _ = writeln!(o, "| first kernel event | {} |", s.to_first_event.show(1));
    o += &super::replay::markdown(&r.replay, h);
    o += &super::wakeup::markdown(&r.wakeup, r.observer.as_ref(), w, mc.quick);
    o
}

/// Throughput lost, % of the alone runs, from a ratio to them.
fn pct(ratio: f64) -> f64 {
    100.0 * (1.0 - ratio)
}

fn shown(v: Option<f64>) -> String {
    v.map_or_else(|| "unresolved".to_string(), |v| format!("{v:.2}"))
}
