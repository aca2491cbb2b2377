//! Explaining one gap: what ran on its CPU inside it, charged by exclusive
//! time and named, with the wake-up probe's parts, the origins of its
//! causes and its frequency change. The rest of the engine decides when a
//! gap is ready; this is what it does with it.

use crate::cause::{CauseId, Origin, Sender};
use crate::interval::{Hiccup, Interval, Source, Stack};
use crate::record::{OriginKind, Vector};

use super::namer::Namer;
use super::origins::{self, OriginLog};
use super::stacks::StackLog;
use super::{wakeup, Context, Engine};

impl Engine {
    /// Explains gap `g` into `h` (reused: every field is written).
    pub(super) fn attribute(&mut self, g: Interval, watermark: u64, h: &mut Hiccup) {
        let slot = self.slot(g.cpu).expect("pending gaps are on watched CPUs");
        self.scratch.clear();
        let cpu = &mut self.cpus[slot];
        // The probe ran at both ends of its gap: that places switches into
        // it that no event reported.
        let tl = &mut cpu.timeline;
        // The wake-up probe slept until its deadline: it ran only at the end.
        if g.source == Source::Probe {
            tl.probe_ran_at(g.t0);
        }
        if g.source == Source::WakeupProbe {
            tl.probe_ran_at(g.t1);
        }
        // A late wake-up: its parts, and its timer slack charged first (the
        // kernel may fire the timer that late, whatever ran meanwhile).
        let namer = &self.namer;
        let wakes = &cpu.probe_wakes;
        let mut parts = (g.source == Source::WakeupProbe).then(|| {
            let woken = wakes.iter().copied().find(|&w| w >= g.t0 && w < g.t1);
            wakeup::split(tl, g.t0, g.t1, woken, |f| namer.is_function(f, "hrtimer_wakeup"))
        });
        let slack = parts.as_ref().map_or(0, |p| p.timer_ns.min(cpu.slack));
        if let Some(p) = parts.as_mut() {
            // Each part's largest cause (the slack first in the timer's part).
            let mut at = g.t0;
            for (i, len) in p.ns().into_iter().enumerate() {
                let from = if i == 0 { at + slack } else { at };
                self.scratch.clear();
                tl.charge(from, at + len, watermark, &mut self.scratch);
                let top = self.scratch.iter().filter(|(c, _)| !c.is_unexplained()).max_by_key(|(_, ns)| *ns).copied();
                p.top[i] = match top {
                    Some((_, ns)) if i == 0 && slack >= ns => Some((CauseId::SLACK, slack)),
                    Some((ctx, ns)) => Some((self.namer.cause(ctx), ns)),
                    None if i == 0 && slack > 0 => Some((CauseId::SLACK, slack)),
                    None => None,
                };
                at += len;
            }
            self.scratch.clear();
        }
        let mut unexplained = tl.charge(g.t0 + slack, g.t1, watermark, &mut self.scratch);
        // A wake-up that preempted: what ran there before its reschedule
        // IPI arrived did not keep the thread waiting, the IPI's way did.
        // After it, the running task's way to a point where it can be
        // switched out is its own (long in a kernel without full
        // preemption).
        let arrived = g.delivery.then(|| tl.resched_after(g.t0, g.t1)).flatten();
        if let Some(at) = arrived {
            self.before.clear();
            tl.charge(g.t0, at, watermark, &mut self.before);
            let mut moved = 0;
            for &(ctx, ns) in &self.before {
                let other_task = matches!((ctx, g.victim), (Context::Task { pid, .. }, Some(v)) if pid != v.tid);
                if let Some(entry) = self.scratch.iter_mut().find(|(c, _)| other_task && *c == ctx) {
                    entry.1 -= ns;
                    moved += ns;
                }
            }
            if moved > 0 {
                let ipi = Context::Vector(Vector::Reschedule);
                match self.scratch.iter_mut().find(|(c, _)| *c == ipi) {
                    Some((_, n)) => *n += moved,
                    None => self.scratch.push((ipi, moved)),
                }
                self.scratch.retain(|&(_, ns)| ns > 0);
            }
        }
        if g.source == Source::Probe {
            tl.probe_ran_at(g.t1);
        }
        // A victim's own time inside its interval (the kernel's entry and
        // exit around an interrupt) is not a cause of its own loss.
        let own = |ctx: &Context| matches!((ctx, g.victim), (Context::Task { pid, .. }, Some(v)) if *pid == v.tid);
        let causes = &mut h.causes;
        causes.clear();
        if slack > 0 {
            causes.push((CauseId::SLACK, slack));
        }
        let mut own_ns = 0;
        for &(ctx, ns) in &self.scratch {
            if ctx.is_unexplained() {
                unexplained += ns;
            } else if own(&ctx) {
                own_ns += ns;
            } else {
                causes.push((self.namer.cause(ctx), ns));
            }
        }
        // A preempted thread's own time in its gap is the kernel switching
        // it out (from the interrupt that woke the preemptor to the switch):
        // charged to the task it switched to, the one that ran longest.
        // Elsewhere it is the kernel's entry and exit around an interrupt:
        // not a cause of its own loss.
        let preemptor = causes.iter_mut().filter(|(c, _)| c.is_task()).max_by_key(|(_, ns)| *ns);
        match preemptor {
            Some((_, ns)) if g.source == Source::Preempted => *ns += own_ns,
            _ => unexplained += own_ns,
        }
        // An SMI during the gap: the firmware had the CPU, no kernel event
        // can show it, so it takes the time nothing else explains.
        if g.smis > 0 && unexplained > 0 {
            causes.push((CauseId::SMI, unexplained));
            unexplained = 0;
        }
        // Largest first; ties in a stable order.
        causes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        origins_of(&cpu.origins, &self.scratch, &mut self.namer, g.t1, &mut h.origins);
        h.cpu = g.cpu;
        h.t0 = g.t0;
        h.gap = g.t1 - g.t0;
        h.source = g.source;
        h.victim = g.victim;
        h.unexplained = unexplained;
        h.parts = parts;
        h.freq = cpu.freqs.within(g.t0, g.t1);
        h.stack = match &self.stacks {
            Some(s) if h.gap >= s.above_ns => stack_of(&h.causes, &cpu.stacks, &self.namer, g.t0, g.t1),
            _ => None,
        };
    }
}

/// `--stacks-above`: where the stall's largest cause was — a task's stack
/// taken as it left the CPU inside the stall; an IRQ's functions (its
/// handler, then its threaded handler). Other kinds are named by their
/// function already.
fn stack_of(causes: &[(CauseId, u64)], log: &StackLog, namer: &Namer, t0: u64, t1: u64) -> Option<std::sync::Arc<Stack>> {
    let &(cause, _) = causes.first()?;
    if let Some(irq) = cause.irq_no() {
        let frames = namer.irq_functions(irq);
        return (!frames.is_empty()).then(|| std::sync::Arc::new(Stack { cause, frames: frames.into() }));
    }
    let frames = log.find(cause.task_pid()?, t0, t1)?;
    let named: Vec<_> = frames.iter().map(|&a| namer.symbol(a)).collect();
    // With kernel addresses hidden (kptr_restrict) nothing resolves, and
    // ours cannot be told from the task's: every frame is kept, as an
    // address (a System.map names them later), never an empty stack.
    let resolved = named.iter().any(|f| !f.starts_with("0x"));
    let from = if resolved { named.iter().position(|f| !ours(f)).unwrap_or(named.len()) } else { 0 };
    Some(std::sync::Arc::new(Stack { cause, frames: named[from..].into() }))
}

/// Frames of the program that took the stack, above the task's own: the
/// tracepoint hook's dispatch (its iterator where the kernel calls probes
/// through one, `__traceiter_sched_switch`) and the JIT-ed program (an
/// address kallsyms may not name). The perf-event hook has none.
fn ours(frame: &str) -> bool {
    ["0x", "bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"].iter().any(|p| frame.starts_with(p))
}

/// The origins of the causes in `scratch` (a stall on the CPU whose
/// `sent` they are, that ended at `end`), in the order of the causes, for
/// those whose sending was seen, into `out` (emptied first). Inlined into
/// its one caller, as it was when it was the engine's method.
#[inline]
fn origins_of(sent: &OriginLog, scratch: &[(Context, u64)], namer: &mut Namer, end: u64, out: &mut Vec<(CauseId, Origin)>) {
    out.clear();
    for &(ctx, _) in scratch {
        let Some((kind, key)) = origins::key_of(ctx) else { continue };
        let Some(s) = sent.find(kind, key, end).copied() else { continue };
        let sender = match s.sender {
            origins::RawSender::Task { comm, pid, tgid, cpu } => Sender::Task { comm, pid, tgid, cpu },
            origins::RawSender::Local(c) => Sender::Local(namer.cause(c)),
        };
        let via = (kind == OriginKind::Ipi && s.callsite != 0).then(|| namer.symbol(s.callsite));
        out.push((namer.cause(ctx), Origin { sender, via }));
    }
}
