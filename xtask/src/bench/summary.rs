//! The summary rows (figure, measured, target, verdict), from a run's
//! figures alone, so that the history can redraw them for any past run.

use super::figures::{get, slug, Figures};
use super::ids::Id;
use super::replay::SIZES;
use super::targets;
use super::util::grouped;
use super::verdicts::{judge, unwatched_parts, unwatched_total, Verdict};

pub struct Row {
    /// The figure's title.
    pub name: &'static str,
    pub measured: String,
    pub target: String,
    pub verdict: Verdict,
}

/// A number with `prec` decimals, or "n/a".
fn n(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.prec$}"),
        _ => "n/a".into(),
    }
}

/// A signed change in %, or "n/a".
fn pct(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:+.1}%"),
        _ => "n/a".into(),
    }
}

/// A rate with thousands separators, or "n/a".
fn g(v: Option<f64>) -> String {
    v.map_or("n/a".into(), grouped)
}

/// What figure `id` measured, in words and numbers.
pub fn measured(id: Id, f: &Figures) -> String {
    let v = |k: &str| get(f, id, k);
    if f.get(&id).is_none_or(|x| x.values.values().all(Option::is_none)) {
        return if id == Id::ProbeFloorTsc { "the TSC is not usable here".into() } else { "not measured".into() };
    }
    match id {
        Id::ProbeFloor => format!(
            "floor {} vs {} ns = {}×; period between hiccups {} vs {} ns = {}×; auto threshold {} ns",
            n(v("floor_ns"), 0),
            n(v("c_floor_ns"), 0),
            n(v("floor_ratio"), 2),
            n(v("quiet_ns"), 1),
            n(v("c_quiet_ns"), 1),
            n(v("quiet_ratio"), 3),
            n(v("threshold_ns"), 0)
        ),
        Id::ProbeFloorTsc => format!(
            "floor {} vs {} ns = {}×; period between hiccups {}×; auto threshold {} ns",
            n(v("floor_ns"), 0),
            n(get(f, Id::ProbeFloor, "c_floor_ns"), 0),
            n(v("floor_ratio"), 2),
            n(v("quiet_ratio"), 3),
            n(v("threshold_ns"), 0)
        ),
        Id::UnwatchedCost => {
            let p = unwatched_parts(f);
            let hook = match (p.hook, p.hook_null, p.hook_null_half_spread) {
                (Some(h), Some(nl), Some(s)) => match super::results::hook_part(h, nl, s) {
                    Ok(x) => format!("{x:.2}%"),
                    Err(_) => format!("unresolved ({h:+.2}%, null {nl:+.2}%)"),
                },
                _ => "not measured".into(),
            };
            // The other hooks by the same harness, where the run measured them.
            let others = v("hook_tpevent_pct").map_or(String::new(), |e| {
                // Its cost on the watched CPU itself, where a run measured it.
                let there = v("tpevent_watched_ns").map_or(String::new(), |ns| format!(", {ns:.0} ns a switch on the watched CPU"));
                // And the two hooks jitterwatch can use, on the watched CPU.
                let ours = match (v("perf_bpf_watched_ns"), v("tp_watched_ns")) {
                    (Some(e), Some(t)) => format!("; on the watched CPU, programs returning at once: the switch event {e:.0} ns a switch, the program {t:.0}"),
                    _ => String::new(),
                };
                format!(
                    ", a sched_switch perf event {}%{there} (with a BPF program {}%), switch records {}%{ours}",
                    n(Some(e), 2),
                    n(v("hook_tpevent_bpf_pct"), 2),
                    n(v("hook_switchrec_pct"), 2)
                )
            });
            let (taken, other, other_key) =
                if p.switch_tp { ("sched_switch program", "the switch event", "hook_pct") } else { ("switch event", "a sched_switch program", "hook_tp_pct") };
            format!(
                "{} by parts (own threads {}% + {taken} {hook} (± {}) + BPF early returns {}%; {other} instead \
                 {}%{others}); end to end {}% ± {} (95%) vs bpftrace's {}% (a bare spinning vCPU {}%), host noise ±{}%",
                unwatched_total(p).map_or("unresolved".into(), |t| format!("{t:.2}%")),
                n(p.own, 2),
                n(p.hook_null_half_spread, 2),
                n(p.bpf_early, 2),
                n(v(other_key), 2),
                n(v("end_to_end_pct"), 1),
                n(v("end_to_end_ci95_pct"), 1),
                n(v("bpftrace_end_to_end_pct"), 1),
                n(v("spin_end_to_end_pct"), 1),
                n(v("noise_pct"), 0)
            )
        }
        Id::BpfRunTime => format!(
            "switch program {} ns/run at {} events/s (every program in section 3); with a kernel stack at each switch (--stacks-above) {}",
            n(v("switch_ns_per_run"), 0),
            g(v("events_per_sec")),
            v("switch_stack_ns_per_run").map_or("not measured".to_string(), |s| format!("{s:.0} ns/run"))
        ),
        Id::RingCapacity => format!(
            "0 drops up to {} events/s (highest reached {}; {})",
            g(v("max_clean_events_per_sec")),
            g(v("max_events_per_sec")),
            v("first_drops_events_per_sec").map_or("no run dropped".to_string(), |d| format!("drops from {} events/s", g(Some(d))))
        ),
        Id::RecorderCost => format!(
            "consumer ns/event, recorder off → on: perf pipe {} → {}, storm {} → {}; storm's peak {} of {} MiB per CPU",
            n(v("pipe_off_ns_per_event"), 0),
            n(v("pipe_on_ns_per_event"), 0),
            n(v("storm_off_ns_per_event"), 0),
            n(v("storm_on_ns_per_event"), 0),
            n(v("storm_peak_mib"), 1),
            n(v("cap_mib"), 0)
        ),
        Id::CollectorMix => format!(
            "consumer {} ns/event at {} events/s of a TCP ping-pong in passive mode ({}% of a CPU)",
            n(v("ns_per_event"), 0),
            g(v("events_per_sec")),
            n(v("consumer_cpu_pct"), 1)
        ),
        Id::PeakRss => format!("{} MiB", n(v("peak_rss_mib"), 1)),
        Id::ScreenCost => format!(
            "jitterwatch {} % of a CPU headless, {} % with the screen at 80x24 (+{}), {} % at 200x50 (+{}); lag {} / {} / {} ms",
            n(v("headless_cpu_pct"), 1),
            n(v("screen_80x24_cpu_pct"), 1),
            n(v("adds_80x24_pct"), 1),
            n(v("screen_200x50_cpu_pct"), 1),
            n(v("adds_200x50_pct"), 1),
            n(v("headless_lag_ms"), 0),
            n(v("screen_80x24_lag_ms"), 0),
            n(v("screen_200x50_lag_ms"), 0)
        ),
        Id::ExplainScale => format!(
            "10^6 operations against 10^6 stalls: the slowest 1% in {} s ({} MiB), every one in {} s ({} MiB)",
            n(v("slowest_s"), 2),
            n(v("slowest_rss_mib"), 0),
            n(v("all_s"), 2),
            n(v("all_rss_mib"), 0)
        ),
        Id::Startup => format!("first sample {} ms, first event {} ms after exec", n(v("first_sample_ms"), 0), n(v("first_event_ms"), 0)),
        Id::ManyCpus => {
            let show = |c: usize| match (v(&format!("events_per_core_sec_{c}")), v(&format!("bytes_per_cpu_{c}"))) {
                (None, None) => format!("{c} CPUs not measured"),
                (r, m) => format!("{c} CPUs {} M/s, {} KiB/CPU", n(r.map(|x| x / 1e6), 1), n(m.map(|x| x / 1024.0), 0)),
            };
            format!("events/s per consumer core and memory: {}", SIZES.map(show).join("; "))
        }
        Id::WakeupProbe => super::wakeup::CONDITIONS
            .map(|c| {
                let k = slug(c.0);
                let s = |x: &str| n(v(&format!("{k}_{x}_us")), 0);
                format!(
                    "{}: avg {} vs {} µs, p99 {} vs {} µs, max {} vs {} µs",
                    c.0,
                    s("jw_avg"),
                    s("ct_avg"),
                    s("jw_p99"),
                    s("ct_p99"),
                    s("jw_max"),
                    s("ct_max")
                )
            })
            .join("; "),
        Id::WatchedCyclictest => format!(
            "cyclictest alone vs watched: avg {} vs {} µs, p50 {} vs {} µs, p99 {} vs {} µs; each round's change, median: avg {}, p50 {}, p99 {} ({} wake-ups seen per run); within one run, its measurement watched less not watched: avg {} ns ({}), p50 {} ns, p99 {} ns; the hooks, returning at once, against no hook: avg {} ns ({}), p50 {} ns; the hooks attached, not watched, less nothing attached (separate runs): p50 {} ns",
            n(v("alone_avg_us"), 1),
            n(v("watched_avg_us"), 1),
            n(v("alone_p50_us"), 0),
            n(v("watched_p50_us"), 0),
            n(v("alone_p99_us"), 0),
            n(v("watched_p99_us"), 0),
            pct(v("paired_avg_pct")),
            pct(v("paired_p50_pct")),
            pct(v("paired_p99_pct")),
            n(v("wakeups_seen"), 0),
            n(v("in_run_added_avg_ns"), 0),
            pct(v("in_run_added_avg_pct")),
            n(v("in_run_added_p50_ns"), 0),
            n(v("in_run_added_p99_ns"), 0),
            n(v("in_run_hooks_avg_ns"), 0),
            pct(v("in_run_hooks_avg_pct")),
            n(v("in_run_hooks_p50_ns"), 0),
            n(v("in_run_off_p50_ns").zip(v("in_run_none_p50_ns")).map(|(a, b)| a - b), 0)
        ),
        Id::PerInterruption => crate::bench::interruption::Kind::ALL
            .map(|k| {
                let x = |c: &str| v(&format!("{}_{c}_p50_ns", k.key()));
                let d = |a: Option<f64>, b: Option<f64>| n(a.zip(b).map(|(a, b)| a - b), 0);
                let stats = |c: &str| v(&format!("{}_bpf_stats{c}_ns", k.key()));
                let own = v(&format!("self_{}_ns", k.key()));
                let [kernel, share, work] = crate::bench::verdicts::per_interruption_shares(x, own);
                let firing = x("hooks").zip(k.programs()).map(|(h, p)| h / p.len() as f64);
                format!(
                    "{}: charged to the kernel {} over no hook, self {} of what watching adds, our work {} the hooks alone; our programs' work {} ns paired, the hooks alone {} ns (within the run, against no hook; {} ns by separate runs; {} ns a firing, priced at start at {} ns); self {} ns{}",
                    k.describe(),
                    kernel.map_or("not measured".to_string(), |p| format!("{p:+.1}%")),
                    share.map_or("not measured".to_string(), |p| format!("{p:.0}%")),
                    work.map_or("not measured".to_string(), |r| format!("{r:.2}×")),
                    n(x("paired"), 0),
                    n(x("hooks"), 0),
                    d(x("floor"), x("none")),
                    n(firing, 0),
                    n(v("dispatch_priced_ns"), 0),
                    n(own, 0),
                    stats("").zip(stats("_floor")).map_or(String::new(), |(w, f)| format!(
                        "; kernel BPF stats {w:.0} ns less {f:.0} returning at once = {:.0} ns",
                        w - f
                    ))
                )
            })
            .join("; "),
    }
}

/// Every figure's row.
pub fn rows(f: &Figures) -> Vec<Row> {
    Id::ALL
        .iter()
        .map(|&id| Row { name: id.title(), measured: measured(id, f), target: targets::text(id), verdict: judge(id, f) })
        .collect()
}

/// The figures, for the terminal.
pub fn print(f: &Figures) {
    println!("\nbench: results (medians)");
    for r in rows(f) {
        println!("  {:<36} {}  [target {}: {}]", r.name, r.measured, r.target, r.verdict.as_str().trim_matches('*'));
    }
}
