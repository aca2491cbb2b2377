//! Each figure of a run as named numbers, with the method that measured
//! it: what the history records per run, and all the verdicts and the
//! summary table read. Built from a run's results; read back from the
//! history. A value is None (null in the history) when not measured.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::Id;
use super::replay::SIZES;
use super::results::Results;
use super::util::Spread;

/// One figure: how it was measured, and its values by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What measured it. Change it whenever the measurement changes, so
    /// that the history says a change of figure may be a change of method.
    pub method: String,
    pub values: BTreeMap<String, Option<f64>>,
}

impl Figure {
    pub fn new(method: impl Into<String>) -> Figure {
        Figure { method: method.into(), values: BTreeMap::new() }
    }

    pub fn with(mut self, key: &str, v: Option<f64>) -> Figure {
        self.values.insert(key.to_string(), v);
        self
    }

    /// A value as recorded: None when absent or null (NaN kept as read).
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values.get(key).copied().flatten()
    }
}

/// A run's figures, in the tables' order (the history keys them by id).
pub type Figures = BTreeMap<Id, Figure>;

/// A value of figure `id`, None when the figure or the value is absent.
pub fn get(f: &Figures, id: Id, key: &str) -> Option<f64> {
    f.get(&id).and_then(|x| x.get(key))
}

/// The median of a spread with samples, else None.
fn med(s: &Spread) -> Option<f64> {
    (s.n > 0).then_some(s.median)
}

/// A value that is NaN when unsampled.
fn val(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

/// "idle, SCHED_OTHER" → "idle_sched_other": a wake-up condition as a key.
pub fn slug(s: &str) -> String {
    let mut o = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            o.push(c.to_ascii_lowercase());
        } else if !o.ends_with('_') {
            o.push('_');
        }
    }
    o.trim_matches('_').to_string()
}

/// Each figure's method, from the parameters a run used. The seeded
/// history entry's methods are these with the parameters of that run.
pub mod method {
    /// v2 (9e2dbe4): jitterwatch's loop floor became its loop period's 5th
    /// percentile, while the C loop's was still its smallest delta. v3: the
    /// C loop's floor is found the same way, and both cut at 8 × their floor
    /// (jitterwatch with `--threshold auto`): like for like.
    pub fn probe(reps: usize, secs: f64) -> String {
        format!(
            "v3: jitterwatch --clock vdso --threshold auto vs a C clock_gettime loop, both floors their period's p5 over 64-turn blocks, alternated, {reps} × {secs} s"
        )
    }
    pub fn probe_tsc(reps: usize, secs: f64) -> String {
        format!("v3: jitterwatch --clock tsc --threshold auto (floor: its period's p5) vs the same C loop, a third run per repetition, {reps} × {secs} s")
    }
    pub fn unwatched(reps: usize, hook_runs: usize) -> String {
        format!(
            "v2: by parts (own threads by schedstat + the switch event by paired batches, {hook_runs} runs, against a null + \
             the default programs' early returns from figure 3; v1 read the switch event's ratio inverted, so its hook figures are \
             negated); bpftrace's BPF run time; end to end {reps} × 5 conditions"
        )
    }
    pub fn per_interruption(reps: usize, secs: f64) -> String {
        format!("v8: a C clock loop's gaps on the watched CPU (the tick by its period; every 1 ms in turn a membarrier IPI, a UDP datagram to the gateway whose send-completion interrupt is routed to the watched CPU, a signal to the loop (a reschedule IPI), a stat_refresh write (a workqueue item), two membarrier IPIs 20 µs apart (the second: warm caches), each by its send), nothing attached / the hooks alone (JITTERWATCH_BPF_FLOOR=1) / jitterwatch --comm attaching nothing (JITTERWATCH_BPF_UNATTACHED) with the loop linking its programs and cycling 50 ms windows watched / not / the links closed (paired; v7: the third window not watched with a second link to each program, which turns each tracepoint's direct call into an iterator's indirect calls; v6: two windows, none left out), gaps within 3 ms of a window's opening left out (25 ms of the links-closed window's), then the paired run with our programs stopped after their clock read and after their append (JITTERWATCH_BPF_FLOOR=clock|append), then two runs with --bpf-stats (whole, and JITTERWATCH_BPF_FLOOR=1), alternated, {reps} runs of {secs} s each (the paired run three times as long, the stages' twice)")
    }

    pub fn bpf(reps: usize, secs: f64) -> String {
        format!("v2: --bpf-stats --wake-origins under perf bench sched pipe -T, on the watched then the other CPU, then the watched with --stacks-above 1ns, {reps} × {secs} s")
    }
    pub fn capacity(secs: f64, strong: &str) -> String {
        format!("v2: context-switch storms stepped up and down, then with an IPI storm from the housekeeping CPU, {secs} s each, strong storms {strong}")
    }
    pub fn recorder(runs: usize) -> String {
        format!("v1: --trace-dir on and off alternated under perf pipe and the storm, {runs} runs")
    }
    pub fn memory(secs: f64, load: &str) -> String {
        format!("v1: {secs} s under {load}, VmRSS every 100 ms")
    }
    pub fn startup(runs: usize) -> String {
        format!("v1: CLOCK_MONOTONIC at spawn to the summary's timestamps, figure 1's {runs} runs")
    }
    pub fn replay(events_per_cpu_sec: f64) -> String {
        format!("v1: replay-bench at 1, 8, 64, 256 CPUs, {events_per_cpu_sec:.0} events/s per CPU stream, pinned to the housekeeping CPU")
    }
    /// v2: both hold /dev/cpu_dma_latency at 0 (jitterwatch by
    /// --dma-latency 0), and avg is a figure. v3: cyclictest's avg is its
    /// histogram's mean, not its summary's whole µs.
    pub fn wakeup(reps: usize) -> String {
        format!("v3: cyclictest -i 1000 and --probe wakeup --period 1ms --dma-latency 0, alternated, {reps} repetitions per condition")
    }
    pub fn screen(rounds: usize, secs: f64) -> String {
        format!("v1: sockperf UDP ping-pong watched by --comm sockperf (passive), headless / 80x24 / 200x50 in tmux alternated, {rounds} rounds, {secs} s windows")
    }
    pub fn explain_scale(runs: usize) -> String {
        format!("v1: explain of a synthetic 10^6-operation log against 10^6 stalls, the slowest 1% as text and every one as JSON, {runs} runs each")
    }
    pub fn passive_mix(runs: usize) -> String {
        format!("v1: --pid of a loopback TCP ping-pong on the watched CPU, {runs} runs")
    }
    /// v2: avg is the mean of cyclictest's histogram (v1: its summary's
    /// whole µs), and each round's paired change is a figure. v3: the
    /// in-run hooks are the not-watched window less one with no hook (v2:
    /// a second link of each program less not watched).
    pub fn observer(runs: usize) -> String {
        format!("v3: cyclictest -p 80 alone and watched by jitterwatch --comm cyclictest (passive), alternated, {runs} runs each; in one run, a loop with cyclictest's measurement cycling watched / not / no hook (the loop's links to jitterwatch's unattached programs closed)")
    }
}

/// A run's figures. `quick` marks every method: a quick run's figures are
/// not comparable with a full run's.
pub fn from_results(r: &Results, quick: bool) -> Figures {
    let q = |m: String| if quick { format!("{m} (quick)") } else { m };
    let mut o = Figures::new();
    let f = &r.floor;
    o.insert(
        Id::ProbeFloor,
        Figure::new(q(method::probe(f.reps, f.secs)))
            .with("floor_ratio", med(&f.ratio_floor))
            .with("quiet_ratio", med(&f.ratio_quiet))
            .with("floor_ns", med(&f.jw_floor))
            .with("c_floor_ns", med(&f.c_floor))
            .with("quiet_ns", med(&f.jw_quiet))
            .with("c_quiet_ns", med(&f.c_quiet))
            .with("threshold_ns", med(&f.threshold)),
    );
    let t = f.tsc.as_ref();
    o.insert(
        Id::ProbeFloorTsc,
        Figure::new(q(method::probe_tsc(f.reps, f.secs)))
            .with("floor_ratio", t.and_then(|t| med(&t.ratio_floor)))
            .with("quiet_ratio", t.and_then(|t| med(&t.ratio_quiet)))
            .with("floor_ns", t.and_then(|t| med(&t.floor)))
            .with("threshold_ns", t.and_then(|t| med(&t.threshold))),
    );
    let m = &r.machine;
    // No program seen under the load on the other CPU: nothing measured there.
    let progs = !r.bpf.unwatched.is_empty();
    let half = |s: &Spread| (s.n > 0).then_some((s.max - s.min) / 2.0);
    o.insert(
        Id::UnwatchedCost,
        Figure::new(q(method::unwatched(m.reps, m.hook_pct.n)))
            .with("own_threads_pct", med(&m.jw_threads_pct))
            .with("hook_pct", med(&m.hook_pct))
            .with("hook_null_pct", med(&m.hook_null_pct))
            .with("hook_tp_pct", med(&m.hook_tp_pct))
            .with("hook_tpevent_pct", med(&m.hook_tpevent_pct))
            .with("hook_tpevent_bpf_pct", med(&m.hook_tpevent_bpf_pct))
            .with("hook_switchrec_pct", med(&m.hook_switchrec_pct))
            .with("tpevent_watched_ns", med(&m.tpevent_watched_ns))
            .with("perf_bpf_watched_ns", med(&m.perf_bpf_watched_ns))
            .with("tp_watched_ns", med(&m.tp_watched_ns))
            .with("hook_null_half_spread_pct", half(&m.hook_null_pct))
            .with("bpf_early_returns_pct", progs.then(|| r.bpf.busy_pct_unwatched()))
            // Which hook the run took, so the parts add the one it paid for.
            .with("switch_tp", progs.then(|| f64::from(u8::from(r.bpf.switch_everywhere()))))
            .with("opt_in_pct", progs.then(|| r.bpf.opt_in_pct_unwatched()))
            .with("bpftrace_bpf_pct", med(&m.bt_bpf_pct))
            .with("end_to_end_pct", val(m.jw_cost_pct()))
            .with("end_to_end_ci95_pct", val(m.jw_ci95_pct))
            .with("bpftrace_end_to_end_pct", val(m.bt_cost_pct()))
            .with("spin_end_to_end_pct", val(m.spin_cost_pct()))
            .with("noise_pct", half(&m.null).map(|x| 100.0 * x)),
    );
    let b = &r.bpf;
    let switch = b.watched.iter().find(|p| super::measure::is_prog(&p.name, "switch"));
    let (_, stacked) = b.switch_ns();
    o.insert(
        Id::BpfRunTime,
        Figure::new(q(method::bpf(b.reps, b.secs)))
            .with("switch_ns_per_run", switch.and_then(|p| med(&p.ns_per_run)))
            .with("switch_stack_ns_per_run", stacked)
            .with("events_per_sec", med(&b.watched_events_per_sec)),
    );
    let c = &r.cap;
    let strong = c.runs.iter().find_map(|x| match x.load {
        super::capacity::Load::PingPong { policy, .. } if policy != super::capacity::Policy::Other => Some(policy.describe()),
        _ => None,
    });
    // The maxima start at 0: without a run that counted events, 0 is no value.
    let ran = c.runs.iter().any(|x| x.stall_ms == 0 && x.events_per_sec.is_finite());
    o.insert(
        Id::RingCapacity,
        Figure::new(q(method::capacity(c.secs, strong.unwrap_or("none"))))
            .with("max_clean_events_per_sec", ran.then_some(c.max_clean))
            .with("max_events_per_sec", ran.then_some(c.max_rate))
            .with("first_drops_events_per_sec", c.first_drops)
            .with("lag_max_ms", ran.then_some(c.lag_max_ms)),
    );
    o.insert(Id::RecorderCost, recorder(&r.recorder, &q));
    let sc = r.screen.as_ref();
    let mut fig = Figure::new(q(method::screen(sc.map_or(0, |s| s.cpu_pct[0].n), sc.map_or(0.0, |s| s.secs))));
    for (i, key) in ["headless", "screen_80x24", "screen_200x50"].iter().enumerate() {
        fig = fig
            .with(&format!("{key}_cpu_pct"), sc.and_then(|s| med(&s.cpu_pct[i])))
            .with(&format!("{key}_lag_ms"), sc.and_then(|s| med(&s.lag_ms[i])));
    }
    fig = fig
        .with("adds_80x24_pct", sc.and_then(|s| med(&s.adds_pct[0])))
        .with("adds_200x50_pct", sc.and_then(|s| med(&s.adds_pct[1])))
        .with("events_per_sec", sc.and_then(|s| med(&s.events_per_sec[0])));
    o.insert(Id::ScreenCost, fig);
    let x = r.explain.as_ref();
    o.insert(
        Id::ExplainScale,
        Figure::new(q(method::explain_scale(x.map_or(0, |x| x.slowest_s.n))))
            .with("slowest_s", x.and_then(|x| med(&x.slowest_s)))
            .with("slowest_rss_mib", x.and_then(|x| med(&x.slowest_mib)))
            .with("all_s", x.and_then(|x| med(&x.all_s)))
            .with("all_rss_mib", x.and_then(|x| med(&x.all_mib))),
    );
    let m = r.mix.as_ref();
    o.insert(
        Id::CollectorMix,
        Figure::new(q(method::passive_mix(m.map_or(0, |m| m.events_per_sec.n))))
            .with("ns_per_event", m.and_then(|m| med(&m.ns_per_event)))
            .with("events_per_sec", m.and_then(|m| med(&m.events_per_sec)))
            .with("consumer_cpu_pct", m.and_then(|m| med(&m.consumer_cpu_pct))),
    );
    let me = &r.mem;
    let peak_kb = me.mem.max_rss_kb.max(me.mem.hwm_kb);
    o.insert(
        Id::PeakRss,
        Figure::new(q(method::memory(me.secs, &me.load.describe())))
            .with("peak_rss_mib", (me.mem.samples > 0).then_some(peak_kb as f64 / 1024.0))
            .with("rss_end_mib", (me.mem.samples > 0).then_some(me.rss_end_kb as f64 / 1024.0)),
    );
    let s = &f.startup;
    o.insert(
        Id::Startup,
        Figure::new(q(method::startup(s.to_first_sample.n)))
            .with("main_ms", med(&s.to_main))
            .with("first_sample_ms", med(&s.to_first_sample))
            .with("first_event_ms", med(&s.to_first_event)),
    );
    let mut seven = Figure::new(q(method::replay(r.replay.first().map_or(f64::NAN, |x| x.stream.0))));
    for n in SIZES {
        let row = r.replay.iter().find(|x| x.cpus == n);
        seven = seven
            .with(&format!("events_per_core_sec_{n}"), row.and_then(|x| med(&x.per_core)))
            .with(&format!("bytes_per_cpu_{n}"), row.and_then(|x| med(&x.mem_per_cpu)));
    }
    o.insert(Id::ManyCpus, seven);
    let mut eight = Figure::new(q(method::wakeup(r.wakeup.first().map_or(0, |w| w.cyclictest[0].n))));
    for cond in super::wakeup::CONDITIONS.map(|c| c.0) {
        let row = r.wakeup.iter().find(|w| w.condition == cond);
        let k = slug(cond);
        for (stat, i) in [("avg", 1), ("p99", 3), ("max", 4)] {
            eight = eight
                .with(&format!("{k}_jw_{stat}_us"), row.and_then(|w| med(&w.jitterwatch[i])))
                .with(&format!("{k}_ct_{stat}_us"), row.and_then(|w| med(&w.cyclictest[i])));
        }
    }
    o.insert(Id::WakeupProbe, eight);
    let b = r.observer.as_ref();
    let mut fig =
        Figure::new(q(method::observer(b.map_or(0, |b| b.alone[0].n)))).with("wakeups_seen", b.and_then(|b| med(&b.wakeups_seen)));
    for (stat, i) in [("avg", 1), ("p50", 2), ("p99", 3), ("max", 4)] {
        fig = fig
            .with(&format!("alone_{stat}_us"), b.and_then(|b| med(&b.alone[i])))
            .with(&format!("watched_{stat}_us"), b.and_then(|b| med(&b.watched[i])))
            .with(&format!("paired_{stat}_pct"), b.and_then(|b| med(&b.paired[i])));
    }
    for (i, stat) in super::wakeup::paired::STATS.into_iter().enumerate() {
        let r = b.map(|b| &b.in_run);
        fig = fig
            .with(&format!("in_run_added_{stat}_ns"), r.and_then(|r| med(&r.added[i])))
            .with(&format!("in_run_added_{stat}_pct"), r.and_then(|r| med(&r.added_pct[i])))
            .with(&format!("in_run_off_{stat}_ns"), r.and_then(|r| med(&r.off[i])))
            .with(&format!("in_run_none_{stat}_ns"), r.and_then(|r| med(&r.none[i])))
            .with(&format!("in_run_hooks_{stat}_ns"), r.and_then(|r| med(&r.hooks[i])))
            .with(&format!("in_run_hooks_{stat}_pct"), r.and_then(|r| med(&r.hooks_pct[i])));
    }
    o.insert(Id::WatchedCyclictest, fig);
    o.insert(Id::PerInterruption, per_interruption(r.per_interruption.as_ref(), &q));
    o
}

/// 3b: each kind's p25 and p50 (the median of the runs') per condition,
/// the paired differences, and our own time per interruption.
fn per_interruption(p: Option<&super::interruption::PerInterruption>, q: &dyn Fn(String) -> String) -> Figure {
    use super::interruption::Kind;
    let m = |v: &[f64]| med(&Spread::of(v));
    let mut fig = Figure::new(q(method::per_interruption(p.map_or(0, |p| p.reps), p.map_or(0.0, |p| p.secs))));
    let conds = p.map(|p| [&p.none, &p.floor, &p.watched, &p.off, &p.bare]);
    for (cond, c) in ["none", "floor", "watched", "off", "bare"].into_iter().zip(conds.into_iter().flatten()) {
        for (k, kind) in Kind::ALL.into_iter().enumerate() {
            for (i, q) in ["p25", "p50"].into_iter().enumerate() {
                fig = fig.with(&format!("{}_{cond}_{q}_ns", kind.key()), m(&c.q[k][i]));
            }
            fig = fig.with(&format!("{}s_{cond}", kind.key()), m(&c.seen[k]));
        }
    }
    // The paired runs' watched less not watched, each run's, then their median.
    for (k, kind) in Kind::ALL.into_iter().enumerate() {
        for (i, q) in ["p25", "p50"].into_iter().enumerate() {
            fig = fig.with(&format!("{}_paired_{q}_ns", kind.key()), p.and_then(|p| m(&p.paired.0[k][i])));
            // Not watched less no hook at all, within the run.
            fig = fig.with(&format!("{}_hooks_{q}_ns", kind.key()), p.and_then(|p| m(&p.hooks.0[k][i])));
        }
        fig = fig.with(&format!("self_{}_ns", kind.key()), p.and_then(|p| med(&p.own[k])));
        // The same p50 with our programs stopped at each stage.
        for (s, stage) in super::interruption::STAGES.into_iter().enumerate() {
            fig = fig.with(&format!("{}_stage_{stage}_p50_ns", kind.key()), p.and_then(|p| m(&p.stages[s].0[k][1])));
        }
    }
    // The kernel's BPF statistics, summed over each kind's programs: whole,
    // and returning at once (the statistics' own cost and the dispatch).
    fig = fig.with("hook_programs", p.and_then(|p| m(&p.programs)));
    fig = fig.with("dispatch_priced_ns", p.and_then(|p| m(&p.dispatch)));
    let sums = p.map(|p| super::interruption::per_kind(&p.stats[0], &p.stats[1]));
    // Not the warm IPI's: its programs are the cold one's.
    for (k, kind) in Kind::ALL.into_iter().enumerate().filter(|(_, kind)| kind.programs().is_some()) {
        let sum = sums.and_then(|s| s[k]);
        fig = fig.with(&format!("{}_bpf_stats_ns", kind.key()), sum.map(|s| s.whole));
        fig = fig.with(&format!("{}_bpf_stats_floor_ns", kind.key()), sum.map(|s| s.floor));
    }
    fig
}

/// 4b: the consumer's ns/event with the recorder off and on, per load
/// ("pipe", then the storm), and the storm's peak kept bytes per CPU.
fn recorder(runs: &[super::recorder::Run], q: &dyn Fn(String) -> String) -> Figure {
    let mut fig = Figure::new(q(method::recorder(runs.len())));
    let mut loads: Vec<String> = runs.iter().map(|r| r.load.describe()).collect();
    loads.dedup();
    for (name, load) in ["pipe", "storm"].iter().zip(loads.iter().map(Some).chain(std::iter::repeat(None))) {
        let of = |on: bool, f: fn(&super::recorder::Run) -> f64| {
            let v: Vec<f64> = runs.iter().filter(|r| Some(&r.load.describe()) == load && r.on == on).map(f).collect();
            med(&Spread::of(&v))
        };
        fig = fig
            .with(&format!("{name}_off_ns_per_event"), of(false, |r| r.ns_per_event))
            .with(&format!("{name}_on_ns_per_event"), of(true, |r| r.ns_per_event));
        if *name == "storm" {
            fig = fig.with("storm_peak_mib", of(true, |r| r.peak_bytes / 1048576.0)).with("cap_mib", of(true, |r| r.cap_bytes / 1048576.0));
        }
    }
    fig
}

#[cfg(test)]
mod tests;
