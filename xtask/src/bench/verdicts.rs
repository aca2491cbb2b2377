//! Each figure's verdict against its target (targets.rs), from its values
//! alone (figures.rs). A verdict reads "met" or "MISSED" only over real
//! samples: a value that is absent, NaN, infinite, or not above 0 where
//! only a positive time, rate, size or ratio makes sense is "not
//! measured"; a value present but inside the noise that would decide it
//! is "unresolved". This module uses results, figures and targets, never
//! the report.

use super::figures::{get, Figures};
use super::ids::Id;
use super::replay::SIZES;
use super::results::{hook_part, NoPart};
use super::targets as t;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// No real sample: the figure (or a value it needs) is absent, had no
    /// samples, or is NaN, infinite or impossible (a negative time).
    NotMeasured,
    /// Measured, but the noise measured beside it does not let it decide.
    Unresolved,
    /// Reported, with no target.
    Reported,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "**MISSED**",
            Verdict::NotMeasured => "not measured",
            Verdict::Unresolved => "unresolved",
            Verdict::Reported => "—",
        }
    }
}

/// A positive quantity (a time, rate, size or ratio), if it is a real
/// sample: finite and above 0. 0 is what an absent sample defaults to, and
/// a negative one is a timestamp that was never set, not noise.
fn positive(v: Option<f64>) -> Result<f64, Verdict> {
    match v {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(Verdict::NotMeasured),
    }
}

/// Every (ours, reference) pair real samples, and ours within `frac` of the
/// reference's, above or below.
fn within(pairs: &[(Option<f64>, Option<f64>)], frac: f64) -> Verdict {
    let mut met = true;
    for &(a, b) in pairs {
        match (positive(a), positive(b)) {
            (Ok(a), Ok(b)) => met &= (a / b - 1.0).abs() <= frac,
            (Err(v), _) | (_, Err(v)) => return v,
        }
    }
    if met {
        Verdict::Met
    } else {
        Verdict::Missed
    }
}

/// Every value a real sample and each at most its limit.
fn at_most(checks: &[(Option<f64>, f64)]) -> Verdict {
    let mut met = true;
    for &(v, limit) in checks {
        match positive(v) {
            Ok(x) => met &= x <= limit,
            Err(v) => return v,
        }
    }
    if met {
        Verdict::Met
    } else {
        Verdict::Missed
    }
}

/// Figure 1: the probe's floor and its period between hiccups over the C
/// loop's, each at most the target.
pub fn probe(floor_ratio: Option<f64>, quiet_ratio: Option<f64>) -> Verdict {
    at_most(&[(floor_ratio, t::PROBE_VS_C_LOOP), (quiet_ratio, t::PROBE_VS_C_LOOP)])
}

/// Figures with no target (1b, 3, 4b, 8): reported when every value is a
/// real sample, else not measured.
pub fn reported(values: &[Option<f64>]) -> Verdict {
    match values.iter().try_for_each(|&v| positive(v).map(drop)) {
        Ok(()) if !values.is_empty() => Verdict::Reported,
        _ => Verdict::NotMeasured,
    }
}

/// Figure 3b, one kind, from its figures (the medians of the runs'): the
/// share of the no-hook length jitterwatch charges to the kernel beyond
/// it, %; `self`'s share of what watching adds, %; our programs' work over
/// what the hooks alone cost (a ratio). Each None where a figure it needs
/// was not measured. The table (BENCHMARKS.md) and the verdict both read
/// these: one definition.
pub fn per_interruption_shares(x: impl Fn(&str) -> Option<f64>, own: Option<f64>) -> [Option<f64>; 3] {
    // A length is a real sample: finite and above 0 (the work and the
    // hooks' differences may be 0 or below: the host's noise).
    let length = |v: Option<f64>| v.filter(|v| v.is_finite() && *v > 0.0);
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    let (watched, bare, own) = (length(x("watched")), length(x("bare")), length(own));
    let adds = watched.zip(bare).map(|(w, b)| w - b);
    let kernel = watched.zip(bare).zip(own).map(|((w, b), s)| 100.0 * (w - s - b) / b);
    let share = adds.zip(own).and_then(|(a, s)| (a > 0.0).then(|| 100.0 * s / a));
    let work = finite(x("paired")).zip(finite(x("hooks"))).and_then(|(w, h)| (h > 0.0).then(|| w / h));
    [kernel, share, work]
}

/// Figure 3b: every targeted kind within the three targets (issue 64): a
/// kind whose figures were not measured keeps the rest from being met.
fn per_interruption(g: impl Fn(&str) -> Option<f64>) -> Verdict {
    let (mut missed, mut unknown) = (false, false);
    for kind in crate::bench::interruption::Kind::TARGETED {
        let x = |c: &str| g(&format!("{}_{c}_p50_ns", kind.key()));
        match per_interruption_shares(x, g(&format!("self_{}_ns", kind.key()))) {
            [Some(kernel), Some(share), Some(work)] => {
                missed |= kernel > t::KERNEL_OVER_NO_HOOK_PCT || share < t::SELF_SHARE_PCT || work > t::WORK_OVER_HOOKS;
            }
            _ => unknown = true,
        }
    }
    match (missed, unknown) {
        (true, _) => Verdict::Missed,
        (false, true) => Verdict::NotMeasured,
        (false, false) => Verdict::Met,
    }
}

/// Figure 2's parts, % of the unwatched CPU.
#[derive(Debug, Clone, Copy)]
pub struct Unwatched {
    /// jitterwatch's own threads (schedstat): never 0 while it runs.
    pub own: Option<f64>,
    /// The switch hook's paired reading (of the one the run took: the
    /// sched_switch program where `switch_tp`, else the per-CPU event),
    /// its null and the null's half-spread.
    pub switch_tp: bool,
    pub hook: Option<f64>,
    pub hook_null: Option<f64>,
    pub hook_null_half_spread: Option<f64>,
    /// The default programs' early returns (figure 3 with the load there).
    pub bpf_early: Option<f64>,
    /// End to end, from the same rotated runs: jitterwatch's cost (median),
    /// the half-width of its 95% interval, and bpftrace's on the same
    /// tracepoints (the peer: issue 33 wants at most half of it).
    pub end_to_end: Option<f64>,
    pub end_to_end_ci: Option<f64>,
    pub bpftrace_end_to_end: Option<f64>,
}

/// Figure 2: the total of the parts at most the target and below bpftrace,
/// each comparison decided only outside the hook's null spread. A hook
/// reading further below its null than that spread leaves it unresolved.
pub fn unwatched(u: Unwatched) -> Verdict {
    let judge = || -> Result<Verdict, Verdict> {
        let (own, early, bt) = (positive(u.own)?, positive(u.bpf_early)?, positive(u.bpftrace_end_to_end)?);
        let (Some(jw), Some(ci)) = (u.end_to_end.filter(|x| x.is_finite()), u.end_to_end_ci.filter(|x| x.is_finite() && *x >= 0.0)) else {
            return Err(Verdict::NotMeasured);
        };
        let (Some(h), Some(n), Some(s)) = (u.hook, u.hook_null, u.hook_null_half_spread) else {
            return Err(Verdict::NotMeasured);
        };
        let hook = hook_part(h, n, s).map_err(|e| match e {
            NoPart::NotMeasured => Verdict::NotMeasured,
            NoPart::BelowNull(_) => Verdict::Unresolved,
        })?;
        let total = own + hook + early;
        let limit = t::UNWATCHED_COST_PCT;
        // At most half of bpftrace's, each end to end with the interval.
        let (half_met, half_missed) = (jw + ci <= (bt - ci) / 2.0, jw - ci > (bt + ci) / 2.0);
        Ok(if total + s <= limit && half_met {
            Verdict::Met
        } else if total - s > limit || half_missed {
            Verdict::Missed
        } else {
            Verdict::Unresolved
        })
    };
    judge().unwrap_or_else(|v| v)
}

/// Figure 2's total, % (None while a part is missing or unresolved).
pub fn unwatched_total(u: Unwatched) -> Option<f64> {
    let hook = hook_part(u.hook?, u.hook_null?, u.hook_null_half_spread?).ok()?;
    let total = u.own? + hook + u.bpf_early?;
    total.is_finite().then_some(total)
}

/// Figure 4: 0 drops up to the target rate. `max_clean` is the highest
/// rate drained with 0 drops (0: every run dropped), `max_rate` the highest
/// reached. A load that never reached the target leaves it unmeasured (the
/// host was too slow to load-test it), unless drops came below it, which
/// misses it whatever the rest.
pub fn capacity(max_clean: Option<f64>, max_rate: Option<f64>) -> Verdict {
    let Ok(rate) = positive(max_rate) else { return Verdict::NotMeasured };
    let clean = match max_clean {
        Some(c) if c.is_finite() && (0.0..=rate).contains(&c) => c,
        _ => return Verdict::NotMeasured,
    };
    let target = t::CAPACITY_EVENTS_PER_SEC;
    if clean >= target {
        Verdict::Met
    } else if rate >= target || clean < rate {
        Verdict::Missed
    } else {
        Verdict::NotMeasured
    }
}

/// Figure 5: peak RSS, MiB.
pub fn memory(peak_mib: Option<f64>) -> Verdict {
    at_most(&[(peak_mib, t::PEAK_RSS_MIB)])
}

/// Figure 6: exec to the first sample and to the first event, ms.
pub fn startup(first_sample_ms: Option<f64>, first_event_ms: Option<f64>) -> Verdict {
    at_most(&[(first_sample_ms, t::STARTUP_MS), (first_event_ms, t::STARTUP_MS)])
}

/// Figure 7: per replayed size (CPUs, events/s per core, bytes per CPU),
/// every size in `sizes` at the rate target, and from
/// REPLAY_MEMORY_FROM_CPUS up within the memory target.
pub fn replay(rows: &[(usize, Option<f64>, Option<f64>)], sizes: &[usize]) -> Verdict {
    let mut checks = vec![];
    for &n in sizes {
        let Some(&(_, rate, mem)) = rows.iter().find(|r| r.0 == n) else { return Verdict::NotMeasured };
        match positive(rate) {
            Ok(r) => checks.push(r >= t::REPLAY_EVENTS_PER_CORE),
            Err(v) => return v,
        }
        if n >= t::REPLAY_MEMORY_FROM_CPUS {
            match positive(mem) {
                Ok(m) => checks.push(m <= t::REPLAY_BYTES_PER_CPU),
                Err(v) => return v,
            }
        }
    }
    if checks.is_empty() {
        Verdict::NotMeasured
    } else if checks.iter().all(|&ok| ok) {
        Verdict::Met
    } else {
        Verdict::Missed
    }
}

/// Figure 2's parts out of the figures.
pub fn unwatched_parts(f: &Figures) -> Unwatched {
    let g = |k: &str| get(f, Id::UnwatchedCost, k);
    // History lines before the key took the per-CPU event.
    let switch_tp = g("switch_tp") == Some(1.0);
    Unwatched {
        own: g("own_threads_pct"),
        switch_tp,
        hook: g(if switch_tp { "hook_tp_pct" } else { "hook_pct" }),
        hook_null: g("hook_null_pct"),
        hook_null_half_spread: g("hook_null_half_spread_pct"),
        bpf_early: g("bpf_early_returns_pct"),
        end_to_end: g("end_to_end_pct"),
        end_to_end_ci: g("end_to_end_ci95_pct"),
        bpftrace_end_to_end: g("bpftrace_end_to_end_pct"),
    }
}

/// The verdict of figure `id` in `f`. A figure absent from `f` (an older
/// history line) is not measured.
pub fn judge(id: Id, f: &Figures) -> Verdict {
    let Some(fig) = f.get(&id) else { return Verdict::NotMeasured };
    let g = |k: &str| fig.get(k);
    match id {
        Id::ProbeFloor => probe(g("floor_ratio"), g("quiet_ratio")),
        Id::ProbeFloorTsc => reported(&[g("floor_ratio")]),
        Id::UnwatchedCost => unwatched(unwatched_parts(f)),
        Id::BpfRunTime => reported(&[g("switch_ns_per_run")]),
        Id::RingCapacity => capacity(g("max_clean_events_per_sec"), g("max_events_per_sec")),
        Id::CollectorMix => at_most(&[(g("ns_per_event"), t::COLLECTOR_NS_PER_EVENT)]),
        Id::PeakRss => memory(g("peak_rss_mib")),
        Id::ScreenCost => at_most(&[
            (g("adds_80x24_pct"), t::SCREEN_ADDS_PCT),
            (g("adds_200x50_pct"), t::SCREEN_ADDS_PCT),
            (g("screen_80x24_cpu_pct"), t::SCREEN_WHOLE_PCT),
            (g("screen_200x50_cpu_pct"), t::SCREEN_WHOLE_PCT),
            (g("screen_80x24_lag_ms"), t::SCREEN_LAG_MS),
            (g("screen_200x50_lag_ms"), t::SCREEN_LAG_MS),
        ]),
        Id::ExplainScale => at_most(&[
            (g("slowest_s"), t::EXPLAIN_SECS),
            (g("all_s"), t::EXPLAIN_SECS),
            (g("slowest_rss_mib"), t::EXPLAIN_RSS_MIB),
            (g("all_rss_mib"), t::EXPLAIN_RSS_MIB),
        ]),
        Id::Startup => startup(g("first_sample_ms"), g("first_event_ms")),
        Id::ManyCpus => {
            let rows: Vec<_> =
                SIZES.iter().map(|&n| (n, g(&format!("events_per_core_sec_{n}")), g(&format!("bytes_per_cpu_{n}")))).collect();
            replay(&rows, &SIZES)
        }
        Id::WakeupProbe => {
            let pairs: Vec<(Option<f64>, Option<f64>)> = super::wakeup::CONDITIONS
                .iter()
                .flat_map(|c| {
                    let k = super::figures::slug(c.0);
                    ["avg", "p99"].map(|st| (g(&format!("{k}_jw_{st}_us")), g(&format!("{k}_ct_{st}_us"))))
                })
                .collect();
            within(&pairs, t::WAKEUP_VS_CYCLICTEST)
        }
        Id::WatchedCyclictest => match positive(g("wakeups_seen")) {
            Ok(_) => match within(&[(g("watched_avg_us"), g("alone_avg_us")), (g("watched_p50_us"), g("alone_p50_us"))], t::OBSERVER_AVG) {
                Verdict::Met => within(&[(g("watched_p99_us"), g("alone_p99_us"))], t::OBSERVER_P99),
                v => v,
            },
            Err(v) => v,
        },
        Id::PerInterruption => per_interruption(|k| g(k)),
        // Reported, over every value it holds.
        Id::RecorderCost => reported(&fig.values.values().copied().collect::<Vec<_>>()),
    }
}

#[cfg(test)]
mod tests;
