//! Section 5: jitterwatch's memory over a long run at a high rate, and
//! what bounds it.

use std::fmt::Write;

use crate::bench::capacity::Memory;
use crate::bench::util::grouped;

/// Section 5, the load on the watched CPU `w`.
pub fn section(o: &mut String, me: &Memory, w: usize) {
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
}
