//! The wake-up probe's late wake-ups on synthetic streams: the parts of
//! each latency, the slack, the idle state, what delayed the switch-in.

use super::*;

const WAKE_FN: u64 = 0xffff_ffff_8100_3000;
const SLEEPER: u64 = 0xffff_8880_0000_1000;
const US: u64 = 1_000;

fn wakeup_engine(slack: u64) -> Engine {
    let syms = format!("{SYMS}ffffffff81003000 t hrtimer_wakeup\n");
    let mut e = Engine::new(&[CPU as usize], 0, 1024, Namer::new(Kallsyms::parse(&syms), IdleStates::default()));
    e.set_probe_tids(CPU, &[PROBE]);
    e.set_probe_slack(CPU, slack);
    e
}

/// The timer interrupt at `at`: LOCAL_TIMER, the sleeper's hrtimer_wakeup
/// callback for 2 µs, out at `at` + 5 µs.
fn timer_irq(at: u64) -> Vec<Event> {
    vec![
        ev(at, Payload::VectorEntry(Vector::LocalTimer)),
        ev(at + US, Payload::HrtimerEntry { func: WAKE_FN, timer: SLEEPER }),
        ev(at + 3 * US, Payload::HrtimerExit { timer: SLEEPER }),
        ev(at + 5 * US, Payload::VectorExit(Vector::LocalTimer)),
    ]
}

/// One late wake-up: deadline `d`, clock read at `t1`, after `events`.
fn late(e: &mut Engine, events: &[Event], d: u64, t1: u64) -> Hiccup {
    for x in events {
        e.on_event(x);
    }
    e.on_interval(Interval { cpu: CPU, t0: d, t1, source: Source::WakeupProbe, victim: None, smis: 0, delivery: false });
    let mut got = Vec::new();
    e.attribute_ready(t1 + 10 * US, |h| got.push(h.clone()));
    got.pop().expect("a hiccup")
}

fn idle() -> Task {
    task(0, "swapper/1")
}

/// Delayed by a SCHED_FIFO task running when the timer fired: the timer is
/// on time, the scheduling delay is the task's, the parts add up.
#[test]
fn a_running_fifo_task_delays_the_switch_in() {
    let mut e = wakeup_engine(0);
    let d = 1000 * US;
    let mut evs = vec![switch(900 * US, probe(), task(77, "fifohog"))];
    evs.extend(timer_irq(d));
    evs.push(switch(d + 300 * US, task(77, "fifohog"), probe()));
    let h = late(&mut e, &evs, d, d + 302 * US);
    let p = h.parts.clone().expect("parts");
    assert_eq!((p.timer_ns, p.sched_ns, p.user_ns), (US, 299 * US, 2 * US));
    assert_eq!(p.timer_ns + p.sched_ns + p.user_ns, h.gap);
    assert_eq!(labels(&h)[0], format!("task:fifohog[77]={}", 295 * US));
    // Each part's largest cause: the timer interrupt, then the hog.
    let top = p.top.map(|t| t.map(|(c, ns)| format!("{}={ns}", c.label())));
    assert_eq!(top[1], Some(format!("task:fifohog[77]={}", 295 * US)), "{top:?}");
    assert_eq!(h.causes.iter().map(|c| c.1).sum::<u64>() + h.unexplained, h.gap);
}

/// An IRQ before the timer fires: part of the timer latency, named.
#[test]
fn an_irq_before_the_timer_is_timer_latency() {
    let mut e = wakeup_engine(0);
    let d = 1000 * US;
    let mut evs = vec![
        switch_ran(990 * US, probe(), idle(), 0),
        ev(d, Payload::IrqEntry { irq: 24, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(d + 40 * US, Payload::IrqExit { irq: 24, ret: 1 }),
    ];
    evs.extend(timer_irq(d + 40 * US));
    evs.push(switch(d + 46 * US, idle(), probe()));
    let h = late(&mut e, &evs, d, d + 47 * US);
    let p = h.parts.clone().unwrap();
    assert_eq!((p.timer_ns, p.sched_ns, p.user_ns), (41 * US, 5 * US, US));
    assert!(labels(&h).contains(&format!("irq:24={}", 40 * US)), "{:?}", labels(&h));
}

/// An idle CPU: the stretch before the interrupt is the idle state's exit.
#[test]
fn leaving_an_idle_state_is_named_by_the_state() {
    let mut e = wakeup_engine(0);
    let d = 1000 * US;
    let mut evs = vec![switch_ran(990 * US, probe(), idle(), 0), ev(991 * US, Payload::Idle { state: 1 })];
    // The CPU woke 30 µs late; the idle exit is reported inside the interrupt.
    evs.extend(timer_irq(d + 30 * US));
    evs.insert(2, ev(d + 30 * US, Payload::Idle { state: crate::record::IDLE_EXIT }));
    evs.push(switch(d + 36 * US, idle(), probe()));
    let h = late(&mut e, &evs, d, d + 37 * US);
    assert_eq!(h.causes[0].0.kind(), crate::cause::Kind::Idle);
    assert_eq!(h.causes[0].1, 30 * US);
}

/// The timer slack comes first: the kernel may fire the timer that late.
#[test]
fn slack_is_charged_first_and_never_past_the_timer() {
    let d = 1000 * US;
    let evs = |fire: u64| {
        let mut v = vec![switch_ran(990 * US, probe(), idle(), 0), ev(991 * US, Payload::Idle { state: 1 })];
        v.push(ev(fire, Payload::Idle { state: crate::record::IDLE_EXIT }));
        v.extend(timer_irq(fire));
        v.push(switch(fire + 6 * US, idle(), probe()));
        v
    };
    let h = late(&mut wakeup_engine(50 * US), &evs(d + 52 * US), d, d + 60 * US);
    assert_eq!(labels(&h)[0], format!("slack:={}", 50 * US));
    assert_eq!(h.parts.clone().unwrap().top[0], Some((crate::cause::CauseId::SLACK, 50 * US)), "the timer part's largest cause");
    assert!(labels(&h).contains(&format!("idle:halt (default idle)={}", 2 * US)), "{:?}", labels(&h));
    // A timer that fired before the slack ran out: only that much is slack.
    let h = late(&mut wakeup_engine(50 * US), &evs(d + 20 * US), d, d + 28 * US);
    assert!(labels(&h).contains(&format!("slack:={}", 21 * US)), "{:?}", labels(&h));
    assert_eq!(h.causes.iter().map(|c| c.1).sum::<u64>() + h.unexplained, h.gap);
}

/// The CPU's frequency changed inside a stall: the stall says from → to.
#[test]
fn a_frequency_change_inside_a_stall_is_shown_with_it() {
    let mut e = wakeup_engine(0);
    let d = 1000 * US;
    let mut evs = vec![ev(500 * US, Payload::Freq { khz: 2_400_000 }), switch(900 * US, probe(), task(77, "fifohog"))];
    evs.extend(timer_irq(d));
    evs.push(ev(d + 50 * US, Payload::Freq { khz: 800_000 }));
    evs.push(switch(d + 300 * US, task(77, "fifohog"), probe()));
    let h = late(&mut e, &evs, d, d + 302 * US);
    assert_eq!(h.freq, Some((Some(2_400_000), 800_000)));
    // Nothing changed inside the next one.
    let next = late(
        &mut e,
        &[switch(d + 1900 * US, probe(), task(77, "fifohog")), switch(d + 2100 * US, task(77, "fifohog"), probe())],
        d + 2000 * US,
        d + 2101 * US,
    );
    assert_eq!(next.freq, None);
}

/// Events that arrive after the interval is reported are still used: the
/// attribution waits for the CPU's events to pass the interval.
#[test]
fn a_wakeup_whose_events_arrive_late() {
    let mut e = wakeup_engine(0);
    let d = 1000 * US;
    e.on_interval(Interval { cpu: CPU, t0: d, t1: d + 102 * US, source: Source::WakeupProbe, victim: None, smis: 0, delivery: false });
    let mut early = Vec::new();
    e.attribute_ready(d, |h| early.push(h.clone()));
    assert!(early.is_empty(), "attributed before its events came");
    let mut evs = vec![switch(900 * US, probe(), task(77, "fifohog"))];
    evs.extend(timer_irq(d));
    evs.push(switch(d + 100 * US, task(77, "fifohog"), probe()));
    evs.push(ev(d + 2000 * US, Payload::SoftirqEntry { vec: 1, syscall: None }));
    let h = late(&mut e, &evs, d, d + 102 * US);
    assert_eq!(h.parts.clone().unwrap().sched_ns, 99 * US);
    assert!(labels(&h)[0].starts_with("task:fifohog[77]="));
}

/// Switched in, then preempted before its clock read: the wait after the
/// first switch-in is scheduling delay too; return to user is from the last.
#[test]
fn a_probe_preempted_after_its_switch_in_waited_again() {
    let mut e = wakeup_engine(0);
    let d = 1000 * US;
    let mut evs = vec![switch_ran(990 * US, probe(), idle(), 0)];
    evs.extend(timer_irq(d));
    evs.push(switch(d + 6 * US, idle(), probe()));
    evs.push(switch(d + 8 * US, probe(), task(77, "fifohog")));
    evs.push(switch(d + 508 * US, task(77, "fifohog"), probe()));
    let h = late(&mut e, &evs, d, d + 510 * US);
    let p = h.parts.clone().unwrap();
    assert_eq!((p.timer_ns, p.sched_ns, p.user_ns), (US, 507 * US, 2 * US));
}

/// Another sleeper's timer on the CPU, in progress at the deadline and
/// another just after: the probe's own wake-up says which was its timer.
#[test]
fn another_sleepers_timer_is_not_the_probes() {
    let d = 1000 * US;
    let other = 0xffff_8880_0000_2000;
    let evs = |probe_woken: bool| {
        let mut v = vec![
            switch_ran(990 * US, probe(), idle(), 0),
            ev(d - US, Payload::HrtimerEntry { func: WAKE_FN, timer: other }),
            ev(d + US, Payload::HrtimerExit { timer: other }),
            ev(d + 2 * US, Payload::HrtimerEntry { func: WAKE_FN, timer: other }),
            ev(d + 3 * US, Payload::HrtimerExit { timer: other }),
        ];
        v.extend(timer_irq(d + 30 * US));
        if probe_woken {
            v.push(ev(d + 32 * US, Payload::Wakeup { task: probe(), target_cpu: CPU, waker_cpu: CPU }));
        }
        v.push(switch(d + 36 * US, idle(), probe()));
        v
    };
    let h = late(&mut wakeup_engine(0), &evs(true), d, d + 37 * US);
    let p = h.parts.clone().unwrap();
    assert_eq!((p.timer_ns, p.sched_ns, p.user_ns), (32 * US, 4 * US, US));
    // Without its wake-up event: the first sleeper that fired after the
    // deadline (the other one's, here) is taken.
    let h = late(&mut wakeup_engine(0), &evs(false), d, d + 37 * US);
    assert_eq!(h.parts.clone().unwrap().timer_ns, 2 * US);
}
