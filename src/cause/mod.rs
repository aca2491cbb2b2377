//! What a stretch of stolen CPU time is charged to. A `Cause` keeps its
//! fields (a task's comm and pid, an IRQ's number, a function's symbol)
//! from the engine to every sink: folding, grouping and the doctor's hints
//! read the fields, and only a sink turns a cause into text, escaped for
//! where it goes.

use std::sync::Arc;

mod id;
pub use id::CauseId;

use crate::record::{Comm, Vector};
use crate::sanitize::{push_visible_bytes, visible};

/// Declares `Kind` and, from the same rows, `Kind::ALL`, each kind's label
/// and its colour: a new kind of cause is one row of [`kinds!`] below.
macro_rules! kinds {
    ($($(#[$doc:meta])* $kind:ident => $label:literal, $colour:ident;)+) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(rename_all = "lowercase")]
        pub enum Kind {
            $($(#[$doc])* $kind,)+
        }

        impl Kind {
            /// Every kind, in the order declared: each table, counter and
            /// encoder iterates this list.
            pub const ALL: [Kind; [$(stringify!($kind)),+].len()] = [$(Kind::$kind),+];

            /// Its label: in the CSV, the summary, the screen and the metrics.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Kind::$kind => $label,)+
                }
            }

            /// Its colour on the screen (where there is colour).
            pub fn colour(self) -> ratatui::style::Color {
                match self {
                    $(Kind::$kind => ratatui::style::Color::$colour,)+
                }
            }
        }
    };
}

kinds! {
    Task => "task", Yellow;
    Work => "work", Magenta;
    Irq => "irq", Red;
    Softirq => "softirq", LightRed;
    Timer => "timer", Blue;
    Ipi => "ipi", Cyan;
    Nmi => "nmi", LightMagenta;
    Unexplained => "unexplained", Gray;
    /// Time while the CPU's events were dropped (ring buffer full).
    Lost => "lost", DarkGray;
    /// The CPU in an idle state (and leaving it).
    Idle => "idle", Green;
    /// A wake-up's timer slack: how late the kernel may fire the timer.
    Slack => "slack", LightBlue;
    /// The hypervisor ran something else while this vCPU was runnable
    /// (its steal clock).
    Host => "host", White;
    /// The firmware (a system management interrupt, counted by the CPU).
    Smi => "smi", LightYellow;
    /// jitterwatch's own BPF programs on the watched CPU, by their own
    /// clock reads: the observer's time, never charged to the kernel.
    #[serde(rename = "self")]
    Own => "self", LightGreen;
    /// The probe itself was stopped (SIGSTOP, a debugger, a cgroup freeze):
    /// it did not want the CPU, so nothing took it.
    Stopped => "stopped", LightCyan;
}

impl Kind {
    /// Its place in [`Kind::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What unexplained time is, in the one wording every view uses (short
/// where space is short).
pub const UNEXPLAINED: &str = "(no kernel event: hypervisor, SMI, hardware)";
pub const UNEXPLAINED_SHORT: &str = "(no kernel event)";
/// What host time is (its name, as every view shows it).
pub const HOST: &str = "vCPU preempted by the host";
/// What SMI time is (its name).
pub const SMI: &str = "system management interrupt (firmware)";
/// What lost time is: the ring buffer was full, the CPU's events dropped.
pub const LOST: &str = "(events dropped: ring buffer full)";
/// Whose time `self` is: the name of that cause.
pub const OWN: &str = "jitterwatch";
/// What stopped time is (its name).
pub const STOPPED: &str = "the probe was stopped (SIGSTOP, a debugger or a cgroup freeze)";

/// The idle task's own time outside any idle state (its loop, before it
/// enters one): the name of that idle cause.
pub const IDLE_LOOP: &str = "idle loop";

/// The name of the entry that folded causes of one kind share.
pub const OTHERS: &str = "(others)";

/// A kernel function, named once through kallsyms (`vmstat_update`, or
/// `0xffffffff81001000` when it cannot be resolved).
pub type Symbol = Arc<str>;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// A task; `pid` None once folded with its program's other pids.
    Task {
        comm: Comm,
        pid: Option<u32>,
    },
    /// A work item, by its function.
    Work(Symbol),
    /// A device interrupt, by number and action name (raw bytes, maybe empty).
    Irq {
        irq: i32,
        name: Arc<[u8]>,
    },
    /// An x86 system vector: the local timer (an interrupt) or an IPI.
    Vector(Vector),
    Softirq(u16),
    /// An hrtimer callback.
    Timer(Symbol),
    /// A cross-CPU function call (the csd callback).
    Csd(Symbol),
    Nmi(Symbol),
    /// An idle state, by its cpuidle name (`C6`, `poll`, `halt`).
    Idle(Symbol),
    /// The wake-up probe's timer slack (the kernel may fire its timer that late).
    Slack,
    /// Unexplained time the hypervisor's steal clock accounts for.
    Host,
    /// Unexplained time in a gap during which the CPU counted an SMI.
    Smi,
    /// jitterwatch's own programs (Kind::Own).
    Own,
    /// The probe was stopped, not taken (Kind::Stopped).
    Stopped,
    /// Causes of this kind folded together past the per-CPU cap.
    Others(Kind),
    /// Time no kernel event covers: the hypervisor, SMIs, hardware.
    Unexplained,
    /// Time while this CPU's events were being dropped: what ran then is
    /// not known, so it is not guessed.
    Lost,
}

impl Cause {
    pub fn kind(&self) -> Kind {
        id::kind_of_cause(self)
    }

    pub fn is_unexplained(&self) -> bool {
        matches!(self, Cause::Unexplained)
    }

    /// The name as every view shows it, escaped (`sanitize::visible`):
    /// `kworker/6:1[412]`, `vmstat_update`, `24:virtio0-input.0`, `RCU`.
    /// Empty for unexplained and lost time (views show [`UNEXPLAINED`] and
    /// [`LOST`]).
    pub fn push_name(&self, out: &mut String) {
        match self {
            Cause::Task { comm, pid } => {
                push_visible_bytes(comm, out);
                match pid {
                    Some(p) => {
                        out.push('[');
                        out.push_str(itoa::Buffer::new().format(*p));
                        out.push(']');
                    }
                    None => out.push_str("[*]"),
                }
            }
            Cause::Work(s) | Cause::Timer(s) | Cause::Csd(s) | Cause::Nmi(s) | Cause::Idle(s) => out.push_str(&visible(s)),
            Cause::Irq { irq, name } => {
                out.push_str(itoa::Buffer::new().format(*irq));
                if !name.is_empty() {
                    out.push(':');
                    push_visible_bytes(name, out);
                }
            }
            Cause::Vector(v) => out.push_str(v.name()),
            Cause::Softirq(v) => out.push_str(&crate::names::softirq(*v)),
            Cause::Others(_) => out.push_str(OTHERS),
            Cause::Host => out.push_str(HOST),
            Cause::Smi => out.push_str(SMI),
            Cause::Own => out.push_str(OWN),
            Cause::Stopped => out.push_str(STOPPED),
            Cause::Unexplained | Cause::Lost | Cause::Slack => {}
        }
    }

    pub fn name(&self) -> String {
        let mut s = String::new();
        self.push_name(&mut s);
        s
    }

    /// `kind:name`, as the CSV and the stall breakdowns write a cause.
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind(), self.name())
    }
}

/// Who sent it, as a stall's cause reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Sender {
    /// A task, on `cpu`.
    Task { comm: Comm, pid: u32, tgid: u32, cpu: u32 },
    /// Interrupt-level code of the watched CPU itself (a timer's callback
    /// queueing work, an interrupt waking a task): its context's name.
    Local(CauseId),
}

/// A cause's origin: who, and for an IPI from where in the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub sender: Sender,
    pub via: Option<Symbol>,
}

#[cfg(test)]
pub(crate) fn comm(s: &[u8]) -> Comm {
    let mut c = [0u8; crate::record::COMM_LEN];
    assert!(s.len() < c.len(), "a comm holds {} bytes and the NUL", c.len() - 1);
    c[..s.len()].copy_from_slice(s);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_at_its_index_in_all() {
        for (i, k) in Kind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i, "{k}");
        }
        let json = serde_json::to_string(&Kind::ALL).unwrap();
        let labels: Vec<String> = Kind::ALL.iter().map(|k| format!("\"{k}\"")).collect();
        assert_eq!(json, format!("[{}]", labels.join(",")), "serde writes each kind's label");
    }

    #[test]
    fn names_each_kind_escaped() {
        let sym = |s: &str| Symbol::from(s);
        let cases = [
            (Cause::Task { comm: comm(b"kworker/6:1"), pid: Some(412) }, "task:kworker/6:1[412]"),
            (Cause::Task { comm: comm(b"cc1"), pid: None }, "task:cc1[*]"),
            (Cause::Task { comm: comm(b"ev\x1bil\xff\\"), pid: Some(7) }, "task:ev\\x1bil\\xff\\\\[7]"),
            (Cause::Work(sym("vmstat_update")), "work:vmstat_update"),
            (Cause::Irq { irq: 24, name: Arc::from(&b"virtio0-input.0"[..]) }, "irq:24:virtio0-input.0"),
            (Cause::Irq { irq: 25, name: Arc::from(&b""[..]) }, "irq:25"),
            (Cause::Vector(Vector::LocalTimer), "irq:local_timer"),
            (Cause::Vector(Vector::Reschedule), "ipi:reschedule"),
            (Cause::Csd(sym("flush_tlb_func")), "ipi:flush_tlb_func"),
            (Cause::Softirq(9), "softirq:RCU"),
            (Cause::Timer(sym("tick_nohz_handler")), "timer:tick_nohz_handler"),
            (Cause::Nmi(sym("0x10")), "nmi:0x10"),
            (Cause::Others(Kind::Irq), "irq:(others)"),
            (Cause::Unexplained, "unexplained:"),
            (Cause::Host, "host:vCPU preempted by the host"),
            (Cause::Smi, "smi:system management interrupt (firmware)"),
        ];
        for (c, want) in cases {
            assert_eq!(c.label(), want);
        }
    }
}
