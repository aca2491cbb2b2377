//! The watermark, the window of kept events, pruning and spills: what
//! happens when events arrive late, out of order, or too many.

use super::*;

#[test]
fn waits_for_the_watermark_and_tolerates_late_events() {
    let mut e = engine();
    e.on_event(&switch(100, probe(), task(50, "hog")));
    e.on_interval(gap(90, 310));
    let mut got = Vec::new();
    // Drained only up to 200: the gap's end has not been covered yet.
    e.attribute_ready(200, |h| got.push(h.clone()));
    assert!(got.is_empty());
    assert_eq!(e.cpus[0].pending.len(), 1);
    // Events from another CPU arrive in between, out of order: ignored here.
    e.on_event(&Event { ts: 5, cpu: 0, dropped: 0, own_ns: 0, payload: Payload::SoftirqEntry { vec: 1, syscall: None } });
    e.on_event(&switch(300, task(50, "hog"), probe()));
    e.attribute_ready(1000, |h| got.push(h.clone()));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].causes[0].1, 200);
    assert_eq!(e.foreign_events, 1);
}

#[test]
fn slightly_reordered_events_are_clamped() {
    let evs = [
        switch(100, probe(), task(50, "hog")),
        ev(200, Payload::WorkStart { func: WORK_FN, work: 1 }),
        // Stamped a few ns before the previous record: nested programs.
        ev(195, Payload::IrqEntry { irq: 4, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(230, Payload::IrqExit { irq: 4, ret: 1 }),
        ev(260, Payload::WorkEnd { func: WORK_FN, work: 1 }),
        switch(300, task(50, "hog"), probe()),
    ];
    let (c, u) = run(&evs, 100, 300, 1000);
    assert_eq!(c, vec!["task:hog[50]=140", "work:vmstat_update=30", "irq:4=30"]);
    assert_eq!(u, 0);
}

#[test]
fn prune_keeps_what_pending_gaps_need() {
    let mut e = engine();
    e.on_event(&switch(100, probe(), task(50, "hog")));
    e.on_event(&switch(300, task(50, "hog"), probe()));
    e.on_interval(gap(100, 300));
    e.prune(CPU, 10_000);
    let mut got = Vec::new();
    e.attribute_ready(1000, |h| got.push(h.clone()));
    assert_eq!(got[0].causes.len(), 1);
    e.prune(CPU, 10_000);
    assert_eq!(e.cpus[0].timeline.held(), 0);
}

#[test]
fn unseen_switch_out_of_idle_is_placed_by_the_run_time() {
    // The perf event misses swapper -> hog at 200; hog's switch-out says it
    // ran 100 ns, so [200, 300) is hog's, not the idle task's.
    let evs = [switch_ran(100, probe(), task(0, "swapper/1"), 40), switch_ran(300, task(50, "hog"), probe(), 100)];
    assert_eq!(run(&evs, 90, 310, 1000), (vec!["task:hog[50]=100".into(), "idle:idle loop=100".into()], 20));
}

#[test]
fn unseen_switch_moves_time_already_closed() {
    // An interrupt inside hog's run closed pieces before hog was known:
    // those pieces move from the idle task to hog, the IRQ stays an IRQ.
    let evs = [
        switch_ran(100, probe(), task(0, "swapper/1"), 40),
        ev(150, Payload::IrqEntry { irq: 9, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(160, Payload::IrqExit { irq: 9, ret: 1 }),
        ev(250, Payload::IrqEntry { irq: 9, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(260, Payload::IrqExit { irq: 9, ret: 1 }),
        switch_ran(300, task(50, "hog"), probe(), 120),
    ];
    assert_eq!(run(&evs, 100, 300, 1000), (vec!["task:hog[50]=110".into(), "idle:idle loop=70".into(), "irq:9=20".into()], 0));
}

#[test]
fn without_a_run_time_a_switch_changes_nothing_before_it() {
    // The tracepoint hook sees every switch and reports no run time.
    let evs = [switch(100, probe(), task(0, "swapper/1")), switch(300, task(50, "hog"), probe())];
    assert_eq!(run(&evs, 100, 300, 1000), (vec!["idle:idle loop=200".into()], 0));
}

#[test]
fn the_probe_resuming_ends_an_idle_stretch_no_event_closed() {
    // RT throttling parks the probe (seen), the idle task runs, and the
    // switch back into the probe is unseen: the next gap, a host pause with
    // no events, is unexplained, not the idle task's.
    let evs = [switch_ran(100, probe(), task(0, "swapper/1"), 5000)];
    let rows = run_gaps(&evs, &[(90, 300), (400, 500)], 1000);
    assert_eq!(rows, vec![(vec!["idle:idle loop=200".to_string()], 10), (vec![], 100)]);
}

#[test]
fn an_unseen_switch_drops_interrupt_frames_that_never_exited() {
    // An IPI entry whose exit program was not attached yet, then the probe
    // starts on an idle CPU (unseen switch): a later host pause is not the IPI's.
    let evs = [ev(50, Payload::VectorEntry(Vector::CallFunctionSingle))];
    assert_eq!(run(&evs, 400, 500, 1000), (vec![], 100));
}

#[test]
fn an_unseen_switch_never_reaches_back_past_the_last_seen_one() {
    // hog reports a run longer than the idle stretch before it: only the
    // time since the last seen switch can be hog's; the earlier idle
    // stretch stays idle.
    let evs = [
        switch_ran(100, probe(), task(0, "swapper/1"), 40),
        switch_ran(150, task(0, "swapper/1"), probe(), 0),
        switch_ran(200, probe(), task(0, "swapper/1"), 40),
        switch_ran(300, task(50, "hog"), probe(), 250),
    ];
    assert_eq!(run(&evs, 90, 310, 1000), (vec!["task:hog[50]=100".into(), "idle:idle loop=50".into()], 70));
}

/// A stall longer than the window: the segments pushed out are summed per
/// cause, so the gap keeps its totals instead of turning unexplained.
#[test]
fn a_gap_longer_than_the_window_keeps_its_causes() {
    let mut e = engine_with_window(4);
    let (a, b) = (task(50, "ping"), task(51, "pong"));
    e.on_event(&switch(50, task(0, "swapper/1"), probe()));
    e.on_event(&switch(100, probe(), a));
    // a runs 60 ns, b 40 ns, 9 times over: 18 segments through a window of 4.
    let mut t = 100;
    for _ in 0..9 {
        e.on_event(&switch(t + 60, a, b));
        e.on_event(&switch(t + 100, b, a));
        t += 100;
    }
    e.on_event(&switch(t, a, probe()));
    // The probe's progress is before the gap: pruning keeps what it needs.
    e.prune(CPU, 100);
    assert!(e.window_stats().evicted > 0, "the window overflowed");
    e.on_interval(gap(100, t));
    assert_eq!(first_hiccup(&mut e, t + 10), (vec!["task:ping[50]=540".into(), "task:pong[51]=360".into()], 0));
    // Once the probe has moved past it, the spill is forgotten.
    e.prune(CPU, t + 10);
    e.on_interval(gap(150, 250));
    assert_eq!(first_hiccup(&mut e, t + 10).1, 100);
}

/// More distinct tasks than the spill keeps (a fork storm inside one long
/// stall): the rest are charged to their program (`sh[*]`), never called
/// unexplained (seen: 8 s of a 15 s busy stall charged to the hypervisor).
#[test]
fn a_long_stall_with_many_tasks_keeps_them_by_program() {
    let mut e = engine_with_window(4);
    e.on_event(&switch(50, task(0, "swapper/1"), probe()));
    let mut prev = probe();
    let mut t = 100;
    for pid in 1000..1600u32 {
        let next = task(pid, if pid % 2 == 0 { "sh" } else { "true" });
        e.on_event(&switch(t, prev, next));
        prev = next;
        t += 10;
    }
    e.on_event(&switch(t, prev, probe()));
    e.on_interval(gap(100, t));
    let (causes, unexplained) = first_hiccup(&mut e, t + 10);
    assert_eq!(unexplained, 0, "{causes:?}");
    let total: u64 = causes.iter().map(|c| c.rsplit_once('=').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(total, t - 100);
    assert!(causes.iter().any(|c| c.starts_with("task:sh[*]=")) && causes.iter().any(|c| c.starts_with("task:true[*]=")), "{causes:?}");
    assert!(causes.len() <= super::spill::SPILL_CAUSES + 8, "{} causes", causes.len());
}

/// A gap that covers only part of the spill gets its share pro rata.
#[test]
fn part_of_a_spill_is_charged_pro_rata() {
    let mut e = engine_with_window(2);
    let (a, b) = (task(50, "ping"), task(51, "pong"));
    // probe 50..100, a 100..200, b 200..300, a 300..400, b 400..500, probe.
    e.on_event(&switch(50, task(0, "swapper/1"), probe()));
    e.on_event(&switch(100, probe(), a));
    e.on_event(&switch(200, a, b));
    e.on_event(&switch(300, b, a));
    e.on_event(&switch(400, a, b));
    e.on_event(&switch(500, b, probe()));
    e.on_event(&switch(600, probe(), a));
    // The window holds the last two segments; 100..400 went to the spill
    // (a 200 ns, b 100 ns). 250..400 is half of it: a 100, b 50; then the
    // window's b 400..450.
    e.on_interval(gap(250, 450));
    assert_eq!(first_hiccup(&mut e, 700), (vec!["task:ping[50]=100".to_string(), "task:pong[51]=100".into()], 0));
}

/// A consumer that fell behind drains a burst of events at once. The gap is
/// attributed as soon as its CPU's events pass its end, before the rest of
/// the burst slides the window (and the probe's own segment) past it.
#[test]
fn a_gap_is_attributed_as_its_cpus_events_pass_it() {
    // 16 segments: more than the events of REORDER_NS (10 here), fewer
    // than the burst.
    let mut e = engine_with_window(16);
    let (a, b) = (task(50, "ping"), task(51, "pong"));
    e.on_event(&switch(50, task(0, "swapper/1"), probe()));
    e.on_event(&switch(100, probe(), a));
    e.on_event(&switch(200, a, b));
    e.on_event(&switch(300, b, probe()));
    // The probe came back at 300 and reported its gap; the storm resumes and
    // the consumer, late, meets a long burst before its next watermark.
    e.on_interval(gap(100, 300));
    let mut t = 400;
    e.on_event(&switch(t, probe(), a));
    for _ in 0..40 {
        e.on_event(&switch(t + 100_000, a, b));
        e.on_event(&switch(t + 200_000, b, a));
        t += 200_000;
    }
    assert_eq!(first_hiccup(&mut e, t + 10_000_000), (vec!["task:ping[50]=100".to_string(), "task:pong[51]=100".into()], 0));
}

#[test]
fn gaps_are_explained_in_the_order_they_end_whatever_order_they_came() {
    // Passive mode reports a preempted thread's gap when it runs again,
    // after the shorter gaps inside it: each CPU's gaps wait by their end.
    let mut e = engine();
    e.on_event(&switch(100, probe(), task(50, "hog")));
    e.on_event(&switch(300, task(50, "hog"), probe()));
    e.on_interval(gap(250, 400));
    e.on_interval(gap(90, 310));
    e.on_interval(gap(120, 200));
    assert_eq!(e.next_end(0), 200);
    let mut got = Vec::new();
    e.attribute_ready(350, |h| got.push((h.t0, h.gap)));
    assert_eq!(got, vec![(120, 80), (90, 220)]);
    assert_eq!(e.next_end(0), 400);
    e.attribute_ready(1000, |h| got.push((h.t0, h.gap)));
    assert_eq!(got[2..], [(250, 150)]);
    assert_eq!(e.next_end(0), u64::MAX);
}

#[test]
fn events_from_before_the_start_are_not_reordered() {
    // Tracing began at 100: what the programs wrote while they attached
    // is taken at the start; only a later event older than its
    // predecessor counts as reordered.
    let mut e = Engine::new(&[CPU as usize], 100, 1024, Namer::new(Kallsyms::parse(SYMS), IdleStates::default()));
    e.on_event(&ev(40, Payload::IrqEntry { irq: 4, name: [0; crate::record::IRQ_NAME_LEN] }));
    e.on_event(&ev(60, Payload::IrqExit { irq: 4, ret: 1 }));
    e.on_event(&switch(150, probe(), task(50, "hog")));
    e.on_event(&ev(90, Payload::WorkStart { func: WORK_FN, work: 1 }));
    assert_eq!(e.window_stats().reordered, 0);
    e.on_event(&ev(140, Payload::WorkEnd { func: WORK_FN, work: 1 }));
    assert_eq!(e.window_stats().reordered, 1);
}
