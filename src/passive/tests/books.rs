//! A watched thread's books (time on a CPU, time on a runqueue, the
//! kernel's run_delay beside them) on scripted streams, switches that no
//! hook saw among them.

use super::*;

const TASK_DEAD: u32 = 0x80;

/// A switch as the tracepoint program writes it: how long prev ran, and
/// the kernel's run_delay of prev (as it leaves) and of next (before this
/// switch books its wait).
pub(super) fn sw(ts: u64, prev: Task, next: Task, state: u32, ran: u64, delays: (Option<u32>, Option<u32>)) -> Event {
    ev(ts, Payload::Switch { prev, next, prev_state: state, prev_ran_ns: ran as u32, delays, runtimes: (0, 0), preempt: state == 0 })
}

fn wakeup(ts: u64, task: Task) -> Event {
    // Written on another CPU, about this one.
    Event { ts, cpu: 2, dropped: 0, own_ns: 0, payload: Payload::Wakeup { task, target_cpu: CPU, waker_cpu: 2 } }
}

pub(super) fn books(t: &Tracker, now: u64) -> crate::passive::Books {
    t.books_until(APP, now)
}

pub(super) fn hog() -> Task {
    task(77, 77, "hog")
}

fn agent() -> Task {
    task(69, 1, "agent")
}

#[test]
fn a_switch_into_the_thread_that_no_hook_saw_is_placed_by_its_run_time() {
    // app runs, is preempted by the agent at 100 µs; the agent's switch
    // back to app at 400 µs fires no hook (as on our VMs); app's switch out
    // at 1000 µs says it had run 600 µs: it came back at 400 µs.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(0))),
        sw(100 * US, app(), agent(), 0, 100 * US, (Some(0), None)),
        sw(1_000 * US, app(), hog(), 1, 600 * US, (Some(300_000), None)),
    ];
    let (h, t) = run(&evs, US);
    let b = books(&t, 1_000 * US);
    assert_eq!((b.ran_ns, b.booked.queued_ns), (700 * US, 300 * US), "{b:?}");
    assert_eq!((b.placed, b.unplaced, b.from_kernel), (1, 0, 0));
    assert_eq!(b.booked.kernel_queued_ns, 300_000, "the kernel's count across the unseen switch");
    assert_eq!((b.from_ns, b.to_ns), (Some(0), 1_000 * US));
    // The wait is a preemption from 100 to 400 µs, charged to the agent.
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!((h[0].0, h[0].2.clone()), (Source::Preempted, vec!["task:agent[69]=300000".to_string()]));
}

#[test]
fn without_the_kernels_run_time_the_stretch_is_said_to_be_missing() {
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, None)),
        sw(100 * US, app(), agent(), 0, 0, (None, None)),
        sw(1_000 * US, app(), hog(), 1, 0, (None, None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 1_000 * US);
    assert_eq!((b.ran_ns, b.booked.queued_ns, b.unplaced), (100 * US, 0, 1), "{b:?}");
}

#[test]
fn a_wait_whose_wake_up_no_hook_saw_is_taken_from_the_kernels_books() {
    // app sleeps at 100 µs (run_delay 1000 as it leaves); its wake-up and
    // the switch into it happen in the agent's context, unseen; it leaves
    // again at 900 µs having run 200 µs, run_delay now 51000: the kernel
    // booked a 50 µs wait before that unseen switch.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(1_000))),
        sw(100 * US, app(), agent(), 1, 100 * US, (Some(1_000), None)),
        sw(900 * US, app(), hog(), 1, 200 * US, (Some(51_000), None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 900 * US);
    assert_eq!(
        (b.ran_ns, b.booked.queued_ns, b.booked.woken_queued_ns, b.booked.kernel_queued_ns),
        (300 * US, 50_000, 50_000, 50_000),
        "{b:?}"
    );
    assert_eq!((b.placed, b.from_kernel), (1, 1));
}

#[test]
fn the_kernels_run_delay_is_summed_over_the_window_only() {
    // Found at a switch in (the wait before it is outside the window), then
    // preempted and woken: the kernel's count moves 4000 then 2000 over
    // the window, by 70000 before it.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(70_000))),
        sw(100 * US, app(), hog(), 0, 100 * US, (Some(99_000), None)),
        sw(110 * US, hog(), app(), 1, 10 * US, (None, Some(99_000))),
        sw(200 * US, app(), hog(), 1, 90 * US, (Some(103_000), None)),
        wakeup(300 * US, app()),
        sw(303 * US, hog(), app(), 1, 103 * US, (None, Some(103_000))),
        sw(400 * US, app(), task(0, 0, "swapper/3"), TASK_DEAD, 97 * US, (Some(105_000), None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 5_000 * US);
    assert_eq!(b.booked.kernel_queued_ns, 4_000 + 2_000, "{b:?}");
    assert_eq!((b.booked.queued_ns, b.booked.woken_queued_ns), (13 * US, 3 * US));
    assert_eq!(b.ran_ns, 100 * US + 90 * US + 97 * US);
    // Exited: the window ends at its last switch out, whatever the look.
    assert_eq!((b.from_ns, b.to_ns), (Some(0), 400 * US));
}

#[test]
fn a_wake_up_the_kernel_does_not_book_stays_in_the_clocks_wait() {
    // Woken at 100 µs, in at 130 µs; the kernel skipped its clock read at
    // that switch and booked nothing (run_delay unchanged).
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(5))),
        sw(50 * US, app(), task(0, 0, "swapper/3"), 1, 50 * US, (Some(5), None)),
        wakeup(100 * US, app()),
        sw(130 * US, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(5))),
        sw(200 * US, app(), task(0, 0, "swapper/3"), 1, 70 * US, (Some(5), None)),
    ];
    let (h, t) = run(&evs, US);
    let b = books(&t, 200 * US);
    assert_eq!((b.booked.queued_ns, b.booked.woken_queued_ns, b.booked.kernel_queued_ns), (30 * US, 30 * US, 0), "{b:?}");
    assert_eq!(b.runnable_ns(), 150 * US);
    assert_eq!(h.iter().filter(|h| h.0 == Source::Wakeup).count(), 1, "{h:?}");
}

#[test]
fn a_switch_out_that_no_hook_saw_ends_the_run_where_the_next_task_began() {
    // A dropped record: app's switch out to the hog is missing; the hog's
    // own switch out says it came in at 300 µs. app then comes back with
    // no wake-up: it was preempted, not asleep.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, None)),
        sw(500 * US, hog(), task(0, 0, "swapper/3"), 1, 200 * US, (None, None)),
        sw(600 * US, task(0, 0, "swapper/3"), app(), 1, 0, (None, None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 600 * US);
    assert_eq!((b.ran_ns, b.booked.queued_ns), (300 * US, 300 * US), "{b:?}");
}

#[test]
fn a_sleeping_threads_window_runs_to_the_last_look() {
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, None)),
        sw(100 * US, app(), task(0, 0, "swapper/3"), 1, 100 * US, (None, None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 5_000 * US);
    assert_eq!((b.from_ns, b.to_ns, b.runnable_ns()), (Some(0), 5_000 * US, 100 * US));
}

#[test]
fn a_preemption_switched_on_a_stale_runqueue_clock_books_its_run_as_the_kernels_wait() {
    // app is preempted at 100 µs; the kernel's clock for that switch was
    // the wake-up's, 15 µs before (the hog's switch out says it ran 25 µs
    // where the clock saw 10): the kernel books 25 µs of waiting, of which
    // app ran 15. Then a second preemption whose intervening tasks' run
    // is not all known (the agent's 0) gives no figure rather than a guess.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(0))),
        sw(100 * US, app(), hog(), 0, 100 * US, (Some(0), None)),
        sw(110 * US, hog(), app(), 1, 25 * US, (None, Some(0))),
        sw(200 * US, app(), hog(), 0, 90 * US, (Some(25_000), None)),
        sw(205 * US, hog(), agent(), 1, 5 * US, (None, None)),
        sw(210 * US, agent(), app(), 1, 0, (None, Some(25_000))),
        sw(300 * US, app(), task(0, 0, "swapper/3"), TASK_DEAD, 90 * US, (Some(45_000), None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 300 * US);
    assert_eq!((b.booked.queued_ns, b.booked.kernel_queued_ns), (20 * US, 45 * US), "{b:?}");
    assert_eq!(b.booked.kernel_stale_ns, 15 * US, "{b:?}");
}

#[test]
fn a_wait_the_kernels_clock_saw_as_long_has_nothing_stale() {
    // The hog ran 10 µs by both clocks: nothing of app's run was booked
    // as waiting.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(0))),
        sw(100 * US, app(), hog(), 0, 100 * US, (Some(0), None)),
        sw(110 * US, hog(), app(), 1, 10 * US, (None, Some(0))),
        sw(200 * US, app(), task(0, 0, "swapper/3"), TASK_DEAD, 90 * US, (Some(10_000), None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 200 * US);
    assert_eq!((b.booked.queued_ns, b.booked.kernel_stale_ns, b.booked.kernel_short_ns), (10 * US, 0, 0), "{b:?}");
}

#[test]
fn a_wait_the_kernels_clock_saw_as_short_books_the_difference_as_short() {
    // app waits 80 µs by the clock, but the hog's switch out says it ran
    // 20 µs on the kernel's clock (read as its __schedule() began; the
    // switch came 60 µs later): the kernel books 20 µs of waiting, and
    // 60 µs of the hog's run that app waited through. Then a preemption
    // whose intervening runs are not all known gives no figure.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(0))),
        sw(100 * US, app(), hog(), 0, 100 * US, (Some(0), None)),
        sw(180 * US, hog(), app(), 1, 20 * US, (None, Some(0))),
        sw(200 * US, app(), hog(), 0, 20 * US, (Some(20_000), None)),
        sw(205 * US, hog(), agent(), 1, 5 * US, (None, None)),
        sw(300 * US, agent(), app(), 1, 0, (None, Some(20_000))),
        sw(400 * US, app(), task(0, 0, "swapper/3"), TASK_DEAD, 100 * US, (Some(120_000), None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 400 * US);
    assert_eq!((b.booked.queued_ns, b.booked.kernel_stale_ns, b.booked.kernel_short_ns), (180 * US, 0, 60 * US), "{b:?}");
}

#[test]
fn the_kernels_stale_stretch_is_never_more_than_the_thread_had_run() {
    // The hog says it ran 500 µs where the clock saw 10 (a reading off
    // the kernel's clock, as the idle task's can be): app, preempted
    // after running 100 µs, cannot have had more than those booked as
    // waiting.
    let evs = [
        sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(0))),
        sw(100 * US, app(), hog(), 0, 100 * US, (Some(0), None)),
        sw(110 * US, hog(), app(), 1, 500 * US, (None, Some(0))),
        sw(200 * US, app(), task(0, 0, "swapper/3"), TASK_DEAD, 90 * US, (Some(10_000), None)),
    ];
    let (_, t) = run(&evs, US);
    assert_eq!(books(&t, 200 * US).booked.kernel_stale_ns, 100 * US);
}

#[test]
fn a_thread_found_at_its_wakeup_has_its_first_wait_in_the_kernels_count() {
    // app is first seen as it is woken at 100 µs (its rename came before
    // the programs were on); it waits 4 ms behind the hog (the tick's turn)
    // and runs at 4100 µs; the kernel books that wait as app comes in,
    // after the switch's tracepoint read its run_delay (1000 ns).
    let evs = [
        sw(0, task(0, 0, "swapper/3"), hog(), 1, 0, (None, Some(0))),
        wakeup(100 * US, app()),
        sw(4_100 * US, hog(), app(), 0, 4_100 * US, (Some(0), Some(1_000))),
        sw(4_300 * US, app(), task(0, 0, "swapper/3"), TASK_DEAD, 200 * US, (Some(4_001_000), None)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 4_300 * US);
    assert_eq!(b.from_ns, Some(100 * US), "{b:?}");
    assert_eq!((b.booked.queued_ns, b.booked.kernel_queued_ns), (4_000 * US, 4_000 * US), "{b:?}");
}

/// A switch with the kernel's run time (`se.sum_exec_runtime`, low 32
/// bits) of prev as it leaves and of next as it comes in.
fn sw_rt(ts: u64, prev: Task, next: Task, state: u32, runtimes: (u32, u32)) -> Event {
    ev(ts, Payload::Switch { prev, next, prev_state: state, prev_ran_ns: 0, delays: (None, None), runtimes, preempt: state == 0 })
}

fn origin(ts: u64, kind: crate::record::OriginKind, from_cpu: u32, woken: u32) -> Event {
    let sender = task(9, 9, "waker");
    Event { ts, cpu: CPU, dropped: 0, own_ns: 0, payload: Payload::Origin { kind, sender, from_cpu, callsite: 0, func: 0, woken } }
}

#[test]
fn the_kernels_run_time_is_read_from_each_switch_not_the_clocks() {
    // In at 0 (its count 1000), out asleep at 100 µs (count 1000 + 100 µs);
    // woken at 200 µs, in at 210 µs (the wake-up preempted: the kernel's
    // run began at the enqueue, 10 µs before), out at 310 µs with 110 µs
    // more on its count.
    let swapper = task(0, 0, "swapper/3");
    let c0 = 1_000u32;
    let c1 = c0 + 100_000;
    let c2 = c1 + 110_000;
    let evs = [
        sw_rt(0, swapper, app(), 1, (0, c0)),
        sw_rt(100 * US, app(), swapper, 1, (c1, 0)),
        wakeup(200 * US, app()),
        sw_rt(210 * US, swapper, app(), 1, (0, c1)),
        sw_rt(310 * US, app(), swapper, 1, (c2, 0)),
    ];
    let (_, t) = run(&evs, US);
    let b = books(&t, 310 * US);
    assert_eq!((b.ran_ns, b.booked.woken_queued_ns), (200 * US, 10 * US), "the clock's split: {b:?}");
    assert_eq!(b.kernel_on_cpu_ns(), 210 * US, "the kernel's: the wake-up's wait is its run");
}

#[test]
fn a_count_that_wrapped_is_read_by_the_clocks_length() {
    // 32 bits of ns wrap every 4.29 s: a run of 5 s reads 0.7 s on them.
    let swapper = task(0, 0, "swapper/3");
    let five_s = 5_000_000_000u64;
    let evs = [sw_rt(0, swapper, app(), 1, (0, 0)), sw_rt(five_s, app(), swapper, 1, (five_s as u32, 0))];
    let (_, t) = run(&evs, US);
    assert_eq!(books(&t, five_s).kernel_on_cpu_ns(), five_s);
}

#[test]
fn a_remote_wake_ups_wait_begins_at_its_enqueue_before_the_reschedule_ipi() {
    // CPU 2 begins waking app at 100 µs, enqueues it, sends the reschedule
    // IPI at 101 µs (a VM exit: 12 µs), and its sched_wakeup fires at
    // 113 µs; app runs at 120 µs. The kernel's wait began at the enqueue,
    // and the wake-up's hiccup at its start.
    use crate::record::OriginKind;
    let swapper = task(0, 0, "swapper/3");
    let evs = [
        switch(0, swapper, app(), 1),
        switch(50 * US, app(), hog(), 1),
        origin(100 * US, OriginKind::Wake, 2, APP),
        origin(101 * US, OriginKind::Ipi, 2, 0),
        wakeup(113 * US, app()),
        switch(120 * US, hog(), app(), 0),
    ];
    let (h, t) = run(&evs, US);
    let b = books(&t, 120 * US);
    assert_eq!(b.booked.woken_queued_ns, 19 * US, "from the IPI's send: {b:?}");
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(h[0].0, Source::Wakeup);
    let total: u64 = h[0].2.iter().map(|c| c.rsplit('=').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(total, 20 * US, "from the wake-up's start: {h:?}");
}

#[test]
fn a_reschedule_ipi_from_another_cpu_or_long_before_does_not_place_the_enqueue() {
    use crate::record::OriginKind;
    let swapper = task(0, 0, "swapper/3");
    for (ipi_from, ipi_at) in [(5, 101 * US), (2, 30 * US)] {
        let evs = [
            switch(0, swapper, app(), 1),
            switch(20 * US, app(), hog(), 1),
            origin(ipi_at, OriginKind::Ipi, ipi_from, 0),
            wakeup(113 * US, app()),
            switch(120 * US, hog(), app(), 0),
        ];
        let (_, t) = run(&evs, US);
        assert_eq!(books(&t, 120 * US).booked.woken_queued_ns, 7 * US, "IPI from CPU {ipi_from} at {ipi_at}");
    }
}

#[test]
fn a_wake_up_that_preempts_waits_for_its_ipi_not_for_the_task_that_ran() {
    // app sleeps at 20 µs; the hog runs. app is woken from CPU 2 at 100 µs,
    // the reschedule IPI reaches this CPU at 110 µs, app runs at 112 µs.
    // Preempting, the kernel books none of that wait (run_delay unchanged):
    // until the IPI arrives it is the IPI's, not the hog's. Without the
    // preemption (the kernel booked the wait) the hog kept it.
    for (booked, want) in
        [(0u32, vec!["ipi:reschedule=11000", "task:hog[77]=1000"]), (12_000, vec!["task:hog[77]=11000", "ipi:reschedule=1000"])]
    {
        let evs = [
            sw(0, task(0, 0, "swapper/3"), app(), 1, 0, (None, Some(5_000))),
            sw(20 * US, app(), hog(), 1, 20 * US, (Some(5_000), None)),
            wakeup(100 * US, app()),
            ev(110 * US, Payload::VectorEntry(crate::record::Vector::Reschedule)),
            ev(111 * US, Payload::VectorExit(crate::record::Vector::Reschedule)),
            sw(112 * US, hog(), app(), 0, 92 * US, (None, Some(5_000 + booked))),
        ];
        let (h, _) = run(&evs, US);
        let wake: Vec<_> = h.iter().filter(|(s, ..)| *s == Source::Wakeup).collect();
        assert_eq!(wake.len(), 1, "{h:?}");
        assert_eq!(wake[0].2, want, "booked {booked}");
    }
}
