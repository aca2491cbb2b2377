//! Every target a figure is judged against, in one place, each with where
//! it comes from. A figure with no target here is reported, not judged: a
//! target chosen after seeing the result would only ever read "met".
//!
//! The targets date from the bench's first version (82f2ff9) unless said
//! otherwise; the issue or the peer measurement each one answers is named.

use super::ids::Id;

/// Figure 1: the probe's loop floor and its mean period between hiccups,
/// each at most this many times the bare C `clock_gettime` loop's (the
/// peer: the smallest loop anyone could write; the probe may cost at most
/// 10% over it).
pub const PROBE_VS_C_LOOP: f64 = 1.1;

/// Figure 1b (`--clock tsc`) has no target: its "≤ 0.6× the C loop" was
/// set after its first result (bfc16e1, 0.40×), so it is reported only.
pub const PROBE_TSC_REPORTED: &str = "(reported: no target set before its result)";

/// Figure 2: jitterwatch's cost to a CPU it does not watch, % of that CPU,
/// at most this, and below the peer's: bpftrace's BPF run time on the same
/// tracepoints. Source: issue 33 ("≤ 1% and below bpftrace").
pub const UNWATCHED_COST_PCT: f64 = 1.0;

/// Figure 3b, each kind, against the same run's own references (issue 64,
/// replacing issue 39's absolute 150 ns, which sat below what this host's
/// hooks alone cost): what jitterwatch charges to the kernel's causes for
/// an interruption (watched less `self`) at most this % over the same
/// interruption with no hook.
pub const KERNEL_OVER_NO_HOOK_PCT: f64 = 5.0;
/// ... `self` at least this % of what watching adds (watched less no hook).
pub const SELF_SHARE_PCT: f64 = 80.0;
/// ... and our programs' work (paired) no more than the hooks alone cost
/// (paired against no hook): at most this many times it.
pub const WORK_OVER_HOOKS: f64 = 1.0;

/// Figure 4: 0 ring-buffer drops at this many events/s or more on one
/// watched CPU (0 drops at ≥ 500k events/s).
pub const CAPACITY_EVENTS_PER_SEC: f64 = 500_000.0;

/// Figure 4c: the consumer's CPU time per event drained at a real app's
/// mix in passive mode, ns. Source: issue 39 ("≤ 100 ns/event"; issue 33
/// had 150).
pub const COLLECTOR_NS_PER_EVENT: f64 = 100.0;

/// Figure 4d: with the live screen, on a passive ping-pong of ~100k
/// events/s, the screen adds at most this % of a CPU over headless, the
/// whole process at most this %, and the collector lags at most this many
/// ms (issue 66).
pub const SCREEN_ADDS_PCT: f64 = 2.0;
pub const SCREEN_WHOLE_PCT: f64 = 5.0;
pub const SCREEN_LAG_MS: f64 = 100.0;

/// Figure 7b: `explain` of 10⁶ operations against 10⁶ stalls, each way,
/// in at most this many seconds and MiB (issue 67: "in seconds, bounded
/// memory").
pub const EXPLAIN_SECS: f64 = 10.0;
pub const EXPLAIN_RSS_MIB: f64 = 256.0;

/// Figure 5: peak RSS over a long run at a high event rate, MiB (≤ 32 MiB).
pub const PEAK_RSS_MIB: f64 = 32.0;

/// Figure 6: from exec to the first probe sample and to the first kernel
/// event, ms (≤ 1 s).
pub const STARTUP_MS: f64 = 1000.0;

/// Figure 7: events/s per consumer core at every replayed size (≥ 5 M
/// events/s per core; 6a5c7f2).
pub const REPLAY_EVENTS_PER_CORE: f64 = 5e6;

/// Figure 7: memory per watched CPU, bytes (≤ 1 MiB per CPU; 6a5c7f2).
pub const REPLAY_BYTES_PER_CPU: f64 = 1024.0 * 1024.0;

/// Figure 7: the memory target is judged from this many CPUs up; below it
/// the process's fixed part dominates the per-CPU share.
pub const REPLAY_MEMORY_FROM_CPUS: usize = 64;

/// Figure 8: the wake-up probe's avg and p99 within this fraction of
/// cyclictest's, under the same settings, in every condition. Source:
/// issue 39 ("within 5%"; issue 33 had 10%).
pub const WAKEUP_VS_CYCLICTEST: f64 = 0.05;

/// Figure 8b: cyclictest's avg and p50 moved at most this fraction by
/// jitterwatch watching its thread in passive mode, its p99 at most
/// OBSERVER_P99. Source: issue 39 ("avg and p50 ≤ 2%, p99 ≤ 5%"; issue 33
/// had the avg ≤ 5%).
pub const OBSERVER_AVG: f64 = 0.02;
pub const OBSERVER_P99: f64 = 0.05;

/// The target of a figure with none (3, 4b): it is reported, not judged.
const REPORTED: &str = "(reported)";

/// The targets as the tables write them.
pub fn text(figure: Id) -> String {
    match figure {
        Id::ProbeFloor => format!("≤ {PROBE_VS_C_LOOP}× the C loop"),
        Id::ProbeFloorTsc => PROBE_TSC_REPORTED.into(),
        Id::UnwatchedCost => format!("≤ {UNWATCHED_COST_PCT}% by parts, and ≤ half of bpftrace's end to end"),
        Id::BpfRunTime | Id::RecorderCost => REPORTED.into(),
        Id::PerInterruption => format!(
            "each kind: charged to the kernel ≤ no hook + {KERNEL_OVER_NO_HOOK_PCT}%, `self` ≥ {SELF_SHARE_PCT}% of what watching adds, our work ≤ the hooks alone"
        ),
        Id::RingCapacity => format!("0 drops at ≥ {:.0}k events/s", CAPACITY_EVENTS_PER_SEC / 1e3),
        Id::CollectorMix => format!("≤ {COLLECTOR_NS_PER_EVENT} ns/event"),
        Id::PeakRss => format!("≤ {PEAK_RSS_MIB} MiB"),
        Id::ScreenCost => format!(
            "the screen adds ≤ {SCREEN_ADDS_PCT}% of a CPU, the whole ≤ {SCREEN_WHOLE_PCT}%, lag ≤ {SCREEN_LAG_MS} ms"
        ),
        Id::ExplainScale => format!("≤ {EXPLAIN_SECS} s and ≤ {EXPLAIN_RSS_MIB} MiB each"),
        Id::Startup => format!("≤ {} s", STARTUP_MS / 1e3),
        Id::ManyCpus => format!(
            "≥ {} M events/s per core; ≤ {} MiB per CPU from {REPLAY_MEMORY_FROM_CPUS} CPUs",
            REPLAY_EVENTS_PER_CORE / 1e6,
            REPLAY_BYTES_PER_CPU / 1048576.0
        ),
        Id::WakeupProbe => format!("avg and p99 within {:.0}% of cyclictest's", WAKEUP_VS_CYCLICTEST * 100.0),
        Id::WatchedCyclictest => {
            format!("cyclictest's avg and p50 moved ≤ {:.0}%, p99 ≤ {:.0}%", OBSERVER_AVG * 100.0, OBSERVER_P99 * 100.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_before() {
        assert_eq!(text(Id::ProbeFloor), "≤ 1.1× the C loop");
        assert_eq!(text(Id::UnwatchedCost), "≤ 1% by parts, and ≤ half of bpftrace's end to end");
        assert_eq!(text(Id::BpfRunTime), "(reported)");
        assert_eq!(text(Id::RingCapacity), "0 drops at ≥ 500k events/s");
        assert_eq!(text(Id::PeakRss), "≤ 32 MiB");
        assert_eq!(text(Id::Startup), "≤ 1 s");
        assert_eq!(text(Id::ManyCpus), "≥ 5 M events/s per core; ≤ 1 MiB per CPU from 64 CPUs");
    }
}
