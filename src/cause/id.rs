//! A cause as the collector carries it: one `u64`, copied, hashed and
//! compared as a number on every stall, at every aggregate. The names in
//! it (a task's comm, a kernel function, an IRQ's action name) are
//! interned once, process-wide, where a cause is first named; the
//! numbers (a pid, an IRQ, a vector, a softirq) sit in the id itself. So
//! the table grows with the names a run sees, never with pids: a fork
//! storm of one program adds one comm. Names are looked up only where
//! text is written ([`CauseId::cause`]), and escaped there, per format.
//!
//! Layout: the variant's tag in bits 56–63, a name's number in 32–55,
//! a number (pid, IRQ, vector, softirq, kind) in 0–31.

use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use crate::fastmap::Map;
use crate::record::{Comm, Vector};

use super::{Cause, Kind, Symbol};

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CauseId(u64);

/// Names of each sort kept at most. Past it a new name is not kept and
/// its cause joins the `(others)` of its kind, as the per-CPU cap folds
/// causes (stats/causes.rs): a program renaming itself in a loop on a
/// watched CPU cannot grow memory without end (~64 MiB at the cap).
const NAMES_MAX: usize = 1 << 20;

/// The tags, in the order of [`Cause`]'s variants.
mod tag {
    pub const TASK: u8 = 0;
    pub const PROGRAM: u8 = 1;
    pub const WORK: u8 = 2;
    pub const IRQ: u8 = 3;
    pub const VECTOR: u8 = 4;
    pub const SOFTIRQ: u8 = 5;
    pub const TIMER: u8 = 6;
    pub const CSD: u8 = 7;
    pub const NMI: u8 = 8;
    pub const IDLE: u8 = 9;
    pub const SLACK: u8 = 10;
    pub const HOST: u8 = 11;
    pub const SMI: u8 = 12;
    pub const OWN: u8 = 13;
    pub const STOPPED: u8 = 14;
    pub const OTHERS: u8 = 15;
    pub const UNEXPLAINED: u8 = 16;
    pub const LOST: u8 = 17;
}

/// The vectors by their number in an id.
const VECTORS: [Vector; 5] = [Vector::LocalTimer, Vector::Reschedule, Vector::CallFunction, Vector::CallFunctionSingle, Vector::IrqWork];

/// The interned names: comms, kernel symbols, IRQ action names.
#[derive(Default)]
struct Names {
    comms: Vec<Comm>,
    comm_ids: Map<Comm, u32>,
    symbols: Vec<Symbol>,
    symbol_ids: Map<Symbol, u32>,
    irqs: Vec<Arc<[u8]>>,
    irq_ids: Map<Arc<[u8]>, u32>,
}

static NAMES: LazyLock<RwLock<Names>> = LazyLock::new(Default::default);

/// The number of `name` in `list`, added if new (None: the list is full).
fn number<K: std::hash::Hash + Eq + Clone>(list: &mut Vec<K>, ids: &mut Map<K, u32>, name: &K) -> Option<u32> {
    if let Some(&n) = ids.get(name) {
        return Some(n);
    }
    if list.len() >= NAMES_MAX {
        return None;
    }
    let n = list.len() as u32;
    list.push(name.clone());
    ids.insert(name.clone(), n);
    Some(n)
}

/// A cause's tag and the number kept beside it in its id (a pid, an
/// IRQ, a vector, a softirq, a kind): the one place a variant becomes a
/// tag.
fn tag_of(c: &Cause) -> (u8, u32) {
    match c {
        Cause::Task { pid: Some(p), .. } => (tag::TASK, *p),
        Cause::Task { pid: None, .. } => (tag::PROGRAM, 0),
        Cause::Work(_) => (tag::WORK, 0),
        Cause::Irq { irq, .. } => (tag::IRQ, *irq as u32),
        Cause::Vector(v) => (tag::VECTOR, *v as u32),
        Cause::Softirq(v) => (tag::SOFTIRQ, u32::from(*v)),
        Cause::Timer(_) => (tag::TIMER, 0),
        Cause::Csd(_) => (tag::CSD, 0),
        Cause::Nmi(_) => (tag::NMI, 0),
        Cause::Idle(_) => (tag::IDLE, 0),
        Cause::Slack => (tag::SLACK, 0),
        Cause::Host => (tag::HOST, 0),
        Cause::Smi => (tag::SMI, 0),
        Cause::Own => (tag::OWN, 0),
        Cause::Stopped => (tag::STOPPED, 0),
        Cause::Others(k) => (tag::OTHERS, *k as u32),
        Cause::Unexplained => (tag::UNEXPLAINED, 0),
        Cause::Lost => (tag::LOST, 0),
    }
}

/// The kind of a cause by its tag and number: the one place a cause gets
/// its kind ([`Cause::kind`] asks here too).
fn kind_of(t: u8, n: u32) -> Kind {
    match t {
        tag::TASK | tag::PROGRAM => Kind::Task,
        tag::WORK => Kind::Work,
        tag::IRQ => Kind::Irq,
        // The local timer is an interrupt (LOC in /proc/interrupts); the
        // other vectors are inter-processor interrupts.
        tag::VECTOR if VECTORS[n as usize] == Vector::LocalTimer => Kind::Irq,
        tag::VECTOR | tag::CSD => Kind::Ipi,
        tag::SOFTIRQ => Kind::Softirq,
        tag::TIMER => Kind::Timer,
        tag::NMI => Kind::Nmi,
        tag::IDLE => Kind::Idle,
        tag::SLACK => Kind::Slack,
        tag::HOST => Kind::Host,
        tag::SMI => Kind::Smi,
        tag::OWN => Kind::Own,
        tag::STOPPED => Kind::Stopped,
        tag::OTHERS => Kind::ALL[n as usize],
        tag::UNEXPLAINED => Kind::Unexplained,
        _ => Kind::Lost,
    }
}

/// [`Cause::kind`]: without interning its names.
pub(super) fn kind_of_cause(c: &Cause) -> Kind {
    let (t, n) = tag_of(c);
    kind_of(t, n)
}

impl CauseId {
    pub const UNEXPLAINED: CauseId = CauseId::unit(tag::UNEXPLAINED);
    pub const LOST: CauseId = CauseId::unit(tag::LOST);
    pub const STOPPED: CauseId = CauseId::unit(tag::STOPPED);
    pub const OWN: CauseId = CauseId::unit(tag::OWN);
    pub const SLACK: CauseId = CauseId::unit(tag::SLACK);
    pub const HOST: CauseId = CauseId::unit(tag::HOST);
    pub const SMI: CauseId = CauseId::unit(tag::SMI);

    const fn unit(t: u8) -> Self {
        Self::pack(t, 0, 0)
    }

    const fn pack(t: u8, name: u32, n: u32) -> Self {
        CauseId(((t as u64) << 56) | ((name as u64) << 32) | n as u64)
    }

    fn tag(self) -> u8 {
        (self.0 >> 56) as u8
    }

    fn name_no(self) -> usize {
        ((self.0 >> 32) & 0xff_ffff) as usize
    }

    fn n(self) -> u32 {
        self.0 as u32
    }

    /// A softirq's cause (no name to intern).
    pub const fn softirq(vec: u16) -> Self {
        Self::pack(tag::SOFTIRQ, 0, vec as u32)
    }

    /// A system vector's cause.
    pub const fn vector(v: Vector) -> Self {
        Self::pack(tag::VECTOR, 0, v as u32)
    }

    /// The folded entry of kind `k`.
    pub const fn others(k: Kind) -> Self {
        Self::pack(tag::OTHERS, 0, k as u32)
    }

    /// The id of `c`, its names interned if new.
    pub fn of(c: &Cause) -> Self {
        let (t, n) = tag_of(c);
        enum Name<'a> {
            Comm(&'a Comm),
            Symbol(&'a Symbol),
            Irq(&'a Arc<[u8]>),
        }
        let name = match c {
            Cause::Task { comm, .. } => Name::Comm(comm),
            Cause::Work(s) | Cause::Timer(s) | Cause::Csd(s) | Cause::Nmi(s) | Cause::Idle(s) => Name::Symbol(s),
            Cause::Irq { name, .. } => Name::Irq(name),
            // Numbers only: no name to look up.
            _ => return Self::pack(t, 0, n),
        };
        let mut guard = NAMES.write().unwrap_or_else(PoisonError::into_inner);
        let names = &mut *guard;
        let no = match name {
            Name::Comm(comm) => number(&mut names.comms, &mut names.comm_ids, comm),
            Name::Symbol(s) => number(&mut names.symbols, &mut names.symbol_ids, s),
            Name::Irq(irq) => number(&mut names.irqs, &mut names.irq_ids, irq),
        };
        match no {
            Some(no) => Self::pack(t, no, n),
            None => Self::others(kind_of(t, n)),
        }
    }

    /// The cause, with its names: for writing it (and for tests).
    pub fn cause(self) -> Cause {
        let names = NAMES.read().unwrap_or_else(PoisonError::into_inner);
        let sym = || names.symbols[self.name_no()].clone();
        match self.tag() {
            tag::TASK => Cause::Task { comm: names.comms[self.name_no()], pid: Some(self.n()) },
            tag::PROGRAM => Cause::Task { comm: names.comms[self.name_no()], pid: None },
            tag::WORK => Cause::Work(sym()),
            tag::IRQ => Cause::Irq { irq: self.n() as i32, name: names.irqs[self.name_no()].clone() },
            tag::VECTOR => Cause::Vector(VECTORS[self.n() as usize]),
            tag::SOFTIRQ => Cause::Softirq(self.n() as u16),
            tag::TIMER => Cause::Timer(sym()),
            tag::CSD => Cause::Csd(sym()),
            tag::NMI => Cause::Nmi(sym()),
            tag::IDLE => Cause::Idle(sym()),
            tag::SLACK => Cause::Slack,
            tag::HOST => Cause::Host,
            tag::SMI => Cause::Smi,
            tag::OWN => Cause::Own,
            tag::STOPPED => Cause::Stopped,
            tag::OTHERS => Cause::Others(Kind::ALL[self.n() as usize]),
            tag::UNEXPLAINED => Cause::Unexplained,
            _ => Cause::Lost,
        }
    }

    /// Its kind, from the id alone.
    pub fn kind(self) -> Kind {
        kind_of(self.tag(), self.n())
    }

    pub fn is_unexplained(self) -> bool {
        self == Self::UNEXPLAINED
    }

    /// A task with its pid (not a program's folded entry).
    pub fn task_pid(self) -> Option<u32> {
        (self.tag() == tag::TASK).then(|| self.n())
    }

    pub fn is_task(self) -> bool {
        matches!(self.tag(), tag::TASK | tag::PROGRAM)
    }

    /// The softirq's number, for a softirq.
    pub fn softirq_no(self) -> Option<u16> {
        (self.tag() == tag::SOFTIRQ).then(|| self.n() as u16)
    }

    /// An IRQ's number, for a device interrupt.
    pub fn irq_no(self) -> Option<i32> {
        (self.tag() == tag::IRQ).then(|| self.n() as i32)
    }

    /// A task's program (`comm[*]`): its pids folded into one entry.
    pub fn program(self) -> Option<CauseId> {
        self.is_task().then(|| Self::pack(tag::PROGRAM, self.name_no() as u32, 0))
    }

    /// The entry this cause joins when folded: a task its program's
    /// (`comm[*]`), anything else the `(others)` of its kind. None when it
    /// is already a folded entry, or is never folded (unexplained, lost,
    /// idle, slack, the host, SMIs, ourselves, a stopped probe).
    pub fn folded(self) -> Option<CauseId> {
        match self.tag() {
            tag::TASK => self.program(),
            tag::PROGRAM
            | tag::OTHERS
            | tag::UNEXPLAINED
            | tag::LOST
            | tag::IDLE
            | tag::SLACK
            | tag::HOST
            | tag::SMI
            | tag::OWN
            | tag::STOPPED => None,
            _ => Some(Self::others(self.kind())),
        }
    }

    /// The name as every view shows it, escaped ([`Cause::push_name`]).
    pub fn push_name(self, out: &mut String) {
        self.cause().push_name(out)
    }

    pub fn name(self) -> String {
        self.cause().name()
    }

    /// `kind:name` ([`Cause::label`]).
    pub fn label(self) -> String {
        self.cause().label()
    }
}

impl From<&Cause> for CauseId {
    fn from(c: &Cause) -> Self {
        CauseId::of(c)
    }
}

impl From<Cause> for CauseId {
    fn from(c: Cause) -> Self {
        CauseId::of(&c)
    }
}

/// In the order of the causes themselves (kind, then name, then number),
/// so every table sorted by it reads as before causes had ids.
impl Ord for CauseId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self == other {
            return std::cmp::Ordering::Equal;
        }
        match self.tag().cmp(&other.tag()) {
            // A task and a program share Cause::Task: its fields decide.
            std::cmp::Ordering::Equal => self.cause().cmp(&other.cause()),
            o if self.is_task() && other.is_task() => self.cause().cmp(&other.cause()).then(o),
            o => o,
        }
    }
}

impl PartialOrd for CauseId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Debug for CauseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.cause().fmt(f)
    }
}

#[cfg(test)]
mod tests;
