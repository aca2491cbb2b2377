//! A late wake-up of the wake-up probe, split as cyclictest users and
//! timerlat read it: from the deadline to the timer's callback firing
//! (timer latency; the thread's timer slack is the first part of it), to
//! the probe's switch-in (scheduling delay), to its clock read (return to
//! user). The parts are found on the CPU's timeline and add up to the
//! latency exactly.

use super::context::Context;
use super::timeline::Timeline;
use crate::interval::Parts;

/// Where the parts of the wake-up `[deadline, t1)` begin. `woken`: when
/// the probe was woken (its sched_wakeup, inside its timer's callback),
/// if seen; else the timer's fire is taken as the first sleeper's callback
/// (`is_wakeup_fn`: `hrtimer_wakeup`) that began after the deadline (another
/// task's sleeper firing first would be taken for the probe's). A fire not
/// seen leaves the whole stretch up to the switch-in to the timer; a
/// switch-in not seen leaves it all up to `t1`.
pub fn split(tl: &Timeline, deadline: u64, t1: u64, woken: Option<u64>, is_wakeup_fn: impl Fn(u64) -> bool) -> Parts {
    let mut fire = woken;
    // The probe's last switch-in: preempted after a first one, it waited
    // again, and that wait is scheduling delay too.
    let mut switch_in = None;
    let mut on_cpu = false;
    let mut seen = |start: u64, ctx: Context, fire: Option<u64>| match ctx {
        Context::Probe => {
            if !on_cpu && fire.is_some_and(|f| start >= f) {
                switch_in = Some(start);
            }
            on_cpu = true;
        }
        // Interrupts come and go on whatever task runs.
        Context::Irq(_) | Context::Softirq(_) | Context::Timer(_) | Context::Vector(_) | Context::Csd(_) | Context::Nmi(_) => {}
        _ => on_cpu = false,
    };
    for s in tl.segments_in(deadline, t1) {
        if let Context::Timer(f) = s.ctx {
            if fire.is_none() && s.start >= deadline && is_wakeup_fn(f) {
                fire = Some(s.start);
            }
        }
        seen(s.start.max(deadline), s.ctx, fire);
    }
    // The probe may still be running in the open segment (no event since).
    let (since, ctx) = tl.open();
    if since < t1 {
        seen(since.max(deadline), ctx, fire.or(Some(deadline)));
    }
    let switch_in = switch_in.unwrap_or(t1).min(t1);
    let fire = fire.unwrap_or(switch_in).min(switch_in);
    Parts { timer_ns: fire - deadline, sched_ns: switch_in - fire, user_ns: t1 - switch_in, top: Default::default() }
}
