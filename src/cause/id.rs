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
        // Numbers only: no name to look up.
        let simple = match c {
            Cause::Vector(v) => Some(Self::vector(*v)),
            Cause::Softirq(v) => Some(Self::softirq(*v)),
            Cause::Slack => Some(Self::SLACK),
            Cause::Host => Some(Self::HOST),
            Cause::Smi => Some(Self::SMI),
            Cause::Own => Some(Self::OWN),
            Cause::Stopped => Some(Self::STOPPED),
            Cause::Others(k) => Some(Self::others(*k)),
            Cause::Unexplained => Some(Self::UNEXPLAINED),
            Cause::Lost => Some(Self::LOST),
            _ => None,
        };
        if let Some(id) = simple {
            return id;
        }
        let mut guard = NAMES.write().unwrap_or_else(PoisonError::into_inner);
        let names = &mut *guard;
        let sym =
            |t: u8, s: &Symbol, names: &mut Names| number(&mut names.symbols, &mut names.symbol_ids, s).map(|no| Self::pack(t, no, 0));
        let id = match c {
            Cause::Task { comm, pid } => number(&mut names.comms, &mut names.comm_ids, comm).map(|no| match pid {
                Some(p) => Self::pack(tag::TASK, no, *p),
                None => Self::pack(tag::PROGRAM, no, 0),
            }),
            Cause::Work(s) => sym(tag::WORK, s, names),
            Cause::Timer(s) => sym(tag::TIMER, s, names),
            Cause::Csd(s) => sym(tag::CSD, s, names),
            Cause::Nmi(s) => sym(tag::NMI, s, names),
            Cause::Idle(s) => sym(tag::IDLE, s, names),
            Cause::Irq { irq, name } => number(&mut names.irqs, &mut names.irq_ids, name).map(|no| Self::pack(tag::IRQ, no, *irq as u32)),
            _ => unreachable!("numbers only, handled above"),
        };
        id.unwrap_or(Self::others(c.kind()))
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
        match self.tag() {
            tag::TASK | tag::PROGRAM => Kind::Task,
            tag::WORK => Kind::Work,
            tag::IRQ => Kind::Irq,
            tag::VECTOR if VECTORS[self.n() as usize] == Vector::LocalTimer => Kind::Irq,
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
            tag::OTHERS => Kind::ALL[self.n() as usize],
            tag::UNEXPLAINED => Kind::Unexplained,
            _ => Kind::Lost,
        }
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
mod tests {
    use super::*;
    use crate::cause::comm;

    fn every_sort() -> Vec<Cause> {
        let sym = |s: &str| Symbol::from(s);
        let mut v = vec![
            Cause::Task { comm: comm(b"kworker/6:1"), pid: Some(412) },
            Cause::Task { comm: comm(b"kworker/6:1"), pid: None },
            Cause::Task { comm: comm(b"ev\x1bil"), pid: Some(u32::MAX) },
            Cause::Work(sym("vmstat_update")),
            Cause::Irq { irq: 24, name: Arc::from(&b"virtio0-input.0"[..]) },
            Cause::Irq { irq: -1, name: Arc::from(&b""[..]) },
            Cause::Softirq(9),
            Cause::Timer(sym("tick_nohz_handler")),
            Cause::Csd(sym("flush_tlb_func")),
            Cause::Nmi(sym("0x10")),
            Cause::Idle(sym("C6")),
            Cause::Slack,
            Cause::Host,
            Cause::Smi,
            Cause::Own,
            Cause::Stopped,
            Cause::Unexplained,
            Cause::Lost,
        ];
        v.extend(VECTORS.map(Cause::Vector));
        v.extend(Kind::ALL.map(Cause::Others));
        v
    }

    #[test]
    fn every_cause_comes_back_whole() {
        for c in every_sort() {
            let id = CauseId::of(&c);
            assert_eq!(id.cause(), c);
            assert_eq!(id.kind(), c.kind(), "{c:?}");
            assert_eq!(id.is_unexplained(), c.is_unexplained());
            assert_eq!(CauseId::of(&c), id, "interned once");
        }
        for (i, v) in VECTORS.iter().enumerate() {
            assert_eq!(*v as usize, i, "{v:?}");
        }
    }

    #[test]
    fn ids_sort_as_their_causes() {
        let causes = every_sort();
        let mut by_cause = causes.clone();
        by_cause.sort();
        let mut by_id: Vec<CauseId> = causes.iter().map(CauseId::of).collect();
        by_id.sort();
        assert_eq!(by_id.into_iter().map(CauseId::cause).collect::<Vec<_>>(), by_cause);
    }

    #[test]
    fn folding_keeps_the_program_and_the_kind() {
        let t = CauseId::of(&Cause::Task { comm: comm(b"sh"), pid: Some(9) });
        assert_eq!(t.folded().map(CauseId::cause), Some(Cause::Task { comm: comm(b"sh"), pid: None }));
        assert_eq!(t.folded().unwrap().folded(), None);
        assert_eq!(CauseId::softirq(1).folded(), Some(CauseId::others(Kind::Softirq)));
        assert_eq!(CauseId::vector(Vector::LocalTimer).folded(), Some(CauseId::others(Kind::Irq)));
        for c in [CauseId::UNEXPLAINED, CauseId::LOST, CauseId::HOST, CauseId::OWN, CauseId::others(Kind::Work)] {
            assert_eq!(c.folded(), None, "{c:?}");
        }
    }

    #[test]
    fn pids_share_their_program_name() {
        let a = CauseId::of(&Cause::Task { comm: comm(b"cc1"), pid: Some(1) });
        let b = CauseId::of(&Cause::Task { comm: comm(b"cc1"), pid: Some(2) });
        assert_ne!(a, b);
        assert_eq!(a.program(), b.program());
        assert_eq!((a.task_pid(), b.task_pid()), (Some(1), Some(2)));
        assert_eq!(a.name_no(), b.name_no(), "one comm interned");
    }
}
