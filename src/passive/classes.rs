//! A watched thread's interference counted as rtla osnoise counts it, so
//! the two tools can be held side by side: per class (NMI, IRQ, softirq,
//! thread), every event that reached the thread's CPU while the thread ran
//! or waited there to run, however short and however named. rtla's classes:
//! an IRQ is a device handler or an APIC vector (local timer, IPI); a
//! softirq is one run at interrupt level (PREEMPT_RT runs softirqs in
//! threads, where osnoise counts them as thread noise); a thread is another
//! task switched in while the watched one was runnable. Also the thread's
//! wake-ups, every one (rtla timerlat's activation count).

use serde::Serialize;

use crate::record::Payload;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Classes {
    pub nmi: u64,
    pub irq: u64,
    pub softirq: u64,
    pub thread: u64,
    pub wakeups: u64,
}

/// Whether a vector's entry lies inside an IRQ's, which counted it: on
/// arm64 an IPI is an IRQ (its action "IPI"), and the vector that says why
/// (ipi_entry) is nested in it; x86's vectors are no IRQ handler's.
const VECTORS_IN_IRQS: bool = cfg!(target_arch = "aarch64");

/// What an event counts as, by osnoise's classes (None: it does not count:
/// exits, work items and timers inside an IRQ, switches, the rest).
/// `softirqs_in_threads`: the kernel is PREEMPT_RT.
pub fn class_of(p: &Payload, softirqs_in_threads: bool) -> Option<fn(&mut Classes)> {
    class_on(p, softirqs_in_threads, VECTORS_IN_IRQS)
}

/// [`class_of`] on an architecture whose vectors are (`vectors_in_irqs`)
/// or are not inside IRQs.
fn class_on(p: &Payload, softirqs_in_threads: bool, vectors_in_irqs: bool) -> Option<fn(&mut Classes)> {
    match p {
        Payload::Nmi { .. } => Some(|c| c.nmi += 1),
        Payload::VectorEntry(_) if vectors_in_irqs => None,
        Payload::IrqEntry { .. } | Payload::VectorEntry(_) => Some(|c| c.irq += 1),
        Payload::SoftirqEntry { .. } if !softirqs_in_threads => Some(|c| c.softirq += 1),
        _ => None,
    }
}

impl Classes {
    /// As the summary's text says it.
    pub fn words(&self) -> String {
        format!(
            "as rtla osnoise counts: irq {}, softirq {}, thread {}, nmi {}; wake-ups {}",
            self.irq, self.softirq, self.thread, self.nmi, self.wakeups
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passive::{Filter, Tracker};
    use crate::record::{Event, Task, Vector};

    const CPU: u32 = 3;

    fn task(pid: u32, name: &str) -> Task {
        Task { pid, tgid: pid, prio: 120, comm: crate::cause::comm(name.as_bytes()) }
    }

    fn ev(cpu: u32, ts: u64, payload: Payload) -> Event {
        Event { ts, cpu, dropped: 0, own_ns: 0, payload }
    }

    fn switch(ts: u64, prev: Task, next: Task, state: u32) -> Event {
        ev(
            CPU,
            ts,
            Payload::Switch { prev, next, prev_state: state, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: state == 0 },
        )
    }

    /// The classes of the app's thread after a scripted stream: what
    /// reaches its CPU while it runs or waits there counts, nothing else.
    fn classes(rt: bool) -> Classes {
        let (app, idle, ktimers, other) = (task(500, "app"), task(0, "swapper/3"), task(20, "ktimers/3"), task(30, "other"));
        let irq = |ts, entry| {
            let p = if entry {
                Payload::IrqEntry { irq: 24, name: [0; crate::record::IRQ_NAME_LEN] }
            } else {
                Payload::IrqExit { irq: 24, ret: 1 }
            };
            ev(CPU, ts, p)
        };
        let evs = [
            switch(0, idle, app, 1),
            irq(100, true),
            irq(130, false),
            ev(CPU, 200, Payload::VectorEntry(Vector::LocalTimer)),
            ev(CPU, 210, Payload::VectorExit(Vector::LocalTimer)),
            ev(CPU, 211, Payload::SoftirqEntry { vec: 1, syscall: None }),
            ev(CPU, 220, Payload::SoftirqExit { vec: 1 }),
            // Another CPU's IRQ is not its noise.
            ev(2, 250, Payload::IrqEntry { irq: 25, name: [0; crate::record::IRQ_NAME_LEN] }),
            // Preempted: two tasks run before it does again, an IRQ between.
            switch(300, app, ktimers, 0),
            irq(310, true),
            irq(320, false),
            switch(330, ktimers, other, 1),
            switch(340, other, app, 0),
            // Asleep: nothing reaching the CPU is its noise.
            switch(400, app, idle, 1),
            irq(500, true),
            irq(510, false),
            ev(CPU, 600, Payload::Wakeup { task: app, target_cpu: CPU, waker_cpu: 0 }),
            switch(610, idle, app, 1),
        ];
        let mut t = Tracker::new(Filter { tgids: vec![500], ..Filter::default() }, &[2, 3], 1_000).softirqs_in_threads(rt);
        for e in &evs {
            t.on_event(e, &mut |_| {});
        }
        let found = t.threads().find(|i| i.tid == 500).expect("the app is watched").classes;
        found
    }

    #[test]
    fn what_reaches_a_running_or_waiting_thread_counts_by_class() {
        // The stream's local-timer vector is an IRQ of its own on x86 (an
        // arm64 kernel sends none: its tick is an IRQ).
        let irq = if VECTORS_IN_IRQS { 2 } else { 3 };
        assert_eq!(classes(false), Classes { nmi: 0, irq, softirq: 1, thread: 2, wakeups: 1 });
        assert_eq!(classes(true), Classes { nmi: 0, irq, softirq: 0, thread: 2, wakeups: 1 });
    }

    #[test]
    fn softirqs_count_at_interrupt_level_only() {
        let sirq = Payload::SoftirqEntry { vec: 1, syscall: None };
        let mut c = Classes::default();
        class_of(&sirq, false).expect("a softirq counts")(&mut c);
        assert_eq!(c.softirq, 1);
        assert!(class_of(&sirq, true).is_none(), "on PREEMPT_RT its thread is counted instead");
        class_of(&Payload::Nmi { delta_ns: 10, handler: 0, handled: true }, true).expect("an NMI counts")(&mut c);
        assert_eq!((c.nmi, c.irq), (1, 0));
        let ipi = Payload::VectorEntry(Vector::Reschedule);
        class_on(&ipi, false, false).expect("an x86 vector is an IRQ of its own")(&mut c);
        assert_eq!(c.irq, 1);
        assert!(class_on(&ipi, false, true).is_none(), "arm64's IPI counted as its IRQ, not twice");
    }
}
