//! Passive mode's interval source: from the same kernel events the engine
//! reads, the times a watched thread wanted its CPU and did not have it.
//! - interrupted: kernel activity at interrupt level (IRQ, softirq, vector,
//!   csd, hrtimer, NMI) while the thread runs; activity separated by less
//!   than [`MERGE_NS`] is one interruption;
//! - preempted: switched out while still runnable, until it runs again;
//! - wakeup: from its wake-up to its switch-in.
//!
//! Pure logic on decoded events: no BPF, no threads, no allocation per
//! event once each thread has been seen.

use crate::fastmap::Map;

use crate::interval::{Interval, Source, Victim};
use crate::record::{Event, OriginKind, Payload, Task};

mod kernel_wait;
mod levels;
mod running;
mod steal;
mod switch;
mod unseen;
mod wake;

use kernel_wait::KernelWait;

use super::classes::class_of;
use super::filter::Filter;
use super::thread::{Books, Found, State, Thread, ThreadInfo};

/// Interrupt-level activity this close to the previous one continues the
/// same interruption (the return to the thread and the next entry take a
/// few hundred ns: an IRQ's exit, then its softirqs, is one stall).
pub const MERGE_NS: u64 = 2_000;

/// An interruption followed this soon by the thread's preemption, with no
/// other interrupt-level activity between, caused it (an IRQ or IPI that
/// woke a task of higher priority): one gap from the interruption's start
/// to the thread's return, as rtla osnoise counts it. The return from the
/// interrupt into schedule() takes ~1-5 µs on hardware and ~40 µs under
/// qemu's TCG: 100 µs covers both.
pub const JOIN_NS: u64 = 100_000;

/// A task switched out in this state has exited (the kernel's TASK_DEAD).
const TASK_DEAD: u32 = 0x80;

#[derive(Clone, Copy, PartialEq, Eq)]
struct Pending {
    t0: u64,
    t1: u64,
    tid: u32,
    source: Source,
}

#[derive(Default, Clone, Copy)]
struct Cpu {
    /// The watched thread running here, if any.
    running: Option<u32>,
    /// Interrupt-level frames open.
    depth: u32,
    /// Start of the interruption in progress (depth > 0 while a watched
    /// thread runs), and what it is: `Interrupted`, or `InSyscall` when it
    /// is a softirq the thread's own system call ran.
    start: Option<(u64, Source)>,
    /// The last interruption, ended, not yet emitted: the next activity
    /// may continue it.
    pending: Option<Pending>,
    /// A context switch was seen here: what runs is known from events,
    /// not from /proc.
    switched: bool,
    /// The watched thread switched out here while runnable, until it runs
    /// again (what reaches the CPU meanwhile is its noise too: classes.rs).
    waiting: Option<u32>,
    /// The last switch seen here: a switch no program saw came after it.
    last_switch: u64,
    /// The watched thread that switched out at `last_switch`.
    left: Option<u32>,
    /// The runqueue's steal clock as last read here (None: not yet).
    steal: Option<u64>,
    /// Its advances since the last switch seen here while no watched
    /// thread was known to run: a switch into one no hook saw may claim
    /// them (steal.rs).
    unowned: steal::Unowned,
    /// A thread /proc showed running here, and when it was read: applied
    /// once the events up to then are read.
    seed: Option<(super::Seed, u64)>,
    /// The watched thread preempted here, as the kernel books its wait.
    kernel_wait: Option<KernelWait>,
    /// The last wake-up begun of a task here (`sched_waking`, an origin
    /// record): (its tid, the waker's CPU, when).
    waking: Option<(u32, u32, u64)>,
    /// The last reschedule IPI sent here since the last wake-up onto this
    /// CPU: (the sender's CPU, when).
    resched: Option<(u32, u64)>,
}

pub struct Tracker {
    filter: Filter,
    threshold: u64,
    /// CPU number → its state (only watched CPUs produce intervals).
    cpus: Vec<Cpu>,
    watched_cpu: Vec<bool>,
    threads: Map<u32, Thread>,
    /// PREEMPT_RT: softirqs run in threads (classes.rs).
    softirqs_in_threads: bool,
    /// Threads that matched the filter on a CPU not watched (said once).
    pub seen_elsewhere: Vec<(u32, u32)>,
    /// When tracing was on (every program attached): nothing before it is
    /// reported. The programs attach one by one, and the kernel patching
    /// itself for them interrupts every CPU (text_poke's sync IPIs): that
    /// is jitterwatch starting, not what the thread suffers.
    start: u64,
}

impl Tracker {
    pub fn new(filter: Filter, cpus: &[usize], threshold: u64) -> Self {
        let n = cpus.iter().copied().max().map_or(0, |m| m + 1);
        let mut watched_cpu = vec![false; n];
        for &c in cpus {
            watched_cpu[c] = true;
        }
        Tracker {
            filter,
            threshold,
            cpus: vec![Cpu::default(); n],
            watched_cpu,
            threads: Map::default(),
            softirqs_in_threads: false,
            seen_elsewhere: Vec::new(),
            start: 0,
        }
    }

    /// Tracing is on from `at`: no interval is reported before it.
    pub fn started_at(&mut self, at: u64) {
        self.start = at;
    }

    /// On a PREEMPT_RT kernel softirqs run in threads: rtla osnoise counts
    /// them as thread noise, and so do the thread's classes.
    pub fn softirqs_in_threads(mut self, rt: bool) -> Self {
        self.softirqs_in_threads = rt;
        self
    }

    fn watched(&self, cpu: u32) -> bool {
        self.watched_cpu.get(cpu as usize).copied().unwrap_or(false)
    }

    pub fn threads(&self) -> impl Iterator<Item = &ThreadInfo> {
        self.threads.values().map(|t| &t.info)
    }

    fn emit(&self, out: &mut dyn FnMut(Interval), cpu: u32, t0: u64, t1: u64, source: Source, tid: u32) {
        self.emit_delivered(out, cpu, (t0, t1), source, tid, false);
    }

    /// `delivery`: a wake-up that preempted (Interval::delivery).
    fn emit_delivered(&self, out: &mut dyn FnMut(Interval), cpu: u32, (t0, t1): (u64, u64), source: Source, tid: u32, delivery: bool) {
        let t0 = t0.max(self.start);
        if t1 < t0.saturating_add(self.threshold) || !self.watched(cpu) {
            return;
        }
        let comm = self.threads.get(&tid).map_or([0; crate::record::COMM_LEN], |t| t.info.comm);
        out(Interval { cpu, t0, t1, source, victim: Some(Victim { tid, comm }), smis: 0, delivery });
    }

    /// The thread, seen now as `task` on `cpu`; None if it is not watched.
    fn thread(&mut self, task: &Task, cpu: u32, how: Found) -> Option<&mut Thread> {
        if !self.threads.contains_key(&task.pid) {
            if !self.filter.matches(task.pid, task.tgid, &task.comm) {
                return None;
            }
            if !self.watched(cpu) && !self.seen_elsewhere.iter().any(|&(t, _)| t == task.pid) {
                self.seen_elsewhere.push((task.pid, cpu));
            }
            let info = ThreadInfo::new(task.pid, task.tgid, task.comm, how);
            self.threads.insert(task.pid, Thread { info, state: State::Sleeping });
        }
        let t = self.threads.get_mut(&task.pid)?;
        t.info.comm = task.comm;
        Some(t)
    }

    pub fn on_event(&mut self, ev: &Event, out: &mut dyn FnMut(Interval)) {
        let cpu = ev.cpu;
        let on = match ev.payload {
            Payload::Wakeup { target_cpu, .. } => target_cpu,
            _ => cpu,
        };
        let need = cpu.max(on) as usize + 1;
        if need > crate::record::MAX_CPUS {
            return;
        }
        if need > self.cpus.len() {
            // A CPU past the watched ones (a waker's, a sender's): where
            // its wake-ups and origins are placed. Watching CPU 0 alone,
            // every wake-up written on CPU 1 was dropped here, and with it
            // every wait after one. Grown once per such CPU.
            self.cpus.resize(need, Cpu::default());
            self.watched_cpu.resize(need, false);
        }
        let ts = ev.ts;
        // Before tracing was on, the switch hook (attached last) may not
        // be: a wake-up or a rename before the first switch its CPU shows
        // has no switches around it (a thread woken six times before them
        // was booked as waiting from the first, its window begun where the
        // kernel's count was not). What runs at the start, /proc says;
        // what is woken, its switch in.
        if ts < self.start
            && matches!(ev.payload, Payload::Wakeup { .. } | Payload::Rename(_))
            && !self.cpus.get(on as usize).is_some_and(|c| c.switched)
        {
            return;
        }
        self.settle(cpu, ts);
        if let Some(count) = class_of(&ev.payload, self.softirqs_in_threads) {
            let c = self.cpus[cpu as usize];
            if let Some(t) = c.running.or(c.waiting).and_then(|tid| self.threads.get_mut(&tid)) {
                count(&mut t.info.classes);
            }
        }
        match ev.payload {
            Payload::Switch { prev, next, prev_state, prev_ran_ns, delays, runtimes, .. } => {
                // When prev was switched in, where the kernel says how long
                // it ran: not before the last switch seen here.
                let arrived = (prev_ran_ns > 0).then(|| ts.saturating_sub(u64::from(prev_ran_ns)).max(self.cpus[cpu as usize].last_switch));
                // The kernel's run time of each task between a watched
                // thread's preemption and its return: the kernel's wait.
                if let Some(w) = &mut self.cpus[cpu as usize].kernel_wait {
                    w.ran(prev.pid, prev_ran_ns);
                }
                self.unseen_switch_out(cpu, prev.pid, arrived.unwrap_or(ts), out);
                self.unseen_switch_in(cpu, &prev, (arrived, ts), out);
                self.switch(cpu, ts, (&prev, prev_state, delays.0, runtimes.0), (&next, delays.1, runtimes.1), out);
                let left = self.threads.contains_key(&prev.pid).then_some(prev.pid);
                let c = &mut self.cpus[cpu as usize];
                (c.last_switch, c.left, c.unowned) = (ts, left, steal::Unowned::default());
            }
            Payload::Steal { ns } => self.steal(cpu, ts, ns),
            Payload::Origin { kind: OriginKind::Wake, from_cpu, woken, .. } => self.cpus[cpu as usize].waking = Some((woken, from_cpu, ts)),
            // A reschedule IPI's callback is none (a function call's is
            // the generic handler).
            Payload::Origin { kind: OriginKind::Ipi, from_cpu, func: 0, .. } => self.cpus[cpu as usize].resched = Some((from_cpu, ts)),
            Payload::Wakeup { task, target_cpu, waker_cpu } => {
                let (from, at) = self.wake_edges(&task, target_cpu, waker_cpu, ts);
                if let Some(c) = self.cpus.get_mut(target_cpu as usize) {
                    c.resched = None;
                }
                if let Some(t) = self.thread(&task, target_cpu, Found::Wakeup) {
                    // Waking a thread that is runnable already changes
                    // nothing; one whose switch out was not seen slept.
                    if matches!(t.state, State::Sleeping | State::Unseen { .. }) {
                        t.state = State::Woken { cpu: target_cpu, at, from };
                    }
                }
            }
            // A softirq raised and run by the thread's own system call
            // (loopback network sends, block completions): its own work.
            Payload::SoftirqEntry { syscall: Some(_), .. } => self.enter(cpu, ts, Source::InSyscall, out),
            Payload::IrqEntry { .. }
            | Payload::SoftirqEntry { .. }
            | Payload::HrtimerEntry { .. }
            | Payload::VectorEntry(_)
            | Payload::CsdEntry { .. } => self.enter(cpu, ts, Source::Interrupted, out),
            // The interruption ends when our program at its exit returns:
            // that program (the one that writes the interruption's record,
            // the dearest of ours) ran after the exit's time, on the
            // thread's CPU, and is its loss too (shown as `self`).
            Payload::IrqExit { .. }
            | Payload::SoftirqExit { .. }
            | Payload::HrtimerExit { .. }
            | Payload::VectorExit(_)
            | Payload::CsdExit { .. } => self.exit(cpu, ts + u64::from(ev.own_ns)),
            Payload::Nmi { delta_ns, .. } => {
                // Reported at its end; inside other activity it adds nothing.
                if self.cpus[cpu as usize].depth == 0 {
                    self.enter(cpu, ts.saturating_sub(delta_ns), Source::Interrupted, out);
                    self.exit(cpu, ts);
                }
            }
            Payload::Rename(task) => self.rename(cpu, ts, &task),
            Payload::WorkStart { .. }
            | Payload::WorkEnd { .. }
            | Payload::Idle { .. }
            | Payload::Freq { .. }
            | Payload::Origin { .. }
            | Payload::Stack { .. }
            | Payload::IrqAction { .. } => {}
        }
    }

    /// Emits the interruptions that ended before `upto - MERGE_NS`: no later
    /// activity can continue them once the events have been read that far.
    pub fn flush(&mut self, upto: u64, out: &mut dyn FnMut(Interval)) {
        for cpu in 0..self.cpus.len() as u32 {
            self.settle(cpu, upto);
            // Held until a preemption could no longer join it.
            if self.cpus[cpu as usize].pending.is_some_and(|p| p.t1.saturating_add(MERGE_NS.max(JOIN_NS)) <= upto) {
                self.close_pending(cpu, out);
            }
        }
    }

    /// For each watched CPU, the earliest time an interval still to come
    /// may start there (at most `upto`): history before it can go.
    pub fn horizons(&self, upto: u64, out: &mut dyn FnMut(u32, u64)) {
        for (cpu, c) in self.cpus.iter().enumerate() {
            if !self.watched_cpu[cpu] {
                continue;
            }
            let mut h = upto;
            if let Some((t, _)) = c.start {
                h = h.min(t);
            }
            if let Some(p) = c.pending {
                h = h.min(p.t0);
            }
            for t in self.threads.values() {
                match t.state {
                    State::Preempted { cpu: on, from: t0, .. }
                    | State::Woken { cpu: on, from: t0, .. }
                    | State::Unseen { cpu: on, since: t0 }
                        if on as usize == cpu =>
                    {
                        h = h.min(t0)
                    }
                    _ => {}
                }
            }
            out(cpu as u32, h);
        }
    }

    /// A thread's books as they stand at `now` (the stretch it is in
    /// counted), so a summary taken mid-run divides by the right time.
    pub fn books_until(&self, tid: u32, now: u64) -> Books {
        self.threads.get(&tid).map_or_else(Books::default, |t| t.books_until(now))
    }
}
