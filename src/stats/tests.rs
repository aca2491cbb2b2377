use super::*;
use crate::cause::Cause;
use crate::cause::{comm, Kind, Symbol};
use crate::interval::hiccup;

fn task(name: &str, pid: u32) -> Cause {
    Cause::Task { comm: comm(name.as_bytes()), pid: Some(pid) }
}

fn key(cpu: u32, cause: Cause) -> CauseKey {
    CauseKey { cpu, cause: cause.into() }
}

#[test]
fn aggregates_per_cpu_and_cause() {
    let mut s = Stats::new(&[1, 3], 0);
    let irq = Cause::Irq { irq: 24, name: std::sync::Arc::from(&b"eth0"[..]) };
    s.record(&hiccup(1, 1_000, vec![(task("hog", 5), 200)], 20));
    s.record(&hiccup(1, 2_000_000_000, vec![(task("hog", 5), 300), (irq.clone(), 50)], 0));
    s.record(&hiccup(3, 10, vec![], 1000));
    s.now_ns = 10_000_000_000;
    let c1 = &s.cpus[0];
    assert_eq!((c1.hiccups, c1.stolen_ns, c1.max_ns, c1.explained_ns), (2, 570, 350, 550));
    assert_eq!(c1.worst_per_sec, VecDeque::from(vec![(0, 220), (2, 350)]));
    let hog = &s.causes[&key(1, task("hog", 5))];
    assert_eq!((hog.count, hog.total_ns, hog.max_ns, hog.last_seen_ns), (2, 500, 300, 2_000_000_000));
    assert_eq!(hog.p99(), 300);
    let top: Vec<Cause> = s.top_causes(Some(1)).iter().map(|(k, _)| k.cause.cause()).collect();
    assert_eq!(top, vec![task("hog", 5), irq, Cause::Unexplained]);
    assert_eq!(s.top_causes(Some(3))[0].0.cause, crate::cause::CauseId::UNEXPLAINED);
    assert!((s.stolen_pct(&s.cpus[0]) - 570.0 / 1e8).abs() < 1e-12);
    assert!((s.per_sec(3) - 0.3).abs() < 1e-9);
}

#[test]
fn pid_churn_folds_stale_causes_by_their_fields() {
    let mut s = Stats::new(&[1], 0);
    let big = 1_000_000;
    let tick = Cause::Timer(Symbol::from("tick_nohz_handler"));
    s.record(&hiccup(1, 0, vec![(task("hog", 5), big)], 0));
    // 1000 short-lived tasks, each seen in 70 hiccups (a histogram each),
    // bigger than the tick that keeps coming between them.
    for pid in 0..1000u64 {
        for i in 0..70 {
            s.record(&hiccup(1, pid * 100 + i, vec![(task("cc1", 1000 + pid as u32), 10 + pid)], 0));
        }
        s.record(&hiccup(1, pid * 100 + 80, vec![(tick.clone(), 5)], 0));
    }
    let kept = s.causes.keys().filter(|k| k.cpu == 1).count();
    assert!(kept <= MAX_CAUSES, "{kept} causes kept");
    assert_eq!(s.cause_entries[&1], kept);
    // Totals still add up, and the large cause survived.
    let total: u64 = s.causes.values().map(|c| c.total_ns).sum();
    assert_eq!(total, s.cpus[0].stolen_ns);
    assert_eq!(s.causes[&key(1, task("hog", 5))].total_ns, big);
    assert_eq!(s.causes[&key(1, tick)].count, 1000);
    // Folded tasks share their program's entry: a comm with `[` in it
    // folds by its field, not by parsing `comm[pid]` back. Once folded, the
    // program is one cause: no `cc1[pid]` beside `cc1[*]`.
    let program = &s.causes[&key(1, Cause::Task { comm: comm(b"cc1"), pid: None })];
    let cc1: Vec<_> = s.causes.iter().filter(|(k, _)| k.cause.name().starts_with("cc1")).map(|(k, c)| (k.cause.name(), c.count)).collect();
    assert_eq!(program.count, 70_000, "{cc1:?}");
    let split = s.causes.keys().filter(|k| matches!(k.cause.cause(), Cause::Task { comm: c, pid: Some(_) } if c == comm(b"cc1"))).count();
    assert_eq!(split, 0, "cc1 shown as its program and as {split} pids");
    assert_eq!(s.causes.values().map(|c| c.count).sum::<u64>(), 71_001);
    assert!(!s.causes.contains_key(&key(1, Cause::Others(Kind::Task))));
}

#[test]
fn a_program_the_engine_folded_is_one_cause() {
    // The engine's spill names a program (`qemu[*]`) while one of its pids
    // was already listed: the views show one qemu, before and after.
    let mut s = Stats::new(&[1], 0);
    let program = Cause::Task { comm: comm(b"qemu"), pid: None };
    s.record(&hiccup(1, 0, vec![(task("qemu", 23769), 100)], 0));
    s.record(&hiccup(1, 1, vec![(program.clone(), 50)], 0));
    s.record(&hiccup(1, 2, vec![(task("qemu", 23770), 25)], 0));
    let top: Vec<(Cause, u64, u64)> = s.top_causes(Some(1)).iter().map(|(k, c)| (k.cause.cause(), c.count, c.total_ns)).collect();
    assert_eq!(top, [(program, 3, 175)]);
    assert_eq!(s.cause_entries[&1], 1);
}

#[test]
fn keeps_the_worst_recent_stalls_and_resets_at_the_source() {
    let mut s = Stats::new(&[1], 0);
    for i in 0..100u64 {
        s.record(&hiccup(1, i, vec![], i + 1));
    }
    assert_eq!(s.worst.len(), WORST_KEPT);
    assert_eq!(s.worst[0].gap, 100);
    // A minute later the old ones have aged out.
    s.record(&hiccup(1, 2 * WORST_AGE_NS, vec![], 5));
    assert_eq!(s.worst.len(), 1);
    let mut raw = Counters::new(&[1]);
    raw.events = 500;
    raw.cpus[0].drops = 7;
    raw.cpus[0].threshold_ns = 180;
    s.update_counters(raw.clone(), 10);
    s.reset(20);
    assert_eq!((s.cpus[0].hiccups, s.causes.len(), s.worst.len(), s.start_ns, s.was_reset), (0, 0, 0, 20, true));
    // The run's gap totals (for the probe's period between hiccups) survive.
    assert_eq!(s.run_gaps(1), ((1..=100).sum::<u64>() + 5, 101));
    assert_eq!((s.counters.events, s.cpus[0].counters.drops, s.cpus[0].counters.threshold_ns), (0, 0, 180));
    raw.events = 600;
    raw.cpus[0].drops = 9;
    s.update_counters(raw, 30);
    assert_eq!((s.counters.events, s.cpus[0].counters.drops, s.elapsed_ns()), (100, 2, 10));
}

#[test]
fn a_second_seen_again_after_a_later_one_is_kept_once_and_in_order() {
    let mut secs = VecDeque::new();
    for (sec, gap) in [(3, 10), (5, 20), (4, 7), (5, 30), (3, 40), (1, 5)] {
        super::note_second(&mut secs, sec, gap);
    }
    assert_eq!(secs, VecDeque::from(vec![(1, 5), (3, 40), (4, 7), (5, 30)]));
    // Full: the oldest second gives way; a second older than all is dropped.
    let mut full: VecDeque<(u64, u64)> = (10..10 + super::SPARK_SECS as u64).map(|s| (s, 1)).collect();
    super::note_second(&mut full, 5, 9);
    assert_eq!(full.front(), Some(&(10, 1)));
    super::note_second(&mut full, 12, 9);
    assert_eq!(full.iter().find(|p| p.0 == 12), Some(&(12, 9)));
    super::note_second(&mut full, 400, 9);
    assert_eq!((full.len(), full.front(), full.back()), (super::SPARK_SECS, Some(&(11, 1)), Some(&(400, 9))));
    assert!(full.iter().zip(full.iter().skip(1)).all(|(a, b)| a.0 < b.0));
}

/// A stopped probe's gap is a hiccup, but nothing stole that time.
#[test]
fn stopped_time_is_not_stolen() {
    let mut s = Stats::new(&[1], 0);
    s.record(&hiccup(1, 10, vec![(Cause::Stopped, 2_000_000), (Cause::Softirq(1), 500)], 100));
    let c = &s.cpus[0];
    assert_eq!((c.hiccups, c.stolen_ns, c.stopped_ns, c.explained_ns), (1, 600, 2_000_000, 500));
}

/// A percentile never exceeds the max, on a CPU as for a thread: the
/// histogram keeps 2 significant digits, and the top of the bucket of
/// 7,201 ns is 7,231 (the headless summary said "p99 7231 ns, max 7201").
#[test]
fn no_percentile_above_the_max() {
    let mut s = Stats::new(&[1], 0);
    for gap in [1_000, 2_000, 7_201] {
        s.record(&hiccup(1, gap * 10, vec![], gap));
    }
    let c = &s.cpus[0];
    assert_eq!(c.max_ns, 7_201);
    assert!(c.gaps.value_at_quantile(0.99) > 7_201, "the bucket's top: the case this guards");
    for q in [0.5, 0.99, 0.999, 1.0] {
        assert!(c.pct(q) <= c.max_ns, "p{q} {} above the max", c.pct(q));
    }
    assert_eq!(c.pct(0.999), 7_201);
}

/// `--stacks-above`: a cause keeps the stack of the stall where it took
/// the most with one; a smaller one later does not replace it.
#[test]
fn a_cause_keeps_the_stack_of_its_largest_stall_with_one() {
    let mut s = Stats::new(&[1], 0);
    let with = |at: u64, ns: u64, frame: &str| {
        let mut h = hiccup(1, at, vec![(task("hog", 5), ns)], 0);
        h.stack =
            Some(std::sync::Arc::new(crate::interval::Stack { cause: task("hog", 5).into(), frames: vec![Symbol::from(frame)].into() }));
        h
    };
    s.record(&with(1_000, 2_000_000, "first"));
    s.record(&with(9_000_000, 3_000_000, "largest"));
    s.record(&with(20_000_000, 2_500_000, "smaller"));
    s.record(&hiccup(1, 30_000_000, vec![(task("hog", 5), 9_000_000)], 0));
    let st = s.causes[&key(1, task("hog", 5))].stack.as_ref().expect("a stack");
    assert_eq!((st.0, &*st.1[0]), (3_000_000, "largest"));
}
