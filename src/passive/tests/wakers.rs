//! Wake-ups written on a CPU the tracker does not watch (the waker's).

use super::*;

/// Watching CPU 0 alone: a wake-up written on CPU 1 (the waker's) is the
/// watched thread's all the same, and the wait after it is reported (it
/// was dropped: the tracker knew no CPU past the watched ones).
#[test]
fn a_wake_up_written_on_a_higher_cpu_than_the_watched_one_counts() {
    let mut tracker = Tracker::new(Filter { tgids: vec![APP], ..Filter::default() }, &[0], US);
    let idle = task(0, 0, "swapper/0");
    let sw = |ts, prev, next, state| {
        at(0, ts, Payload::Switch { prev, next, prev_state: state, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: false })
    };
    let events = [
        sw(0, idle, app(), 1),
        sw(100 * US, app(), idle, 1),
        at(1, 200 * US, Payload::Wakeup { task: app(), target_cpu: 0, waker_cpu: 1 }),
        sw(230 * US, idle, app(), 1),
    ];
    let mut got = Vec::new();
    for e in &events {
        tracker.on_event(e, &mut |iv| got.push(iv));
    }
    tracker.flush(10_000 * US, &mut |iv| got.push(iv));
    let waits: Vec<(Source, u64)> = got.iter().map(|iv| (iv.source, iv.t1 - iv.t0)).collect();
    assert!(waits.contains(&(Source::Wakeup, 30 * US)), "{waits:?}");
}
