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
    e.set_dispatch_ns(200);
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
