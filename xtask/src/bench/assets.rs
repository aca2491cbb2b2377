//! What the bench compiles and runs besides jitterwatch: the yardsticks
//! (a bare C loop, the bpftrace script it compares against) here, the
//! context-switch hook's cost in hookcost.rs, the loads it drives in
//! loads.rs, figure 3b's gap loop in interrupts.rs, figure 8b's paired
//! wake-up loop in wakes.rs, the host's speed on fixed work in
//! yardstick.rs, the C they share in headers.rs; C written to a
//! temp dir and built with gcc -O2.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::proc;

mod headers;
mod hookcost;
mod interrupts;
mod loads;
mod wakes;
mod yardstick;
pub use hookcost::HOOKCOST;
pub use interrupts::INTERRUPTS;
pub use loads::{HOG, IPISTORM, PINGPONG, TCPPP};
pub use wakes::WAKES;
pub use yardstick::YARDSTICK;

/// The limit for the probe: a bare clock_gettime loop. Its floor is found
/// as jitterwatch's probe finds its own (docs/threshold.md): over its first
/// 20 ms and at least 1,048,576 turns (at most 1 s), turns timed in blocks
/// of 64, the floor the 5th percentile of the blocks' mean turn; then 8 ×
/// the floor is its threshold (`--threshold auto`'s rule). Prints the
/// floor, its smallest delta, its mean period over `secs`, and its mean
/// period between hiccups.
pub const CLOOP: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BLOCK 64
#define MIN_TURNS 1048576u
#define MAX_BLOCKS (1u << 20)

static inline uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint64_t span = (uint64_t)(atof(argc > 1 ? argv[1] : "1") * 1e9);
	uint64_t start = now(), prev = start, end = start + span;
	uint64_t calibrated = start + 20000000, give_up = start + 1000000000;
	uint64_t min = UINT64_MAX, n = 0;
	uint64_t hot_start = 0, hot_n = 0, thr = UINT64_MAX, gap_ns = 0, gaps = 0;
	double *blocks = malloc(MAX_BLOCKS * sizeof(double)), floor_ns = 0;
	uint64_t nb = 0, block_t0 = start;

	if (!blocks)
		return 1;
	while (prev < end) {
		uint64_t t = now(), d = t - prev;
		if (d < min)
			min = d;
		if (d >= thr) {
			gap_ns += d;
			gaps++;
		}
		n++;
		prev = t;
		if (!hot_start) {
			if (n % BLOCK == 0 && nb < MAX_BLOCKS) {
				blocks[nb++] = (double)(t - block_t0) / BLOCK;
				block_t0 = t;
			}
			if ((t >= calibrated && n >= MIN_TURNS) || t >= give_up) {
				hot_start = t;
				hot_n = n;
				qsort(blocks, nb, sizeof(double), cmp);
				floor_ns = nb ? blocks[nb * 5 / 100] : (double)min;
				thr = (uint64_t)(8 * (floor_ns > 1 ? floor_ns : 1));
			}
		}
	}
	printf("floor_ns=%.3f min_ns=%llu mean_ns=%.3f loops=%llu quiet_mean_ns=%.3f\n", floor_ns, (unsigned long long)min,
	       (double)(prev - start) / (double)n, (unsigned long long)n,
	       hot_start ? (double)(prev - hot_start - gap_ns) / (double)(n - hot_n - gaps) : 0.0);
	return 0;
}
"#;

/// The tracepoints jitterwatch attaches, as bpftrace names them.
/// irq_work_exit is left out: the kernel refuses perf_event_open on it
/// (EPERM), and bpftrace's `tracepoint:` goes through perf.
const TRACEPOINTS: &[&str] = &[
    "sched:sched_switch",
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "workqueue:workqueue_execute_start",
    "workqueue:workqueue_execute_end",
    "timer:hrtimer_expire_entry",
    "timer:hrtimer_expire_exit",
    "irq_vectors:local_timer_entry",
    "irq_vectors:local_timer_exit",
    "irq_vectors:reschedule_entry",
    "irq_vectors:reschedule_exit",
    "irq_vectors:call_function_entry",
    "irq_vectors:call_function_exit",
    "irq_vectors:call_function_single_entry",
    "irq_vectors:call_function_single_exit",
    "irq_vectors:irq_work_entry",
    "csd:csd_function_entry",
    "csd:csd_function_exit",
    "nmi:nmi_handler",
];

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// The bpftrace script: every tracepoint of [`TRACEPOINTS`] this kernel
/// has, filtered to `cpu`, counting per probe. Also returns how many.
pub fn bpftrace_script(cpu: usize) -> (String, usize) {
    let probes: Vec<String> = TRACEPOINTS
        .iter()
        .filter(|tp| {
            let (cat, name) = tp.split_once(':').expect("cat:name");
            Path::new(TRACEFS).join("events").join(cat).join(name).exists()
        })
        .map(|tp| format!("tracepoint:{tp}"))
        .collect();
    let n = probes.len();
    let script = format!("{}\n/cpu == {cpu}/\n{{\n\t@[probe] = count();\n}}\n", probes.join(",\n"));
    (script, n)
}

/// Writes `src` as NAME.c in `dir`, the shared headers beside it, and
/// builds it with gcc -O2.
pub fn compile(dir: &Path, name: &str, src: &str) -> Result<PathBuf> {
    for (file, text) in headers::HEADERS {
        let h = dir.join(file);
        std::fs::write(&h, text).with_context(|| format!("writing {}", h.display()))?;
    }
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, src).with_context(|| format!("writing {}", c.display()))?;
    proc::check(Command::new("gcc").args(["-O2", "-pthread", "-o"]).arg(&exe).arg(&c))?;
    Ok(exe)
}
