//! What runs on a CPU, raw, and the stretches of a timeline it ran:
//! what the timeline builds and the spill, the namer and attribution read.

use crate::cause::Kind;
use crate::record::{Comm, Vector};

/// What runs on a CPU at an instant, as the kernel's events say it: raw
/// (a pid and comm, a function address). Copy and allocation-free, for the
/// hot path; the namer turns it into a `Cause` when a hiccup is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Context {
    Task {
        pid: u32,
        comm: Comm,
    },
    Work(u64),
    Irq(i32),
    Softirq(u16),
    Timer(u64),
    Vector(Vector),
    Csd(u64),
    Nmi(u64),
    /// The CPU in idle state n (cpu_idle), `IDLE_EXIT` where the state is
    /// not known (an exit whose entry was not seen).
    Idle(u32),
    /// The idle task (pid 0, swapper/N) outside an idle state: leaving the
    /// state it names (`IDLE_EXIT`: none seen since it was switched in, so
    /// the idle loop). Idle is never a task that stole the CPU.
    IdleTask(u32),
    /// Tasks of one program, folded where too many pids came by (the spill).
    Program(Comm),
    /// Contexts of one kind, folded likewise.
    Others(Kind),
    /// The probe's own thread: never a cause, its time is "unexplained".
    Probe,
    /// jitterwatch's own BPF programs (each event's `own_ns` from its time).
    Own,
    /// The probe was switched out stopped (SIGSTOP, ptrace, frozen): until
    /// it runs again, nothing took the CPU from it.
    Stopped,
    /// Before the first event told us what runs here.
    Unknown,
    /// Events of this CPU were dropped (ring buffer full): not known.
    Lost,
}

impl Context {
    /// Time charged to this is time no kernel event explains.
    pub fn is_unexplained(&self) -> bool {
        matches!(self, Context::Probe | Context::Unknown)
    }

    /// What this context is folded into when distinct ones must be bounded:
    /// a task into its program, anything else into the others of its kind.
    pub fn folded(self) -> Context {
        match self {
            Context::Task { comm, .. } => Context::Program(comm),
            Context::Program(_) => Context::Others(Kind::Task),
            Context::Work(_) => Context::Others(Kind::Work),
            Context::Irq(_) | Context::Vector(Vector::LocalTimer) => Context::Others(Kind::Irq),
            Context::Vector(_) | Context::Csd(_) => Context::Others(Kind::Ipi),
            Context::Softirq(_) => Context::Others(Kind::Softirq),
            Context::Timer(_) => Context::Others(Kind::Timer),
            Context::Nmi(_) => Context::Others(Kind::Nmi),
            // Idle states are few: never folded.
            c @ (Context::Idle(_)
            | Context::IdleTask(_)
            | Context::Others(_)
            | Context::Probe
            | Context::Unknown
            | Context::Lost
            | Context::Own
            | Context::Stopped) => c,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
    pub ctx: Context,
}
