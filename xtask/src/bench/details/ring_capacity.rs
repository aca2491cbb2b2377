//! Section 4: the event rates drained without ring-buffer drops, and what
//! a starved consumer costs.

use std::fmt::Write;

use crate::bench::capacity::{storm, Capacity, Policy};
use crate::bench::util::grouped;

/// Section 4, the storms on the watched CPU `w`, the consumer on CPU `h`.
pub fn section(o: &mut String, c: &Capacity, w: usize, h: usize) {
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
        storm().describe()
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
}
