//! The summary from made-up aggregates: its rows, kinds and JSON.

use super::*;
use crate::cause::{comm, Cause};
use crate::interval::hiccup;
use crate::interval::Method;
use crate::stats::Counters;

#[test]
fn text_and_json_carry_the_same_figures_escaped() {
    let mut s = Stats::new(&[1], 0);
    // A comm with an escape, a bidi override, a byte that is not UTF-8
    // and a literal backslash sequence.
    let evil = Cause::Task { comm: comm(b"ev\\x1b\x1b\xe2\x80\xae\xff"), pid: Some(9) };
    s.record(&hiccup(1, 10, vec![(evil, 900)], 100));
    let mut raw = Counters::new(&[1]);
    raw.cpus[0].threshold_ns = 250;
    (raw.events, raw.consumer_cpu_ns, raw.setup_cpu_ns) = (400, 20_000, 30_000_000);
    s.update_counters(raw, 1_000_000);
    let sum = Summary::from_stats(&s, &Default::default());
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.lines().next().unwrap().starts_with(" cpu threshold_ns   hiccups"));
    assert!(text.contains("   1          250         1"), "{text}");
    let shown = "ev\\\\x1b\\x1b\\u{202e}\\xff[9]";
    assert!(text.contains(shown), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\u{202e}'));
    assert!(text.contains("consumer thread: 20.0µs of CPU, 2.0% of one CPU, 50 ns per event (after 30.0ms of set-up"), "{text}");
    let mut json = Vec::new();
    sum.write_json(&mut json).unwrap();
    assert!(!String::from_utf8(json.clone()).unwrap().contains('\u{202e}'), "raw bidi override in the JSON");
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["cpus"][0]["hiccups"], 1);
    assert_eq!(v["cpus"][0]["max_ns"], 1000);
    assert_eq!(v["cpus"][0]["top_causes"][0]["kind"], "task");
    assert_eq!(v["cpus"][0]["top_causes"][0]["name"], shown);
    assert_eq!(v["cpus"][0]["stolen_pct"], 0.1);
    assert_eq!(v["overhead"]["consumer_cpu_ns"], 20_000);
    assert_eq!(v["overhead"]["consumer_ns_per_event"], 50.0);
    assert_eq!(v["overhead"]["setup_cpu_ns"], 30_000_000);
}

/// Per-class totals: every cause of a kind summed, also those past the
/// top few, in the JSON and the text.
#[test]
fn causes_are_summed_by_kind() {
    let mut s = Stats::new(&[1], 0);
    let irq = |n: i32| Cause::Irq { irq: n, name: std::sync::Arc::from(&b"dev"[..]) };
    for i in 0..8 {
        s.record(&hiccup(1, 10 + i, vec![(irq(30 + i as i32), 300), (Cause::Softirq(3), 100)], 50));
    }
    s.record(&hiccup(1, 100, vec![(Cause::Task { comm: comm(b"hog"), pid: Some(7) }, 5_000)], 0));
    let sum = Summary::from_stats(&s, &Default::default());
    let k: Vec<(Kind, u64, u64)> = sum.cpus[0].by_kind.iter().map(|r| (r.kind, r.count, r.total_ns)).collect();
    assert_eq!(k, [(Kind::Task, 1, 5_000), (Kind::Irq, 8, 2_400), (Kind::Softirq, 8, 800), (Kind::Unexplained, 8, 400)]);
    let mut json = Vec::new();
    sum.write_json(&mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["cpus"][0]["by_kind"][1], serde_json::json!({"kind": "irq", "count": 8, "total_ns": 2400}));
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("by kind: task 1 × 5.0µs, irq 8 × 2.4µs, softirq 8 × 800ns, unexplained 8 × 400ns"), "{text}");
}

#[test]
fn the_sidecar_sits_beside_the_csv() {
    assert_eq!(sidecar(Path::new("runs/untuned.csv")), Path::new("runs/untuned.summary.json"));
    assert_eq!(sidecar(Path::new("hiccups")), Path::new("hiccups.summary.json"));
    assert_eq!(sidecar(Path::new("a.b.txt")), Path::new("a.b.txt.summary.json"));
}

/// Drop counters that could not be read are said, never shown as 0.
#[test]
fn unreadable_drop_counters_are_a_note() {
    let mut s = Stats::new(&[1], 0);
    let mut raw = Counters::new(&[1]);
    raw.cpus[0].drops = 12;
    raw.drop_read_failures = 2;
    s.update_counters(raw, 1_000_000);
    let sum = Summary::from_stats(&s, &Default::default());
    assert_eq!(sum.cpus[0].ringbuf_drops, 12);
    assert!(sum.notes.iter().any(|n| n.contains("could not be read 2 time(s)") && n.contains("lower bounds")), "{:?}", sum.notes);
}

/// One meaning per field across modes: a CPU's share of stolen time whose
/// causes are unknown is `unknown_pct`, never `lost_pct` (a thread's share
/// of its runnable time); the spin loop's figures are null without a spin
/// probe; the layout says its version.
#[test]
fn the_json_says_one_thing_per_field_in_every_mode() {
    let json = |method: Method| {
        let mut s = Stats::new(&[1], 0).measuring(method);
        // Each source's own figures, as it reports them.
        let mut raw = Counters::new(&[1]);
        raw.cpus[0].own = match method {
            Method::Spin => crate::stats::SourceFigures::Spin(Default::default()),
            Method::Wakeup => crate::stats::SourceFigures::Wakeup(Default::default()),
            Method::Passive => crate::stats::SourceFigures::Passive,
        };
        s.update_counters(raw, 1);
        let mut out = Vec::new();
        Summary::from_stats(&s, &Default::default()).write_json(&mut out).unwrap();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()
    };
    for method in Method::ALL {
        let (v, mode) = (json(method), method.label());
        assert_eq!(v["schema_version"], SCHEMA_VERSION, "{mode}");
        let c = &v["cpus"][0];
        assert!(c.get("lost_pct").is_none() && c["unknown_pct"] == 0.0, "{mode}: {c}");
        let spin = method == Method::Spin;
        for k in ["loop_floor_ns", "loop_mean_ns", "loop_quiet_mean_ns", "clock"] {
            assert_eq!(c[k].is_null(), !spin, "{mode}: {k} = {}", c[k]);
        }
    }
}

/// What recurs reaches the summary: a softirq every 4 ms (the tick's
/// period) among random unexplained stalls, found as the collector finds
/// it at the end; the random stalls have no period. The screen's line
/// and the JSON's row say the same.
#[test]
fn a_cause_that_recurs_is_said_with_its_period() {
    let mut s = Stats::new(&[2], 0);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut t = 1_000_000_000u64;
    for k in 0..3_000u64 {
        // A xorshift: random stalls, ~1 per ms.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t += 50_000 + x % 1_900_000;
        s.record(&hiccup(2, t, vec![], 3_000));
        s.record(&hiccup(2, 1_000_000_000 + k * 4_000_000 + 7_000, vec![(Cause::Softirq(1), 2_000)], 0));
    }
    s.set_now_ns(t);
    s.look_for_periods(t, true);
    let sum = Summary::from_stats(&s, &Default::default());
    let p = &sum.cpus[0].periodic;
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!((p[0].cause.as_str(), p[0].period_ns, p[0].share), ("softirq:TIMER", 4_000_000, 1.0));
    assert_eq!(p[0].phase_ns, 0, "7 µs into each period: the first twentieth");
    assert!(p[0].likely.starts_with("at the tick's period"));
    let mut out = Vec::new();
    sum.write_text(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("recurs: softirq:TIMER every 4.000 ms (100% of its last"), "{text}");
    assert!(!text.contains("recurs: unexplained"), "{text}");
}

/// Why the tick ran: the kernel's verdicts reach the JSON and the text,
/// with the dependency's meaning and, for SCHED, the task beside.
#[test]
fn the_tick_s_verdicts_are_said_with_what_stands_behind() {
    let mut s = Stats::new(&[3], 0);
    s.record(&hiccup(3, 10, vec![(Cause::Task { comm: comm(b"stress"), pid: Some(42) }, 900)], 0));
    let mut raw = Counters::new(&[3]);
    let mut t = crate::tick::Tally { stops: 1, refusals: 700, last_dep: 1 << 2, nohz_full: true, ..Default::default() };
    t.deps[2] = 699;
    t.deps[4] = 1;
    raw.cpus[0].tick = Some(t);
    s.update_counters(raw, 1_000_000);
    let sum = Summary::from_stats(&s, &Default::default());
    let mut json = Vec::new();
    sum.write_json(&mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let tick = &v["cpus"][0]["tick"];
    assert_eq!(tick["state"], "running");
    assert_eq!(tick["dependencies"], serde_json::json!(["SCHED", "RCU"]));
    assert_eq!((tick["last"].as_str(), tick["behind"].as_str()), (Some("SCHED"), Some("task:stress[42]")));
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("  tick: running at the end (1 stops, 700 attempts refused): SCHED, more than one runnable task"), "{text}");
    assert!(text.contains("; also kept by RCU; beside the watched task: task:stress[42]"), "{text}");
    // Where the kernel never said (not nohz_full): null, no line.
    let mut s = Stats::new(&[3], 0);
    s.update_counters(Counters::new(&[3]), 1_000_000);
    let sum = Summary::from_stats(&s, &Default::default());
    assert!(sum.cpus[0].tick.is_none());
}

/// `--stacks-above`: a top cause's stack in the text (under its row) and
/// the JSON, frames escaped; a cause without one has no `stack`.
#[test]
fn a_top_cause_carries_its_stack_escaped() {
    let mut s = Stats::new(&[1], 0);
    let hog = Cause::Task { comm: comm(b"hog"), pid: Some(5) };
    let mut h = hiccup(1, 10, vec![(hog.clone(), 2_000_000)], 100);
    h.stack = Some(std::sync::Arc::new(crate::interval::Stack {
        cause: hog.into(),
        frames: vec![crate::cause::Symbol::from("schedule+0x23"), crate::cause::Symbol::from("evil\u{202e}")].into(),
    }));
    s.record(&h);
    let sum = Summary::from_stats(&s, &Default::default());
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("stack: schedule+0x23 ← evil\\u{202e}"), "{text}");
    let mut json = Vec::new();
    sum.write_json(&mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let top = &v["cpus"][0]["top_causes"];
    assert_eq!(top[0]["stack"], serde_json::json!(["schedule+0x23", "evil\\u{202e}"]));
    assert!(top[1].get("stack").is_none(), "{top}");
}

/// POSIX_TIMER kept the tick: the audit's processes with CPU-clock timers
/// stand behind it, in the JSON and the text.
#[test]
fn the_audit_s_cpu_timers_stand_behind_posix_timer() {
    let mut s = Stats::new(&[3], 0);
    let mut raw = Counters::new(&[3]);
    let mut t = crate::tick::Tally { refusals: 4, last_dep: 1, nohz_full: true, ..Default::default() };
    t.deps[0] = 4;
    raw.cpus[0].tick = Some(t);
    s.update_counters(raw, 1_000_000);
    let fx = crate::doctor::Fx::tuned_with_cpu_timer();
    let sum = Summary::from_stats(&s, &Default::default()).with_hints(&crate::doctor::audit(fx.path(), &[3]));
    let tick = sum.cpus[0].tick.as_ref().expect("a tick state");
    assert_eq!(tick.behind.as_deref(), Some("spinner[500]: 1 CPU-clock timer(s) in /proc/500/timers"));
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("POSIX_TIMER") && text.contains("; CPU-clock timers: spinner[500]") && text.contains("fix: find it"), "{text}");
}

/// The loop's clock is said by its name in the text and the JSON: the
/// vDSO says nothing more, a counter (x86's TSC, arm64's CNTVCT) its
/// distance from CLOCK_MONOTONIC at the end.
#[test]
fn the_loop_s_clock_is_named_with_its_drift() {
    let with = |counter: Option<&'static str>, drift: Option<i64>| {
        let mut s = Stats::new(&[1], 0);
        let mut raw = Counters::new(&[1]);
        raw.cpus[0].own =
            crate::stats::SourceFigures::Spin(crate::stats::SpinFigures { counter, tsc_drift_ns: drift, ..Default::default() });
        s.update_counters(raw, 1_000_000);
        let sum = Summary::from_stats(&s, &Default::default());
        let (mut text, mut json) = (Vec::new(), Vec::new());
        sum.write_text(&mut text).unwrap();
        sum.write_json(&mut json).unwrap();
        (String::from_utf8(text).unwrap(), serde_json::from_slice::<serde_json::Value>(&json).unwrap())
    };
    let (text, v) = with(Some("cntvct"), Some(-17));
    assert!(text.contains("; CNTVCT clock, -17 ns from CLOCK_MONOTONIC at the end"), "{text}");
    assert_eq!((v["cpus"][0]["clock"].as_str(), v["cpus"][0]["tsc_drift_ns"].as_i64()), (Some("cntvct"), Some(-17)));
    let (text, v) = with(Some("tsc"), None);
    assert!(text.contains("; TSC clock)"), "{text}");
    assert_eq!(v["cpus"][0]["clock"], "tsc");
    let (text, v) = with(None, None);
    assert!(!text.contains(" clock"), "{text}");
    assert_eq!(v["cpus"][0]["clock"], "vdso");
}

/// The tick's advice is nohz_full= only where the kernel can take it: a
/// kernel without CONFIG_NO_HZ_FULL was told to use it, and doctor said
/// it cannot.
#[test]
fn the_tick_s_advice_follows_what_the_kernel_can_do() {
    let can = likely(Kind::Irq, 4_000_000, Some(true));
    assert!(can.contains("nohz_full= on this CPU stops it"), "{can}");
    assert_eq!(likely(Kind::Irq, 4_000_000, None), can, "not known: the advice, with doctor to check");
    let cannot = likely(Kind::Irq, 4_000_000, Some(false));
    assert!(cannot.contains("this kernel cannot stop it") && cannot.contains("CONFIG_NO_HZ_FULL"), "{cannot}");
}

/// A floor measured while the CPU was busier than later reads above the
/// run's mean period: said as such ("loop floor 17 ns (mean period
/// 11.5 ns)" read as a contradiction).
#[test]
fn a_floor_above_the_mean_period_says_when_it_was_measured() {
    let s = Stats::new(&[1], 0);
    let mut sum = Summary::from_stats(&s, &Default::default());
    (sum.cpus[0].loop_floor_ns, sum.cpus[0].loop_mean_ns, sum.cpus[0].loop_quiet_mean_ns) = (Some(17), Some(11.5), Some(11.6));
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("loop floor 17 ns, measured as the probe started, when the loop ran slower (mean period 11.5 ns"), "{text}");
    sum.cpus[0].loop_mean_ns = Some(23.7);
    let mut text = Vec::new();
    sum.write_text(&mut text).unwrap();
    assert!(String::from_utf8(text).unwrap().contains("loop floor 17 ns (mean period 23.7 ns"));
}
