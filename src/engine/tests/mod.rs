//! Synthetic event streams: each test builds a CPU's history by hand and
//! checks what a gap over it is charged to.

use super::*;
use crate::interval::Source;
use crate::kallsyms::Kallsyms;
use crate::record::{Comm, Task, Vector};

const CPU: u32 = 1;
const PROBE: u32 = 999;
const WORK_FN: u64 = 0xffff_ffff_8100_1000;
const TICK_FN: u64 = 0xffff_ffff_8100_2000;
const SYMS: &str = "ffffffff81001000 t vmstat_update\nffffffff81002000 t tick_nohz_handler\nffffffff81003000 T bpf_trace_run4\nffffffff81000800 T __traceiter_sched_switch\n";

fn comm(s: &str) -> Comm {
    crate::cause::comm(s.as_bytes())
}

fn gap(t0: u64, t1: u64) -> Interval {
    Interval { cpu: CPU, t0, t1, source: Source::Probe, victim: None, smis: 0, delivery: false }
}

/// A hiccup's causes as `kind:name=ns`.
fn labels(h: &Hiccup) -> Vec<String> {
    h.causes.iter().map(|(c, ns)| format!("{}={ns}", c.label())).collect()
}

fn task(pid: u32, name: &str) -> Task {
    Task { pid, tgid: pid, prio: 120, comm: comm(name) }
}

fn ev(ts: u64, payload: Payload) -> Event {
    Event { ts, cpu: CPU, dropped: 0, own_ns: 0, payload }
}

fn switch(ts: u64, prev: Task, next: Task) -> Event {
    ev(ts, Payload::Switch { prev, next, prev_state: 0, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: true })
}

/// A switch as the per-CPU perf event reports it: with how long prev ran.
fn switch_ran(ts: u64, prev: Task, next: Task, ran: u32) -> Event {
    ev(ts, Payload::Switch { prev, next, prev_state: 1, prev_ran_ns: ran, delays: (None, None), runtimes: (0, 0), preempt: false })
}

fn engine() -> Engine {
    engine_with_window(1024)
}

/// An engine whose timeline keeps at most `window` segments.
fn engine_with_window(window: usize) -> Engine {
    let mut e = Engine::new(&[CPU as usize], 0, window, Namer::new(Kallsyms::parse(SYMS), IdleStates::default()));
    e.set_probe_tids(CPU, &[PROBE]);
    e
}

/// The first hiccup `attribute_ready` hands out, as `kind:name=ns` strings
/// and its unexplained time.
fn first_hiccup(e: &mut Engine, watermark: u64) -> (Vec<String>, u64) {
    let mut got = Vec::new();
    e.attribute_ready(watermark, |h| got.push(h.clone()));
    let h = got.first().expect("a hiccup");
    (labels(h), h.unexplained)
}

fn probe() -> Task {
    task(PROBE, "jitterwatch-pro")
}

/// Feeds events, then gaps (t0, t1), and returns each hiccup as
/// `kind:name=ns` strings and its unexplained time.
fn run_gaps(events: &[Event], gaps: &[(u64, u64)], watermark: u64) -> Vec<(Vec<String>, u64)> {
    let mut e = engine();
    for x in events {
        e.on_event(x);
    }
    for &(t0, t1) in gaps {
        e.on_interval(gap(t0, t1));
    }
    let mut got = Vec::new();
    e.attribute_ready(watermark, |h| got.push(h.clone()));
    assert_eq!(got.len(), gaps.len(), "gaps not attributed");
    got.iter()
        .map(|h| {
            assert_eq!(h.causes.iter().map(|c| c.1).sum::<u64>() + h.unexplained, h.gap, "rows add up");
            (labels(h), h.unexplained)
        })
        .collect()
}

/// The same for one gap.
fn run(events: &[Event], t0: u64, t1: u64, watermark: u64) -> (Vec<String>, u64) {
    run_gaps(events, &[(t0, t1)], watermark).pop().expect("one gap")
}

#[test]
fn task_slice() {
    let evs = [switch(100, probe(), task(50, "hog")), switch(300, task(50, "hog"), probe())];
    assert_eq!(run(&evs, 90, 310, 1000), (vec!["task:hog[50]=200".into()], 20));
}

#[test]
fn irq_nested_in_task_slice_is_charged_once() {
    let evs = [
        switch(100, probe(), task(50, "hog")),
        ev(150, Payload::IrqEntry { irq: 24, name: *b"virtio0-input.0\0\0\0\0\0\0\0\0\0" }),
        ev(170, Payload::IrqExit { irq: 24, ret: 1 }),
        switch(300, task(50, "hog"), probe()),
    ];
    let (c, u) = run(&evs, 100, 300, 1000);
    assert_eq!(c, vec!["task:hog[50]=180", "irq:24:virtio0-input.0=20"]);
    assert_eq!(u, 0);
}

#[test]
fn softirq_right_after_irq() {
    let evs = [
        ev(100, Payload::IrqEntry { irq: 5, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(110, Payload::IrqExit { irq: 5, ret: 1 }),
        ev(110, Payload::SoftirqEntry { vec: 3, syscall: None }),
        ev(140, Payload::SoftirqExit { vec: 3 }),
    ];
    let (c, u) = run(&[switch(50, task(1, "x"), probe())].iter().chain(&evs).copied().collect::<Vec<_>>(), 95, 145, 1000);
    assert_eq!(c, vec!["softirq:NET_RX=30", "irq:5=10"]);
    // Kernel entry and exit around them ran in the probe's own context.
    assert_eq!(u, 10);
}

#[test]
fn work_item_inside_kworker_slice() {
    let kw = task(412, "kworker/1:1");
    let evs = [
        switch(100, probe(), kw),
        ev(110, Payload::WorkStart { func: WORK_FN, work: 0xabc }),
        ev(150, Payload::WorkEnd { func: WORK_FN, work: 0xabc }),
        switch(160, kw, probe()),
    ];
    let (c, u) = run(&evs, 100, 160, 1000);
    assert_eq!(c, vec!["work:vmstat_update=40", "task:kworker/1:1[412]=20"]);
    assert_eq!(u, 0);
}

#[test]
fn work_item_that_sleeps_resumes_after_the_switch_back() {
    let kw = task(412, "kworker/1:1");
    let evs = [
        switch(100, probe(), kw),
        ev(100, Payload::WorkStart { func: WORK_FN, work: 0xabc }),
        switch(120, kw, task(0, "swapper/1")),
        switch(150, task(0, "swapper/1"), kw),
        ev(170, Payload::WorkEnd { func: WORK_FN, work: 0xabc }),
        switch(170, kw, probe()),
    ];
    let (c, _) = run(&evs, 100, 170, 1000);
    assert_eq!(c, vec!["work:vmstat_update=40", "idle:idle loop=30"]);
}

#[test]
fn hrtimer_inside_local_timer() {
    let evs = [
        switch(10, task(1, "x"), probe()),
        ev(100, Payload::VectorEntry(Vector::LocalTimer)),
        ev(105, Payload::HrtimerEntry { func: TICK_FN, timer: 0x77 }),
        ev(125, Payload::HrtimerExit { timer: 0x77 }),
        ev(130, Payload::VectorExit(Vector::LocalTimer)),
    ];
    let (c, u) = run(&evs, 98, 132, 1000);
    assert_eq!(c, vec!["timer:tick_nohz_handler=20", "irq:local_timer=10"]);
    assert_eq!(u, 4);
}

#[test]
fn no_events_is_all_unexplained() {
    let (c, u) = run(&[switch(10, task(1, "x"), probe())], 100, 400, 1000);
    assert!(c.is_empty());
    assert_eq!(u, 300);
}

#[test]
fn gap_wider_than_its_events_is_clipped_to_the_gap() {
    // A hog that ran from before the gap to after it: only the overlap counts.
    let evs = [switch(50, probe(), task(7, "hog")), switch(500, task(7, "hog"), probe())];
    assert_eq!(run(&evs, 100, 300, 1000).0, vec!["task:hog[7]=200"]);
    // And a gap that starts before its events and ends after them.
    let evs = [
        switch(10, task(1, "x"), probe()),
        ev(200, Payload::IrqEntry { irq: 9, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(260, Payload::IrqExit { irq: 9, ret: 1 }),
    ];
    assert_eq!(run(&evs, 100, 400, 1000), (vec!["irq:9=60".into()], 240));
}

#[test]
fn exit_without_entry_is_clipped_not_dropped() {
    // Tracing began at 0 in the middle of an IRQ whose entry we never saw.
    let evs = [ev(40, Payload::IrqExit { irq: 3, ret: 1 })];
    assert_eq!(run(&evs, 0, 50, 1000), (vec!["irq:3=40".into()], 10));
}

#[test]
fn nmi_is_cut_out_of_what_it_interrupted() {
    let evs = [
        switch(100, probe(), task(50, "hog")),
        ev(220, Payload::Nmi { handler: 0x1, delta_ns: 20, handled: true }),
        switch(300, task(50, "hog"), probe()),
    ];
    assert_eq!(run(&evs, 100, 300, 1000).0, vec!["task:hog[50]=180", "nmi:0x1=20"]);
}

#[test]
fn parked_probe_names_idle_and_the_timer() {
    // RT throttling: the probe is switched out for idle, the RT period timer
    // fires later in idle's context and lets it run again.
    let idle = task(0, "swapper/1");
    let evs = [
        switch(1000, probe(), idle),
        ev(50_000, Payload::VectorEntry(Vector::LocalTimer)),
        ev(50_010, Payload::HrtimerEntry { func: TICK_FN, timer: 1 }),
        ev(50_030, Payload::HrtimerExit { timer: 1 }),
        ev(50_040, Payload::VectorExit(Vector::LocalTimer)),
        switch(50_100, idle, probe()),
    ];
    let (c, _) = run(&evs, 990, 50_110, 60_000);
    assert_eq!(c[0], "idle:idle loop=49060");
    assert!(c.contains(&"timer:tick_nohz_handler=20".to_string()));
}

#[test]
fn idle_is_its_state_and_its_exit_never_a_task() {
    // The CPU idles in state 1, an IRQ wakes it, the idle task leaves the
    // state and switches to the probe: no second of it is a task's.
    let idle = task(0, "swapper/1");
    let evs = [
        switch(1000, probe(), idle),
        ev(1_200, Payload::Idle { state: 1 }),
        ev(40_000, Payload::IrqEntry { irq: 9, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(40_100, Payload::IrqExit { irq: 9, ret: 1 }),
        ev(40_150, Payload::Idle { state: crate::record::IDLE_EXIT }),
        switch(40_500, idle, probe()),
    ];
    let (c, _) = run(&evs, 990, 40_510, 60_000);
    assert_eq!(c, ["idle:halt (default idle)=38850", "idle:halt (default idle) exit=350", "idle:idle loop=200", "irq:9=100"]);
}

mod origins;
mod own;
mod smi;
mod stacks;
mod steal;
mod wakeup;
mod window;

/// The probe switched out stopped (SIGSTOP, a debugger, a freeze): its gap
/// is its own stop, whatever ran meanwhile, until it runs again.
#[test]
fn a_stopped_probes_gap_is_stopped_not_idle() {
    const STOPPED: u32 = 0x4;
    let events = [
        switch(0, task(0, "swapper/1"), probe()),
        ev(
            10_000,
            Payload::Switch {
                prev: probe(),
                next: task(0, "swapper/1"),
                prev_state: STOPPED,
                prev_ran_ns: 0,
                delays: (None, None),
                runtimes: (0, 0),
                preempt: false,
            },
        ),
        ev(50_000, Payload::VectorEntry(Vector::LocalTimer)),
        ev(52_000, Payload::VectorExit(Vector::LocalTimer)),
        switch(80_000, task(0, "swapper/1"), probe()),
        // Back: a later preemption is a task's again.
        switch(90_000, probe(), task(7, "hog")),
        switch(95_000, task(7, "hog"), probe()),
    ];
    let got = run_gaps(&events, &[(10_000, 80_000), (90_000, 95_000)], 200_000);
    let expect = |l: &str| vec![l.to_string()];
    assert_eq!(got, [(expect(&format!("stopped:{}=70000", crate::cause::STOPPED)), 0), (expect("task:hog[7]=5000"), 0)]);
}

#[test]
fn jitterwatchs_own_threads_on_a_watched_cpu_are_self() {
    // Passive mode may share every CPU with the collector: a watched
    // thread's time lost to one of our threads is ours, not a task's.
    let mut e = engine();
    e.set_own_tgid(4242);
    let collector = Task { pid: 4250, tgid: 4242, prio: 120, comm: comm("jw-collector") };
    let other = task(77, "rustc");
    for x in [switch(1_000, probe(), collector), switch(4_000, collector, other), switch(6_000, other, probe())] {
        e.on_event(&x);
    }
    e.on_interval(gap(1_000, 6_000));
    let (causes, unexplained) = first_hiccup(&mut e, 10_000);
    assert_eq!((causes, unexplained), (vec!["self:jitterwatch=3000".to_string(), "task:rustc[77]=2000".to_string()], 0));
}

#[test]
fn a_preempting_wake_ups_wait_is_its_ipis_until_the_ipi_arrives() {
    // The hog runs; a watched thread is woken at 50 (the wake-up preempts:
    // the kernel booked none of its wait); the reschedule IPI reaches the
    // CPU at 80 and returns at 82; the switch comes at 85.
    let victim = Task { pid: 500, tgid: 500, prio: 120, comm: comm("app") };
    let hog = task(77, "hog");
    let evs = [
        switch(0, probe(), hog),
        ev(80, Payload::VectorEntry(Vector::Reschedule)),
        ev(82, Payload::VectorExit(Vector::Reschedule)),
        switch(85, hog, victim),
        switch(200, victim, probe()),
    ];
    let wake = |delivery| Interval {
        cpu: CPU,
        t0: 50,
        t1: 85,
        source: Source::Wakeup,
        victim: Some(crate::interval::Victim { tid: 500, comm: comm("app") }),
        smis: 0,
        delivery,
    };
    for (delivery, want) in [
        (true, vec!["ipi:reschedule=32", "task:hog[77]=3"]),
        // Not preempting (the kernel booked the wait): the hog kept it.
        (false, vec!["task:hog[77]=33", "ipi:reschedule=2"]),
    ] {
        let mut e = engine();
        for x in &evs {
            e.on_event(x);
        }
        e.on_interval(wake(delivery));
        let (causes, unexplained) = first_hiccup(&mut e, 1_000);
        assert_eq!((causes, unexplained), (want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 0), "delivery {delivery}");
    }
}

#[test]
fn a_handler_stretch_no_event_can_hold_is_unexplained_past_its_cap() {
    // The tick's vector runs 5 ms with no event of its own (the host took
    // the vCPU in the handler): 1 ms is the tick's, the rest nobody's. A
    // softirq as long (NET_RX's budget) stays the softirq's.
    let cap = super::timeline::HANDLER_MAX_NS;
    let evs = [
        switch(0, probe(), task(77, "hog")),
        ev(1_000, Payload::VectorEntry(Vector::LocalTimer)),
        ev(1_000 + 5 * cap, Payload::VectorExit(Vector::LocalTimer)),
        ev(10 * cap, Payload::SoftirqEntry { vec: 3, syscall: None }),
        ev(15 * cap, Payload::SoftirqExit { vec: 3 }),
        switch(20 * cap, task(77, "hog"), probe()),
    ];
    let got = run_gaps(&evs, &[(1_000, 1_000 + 5 * cap), (10 * cap, 15 * cap)], 30 * cap);
    assert_eq!(got[0], (vec![format!("irq:local_timer={cap}")], 4 * cap));
    assert_eq!(got[1], (vec![format!("softirq:NET_RX={}", 5 * cap)], 0));
}

#[test]
fn a_preempting_wake_up_inside_a_reschedule_ipi_charges_nothing_before_it() {
    // The IPI began before the wait did (a wake-up from inside it): there
    // is no time before its arrival to move, and nothing underflows.
    let victim = Task { pid: 500, tgid: 500, prio: 120, comm: comm("app") };
    let hog = task(77, "hog");
    let evs = [
        switch(0, probe(), hog),
        ev(40, Payload::VectorEntry(Vector::Reschedule)),
        ev(60, Payload::VectorExit(Vector::Reschedule)),
        switch(85, hog, victim),
        switch(200, victim, probe()),
    ];
    let mut e = engine();
    for x in &evs {
        e.on_event(x);
    }
    let victim_v = Some(crate::interval::Victim { tid: 500, comm: comm("app") });
    e.on_interval(Interval { cpu: CPU, t0: 50, t1: 85, source: Source::Wakeup, victim: victim_v, smis: 0, delivery: true });
    let (causes, unexplained) = first_hiccup(&mut e, 1_000);
    assert_eq!((causes, unexplained), (vec!["task:hog[77]=25".to_string(), "ipi:reschedule=10".to_string()], 0));
}
