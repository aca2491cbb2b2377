//! The summary rows of BENCHMARKS.md and the terminal: each figure, what
//! was measured, its target and the verdict.

use super::report::{unwatched_total, Results};
use super::util::grouped;

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**MISSED**"
    }
}

pub(super) fn pct(ratio: f64) -> f64 {
    100.0 * (1.0 - ratio)
}

/// The summary rows: figure, measured, target, verdict.
pub fn verdicts(r: &Results) -> Vec<(String, String, &'static str, &'static str)> {
    let f = &r.floor;
    let m = &r.machine;
    let mean_txt = format!("period between hiccups {:.1} vs {:.1} ns = {:.3}×", f.jw_quiet.median, f.c_quiet.median, f.ratio_quiet.median);
    let s = &f.startup;
    let start_worst = s.to_first_sample.median.max(s.to_first_event.median);
    let mem_mib = r.mem.mem.max_rss_kb.max(r.mem.mem.hwm_kb) as f64 / 1024.0;
    vec![
        (
            "1. Probe floor".into(),
            format!(
                "floor {:.0} vs {:.0} ns = {:.2}×; {mean_txt}; auto threshold {:.0} ns",
                f.jw_floor.median, f.c_min.median, f.ratio_floor.median, f.threshold.median
            ),
            "≤ 1.1× the C loop",
            met(f.ratio_floor.median <= 1.1 && f.ratio_quiet.median <= 1.1),
        ),
        (
            "2. Cost to an unwatched CPU".into(),
            format!(
                "{:.2}% by parts (own threads {:.2}% + switch event {:.2}% + BPF early returns {:.2}%) vs bpftrace's BPF \
                 run time alone {:.2}%; end to end {:.1}% (bpftrace {:.1}%), host noise ±{:.0}%",
                unwatched_total(r),
                m.jw_threads_pct.median,
                m.hook_pct.median.max(0.0),
                r.bpf.busy_pct_unwatched(),
                m.bt_bpf_pct.median,
                m.jw_cost_pct(),
                m.bt_cost_pct(),
                100.0 * (m.null.max - m.null.min) / 2.0
            ),
            "≤ 1% and below bpftrace",
            met(unwatched_total(r) <= 1.0 && unwatched_total(r) < m.bt_bpf_pct.median),
        ),
        (
            "3. BPF run time per event".into(),
            r.bpf
                .watched
                .iter()
                .find(|p| p.name == "on_switch_out" || p.name == "on_sched_switch")
                .map_or("n/a".into(), |p| format!("{} {:.0} ns/run (all programs below)", p.name, p.ns_per_run.median)),
            "(reported)",
            "—",
        ),
        (
            "4. Ring-buffer capacity".into(),
            format!("0 drops up to {} events/s (highest reached {})", grouped(r.cap.max_clean), grouped(r.cap.max_rate)),
            "0 drops at ≥ 500k events/s",
            met(r.cap.max_clean >= 500_000.0),
        ),
        ("5. Peak RSS".into(), format!("{mem_mib:.1} MiB"), "≤ 32 MiB", met(mem_mib <= 32.0)),
        (
            "6. Start-up".into(),
            format!("first sample {:.0} ms, first event {:.0} ms after exec", s.to_first_sample.median, s.to_first_event.median),
            "≤ 1 s",
            met(start_worst <= 1000.0),
        ),
    ]
}

/// The figures, for the terminal.
pub fn print(r: &Results) {
    println!("\nbench: results (medians)");
    for (fig, got, target, v) in verdicts(r) {
        println!("  {fig:<30} {got}  [target {target}: {}]", v.trim_matches('*'));
    }
}
