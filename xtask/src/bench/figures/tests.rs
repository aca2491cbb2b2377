//! A run's results to its figures and verdicts, on made-up results: a
//! run that sampled nothing reads "not measured" everywhere, a good one
//! "met". No host is read (no Policy::strong(), no details).

use super::*;
use crate::bench::capacity::{Capacity, Load, Memory, Policy, RateRun};
use crate::bench::ids::Id;
use crate::bench::machine::MachineCost;
use crate::bench::measure::{BpfCost, Floor, ProgCost, Startup, TscFloor};
use crate::bench::summary::rows;
use crate::bench::util::Mem;
use crate::bench::verdicts::{judge, Verdict};
use crate::bench::{interruption, recorder, replay, wakeup};

const STORM: Load = Load::PingPong { pairs: 4, policy: Policy::Fifo };

/// Results whose every sample is `x` scaled to what each figure measures,
/// or, when `sampled` is false, none at all.
fn results(sampled: bool) -> Results {
    let s = |x: f64| if sampled { Spread::of(&[x]) } else { Spread::of(&[]) };
    let n = |x: f64| if sampled { x } else { f64::NAN };
    let rows = |x: usize| if sampled { x } else { 0 };
    Results {
        floor: Floor {
            reps: 11,
            secs: 1.0,
            c_floor: s(20.0),
            c_mean: s(30.0),
            jw_floor: s(20.0),
            jw_mean: s(31.0),
            threshold: s(232.0),
            ratio_floor: s(1.0),
            ratio_mean: s(1.03),
            c_quiet: s(29.6),
            jw_quiet: s(31.0),
            ratio_quiet: s(1.05),
            tsc: sampled.then(|| TscFloor {
                floor: s(8.0),
                quiet: s(22.0),
                threshold: s(72.0),
                ratio_floor: s(0.4),
                ratio_quiet: s(0.76),
                drift: s(-1.0),
            }),
            startup: Startup { to_main: s(2.0), to_first_sample: s(223.0), to_first_event: s(221.0) },
        },
        machine: MachineCost {
            reps: 7,
            loops: 1,
            ops: std::array::from_fn(|_| s(1e5)),
            // bpftrace (2) costs 20%, the others 1%.
            ratio: std::array::from_fn(|c| s(if c == 2 { 0.8 } else { 0.99 })),
            best_ratio: [n(1.0); 5],
            jw_ci95_pct: n(0.5),
            null: s(1.0),
            jw_events: s(3000.0),
            bt_events: s(2400.0),
            jw_threads_pct: s(0.3),
            hook_pct: s(0.02),
            hook_null_pct: s(0.0),
            hook_tp_pct: s(3.5),
            hook_tpevent_pct: s(0.9),
            tpevent_watched_ns: s(800.0),
            perf_bpf_watched_ns: s(330.0),
            tp_watched_ns: s(90.0),
            hook_tpevent_bpf_pct: s(5.9),
            hook_switchrec_pct: s(1.7),
            bt_bpf_pct: s(1.6),
        },
        bpf: BpfCost {
            reps: 3,
            secs: 3.0,
            watched: (0..rows(1)).map(|_| ProgCost { name: "on_switch_out".into(), run_cnt: s(3e5), ns_per_run: s(271.0) }).collect(),
            watched_events_per_sec: s(178_789.0),
            unwatched: (0..rows(1)).map(|_| ProgCost { name: "on_irq_entry".into(), run_cnt: s(3e4), ns_per_run: s(300.0) }).collect(),
            stacked: (0..rows(1)).map(|_| ProgCost { name: "on_switch_out".into(), run_cnt: s(3e5), ns_per_run: s(1_900.0) }).collect(),
        },
        cap: Capacity {
            secs: 3.0,
            runs: (0..rows(1))
                .map(|_| RateRun {
                    load: STORM,
                    stall_ms: 0,
                    events_per_sec: 6e5,
                    events: 1.8e6,
                    drops: 0.0,
                    lag_max_ms: 20.0,
                    consumer_ns_per_event: 160.0,
                    consumer_cpu_pct: 5.0,
                })
                .collect(),
            max_clean: if sampled { 6e5 } else { 0.0 },
            max_rate: if sampled { 6e5 } else { 0.0 },
            first_drops: None,
            lag_max_ms: if sampled { 20.0 } else { 0.0 },
        },
        mem: Memory {
            secs: 30.0,
            load: STORM,
            mem: Mem { samples: rows(300) as u64, max_rss_kb: rows(27_000) as u64, hwm_kb: rows(27_000) as u64, ..Mem::default() },
            events_per_sec: n(2e5),
            drops: n(0.0),
            lag_max_ms: n(20.0),
            wall_s: n(30.4),
            reaped_s: n(30.4),
            rss_early_kb: 0,
            rss_end_kb: rows(27_000) as u64,
            house_cpu_pct: n(5.0),
        },
        replay: replay::SIZES[..rows(4)]
            .iter()
            .map(|&cpus| replay::Row { cpus, events: 1e7, per_core: s(9e6), mem_per_cpu: s(3e5), stream: (24_000.0, 2_000.0, 60.0) })
            .collect(),
        wakeup: wakeup::CONDITIONS[..rows(4)]
            .iter()
            .map(|c| wakeup::Row {
                condition: c.0,
                cyclictest: std::array::from_fn(|_| s(70.0)),
                jitterwatch: std::array::from_fn(|_| s(72.0)),
            })
            .collect(),
        screen: Some(crate::bench::screen::Screen {
            secs: 5.0,
            cpu_pct: [s(3.0), s(4.0), s(4.5)],
            lag_ms: [s(10.0), s(20.0), s(30.0)],
            events_per_sec: [s(1e5), s(1e5), s(1e5)],
            adds_pct: [s(1.0), s(1.5)],
        }),
        explain: Some(crate::bench::explain_scale::Scale {
            ops: 1_000_000,
            stalls: 1_000_000,
            slowest_s: s(2.0),
            slowest_mib: s(60.0),
            all_s: s(5.0),
            all_mib: s(90.0),
        }),
        mix: Some(crate::bench::passive::PassiveMix {
            secs: 3.0,
            events_per_sec: s(5e5),
            ns_per_event: s(90.0),
            consumer_cpu_pct: s(7.0),
            in_syscall_share: s(0.6),
        }),
        observer: Some(wakeup::Observer {
            alone: std::array::from_fn(|_| s(50.0)),
            watched: std::array::from_fn(|_| s(50.5)),
            paired: std::array::from_fn(|_| s(1.0)),
            wakeups_seen: s(5000.0),
            in_run: wakeup::paired::example(&s),
        }),
        recorder: [(Load::PerfPipe, false), (Load::PerfPipe, true), (STORM, false), (STORM, true)][..rows(4)]
            .iter()
            .map(|&(load, on)| recorder::Run {
                load,
                on,
                events_per_sec: 1e5,
                ns_per_event: if on { 300.0 } else { 230.0 },
                peak_bytes: if on { 1.5e6 } else { f64::NAN },
                cap_bytes: if on { 22.0 * 1048576.0 } else { f64::NAN },
                written: if on { 5.0 } else { f64::NAN },
                largest_bytes: if on { 8e5 } else { f64::NAN },
            })
            .collect(),
        per_interruption: sampled.then(|| {
            let cond = |ns: f64| interruption::Condition {
                q: [0.0, 9000.0, 7000.0, 10_000.0, 2000.0, 9500.0].map(|less| [vec![ns - less - 1000.0], vec![ns - less]]),
                seen: [vec![750.0], vec![1400.0], vec![700.0], vec![650.0], vec![600.0], vec![550.0]],
            };
            interruption::PerInterruption {
                reps: 8,
                secs: 3.0,
                none: cond(14_000.0),
                floor: cond(14_050.0),
                watched: cond(14_120.0),
                off: cond(14_040.0),
                bare: cond(14_010.0),
                hooks: interruption::Paired([0.0; 6].map(|_| [vec![125.0], vec![130.0]])),
                programs: vec![31.0],
                paired: interruption::Paired([
                    [vec![70.0], vec![80.0]],
                    [vec![60.0], vec![70.0]],
                    [vec![50.0], vec![60.0]],
                    [vec![40.0], vec![50.0]],
                    [vec![90.0], vec![100.0]],
                    [vec![30.0], vec![40.0]],
                ]),
                stages: [20.0, 45.0].map(|ns| interruption::Paired([0.0; 6].map(|_| [vec![ns - 10.0], vec![ns]]))),
                own: [s(300.0), s(200.0), s(250.0), s(150.0), s(400.0), s(120.0)],
                routed: Ok(vec![38]),
                // Every kind's programs at 100 ns/run whole, 40 returning
                // at once; the reschedule IPI's own figures.
                stats: [[100.0, 180.0, 90.0], [40.0, 50.0, 45.0]].map(|[other, entry, exit]| {
                    let ns = |name: &str| match name {
                        "on_reschedule_entry" => entry,
                        "on_reschedule_exit" => exit,
                        _ => other,
                    };
                    let mut names: Vec<&str> = interruption::Kind::ALL.iter().filter_map(|k| k.programs()).flatten().copied().collect();
                    names.sort_unstable();
                    names.dedup();
                    names.into_iter().map(|name| ProgCost { name: name.into(), run_cnt: s(700.0), ns_per_run: s(ns(name)) }).collect()
                }),
                tick_books: [40, 40],
                dispatch: vec![30.0, 34.0],
            }
        }),
        bt_probes: 21,
    }
}

#[test]
fn a_run_that_sampled_nothing_is_not_measured_anywhere() {
    let f = from_results(&results(false), false);
    for &id in Id::ALL {
        assert!(f.contains_key(&id), "figure {id:?} is recorded, null, when not measured");
        assert!(f[&id].values.values().all(Option::is_none), "{id:?}: {:?}", f[&id].values);
        assert_eq!(judge(id, &f), Verdict::NotMeasured, "{}", id.title());
    }
    for r in rows(&f) {
        assert!(r.measured == "not measured" || r.measured.contains("not usable"), "{}: {}", r.name, r.measured);
    }
}

#[test]
fn a_good_run_is_met_where_judged() {
    let f = from_results(&results(true), false);
    let want = [
        (Id::ProbeFloor, Verdict::Met),
        (Id::ProbeFloorTsc, Verdict::Reported),
        (Id::UnwatchedCost, Verdict::Met),
        (Id::BpfRunTime, Verdict::Reported),
        (Id::PerInterruption, Verdict::Met),
        (Id::RingCapacity, Verdict::Met),
        (Id::RecorderCost, Verdict::Reported),
        (Id::CollectorMix, Verdict::Met),
        (Id::ScreenCost, Verdict::Met),
        (Id::PeakRss, Verdict::Met),
        (Id::Startup, Verdict::Met),
        (Id::ManyCpus, Verdict::Met),
        (Id::ExplainScale, Verdict::Met),
        (Id::WakeupProbe, Verdict::Met),
        (Id::WatchedCyclictest, Verdict::Met),
    ];
    for (id, v) in want {
        assert_eq!(judge(id, &f), v, "figure {id:?}: {:?}", f[&id].values);
        // Where drops begin has no value when no run dropped.
        let unset = f[&id].values.iter().filter(|(k, v)| v.is_none() && k.as_str() != "first_drops_events_per_sec").count();
        assert_eq!(unset, 0, "{id:?}: {:?}", f[&id].values);
    }
    assert_eq!(f[&Id::ProbeFloor].method, method::probe(11, 1.0));
    assert_eq!(f[&Id::RingCapacity].method, method::capacity(3.0, "SCHED_FIFO 1"));
    assert_eq!(f[&Id::PeakRss].method, method::memory(30.0, "futex ping-pong × 4 pairs, SCHED_FIFO 1"));
    assert_eq!(from_results(&results(true), true)[&Id::ProbeFloor].method, format!("{} (quick)", method::probe(11, 1.0)));
}

/// The seeded line (transcribed from the run of a8ac5ba) carries the
/// methods today's code gives that run's parameters, so the next run is
/// compared with it as the same method — but for figures 1 and 1b, whose
/// floor changed meaning since (v2, v3), figure 4, whose loads grew an IPI
/// storm (v2), figure 8, which holds the DMA latency as cyclictest does
/// (v2), and figure 2, whose hook part read its ratio inverted in v1: their
/// rows say the method changed.
#[test]
fn the_seed_carries_todays_methods() {
    let seed = crate::bench::history::parse(include_str!("../../../../bench-history.jsonl")).unwrap().remove(0);
    assert_eq!(seed.source.as_deref(), Some("transcribed from BENCHMARKS.md"));
    let m = |id: Id| seed.figures[&id].method.clone();
    assert_eq!(m(Id::ProbeFloor), "v1: jitterwatch --clock vdso vs a C clock_gettime loop, alternated, 11 × 1 s");
    assert_eq!(m(Id::ProbeFloorTsc), "v1: jitterwatch --clock tsc vs the same C loop, a third run per repetition, 11 × 1 s");
    assert_ne!(m(Id::ProbeFloor), method::probe(11, 1.0));
    assert_eq!(
        m(Id::UnwatchedCost),
        "v1: by parts (own threads by schedstat + the switch event by paired batches, 3 runs, against a null + the default \
         programs' early returns from figure 3); bpftrace's BPF run time; end to end 7 × 5 conditions"
    );
    assert_ne!(m(Id::UnwatchedCost), method::unwatched(7, 3), "figure 2's hook part read inverted in v1");
    assert_eq!(
        m(Id::BpfRunTime),
        "v1: --bpf-stats --wake-origins under perf bench sched pipe -T, on the watched then the other CPU, 3 × 3 s"
    );
    assert_ne!(m(Id::BpfRunTime), method::bpf(3, 3.0), "figure 3 added --stacks-above's run (v2)");
    assert_eq!(m(Id::RingCapacity), "v1: context-switch storms stepped up and down, 3 s each, strong storms SCHED_FIFO 1");
    assert_ne!(m(Id::RingCapacity), method::capacity(3.0, "SCHED_FIFO 1"), "figure 4 added the IPI storm (v2)");
    assert_eq!(m(Id::RecorderCost), method::recorder(12));
    assert_eq!(m(Id::PeakRss), method::memory(30.0, "futex ping-pong × 4 pairs, SCHED_FIFO 1"));
    assert_eq!(m(Id::Startup), method::startup(11));
    assert_eq!(m(Id::ManyCpus), method::replay(24_000.0));
    assert_eq!(m(Id::WakeupProbe), "v1: cyclictest -i 1000 and --probe wakeup --period 1ms, alternated, 3 repetitions per condition");
    assert_ne!(m(Id::WakeupProbe), method::wakeup(3), "figure 8 holds the DMA latency like cyclictest (v2)");
}

/// Figure 2's row names the hooks measured beside the switch event; a
/// history line from before they were measured reads as it did.
#[test]
fn figure_2_names_the_other_hooks_where_measured() {
    let mut f = from_results(&results(true), false);
    let row = |f: &Figures| crate::bench::summary::measured(Id::UnwatchedCost, f);
    assert!(
        row(&f).contains(
            "instead 3.50%, a sched_switch perf event 0.90%, 800 ns a switch on the watched CPU (with a BPF program 5.90%), switch records 1.70%; \
             on the watched CPU, programs returning at once: the switch event 330 ns a switch, the program 90)"
        ),
        "{}",
        row(&f)
    );
    // A line from before the watched CPU's side was measured.
    for k in ["tpevent_watched_ns", "perf_bpf_watched_ns", "tp_watched_ns"] {
        f.get_mut(&Id::UnwatchedCost).expect("figure 2").values.remove(k);
    }
    assert!(row(&f).contains("a sched_switch perf event 0.90% (with a BPF program 5.90%), switch records 1.70%)"), "{}", row(&f));
    let fig = f.get_mut(&Id::UnwatchedCost).expect("figure 2");
    fig.values.retain(|k, _| !k.starts_with("hook_tpevent") && k != "hook_switchrec_pct");
    assert!(row(&f).contains("instead 3.50%); end to end"), "{}", row(&f));
}

/// Where the switch program ran on the unwatched CPU (the tracepoint),
/// figure 2's parts add its harness figure, not the event's, and its runs
/// are not counted again among the early returns.
#[test]
fn figure_2_adds_the_hook_the_run_took() {
    let event = from_results(&results(true), false);
    let p = crate::bench::verdicts::unwatched_parts(&event);
    assert!(!p.switch_tp);
    assert_eq!(p.hook, Some(0.02), "the event's reading");
    let mut r = results(true);
    r.bpf.unwatched.push(ProgCost { name: "on_sched_switch".into(), run_cnt: Spread::of(&[1e6]), ns_per_run: Spread::of(&[60.0]) });
    let f = from_results(&r, false);
    let p = crate::bench::verdicts::unwatched_parts(&f);
    assert!(p.switch_tp);
    assert_eq!(p.hook, Some(3.5), "the sched_switch program's reading");
    assert_eq!(p.bpf_early, crate::bench::verdicts::unwatched_parts(&event).bpf_early, "its runs are the hook's part");
    assert_eq!(r.hook(), Ok(3.5));
    let row = crate::bench::summary::measured(Id::UnwatchedCost, &f);
    assert!(row.contains("+ sched_switch program 3.50% (± 0.00)") && row.contains("; the switch event instead 0.02%"), "{row}");
}

#[test]
fn condition_keys() {
    assert_eq!(slug("idle, SCHED_OTHER"), "idle_sched_other");
    assert_eq!(slug("pipe load, FIFO 80"), "pipe_load_fifo_80");
}

/// 3b: a kind not measured (the NIC counted no datagram) keeps the figure
/// from being met, but a kind over the target is missed all the same.
#[test]
fn per_interruption_is_met_only_when_every_kind_was_measured() {
    let mut r = results(true);
    let p = r.per_interruption.as_mut().unwrap();
    p.paired.0[2] = [Vec::new(), Vec::new()];
    assert_eq!(judge(Id::PerInterruption, &from_results(&r, false)), Verdict::NotMeasured);
    r.per_interruption.as_mut().unwrap().paired.0[0][1] = vec![900.0];
    assert_eq!(judge(Id::PerInterruption, &from_results(&r, false)), Verdict::Missed);
}

/// 3b's stages: each kind's p50 with our programs stopped after their
/// clock read and after their append is recorded, and shown in the
/// section beside the whole work, or "not measured" when a run gave none.
#[test]
fn per_interruption_records_and_shows_where_the_work_goes() {
    let mut r = results(true);
    let f = from_results(&r, false);
    let v = &f[&Id::PerInterruption].values;
    assert_eq!(v["tick_stage_clock_p50_ns"], Some(20.0));
    assert_eq!(v["ipi_stage_append_p50_ns"], Some(45.0));
    let mut o = String::new();
    crate::bench::details::per_interruption::section(&mut o, r.per_interruption.as_ref(), 1, 0);
    let row = o.lines().find(|l| l.contains("clock read (p50, ns)")).expect("the stages' table");
    assert!(row.contains("the whole work"), "{row}");
    assert!(o.lines().any(|l| l.starts_with("| a tick") && l.ends_with("| 20 [20–20] | 45 [45–45] | 80 [80–80] |")), "{o}");
    r.per_interruption.as_mut().unwrap().stages[1].0[0][1].clear();
    let mut o = String::new();
    crate::bench::details::per_interruption::section(&mut o, r.per_interruption.as_ref(), 1, 0);
    assert!(o.lines().any(|l| l.starts_with("| a tick") && l.ends_with("| 20 [20–20] | not measured | 80 [80–80] |")), "{o}");
    assert_eq!(from_results(&r, false)[&Id::PerInterruption].values["tick_stage_append_p50_ns"], None);
}

/// 3b's kernel books: the BPF statistics of each kind's programs, whole and
/// returning at once, are recorded, shown per program and per interruption
/// beside the end-to-end figure, and said in the summary's row.
#[test]
fn per_interruption_shows_the_kernel_books_less_their_own_cost() {
    let r = results(true);
    let f = from_results(&r, false);
    let v = &f[&Id::PerInterruption].values;
    assert_eq!((v["resched_bpf_stats_ns"], v["resched_bpf_stats_floor_ns"]), (Some(270.0), Some(95.0)));
    assert_eq!(v["tick_bpf_stats_ns"], Some(400.0));
    assert!(!v.contains_key("ipi_warm_bpf_stats_ns"), "the warm IPI's programs are the cold one's");
    let mut r = r;
    r.per_interruption.as_mut().unwrap().stats[1].retain(|p| p.name != "on_hrtimer_exit");
    let mut o = String::new();
    crate::bench::details::per_interruption::section(&mut o, r.per_interruption.as_ref(), 1, 0);
    assert!(o.lines().any(|l| l == "| on_reschedule_entry | 700 | 180 [180–180] | 50 [50–50] | 130 |"), "{o}");
    let row = o.lines().find(|l| l.starts_with("| a reschedule IPI") && l.contains("on_reschedule_exit")).expect("the books' row");
    assert!(row.ends_with("| 270 | 95 | 175 | 50 |"), "{row}");
    assert!(o.lines().any(|l| l.starts_with("| a tick") && l.ends_with("| not measured | not measured | not measured | 80 |")), "{o}");
    assert!(o.lines().any(|l| l == "| on_hrtimer_exit | 700 | 100 [100–100] | not measured | not measured |"), "{o}");
    let said = crate::bench::summary::rows(&f).into_iter().find(|r| r.name.starts_with("3b")).unwrap().measured;
    assert!(said.contains("kernel BPF stats 270 ns less 95 returning at once = 175 ns"), "{said}");
}
