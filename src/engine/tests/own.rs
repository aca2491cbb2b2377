//! jitterwatch's own time on a watched CPU: each record's `own_ns` (our
//! program's time from its first clock read on) and the dispatch priced
//! before it are `self`, never the kernel's.

use super::*;

/// Each event's `own_ns` is our program's time from the event on: a stall
/// over a tick names it `self: jitterwatch`, and the kernel's causes keep
/// only the kernel's time.
#[test]
fn our_own_programs_time_is_self_not_the_kernels() {
    let own = |ts, ns, p| Event { own_ns: ns, ..ev(ts, p) };
    let events = [
        switch(0, task(0, "swapper/1"), probe()),
        own(10_000, 300, Payload::VectorEntry(Vector::LocalTimer)),
        own(12_000, 100, Payload::HrtimerEntry { func: TICK_FN, timer: 7 }),
        own(15_000, 100, Payload::HrtimerExit { timer: 7 }),
        own(19_000, 500, Payload::VectorExit(Vector::LocalTimer)),
        ev(30_000, Payload::SoftirqEntry { vec: 1, syscall: None }),
    ];
    let got = run_gaps(&events, &[(10_000, 19_500)], 100_000);
    assert_eq!(
        got,
        [(vec!["irq:local_timer=5600".to_string(), "timer:tick_nohz_handler=2900".to_string(), "self:jitterwatch=1000".to_string()], 0)]
    );
}

/// With a hook's dispatch priced (bpf::Dispatch), that much before each
/// event our program timed is ours too: taken from what ran before it
/// (the tick's handler, the timer, the probe before the vector's entry),
/// never added to the stall.
#[test]
fn a_hooks_dispatch_before_each_of_our_records_is_self() {
    let own = |ts, ns, p| Event { own_ns: ns, ..ev(ts, p) };
    let events = [
        switch(0, task(0, "swapper/1"), probe()),
        own(10_000, 300, Payload::VectorEntry(Vector::LocalTimer)),
        own(12_000, 100, Payload::HrtimerEntry { func: TICK_FN, timer: 7 }),
        own(15_000, 100, Payload::HrtimerExit { timer: 7 }),
        own(19_000, 500, Payload::VectorExit(Vector::LocalTimer)),
        // Not ours (written elsewhere, or untimed): nothing moved.
        ev(30_000, Payload::SoftirqEntry { vec: 1, syscall: None }),
    ];
    let mut e = engine();
    e.set_dispatch_ns(200, 50);
    for x in &events {
        e.on_event(x);
    }
    e.on_interval(gap(9_800, 19_500));
    let mut got = Vec::new();
    e.attribute_ready(100_000, |h| got.push(h.clone()));
    let h = got.first().expect("a hiccup");
    assert_eq!(
        (labels(h), h.unexplained),
        (vec!["irq:local_timer=5200".to_string(), "timer:tick_nohz_handler=2700".to_string(), "self:jitterwatch=1800".to_string()], 0)
    );
}

/// A reschedule IPI's handler shorter than the dispatch priced before its
/// exit leaves no segment of its own: the wake-up it delivered still waits
/// for it until it arrived, not for the task that ran (passive_server_e2e
/// at SCHED_FIFO beside a hog: ipi:reschedule fell to 8 ms of 487 once the
/// dispatch was priced, the hog took the rest).
#[test]
fn a_short_reschedule_ipi_still_ends_a_wake_ups_delivery() {
    let victim = Task { pid: 500, tgid: 500, prio: 120, comm: comm("app") };
    let hog = task(77, "hog");
    let own = |ts, ns, p| Event { own_ns: ns, ..ev(ts, p) };
    let evs = [
        switch(0, probe(), hog),
        // The IPI reaches the CPU at 800; its handler runs 100 ns, under
        // the 200 priced before the exit's record.
        own(800, 50, Payload::VectorEntry(Vector::Reschedule)),
        own(950, 50, Payload::VectorExit(Vector::Reschedule)),
        switch(1_100, hog, victim),
        switch(2_000, victim, probe()),
    ];
    let mut e = engine();
    e.set_dispatch_ns(200, 50);
    for x in &evs {
        e.on_event(x);
    }
    e.on_interval(Interval {
        cpu: CPU,
        t0: 500,
        t1: 1_100,
        source: Source::Wakeup,
        victim: Some(crate::interval::Victim { tid: 500, comm: comm("app") }),
        smis: 0,
        delivery: true,
    });
    let (causes, unexplained) = first_hiccup(&mut e, 10_000);
    // 500..600 the hog's, moved to the IPI (it had not arrived); 600..1_000
    // ours (the entry's dispatch and run, the exit's, which took the
    // handler's 100 ns); after it, the hog's way to the switch.
    assert_eq!(
        (causes, unexplained),
        (vec!["self:jitterwatch=400".to_string(), "task:hog[77]=100".to_string(), "ipi:reschedule=100".to_string()], 0)
    );
}
