//! One CPU's recent history as exclusive segments: at every instant exactly
//! one thing is charged (the innermost running context), as the kernel's
//! osnoise tracer does. Built by a stack machine over that CPU's events; a
//! bounded sliding window; no allocation per event once warmed up.

use std::cell::Cell;
use std::collections::VecDeque;

use crate::fastmap::Map;

use crate::record::{Comm, Event, Payload, Vector, IDLE_EXIT};

use super::context::{Context, Segment};
use super::spill::Spill;

mod price;
mod window;
pub use price::Price;
#[cfg(test)]
pub use window::HANDLER_MAX_NS;

/// Whether a frame lives in a task (and is carried across its sleeps) or in
/// interrupt context (and cannot survive a context switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Task,
    Irq,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    ctx: Context,
    /// Pairs an exit with its entry (irq number, work/timer/csd object...).
    id: u64,
    level: Level,
    /// When it was entered.
    since: u64,
}

const MAX_DEPTH: usize = 16;

/// A task switched out in any of these states was stopped, not asleep:
/// __TASK_STOPPED (SIGSTOP, Ctrl-Z), __TASK_TRACED (a debugger), and
/// TASK_FROZEN (a cgroup freeze, since 6.1).
const STOPPED_STATES: u32 = 0x4 | 0x8 | 0x8000;
pub struct Timeline {
    segments: VecDeque<Segment>,
    cap: usize,
    base: Context,
    stack: Vec<Frame>,
    /// The work item of each task that slept inside it, by pid.
    suspended: Map<u32, Frame>,
    /// Start of the open segment (charged to the top of the stack).
    last: u64,
    /// When reschedule IPIs arrived, in the window (window.rs).
    resched: VecDeque<u64>,
    /// One firing of our hooks before its program's first clock read (the
    /// kernel's dispatch, priced at start: bpf::Dispatch): that much before
    /// each event our program timed is ours (0: nothing moved).
    pub dispatch: Price,
    /// When the last switch seen was.
    last_switch: u64,
    probe_tids: Vec<u32>,
    /// jitterwatch's own process: where it shares a watched CPU (passive
    /// mode watching every CPU), its threads' time there is `self`.
    own_tgid: Option<u32>,
    /// The probe was switched out stopped (SIGSTOP, ptrace, frozen) and has
    /// not run since.
    probe_stopped: bool,
    /// When tracing began: an event before it is early, not reordered.
    start: u64,
    /// Events older than `last` but not before `start` (nested BPF
    /// programs can reorder a few ns).
    pub reordered: u64,
    /// Segments evicted because the window was full (summed in `spill`).
    pub evicted: u64,
    spill: Spill,
    /// Segments ever taken off the front: with it, `last_found` (the last
    /// search's answer, counted from the first segment ever) stays right
    /// as the window slides. A segment inserted in the middle shifts it by
    /// one, which costs the next search a read, not its answer.
    popped: usize,
    last_found: Cell<usize>,
}

impl Timeline {
    /// `start`: when tracing began; time before the first event is Unknown.
    pub fn new(start: u64, cap: usize) -> Self {
        const INITIAL_SEGMENTS: usize = 1024;
        Self {
            // Grown as a burst needs it, up to `cap`: a CPU's memory follows
            // the longest stretch its window had to hold, not the cap (the
            // window would otherwise touch all of it as it wraps round).
            segments: VecDeque::with_capacity(cap.min(INITIAL_SEGMENTS)),
            cap,
            base: Context::Unknown,
            stack: Vec::with_capacity(MAX_DEPTH),
            suspended: crate::fastmap::with_capacity(64),
            last: start,
            resched: VecDeque::with_capacity(64),
            dispatch: Price::default(),
            start,
            last_switch: 0,
            probe_tids: Vec::new(),
            own_tgid: None,
            probe_stopped: false,
            reordered: 0,
            evicted: 0,
            spill: Spill::new(),
            popped: 0,
            last_found: Cell::new(0),
        }
    }

    /// What runs now (as of the last event fed): the innermost context.
    pub fn current(&self) -> Context {
        self.stack.last().map_or(self.base, |f| f.ctx)
    }

    /// Threads whose time is the probe's own (not a cause).
    pub fn set_probe_tids(&mut self, tids: &[u32]) {
        self.probe_tids.clear();
        self.probe_tids.extend_from_slice(tids);
    }

    pub fn set_own_tgid(&mut self, tgid: u32) {
        self.own_tgid = Some(tgid);
    }

    fn top(&self) -> Context {
        if self.probe_stopped {
            // Whatever ran, it took nothing from a probe that did not want
            // the CPU.
            return Context::Stopped;
        }
        self.stack.last().map_or(self.base, |f| f.ctx)
    }

    fn push_segment(&mut self, start: u64, end: u64, ctx: Context) {
        if end <= start {
            return;
        }
        if let Some(last) = self.segments.back_mut() {
            if last.ctx == ctx && last.end == start {
                last.end = end;
                return;
            }
        }
        if self.segments.len() == self.cap {
            if let Some(old) = self.segments.pop_front() {
                self.spill.add(old);
                self.popped += 1;
            }
            self.evicted += 1;
        }
        self.segments.push_back(Segment { start, end, ctx });
    }

    /// Charges [last, ts) to whatever is on top and moves `last` to ts.
    fn close(&mut self, ts: u64) {
        self.push_segment(self.last, ts, self.top());
        self.last = ts;
    }

    fn enter(&mut self, ts: u64, ctx: Context, id: u64, level: Level) {
        self.close(ts);
        if self.stack.len() == MAX_DEPTH {
            // Exits were lost; the oldest frames are the stalest.
            self.stack.remove(0);
        }
        self.stack.push(Frame { ctx, id, level, since: ts });
    }

    /// Leaves the frame matching `matches`. An exit whose entry we never saw
    /// (before attach, or dropped) is charged from `last`: clipped, not lost.
    fn exit(&mut self, ts: u64, ctx: Context, matches: impl Fn(&Frame) -> bool) {
        match self.stack.iter().rposition(matches) {
            Some(i) => {
                self.close(ts);
                self.stack.truncate(i);
            }
            None => {
                self.push_segment(self.last, ts, ctx);
                self.last = ts;
            }
        }
    }

    /// A switch into `to` at `at` that no event reported (on our VMs' CPU 1
    /// no hook sees the idle task switched out: bpf/switch.bpf.h), so the
    /// next switch-out of `to` says when it arrived. Time already closed since
    /// then was charged to the old task and moves to `to`.
    ///
    /// Interrupt frames entered before it are stale (no switch happens in
    /// interrupt context): their exits were never seen, e.g. IPIs that came
    /// while the exit programs were still being attached.
    fn unseen_switch(&mut self, at: u64, to: Context) {
        let from = self.base;
        // The idle task's time is one run whatever state it was leaving.
        let was_from = |c: Context| c == from || matches!((c, from), (Context::IdleTask(_), Context::IdleTask(_)));
        let stale = |f: &Frame| f.level == Level::Irq && f.since < at;
        if at >= self.last {
            self.close(at);
        } else {
            let mut i = self.first_ending_after(at);
            while i < self.segments.len() {
                let s = self.segments[i];
                if was_from(s.ctx) || self.stack.iter().any(|f| stale(f) && f.ctx == s.ctx) {
                    if s.start < at {
                        self.segments[i].end = at;
                        i += 1;
                        self.segments.insert(i, Segment { start: at, end: s.end, ctx: to });
                    } else {
                        self.segments[i].ctx = to;
                    }
                }
                i += 1;
            }
        }
        self.stack.retain(|f| !stale(f));
        self.base = to;
    }

    /// The probe read its clock at `t`, so it was running then. If no switch
    /// was seen since `t` and the timeline names another task, the switch
    /// into the probe was unseen (out of the idle task, after RT throttling
    /// parked the probe): from `t` on, the time is the probe's.
    pub fn probe_ran_at(&mut self, t: u64) {
        if self.base != Context::Probe && t >= self.last_switch && !self.probe_tids.is_empty() {
            self.probe_stopped = false;
            self.unseen_switch(t, Context::Probe);
        }
    }

    pub fn is_probe(&self, pid: u32) -> bool {
        self.probe_tids.contains(&pid)
    }

    /// Whether the timeline has `pid` running now.
    fn runs(&self, pid: u32) -> bool {
        match self.base {
            Context::Task { pid: p, .. } => p == pid,
            Context::IdleTask(_) => pid == 0,
            Context::Probe => self.probe_tids.contains(&pid),
            _ => false,
        }
    }

    fn task_cause(&self, pid: u32, tgid: u32, comm: Comm) -> Context {
        if self.probe_tids.contains(&pid) {
            Context::Probe
        } else if self.own_tgid == Some(tgid) && pid != 0 {
            Context::Own
        } else if pid == 0 {
            Context::IdleTask(IDLE_EXIT)
        } else {
            Context::Task { pid, comm }
        }
    }

    pub fn on_event(&mut self, ev: &Event) {
        // Written on the waker's CPU, out of this CPU's order, and nothing
        // runs because of it until a switch says so.
        if matches!(ev.payload, Payload::Wakeup { .. }) {
            return;
        }
        let ts = if ev.ts < self.last {
            // The programs attach one by one before tracing is on: what
            // they wrote before the start (some 600 events at a loopback
            // TCP writer) is taken at the start, its time unknown, and is
            // no reordering. Counted as one, it was 5% of a short run's
            // events on a slow machine, the test's whole margin.
            if ev.ts >= self.start {
                self.reordered += 1;
            }
            self.last
        } else {
            ev.ts
        };
        // A firing of ours (it timed itself), after what a switch places
        // before it.
        let switch = matches!(ev.payload, Payload::Switch { .. });
        let price = if ev.own_ns > 0 && self.dispatch.cold_ns > 0 { self.dispatch.of(ts, ev.own_ns.into(), switch) } else { 0 };
        if !switch {
            self.dispatched(ts, price);
        }
        match ev.payload {
            Payload::Switch { prev, next, prev_ran_ns, prev_state, .. } => {
                if prev_ran_ns > 0 && !self.runs(prev.pid) {
                    // Not before the last switch seen: prev came after it.
                    let at = ts.saturating_sub(u64::from(prev_ran_ns)).max(self.last_switch);
                    self.unseen_switch(at, self.task_cause(prev.pid, prev.tgid, prev.comm));
                }
                self.dispatched(ts, price);
                self.close(ts);
                // The probe leaving stopped: until it runs again, its gap is
                // its own stop, not anything's doing. Coming back ends it.
                if self.is_probe(prev.pid) {
                    self.probe_stopped = prev_state & STOPPED_STATES != 0;
                }
                if self.is_probe(next.pid) {
                    self.probe_stopped = false;
                }
                // Interrupt frames cannot be open across a switch: their exits were lost.
                self.stack.retain(|f| f.level == Level::Task);
                // A kworker may sleep inside a work item: keep it for its return.
                if let Some(&f) = self.stack.last() {
                    if self.suspended.len() >= 4096 {
                        // Tasks that never came back; forget rather than grow.
                        self.suspended.clear();
                    }
                    self.suspended.insert(prev.pid, f);
                }
                self.stack.clear();
                if let Some(f) = self.suspended.remove(&next.pid) {
                    self.stack.push(f);
                }
                self.base = self.task_cause(next.pid, next.tgid, next.comm);
                self.last_switch = ts;
            }
            Payload::IrqEntry { irq, .. } => self.enter(ts, Context::Irq(irq), irq as u64, Level::Irq),
            Payload::IrqExit { irq, .. } => self.exit(ts, Context::Irq(irq), |f| f.ctx == Context::Irq(irq)),
            Payload::SoftirqEntry { vec, .. } => self.enter(ts, Context::Softirq(vec), 0, Level::Irq),
            Payload::SoftirqExit { vec } => self.exit(ts, Context::Softirq(vec), |f| f.ctx == Context::Softirq(vec)),
            Payload::WorkStart { func, work } => self.enter(ts, Context::Work(func), work, Level::Task),
            Payload::WorkEnd { func, work } => self.exit(ts, Context::Work(func), |f| matches!(f.ctx, Context::Work(_)) && f.id == work),
            Payload::HrtimerEntry { func, timer } => self.enter(ts, Context::Timer(func), timer, Level::Irq),
            Payload::HrtimerExit { timer } => self.exit(ts, Context::Timer(0), |f| matches!(f.ctx, Context::Timer(_)) && f.id == timer),
            Payload::VectorEntry(v) => {
                if v == Vector::Reschedule {
                    self.resched_at(ts);
                }
                self.enter(ts, Context::Vector(v), 0, Level::Irq)
            }
            Payload::VectorExit(v) => self.exit(ts, Context::Vector(v), |f| f.ctx == Context::Vector(v)),
            Payload::CsdEntry { func, csd } => self.enter(ts, Context::Csd(func), csd, Level::Irq),
            Payload::CsdExit { func, csd } => self.exit(ts, Context::Csd(func), |f| f.ctx == Context::Csd(func) && f.id == csd),
            Payload::Nmi { handler, delta_ns, .. } => {
                // Reported at its end: cut the open segment where it began.
                let begin = ts.saturating_sub(delta_ns).max(self.last);
                self.close(begin);
                self.push_segment(begin, ts, Context::Nmi(handler));
                self.last = ts;
            }
            // Idle is a frame above the idle task: interrupts that wake the
            // CPU nest on it, and its own time is the idle state's.
            Payload::Idle { state: IDLE_EXIT } => {
                let left = self.stack.iter().rev().find_map(|f| if let Context::Idle(s) = f.ctx { Some(s) } else { None });
                self.exit(ts, Context::Idle(IDLE_EXIT), |f| matches!(f.ctx, Context::Idle(_)));
                // From here the idle task is leaving that state.
                if let (Context::IdleTask(_), Some(state)) = (self.base, left) {
                    self.base = Context::IdleTask(state);
                }
            }
            Payload::Idle { state } => self.enter(ts, Context::Idle(state), 0, Level::Task),
            // The running task took a new name (exec): from here it runs
            // under it, as the next switch would say.
            Payload::Rename(task) => {
                if matches!(self.base, Context::Task { pid, .. } if pid == task.pid) {
                    self.close(ts);
                    self.base = self.task_cause(task.pid, task.tgid, task.comm);
                }
            }
            // Handled by the engine (engine/freq.rs): no context changes.
            Payload::Wakeup { .. }
            | Payload::Freq { .. }
            | Payload::Steal { .. }
            | Payload::Origin { .. }
            | Payload::Stack { .. }
            | Payload::IrqAction { .. } => {}
        }
        if ev.own_ns > 0 {
            self.own(ts, ev.own_ns);
        }
    }

    /// Events were dropped between the last one seen and `ts`: that stretch
    /// is charged to `Lost`, not to whatever ran at the last event.
    pub fn lost_until(&mut self, ts: u64) {
        if ts > self.last {
            self.push_segment(self.last, ts, Context::Lost);
            self.last = ts;
        }
    }
}
