//! Kernel events of a CPU → the nested slices a trace viewer draws: the
//! running task at the bottom, what interrupted it above (IRQ handlers,
//! softirqs, work items, hrtimer callbacks, IPIs and csd callbacks, NMIs),
//! the same picture the attribution's timeline charges time from. Also the
//! probe's stalls on a track of their own, and flow arrows from the sender
//! of an IPI, a work item or a wake-up to what it caused. Pure: events in,
//! a `Trace` out; names resolved by the engine's `Namer`.

use std::collections::HashMap;

use crate::cause::Cause;
use crate::engine::{Context, Namer};
use crate::interval::Hiccup;
use crate::record::{Event, OriginKind, Payload, Task, Vector, IDLE_EXIT};

use super::model::{Arg, Group, Instant, Slice, Trace};
pub use super::stall::{stall_args, stall_name};

/// What pairs an exit with its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Irq(i32),
    Softirq(u16),
    /// A work item, an hrtimer, a csd: by its object's address.
    Obj(u64),
    Vector(Vector),
    Idle,
}

struct Frame {
    ctx: Context,
    key: Key,
    start: u64,
    flow_in: Option<u64>,
}

/// A send seen, waiting for what it causes on this CPU.
struct Send {
    kind: OriginKind,
    key: u64,
    /// A work item's work_struct (its sender's `callsite`), 0 otherwise.
    obj: u64,
    flow: u64,
}

/// A stall on the probe's track: `[t0, t1)`, its gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub t0: u64,
    pub t1: u64,
}

pub struct Builder<'n> {
    trace: Trace,
    namer: &'n mut Namer,
    /// A task's track per (cpu, tgid, pid), under its process's.
    threads: HashMap<(u32, u32, u32), u64>,
    processes: HashMap<u32, u64>,
    next_flow: u64,
}

impl<'n> Builder<'n> {
    /// A trace of `[from, to)`.
    pub fn new(from: u64, to: u64, namer: &'n mut Namer) -> Self {
        let trace = Trace { from, to, ..Trace::default() };
        Self { trace, namer, threads: HashMap::new(), processes: HashMap::new(), next_flow: 1 }
    }

    pub fn finish(self) -> Trace {
        self.trace
    }

    /// The CPU's events in `[from, to)`, in time order (the sender-side
    /// records of what targeted this CPU included).
    pub fn cpu(&mut self, cpu: u32, events: &[Event]) {
        let (from, to) = (self.trace.from, self.trace.to);
        let track = self.trace.track(&format!("cpu {cpu}"), Group::None);
        let mut task: Option<(Task, u64, Option<u64>)> = None;
        let mut stack: Vec<Frame> = Vec::new();
        let mut sends: Vec<Send> = Vec::new();
        let mut last_ts = from;
        let mut dropped: Option<u32> = None;
        let mut steal: Option<u64> = None;
        // Where the running task's nested slices begin in `trace.slices`.
        let mut children = self.trace.slices.len();
        for ev in events.iter().filter(|e| e.ts >= from && e.ts < to) {
            let t = ev.ts.max(last_ts);
            if dropped.is_some_and(|d| d != ev.dropped) {
                let lost = ev.dropped.wrapping_sub(dropped.unwrap_or(0));
                let args = vec![Arg::uint("records_lost", u64::from(lost))];
                self.instant(track, t, "events lost (ring buffer full)".into(), "lost", args, None);
            }
            dropped = Some(ev.dropped);
            match ev.payload {
                Payload::Switch { prev, next, prev_ran_ns, .. } => {
                    self.close_above(track, &mut stack, 0, t);
                    let (cur, start, flow) = task.take().unwrap_or((prev, from, None));
                    if cur.pid == prev.pid {
                        self.task_slice(track, cpu, &cur, start, t, flow);
                    } else {
                        // The switch into `prev` was not seen (the per-CPU
                        // switch event does not fire when the idle task is
                        // switched out): it ran `prev_ran_ns` before this one.
                        let ran = if prev_ran_ns > 0 { t.saturating_sub(u64::from(prev_ran_ns)) } else { last_ts };
                        let since = self.uncut(track, children, ran.clamp(start, t));
                        self.task_slice(track, cpu, &cur, start, since, flow);
                        let woken = take_send(&mut sends, OriginKind::Wake, u64::from(prev.pid)).filter(|_| prev.pid != 0);
                        self.task_slice(track, cpu, &prev, since, t, woken);
                    }
                    children = self.trace.slices.len();
                    let flow = take_send(&mut sends, OriginKind::Wake, u64::from(next.pid)).filter(|_| next.pid != 0);
                    task = Some((next, t, flow));
                }
                Payload::IrqEntry { irq, name } => {
                    self.namer.note_irq(irq, &name);
                    stack.push(Frame { ctx: Context::Irq(irq), key: Key::Irq(irq), start: t, flow_in: None });
                }
                Payload::IrqExit { irq, .. } => {
                    self.exit(track, &mut stack, Key::Irq(irq), Context::Irq(irq), t, task.as_ref().map(|x| x.1))
                }
                Payload::SoftirqEntry { vec, .. } => {
                    stack.push(Frame { ctx: Context::Softirq(vec), key: Key::Softirq(vec), start: t, flow_in: None })
                }
                Payload::SoftirqExit { vec } => {
                    self.exit(track, &mut stack, Key::Softirq(vec), Context::Softirq(vec), t, task.as_ref().map(|x| x.1))
                }
                Payload::WorkStart { func, work } => {
                    // The queuing of this very work_struct; else of its function.
                    let i = sends.iter().rposition(|s| s.kind == OriginKind::Work && s.obj == work && work != 0);
                    let flow_in = match i {
                        Some(i) => Some(sends.remove(i).flow),
                        None => take_send(&mut sends, OriginKind::Work, func),
                    };
                    stack.push(Frame { ctx: Context::Work(func), key: Key::Obj(work), start: t, flow_in });
                }
                Payload::WorkEnd { func, work } => {
                    self.exit(track, &mut stack, Key::Obj(work), Context::Work(func), t, task.as_ref().map(|x| x.1))
                }
                Payload::HrtimerEntry { func, timer } => {
                    stack.push(Frame { ctx: Context::Timer(func), key: Key::Obj(timer), start: t, flow_in: None })
                }
                Payload::HrtimerExit { timer } => {
                    self.exit(track, &mut stack, Key::Obj(timer), Context::Timer(0), t, task.as_ref().map(|x| x.1))
                }
                Payload::VectorEntry(v) => {
                    let flow_in = (v == Vector::Reschedule).then(|| take_send(&mut sends, OriginKind::Ipi, 0)).flatten();
                    stack.push(Frame { ctx: Context::Vector(v), key: Key::Vector(v), start: t, flow_in });
                }
                Payload::VectorExit(v) => self.exit(track, &mut stack, Key::Vector(v), Context::Vector(v), t, task.as_ref().map(|x| x.1)),
                Payload::CsdEntry { func, csd } => {
                    let flow_in = take_send(&mut sends, OriginKind::Ipi, func);
                    stack.push(Frame { ctx: Context::Csd(func), key: Key::Obj(csd), start: t, flow_in });
                }
                Payload::CsdExit { func, csd } => {
                    self.exit(track, &mut stack, Key::Obj(csd), Context::Csd(func), t, task.as_ref().map(|x| x.1))
                }
                Payload::Idle { state } if state != IDLE_EXIT => {
                    stack.push(Frame { ctx: Context::Idle(state), key: Key::Idle, start: t, flow_in: None })
                }
                Payload::Idle { .. } => self.exit(track, &mut stack, Key::Idle, Context::Idle(IDLE_EXIT), t, task.as_ref().map(|x| x.1)),
                Payload::Nmi { handler, delta_ns, .. } => {
                    // Reported after it ran: it began `delta_ns` earlier, but
                    // never before what the CPU did last (it cannot cross it).
                    let start = t.saturating_sub(delta_ns).max(last_ts);
                    self.slice(track, start, t, stack.len() + 1, Context::Nmi(handler), Vec::new(), None);
                }
                Payload::Origin { kind, sender, from_cpu, callsite, func, woken } => {
                    let key = if kind == OriginKind::Wake { u64::from(woken) } else { func };
                    let flow = self.next_flow;
                    self.next_flow += 1;
                    self.send(cpu, ev.ts, kind, &sender, from_cpu, callsite, func, woken, flow);
                    let obj = if kind == OriginKind::Work { callsite } else { 0 };
                    sends.push(Send { kind, key, obj, flow });
                    // The oldest go first: a storm of sends must not grow this.
                    if sends.len() > 256 {
                        sends.remove(0);
                    }
                }
                Payload::Steal { ns } => {
                    if let Some(prev) = steal.filter(|&p| ns > p) {
                        let args = vec![Arg::uint("stolen_ns", ns - prev)];
                        self.instant(track, t, format!("host steal +{}", crate::units::ns(ns - prev)), "host", args, None);
                    }
                    steal = Some(ns);
                }
                Payload::Wakeup { .. } | Payload::Freq { .. } | Payload::Rename(_) | Payload::Stack { .. } | Payload::IrqAction { .. } => {}
            }
            // Only this CPU's own events order its slices (a sender's
            // timestamp comes from another CPU's clock reading).
            if !matches!(ev.payload, Payload::Origin { .. } | Payload::Wakeup { .. } | Payload::Freq { .. }) {
                last_ts = t;
            }
        }
        // What is still running runs to the window's end.
        self.close_above(track, &mut stack, 0, to.max(last_ts));
        if let Some((t, start, flow)) = task {
            self.task_slice(track, cpu, &t, start, to.max(last_ts), flow);
        }
    }

    /// An exit: closes its entry's frame (and frames above it, whose exits
    /// were lost); an exit whose entry came before the window is drawn
    /// from the window's start (or its task's), inside what is open.
    fn exit(&mut self, track: u64, stack: &mut Vec<Frame>, key: Key, ctx: Context, t: u64, task_start: Option<u64>) {
        if let Some(i) = stack.iter().rposition(|f| f.key == key) {
            self.close_above(track, stack, i, t);
            return;
        }
        let start = stack.last().map(|f| f.start).or(task_start).unwrap_or(self.trace.from);
        let args = vec![Arg::str("note", "entered before the trace's window")];
        // Hrtimer exits carry no function: only an entry names it.
        if !matches!(ctx, Context::Timer(0) | Context::Idle(IDLE_EXIT)) {
            self.slice(track, start, t, stack.len() + 1, ctx, args, None);
        }
    }

    /// `t`, or later if a slice drawn on `track` since `children` spans it:
    /// a task's slice never ends inside an interrupt drawn under it.
    fn uncut(&self, track: u64, children: usize, mut t: u64) -> u64 {
        loop {
            let inside =
                self.trace.slices[children..].iter().filter(|s| s.track == track && s.depth > 0).find(|s| s.start < t && t < s.end);
            match inside {
                Some(s) => t = s.end,
                None => return t,
            }
        }
    }

    /// Closes frames `from..` of `stack` at `t`, innermost first.
    fn close_above(&mut self, track: u64, stack: &mut Vec<Frame>, from: usize, t: u64) {
        while stack.len() > from {
            let f = stack.pop().expect("checked above");
            self.slice(track, f.start, t, stack.len() + 1, f.ctx, Vec::new(), f.flow_in);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn slice(&mut self, track: u64, start: u64, end: u64, depth: usize, ctx: Context, args: Vec<Arg>, flow_in: Option<u64>) {
        let cause = self.namer.cause(ctx);
        let category = cause.kind().as_str();
        let s = Slice { track, start, end, depth: depth.min(255) as u8, name: cause.label(), category, args, flow_in };
        self.trace.slices.push(s);
    }

    /// A task's slice on the CPU, and the same span on the task's own
    /// track under its process, so a viewer groups a program's threads.
    fn task_slice(&mut self, track: u64, cpu: u32, task: &Task, start: u64, end: u64, flow_in: Option<u64>) {
        let name = Cause::Task { comm: task.comm, pid: Some(task.pid) }.name();
        let args = vec![Arg::uint("pid", task.pid.into()), Arg::uint("tgid", task.tgid.into()), Arg::uint("prio", task.prio as u64)];
        let s = Slice { track, start, end, depth: 0, name: name.clone(), category: "task", args, flow_in };
        self.trace.slices.push(s);
        if task.pid == 0 {
            return;
        }
        let thread = match self.threads.get(&(cpu, task.tgid, task.pid)) {
            Some(&t) => t,
            None => {
                let process = match self.processes.get(&task.tgid) {
                    Some(&p) => p,
                    None => {
                        // A thread's comm names its process only if it leads it.
                        let pname = match task.pid == task.tgid {
                            true => Cause::Task { comm: task.comm, pid: Some(task.tgid) }.name(),
                            false => format!("process {}", task.tgid),
                        };
                        let p = self.trace.track(&pname, Group::Process { pid: task.tgid, name: pname.clone() });
                        self.processes.insert(task.tgid, p);
                        p
                    }
                };
                let t = self.trace.track(&format!("{name} on cpu {cpu}"), Group::Child(process));
                self.threads.insert((cpu, task.tgid, task.pid), t);
                t
            }
        };
        let s = Slice {
            track: thread,
            start,
            end,
            depth: 0,
            name: format!("running on cpu {cpu}"),
            category: "task",
            args: Vec::new(),
            flow_in: None,
        };
        self.trace.slices.push(s);
    }

    /// The sending of an IPI, a work item or a wake-up, on its sender's
    /// CPU track: the start of a flow arrow to what it causes here.
    #[allow(clippy::too_many_arguments)]
    fn send(&mut self, cpu: u32, ts: u64, kind: OriginKind, sender: &Task, from_cpu: u32, callsite: u64, func: u64, woken: u32, flow: u64) {
        let track = self.trace.track(&format!("cpu {from_cpu} (senders)"), Group::None);
        let who = Cause::Task { comm: sender.comm, pid: Some(sender.pid) }.name();
        let what = match kind {
            OriginKind::Ipi if func == 0 => format!("reschedule IPI to cpu {cpu}"),
            OriginKind::Ipi => format!("IPI to cpu {cpu}: {}", self.namer.cause(Context::Csd(func)).name()),
            OriginKind::Work => format!("work queued on cpu {cpu}: {}", self.namer.cause(Context::Work(func)).name()),
            OriginKind::Wake => format!("wake-up on cpu {cpu} of pid {woken}"),
        };
        let mut args =
            vec![Arg::str("sender", who), Arg::uint("sender_tgid", sender.tgid.into()), Arg::uint("sender_cpu", from_cpu.into())];
        if kind == OriginKind::Ipi && callsite != 0 {
            args.push(Arg::str("via", crate::sanitize::visible(&self.namer.symbol(callsite)).into_owned()));
        }
        self.instant(track, ts, what, "origin", args, Some(flow));
    }

    fn instant(&mut self, track: u64, ts: u64, name: String, category: &'static str, args: Vec<Arg>, flow_out: Option<u64>) {
        self.trace.instants.push(Instant { track, ts, name, category, args, flow_out });
    }

    /// The stalls of `cpu` in the window on the probe's track (or, in
    /// passive mode, the watched threads' interruptions): `details` with
    /// their causes as arguments, first; then `marks`, by size alone.
    /// Stalls that overlap one already drawn are left out: a track's slices
    /// never cross (passive mode's intervals of several threads can).
    pub fn stalls(&mut self, cpu: u32, method: crate::interval::Method, marks: &[Mark], details: &[&Hiccup]) {
        let name = format!("cpu {cpu} {}", method.track());
        let track = self.trace.track(&name, Group::None);
        let (from, to) = (self.trace.from, self.trace.to);
        let clip = |t0: u64, t1: u64| (t0.max(from), t1.min(to));
        let mut all: Vec<(u64, u64, Option<&Hiccup>)> = details.iter().map(|h| (h.t0, h.t0 + h.gap, Some(*h))).collect();
        // A detailed stall is among the marks too: drawn once, with detail.
        all.extend(marks.iter().filter(|m| !details.iter().any(|h| h.t0 == m.t0)).map(|m| (m.t0, m.t1, None)));
        all.retain(|&(t0, t1, _)| {
            let (a, b) = clip(t0, t1);
            a < b
        });
        all.sort_by_key(|&(t0, _, h)| (t0, h.is_none()));
        let mut kept: Vec<(u64, u64, Option<&Hiccup>)> = Vec::with_capacity(all.len());
        for c in all {
            match kept.last() {
                Some(&(_, end, _)) if c.0 < end => {
                    // Overlaps the last one drawn: a stall with detail wins.
                    if c.2.is_some() && kept.last().is_some_and(|k| k.2.is_none()) {
                        kept.pop();
                        if kept.last().is_none_or(|k| k.1 <= c.0) {
                            kept.push(c);
                        }
                    }
                }
                _ => kept.push(c),
            }
        }
        for (t0, t1, h) in kept {
            let (a, b) = clip(t0, t1);
            let (gap, args) = match h {
                Some(h) => (h.gap, stall_args(h)),
                None => (t1 - t0, vec![Arg::uint("gap_ns", t1 - t0)]),
            };
            self.trace.slices.push(Slice {
                track,
                start: a,
                end: b,
                depth: 0,
                name: stall_name(gap),
                category: "stall",
                args,
                flow_in: None,
            });
        }
    }
}

/// The latest unanswered send of `kind` with `key`, taken.
fn take_send(sends: &mut Vec<Send>, kind: OriginKind, key: u64) -> Option<u64> {
    let i = sends.iter().rposition(|s| s.kind == kind && s.key == key)?;
    Some(sends.remove(i).flow)
}
