//! The hypervisor's steal clock charged to stalls as `host`: increments
//! placed on the unexplained time they may have accrued in, largest first,
//! never more than a stall's unexplained time, the rest counted outside.

use super::*;
use crate::engine::steal::HOLD_NS;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// The clock's reading when tracing began: steal since boot, not this run's.
const BOOT_STEAL: u64 = 21_739_442_740;

fn steal(ts: u64, ns: u64) -> Event {
    ev(ts, Payload::Steal { ns })
}

/// The tick that fell due during a pause, delivered as the vCPU runs again;
/// its rq clock update reads the steal clock (`ns`), reported with its exit.
fn tick_with_steal(at: u64, ns: u64) -> Vec<Event> {
    vec![ev(at, Payload::VectorEntry(Vector::LocalTimer)), ev(at + 2 * US, Payload::VectorExit(Vector::LocalTimer)), steal(at + 2 * US, ns)]
}

/// An engine whose CPU reported its steal clock's baseline at 10 µs, with
/// the probe running.
fn engine_on_a_vm() -> Engine {
    let mut e = engine();
    e.on_event(&switch(5 * US, task(1, "x"), probe()));
    e.on_event(&ev(10 * US, Payload::VectorEntry(Vector::Reschedule)));
    e.on_event(&steal(10 * US, BOOT_STEAL));
    e.on_event(&ev(11 * US, Payload::VectorExit(Vector::Reschedule)));
    e
}

fn feed(e: &mut Engine, events: &[Event]) {
    for x in events {
        e.on_event(x);
    }
}

fn ready(e: &mut Engine, watermark: u64) -> Vec<Hiccup> {
    let mut got = Vec::new();
    e.attribute_ready(watermark, |h| got.push(h.clone()));
    for h in &got {
        assert_eq!(h.causes.iter().map(|c| c.1).sum::<u64>() + h.unexplained, h.gap, "rows add up");
    }
    got
}

fn host(h: &Hiccup) -> u64 {
    h.causes.iter().filter(|(c, _)| *c == crate::cause::CauseId::HOST).map(|c| c.1).sum()
}

#[test]
fn a_pause_is_charged_to_the_host_once_its_increment_came() {
    let mut e = engine_on_a_vm();
    // A 500 µs stall with no kernel event; the host accounted 400 µs.
    e.on_interval(gap(MS, MS + 500 * US));
    assert!(ready(&mut e, MS + 600 * US).is_empty(), "held for the increment that may follow");
    feed(&mut e, &tick_with_steal(MS + 500 * US, BOOT_STEAL + 400 * US));
    assert!(ready(&mut e, 2 * MS).is_empty(), "held until the hold passed");
    let got = ready(&mut e, MS + 500 * US + HOLD_NS);
    assert_eq!(got.len(), 1);
    assert_eq!(labels(&got[0]), vec!["host:vCPU preempted by the host=400000"]);
    assert_eq!(got[0].unexplained, 100 * US);
    let t = e.steal_totals(CPU).expect("a steal clock");
    assert_eq!((t.seen_ns(), t.host_ns, t.outside_ns, t.shared), (400 * US, 400 * US, 0, 0));
    assert_eq!(t.clock_first_ns, BOOT_STEAL, "the baseline is not an increment");
}

#[test]
fn never_more_than_the_unexplained_time_and_named_causes_untouched() {
    let mut e = engine_on_a_vm();
    // A 300 µs stall: a hog ran 200 µs of it, 100 µs has no event.
    feed(&mut e, &[switch(MS, probe(), task(50, "hog")), switch(MS + 200 * US, task(50, "hog"), probe())]);
    e.on_interval(gap(MS, MS + 300 * US));
    feed(&mut e, &tick_with_steal(MS + 300 * US, BOOT_STEAL + 250 * US));
    let got = ready(&mut e, 10 * MS + HOLD_NS);
    assert_eq!(labels(&got[0]), vec!["task:hog[50]=200000", "host:vCPU preempted by the host=100000"]);
    assert_eq!((got[0].unexplained, host(&got[0])), (0, 100 * US));
    let t = e.steal_totals(CPU).unwrap();
    assert_eq!((t.host_ns, t.outside_ns), (100 * US, 150 * US), "the rest accrued outside the stall's unexplained time");
}

#[test]
fn an_increment_shared_by_two_stalls_fills_the_largest_first() {
    let mut e = engine_on_a_vm();
    e.on_interval(gap(MS, MS + 100 * US));
    e.on_interval(gap(2 * MS, 2 * MS + 600 * US));
    // One reading after both: 650 µs of steal.
    feed(&mut e, &tick_with_steal(3 * MS, BOOT_STEAL + 650 * US));
    let got = ready(&mut e, 3 * MS + HOLD_NS);
    assert_eq!(got.len(), 2);
    assert_eq!((host(&got[0]), got[0].unexplained), (50 * US, 50 * US), "the small stall gets what is left");
    assert_eq!((host(&got[1]), got[1].unexplained), (600 * US, 0), "the large stall is filled first");
    let t = e.steal_totals(CPU).unwrap();
    assert_eq!((t.host_ns, t.outside_ns, t.shared), (650 * US, 0, 1));
}

#[test]
fn a_stall_with_no_steal_waits_then_goes_unchanged() {
    let mut e = engine_on_a_vm();
    e.on_interval(gap(MS, MS + 500 * US));
    feed(&mut e, &[ev(2 * MS, Payload::VectorEntry(Vector::LocalTimer)), ev(2 * MS + US, Payload::VectorExit(Vector::LocalTimer))]);
    assert!(ready(&mut e, MS + 500 * US + HOLD_NS - 1).is_empty());
    let got = ready(&mut e, MS + 500 * US + HOLD_NS);
    assert_eq!((labels(&got[0]), got[0].unexplained), (vec![], 500 * US));
    let t = e.steal_totals(CPU).unwrap();
    assert_eq!((t.seen_ns(), t.host_ns, t.outside_ns), (0, 0, 0));
}

#[test]
fn an_increment_from_before_a_stall_is_not_charged_to_it() {
    let mut e = engine_on_a_vm();
    // Steal read at 1 ms (a pause before it), then the next event; the
    // stall comes after both.
    feed(&mut e, &tick_with_steal(MS, BOOT_STEAL + 70 * US));
    feed(&mut e, &[ev(MS + 50 * US, Payload::VectorEntry(Vector::Reschedule)), ev(MS + 51 * US, Payload::VectorExit(Vector::Reschedule))]);
    e.on_interval(gap(2 * MS, 2 * MS + 500 * US));
    let got = ready(&mut e, 3 * MS + HOLD_NS);
    assert_eq!((host(&got[0]), got[0].unexplained), (0, 500 * US));
    assert_eq!(e.steal_totals(CPU).unwrap().outside_ns, 70 * US);
}

#[test]
fn without_a_steal_clock_nothing_waits_and_nothing_changes() {
    let mut e = engine();
    e.on_event(&switch(5 * US, task(1, "x"), probe()));
    e.on_interval(gap(MS, MS + 500 * US));
    let got = ready(&mut e, MS + 600 * US);
    assert_eq!((labels(&got[0]), got[0].unexplained), (vec![], 500 * US));
    assert_eq!(e.steal_totals(CPU), None);
}

#[test]
fn finishing_hands_out_every_held_stall() {
    let mut e = engine_on_a_vm();
    e.on_interval(gap(MS, MS + 500 * US));
    feed(&mut e, &tick_with_steal(MS + 500 * US, BOOT_STEAL + 300 * US));
    assert!(ready(&mut e, 2 * MS).is_empty());
    e.finish();
    let got = ready(&mut e, 2 * MS);
    assert_eq!((got.len(), host(&got[0])), (1, 300 * US));
}

#[test]
fn a_stall_with_nothing_unexplained_is_not_held() {
    // No increment can go to it: it reaches the sinks at once, before the
    // held stall that came first.
    let mut e = engine_on_a_vm();
    feed(&mut e, &[switch(2 * MS, probe(), task(50, "hog"))]);
    e.on_interval(gap(MS, MS + 500 * US));
    e.on_interval(gap(2 * MS, 2 * MS + 100 * US));
    feed(&mut e, &[switch(2 * MS + 100 * US, task(50, "hog"), probe())]);
    let got = ready(&mut e, 3 * MS);
    assert_eq!(got.iter().map(|h| (h.t0, h.unexplained)).collect::<Vec<_>>(), vec![(2 * MS, 0)]);
    let later = ready(&mut e, 3 * MS + HOLD_NS);
    assert_eq!(later.iter().map(|h| (h.t0, h.unexplained)).collect::<Vec<_>>(), vec![(MS, 500 * US)]);
}
