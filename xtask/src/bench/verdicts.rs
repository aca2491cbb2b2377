//! The summary rows of BENCHMARKS.md and the terminal: each figure, what
//! was measured, its target and the verdict.

use super::report::{unwatched_total, Results};
use super::util::grouped;
use super::util::Spread;

/// A figure's verdict. A measurement that did not happen is never a
/// number standing for it: its verdict is `NotMeasured`, never `Met`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    NotMeasured,
    /// Reported, with no target.
    Reported,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "**MISSED**",
            Verdict::NotMeasured => "not measured",
            Verdict::Reported => "—",
        }
    }
}

/// A real sample: finite and above 0 (every figure here is a positive
/// time, rate, size or ratio; 0 is what an absent sample defaults to).
fn sample(v: f64) -> Option<f64> {
    (v.is_finite() && v > 0.0).then_some(v)
}

/// Every value sampled and each at most its limit.
fn at_most(checks: &[(f64, f64)]) -> Verdict {
    if checks.iter().any(|&(v, _)| sample(v).is_none()) {
        return Verdict::NotMeasured;
    }
    if checks.iter().all(|&(v, limit)| v <= limit) {
        Verdict::Met
    } else {
        Verdict::Missed
    }
}

/// Every value sampled and each at least its floor.
fn at_least(checks: &[(f64, f64)]) -> Verdict {
    if checks.iter().any(|&(v, _)| sample(v).is_none()) {
        return Verdict::NotMeasured;
    }
    if checks.iter().all(|&(v, floor)| v >= floor) {
        Verdict::Met
    } else {
        Verdict::Missed
    }
}

/// Figure 7: every size replayed at ≥ `rate` events/s per core, and the
/// largest sizes (where the fixed part no longer counts) within `mem`
/// bytes per CPU. A size not replayed leaves it unmeasured.
fn replay(rows: &[super::replay::Row], sizes: &[usize], rate: f64, mem: f64) -> Verdict {
    let Some(found) = sizes.iter().map(|&n| rows.iter().find(|r| r.cpus == n)).collect::<Option<Vec<_>>>() else {
        return Verdict::NotMeasured;
    };
    let big: Vec<(f64, f64)> = found.iter().filter(|r| r.cpus >= 64).map(|r| (r.mem_per_cpu.median, mem)).collect();
    match (at_least(&found.iter().map(|r| (r.per_core.median, rate)).collect::<Vec<_>>()), at_most(&big)) {
        (Verdict::NotMeasured, _) | (_, Verdict::NotMeasured) => Verdict::NotMeasured,
        (Verdict::Met, Verdict::Met) => Verdict::Met,
        _ => Verdict::Missed,
    }
}

/// Figure 4: 0 drops up to `target` events/s. A load that never reached
/// the target leaves it unmeasured (the host was too slow to load-test
/// it), unless drops came below it, which misses it whatever the rest.
fn capacity(max_clean: f64, max_rate: f64, target: f64) -> Verdict {
    match (sample(max_clean), sample(max_rate)) {
        (Some(clean), _) if clean >= target => Verdict::Met,
        (_, Some(rate)) if rate >= target => Verdict::Missed,
        (Some(clean), Some(rate)) if clean < rate => Verdict::Missed,
        _ => Verdict::NotMeasured,
    }
}

pub(super) fn pct(ratio: f64) -> f64 {
    100.0 * (1.0 - ratio)
}

/// The switch hook's part of figure 2, % of the unwatched CPU, from its
/// paired measurement and the same harness opening nothing (the null).
/// A reading within the null's spread of the null is that close to 0 and
/// counts as what it read (at least 0: a hook cannot speed the CPU up); a
/// reading further below the null than its spread is a bias the harness
/// does not explain: unresolved, never counted as 0.
pub fn hook_part(hook: &Spread, null: &Spread) -> Result<f64, String> {
    let spread = (null.max - null.min) / 2.0;
    if !(hook.median.is_finite() && null.median.is_finite() && spread.is_finite()) {
        return Err("not measured".into());
    }
    if hook.median < null.median - spread {
        return Err(format!("reads {:+.2}% against a null of {:+.2} ± {spread:.2}%", hook.median, null.median));
    }
    Ok(hook.median.max(0.0))
}

/// The summary rows: figure, measured, target, verdict.
pub fn verdicts(r: &Results) -> Vec<(String, String, &'static str, Verdict)> {
    let f = &r.floor;
    let m = &r.machine;
    let mean_txt = format!("period between hiccups {:.1} vs {:.1} ns = {:.3}×", f.jw_quiet.median, f.c_quiet.median, f.ratio_quiet.median);
    let s = &f.startup;
    let mem_mib = r.mem.mem.max_rss_kb.max(r.mem.mem.hwm_kb) as f64 / 1024.0;
    vec![
        (
            "1. Probe floor".into(),
            format!(
                "floor {:.0} vs {:.0} ns = {:.2}×; {mean_txt}; auto threshold {:.0} ns",
                f.jw_floor.median, f.c_min.median, f.ratio_floor.median, f.threshold.median
            ),
            "≤ 1.1× the C loop",
            at_most(&[(f.ratio_floor.median, 1.1), (f.ratio_quiet.median, 1.1)]),
        ),
        match &f.tsc {
            Some(t) => (
                "1b. Probe floor, `--clock tsc`".into(),
                format!(
                    "floor {:.0} vs {:.0} ns = {:.2}×; auto threshold {:.0} ns",
                    t.floor.median, f.c_min.median, t.ratio_floor.median, t.threshold.median
                ),
                "≤ 0.6× the C loop",
                at_most(&[(t.ratio_floor.median, 0.6)]),
            ),
            None => {
                ("1b. Probe floor, `--clock tsc`".into(), "the TSC is not usable here".into(), "≤ 0.6× the C loop", Verdict::NotMeasured)
            }
        },
        (
            "2. Cost to an unwatched CPU".into(),
            format!(
                "{} by parts (own threads {:.2}% + switch event {} + BPF early returns {:.2}%) vs bpftrace's BPF \
                 run time alone {:.2}%; end to end {:.1}% (bpftrace {:.1}%, a bare spinning vCPU {:.1}%), host noise ±{:.0}%",
                unwatched_total(r).map_or("unresolved".into(), |t| format!("{t:.2}%")),
                m.jw_threads_pct.median,
                match hook_part(&m.hook_pct, &m.hook_null_pct) {
                    Ok(v) => format!("{v:.2}%"),
                    Err(_) => format!("unresolved ({:+.2}%, null {:+.2}%)", m.hook_pct.median, m.hook_null_pct.median),
                },
                r.bpf.busy_pct_unwatched(),
                m.bt_bpf_pct.median,
                m.jw_cost_pct(),
                m.bt_cost_pct(),
                m.spin_cost_pct(),
                100.0 * (m.null.max - m.null.min) / 2.0
            ),
            "≤ 1% and below bpftrace",
            match unwatched_total(r) {
                // An unresolved part: the total is not known.
                None => Verdict::NotMeasured,
                Some(total) => match at_most(&[(total.max(f64::MIN_POSITIVE), 1.0), (m.bt_bpf_pct.median, f64::INFINITY)]) {
                    Verdict::Met if total >= m.bt_bpf_pct.median => Verdict::Missed,
                    v => v,
                },
            },
        ),
        (
            "3. BPF run time per event".into(),
            r.bpf
                .watched
                .iter()
                .find(|p| p.name == "on_switch_out" || p.name == "on_sched_switch")
                .map_or("n/a".into(), |p| format!("{} {:.0} ns/run (all programs below)", p.name, p.ns_per_run.median)),
            "(reported)",
            Verdict::Reported,
        ),
        (
            "4. Ring-buffer capacity".into(),
            format!("0 drops up to {} events/s (highest reached {})", grouped(r.cap.max_clean), grouped(r.cap.max_rate)),
            "0 drops at ≥ 500k events/s",
            capacity(r.cap.max_clean, r.cap.max_rate, 500_000.0),
        ),
        ("5. Peak RSS".into(), format!("{mem_mib:.1} MiB"), "≤ 32 MiB", at_most(&[(mem_mib, 32.0)])),
        (
            "7. Many CPUs, by replay".into(),
            {
                let at = |n: usize| r.replay.iter().find(|x| x.cpus == n);
                let show = |n: usize| {
                    at(n).map_or(format!("{n} CPUs not measured"), |x| {
                        format!("{n} CPUs {:.1} M/s, {:.0} KiB/CPU", x.per_core.median / 1e6, x.mem_per_cpu.median / 1024.0)
                    })
                };
                format!("events/s per consumer core and memory: {}", super::replay::SIZES.map(show).join("; "))
            },
            "≥ 5 M events/s per core; ≤ 1 MiB per CPU at 64 and 256",
            replay(&r.replay, &super::replay::SIZES, 5e6, 1024.0 * 1024.0),
        ),
        (
            "8. Wake-up probe vs cyclictest".into(),
            r.wakeup
                .iter()
                .map(|w| {
                    format!(
                        "{}: p99 {:.0} vs {:.0} µs, max {:.0} vs {:.0} µs",
                        w.condition, w.jitterwatch[2].median, w.cyclictest[2].median, w.jitterwatch[3].median, w.cyclictest[3].median
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
            "(reported: jitterwatch vs cyclictest)",
            Verdict::Reported,
        ),
        (
            "6. Start-up".into(),
            format!("first sample {:.0} ms, first event {:.0} ms after exec", s.to_first_sample.median, s.to_first_event.median),
            "≤ 1 s",
            at_most(&[(s.to_first_sample.median, 1000.0), (s.to_first_event.median, 1000.0)]),
        ),
    ]
}

/// The figures, for the terminal.
pub fn print(r: &Results) {
    println!("\nbench: results (medians)");
    for (fig, got, target, v) in verdicts(r) {
        println!("  {fig:<30} {got}  [target {target}: {}]", v.as_str().trim_matches('*'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_sample_is_never_met() {
        assert_eq!(at_most(&[(0.9, 1.1)]), Verdict::Met);
        assert_eq!(at_most(&[(1.2, 1.1)]), Verdict::Missed);
        assert_eq!(at_most(&[(0.0, 32.0)]), Verdict::NotMeasured, "peak RSS with no sample");
        assert_eq!(at_most(&[(f64::NAN, 1.1)]), Verdict::NotMeasured);
        assert_eq!(at_most(&[(5.0, 1000.0), (0.0, 1000.0)]), Verdict::NotMeasured, "start-up with no first event");
        assert_eq!(at_most(&[(-0.7, 1.0)]), Verdict::NotMeasured, "a negative cost is not a measurement of 0");
    }

    fn spread(median: f64, min: f64, max: f64) -> Spread {
        Spread { median, min, max, n: 5 }
    }

    #[test]
    fn a_hook_reading_below_its_null_is_unresolved_not_zero() {
        let null = spread(0.0, -0.1, 0.1);
        assert_eq!(hook_part(&spread(0.05, 0.0, 0.1), &null), Ok(0.05));
        assert_eq!(hook_part(&spread(-0.05, -0.1, 0.0), &null), Ok(0.0), "within the null: that close to 0");
        let e = hook_part(&spread(-0.9, -1.1, -0.7), &null).unwrap_err();
        assert!(e.contains("-0.90%"), "{e}");
        assert_eq!(hook_part(&spread(f64::NAN, 0.0, 0.0), &null), Err("not measured".into()));
    }

    #[test]
    fn replay_needs_every_size_and_both_limits() {
        use crate::bench::replay::Row;
        let row = |cpus, rate, mem| Row {
            cpus,
            events: 1e7,
            per_core: spread(rate, rate, rate),
            mem_per_cpu: spread(mem, mem, mem),
            stream: (2e4, 2e3, 60.0),
        };
        let good = vec![row(1, 12e6, 2e6), row(64, 11e6, 3e5), row(256, 6e6, 3e5)];
        assert_eq!(replay(&good, &[1, 64, 256], 5e6, 1048576.0), Verdict::Met, "1 CPU's fixed part is not judged");
        assert_eq!(replay(&good[..2], &[1, 64, 256], 5e6, 1048576.0), Verdict::NotMeasured, "256 CPUs not replayed");
        let slow = vec![row(1, 12e6, 2e6), row(64, 11e6, 3e5), row(256, 4e6, 3e5)];
        assert_eq!(replay(&slow, &[1, 64, 256], 5e6, 1048576.0), Verdict::Missed);
        let fat = vec![row(1, 12e6, 2e6), row(64, 11e6, 3e6), row(256, 6e6, 3e5)];
        assert_eq!(replay(&fat, &[1, 64, 256], 5e6, 1048576.0), Verdict::Missed);
        let nan = vec![row(1, f64::NAN, 2e6), row(64, 11e6, 3e5), row(256, 6e6, 3e5)];
        assert_eq!(replay(&nan, &[1, 64, 256], 5e6, 1048576.0), Verdict::NotMeasured);
    }

    #[test]
    fn capacity_needs_the_target_reached() {
        assert_eq!(capacity(679_228.0, 679_228.0, 500_000.0), Verdict::Met);
        assert_eq!(capacity(246_946.0, 246_946.0, 500_000.0), Verdict::NotMeasured, "the load never got there");
        assert_eq!(capacity(200_000.0, 600_000.0, 500_000.0), Verdict::Missed, "drops before the target");
        assert_eq!(capacity(200_000.0, 300_000.0, 500_000.0), Verdict::Missed, "drops below the target");
        assert_eq!(capacity(0.0, 0.0, 500_000.0), Verdict::NotMeasured);
    }
}
