//! Raw contexts (a function address, an IRQ number) to causes with names:
//! symbols through /proc/kallsyms, IRQ action names as irq_handler_entry
//! reported them. Each context is resolved once and cached, so reporting a
//! hiccup costs lookups, not symbol searches.

use crate::fastmap::Map;
use std::path::Path;
use std::sync::Arc;

use crate::cause::{Cause, CauseId, Symbol};
use crate::kallsyms::Kallsyms;

use super::context::Context;

/// Cached contexts at most: pid churn clears the cache rather than grow it.
const CACHE_MAX: usize = 100_000;

pub struct Namer {
    /// Shared with the namers forked for other threads (the trace writer).
    kallsyms: Arc<Kallsyms>,
    /// The cpuidle driver's state names, read once at start by the caller.
    idle: Arc<IdleStates>,
    /// The one map of IRQ numbers to their action names (raw bytes).
    irq_names: Map<i32, Arc<[u8]>>,
    /// IRQ numbers to their action's handler and threaded handler.
    irq_actions: Map<i32, (u64, u64)>,
    /// Each context's cause, interned ([`CauseId`]).
    cache: Map<Context, CauseId>,
}

impl Namer {
    pub fn new(kallsyms: Kallsyms, idle: IdleStates) -> Self {
        Self {
            kallsyms: Arc::new(kallsyms),
            idle: Arc::new(idle),
            irq_names: Map::default(),
            irq_actions: Map::default(),
            cache: Map::default(),
        }
    }

    /// A namer for another thread: the same symbols (shared) and the IRQ
    /// names known so far, its own cache.
    pub fn fork(&self) -> Self {
        Self {
            kallsyms: Arc::clone(&self.kallsyms),
            idle: Arc::clone(&self.idle),
            irq_names: self.irq_names.clone(),
            irq_actions: self.irq_actions.clone(),
            cache: Map::default(),
        }
    }

    /// Remembers an IRQ's action name (seen on irq_handler_entry). Allocates
    /// only the first time an IRQ is seen, or when its name changes.
    pub fn note_irq(&mut self, irq: i32, raw_name: &[u8]) {
        let name = &raw_name[..raw_name.iter().position(|&b| b == 0).unwrap_or(raw_name.len())];
        if self.irq_names.get(&irq).is_none_or(|n| **n != *name) {
            self.irq_names.insert(irq, Arc::from(name));
            self.cache.remove(&Context::Irq(irq));
        }
    }

    /// IRQ `irq`'s action: its handler and threaded handler (0: none).
    pub fn note_irq_action(&mut self, irq: i32, handler: u64, thread_fn: u64) {
        self.irq_actions.insert(irq, (handler, thread_fn));
    }

    /// The functions of IRQ `irq`'s action, handler first, as symbols.
    pub fn irq_functions(&self, irq: i32) -> Vec<Symbol> {
        let Some(&(handler, thread_fn)) = self.irq_actions.get(&irq) else { return Vec::new() };
        [handler, thread_fn].into_iter().filter(|&f| f != 0).map(|f| self.symbol(f)).collect()
    }

    /// The cause of IRQ `irq`, named if its entry was seen.
    pub fn irq(&self, irq: i32) -> Cause {
        Cause::Irq { irq, name: self.irq_names.get(&irq).cloned().unwrap_or_else(|| Arc::from(&b""[..])) }
    }

    /// Whether `addr` is the start of the kernel function `name`.
    pub fn is_function(&self, addr: u64, name: &str) -> bool {
        self.kallsyms.resolve(addr).is_some_and(|(n, off)| off == 0 && n == name)
    }

    pub fn symbol(&self, addr: u64) -> Symbol {
        Symbol::from(self.kallsyms.name(addr))
    }

    /// The cause of `ctx`, as an id: named (and its names interned) the
    /// first time, a cache lookup after.
    pub fn cause(&mut self, ctx: Context) -> CauseId {
        if ctx.is_unexplained() {
            return CauseId::UNEXPLAINED;
        }
        if let Some(&c) = self.cache.get(&ctx) {
            return c;
        }
        let cause = match ctx {
            Context::Task { comm, .. } | Context::Program(comm) if threaded_irq(&comm).is_some() => {
                let (irq, name) = threaded_irq(&comm).expect("checked");
                // The name the IRQ's entry gave, whole; else the thread's.
                match self.irq_names.get(&irq) {
                    Some(n) => Cause::Irq { irq, name: n.clone() },
                    None => Cause::Irq { irq, name: Arc::from(name) },
                }
            }
            Context::Task { pid, comm } => Cause::Task { comm, pid: Some(pid) },
            Context::Program(comm) => Cause::Task { comm, pid: None },
            Context::Work(f) => Cause::Work(self.symbol(f)),
            Context::Irq(irq) => self.irq(irq),
            Context::Softirq(v) => Cause::Softirq(v),
            Context::Timer(f) => Cause::Timer(self.symbol(f)),
            Context::Vector(v) => Cause::Vector(v),
            Context::Csd(f) => Cause::Csd(self.symbol(f)),
            Context::Nmi(f) => Cause::Nmi(self.symbol(f)),
            Context::Idle(state) => Cause::Idle(Symbol::from(self.idle.name(state))),
            Context::IdleTask(state) => Cause::Idle(Symbol::from(self.idle.exit_name(state))),
            Context::Others(k) => Cause::Others(k),
            Context::Lost => Cause::Lost,
            Context::Own => Cause::Own,
            Context::Stopped => Cause::Stopped,
            Context::Probe | Context::Unknown => unreachable!("unexplained, handled above"),
        };
        if self.cache.len() >= CACHE_MAX {
            self.cache.clear();
        }
        let id = CauseId::of(&cause);
        self.cache.insert(ctx, id);
        id
    }
}

/// A threaded IRQ handler's kernel thread, `irq/N-name` (every IRQ on
/// PREEMPT_RT, `threadirqs` elsewhere): the IRQ it serves, and the name
/// as far as the 15-byte comm keeps it. Its time is the IRQ's, as on the
/// stock kernel where the handler runs at interrupt level.
fn threaded_irq(comm: &[u8]) -> Option<(i32, &[u8])> {
    let comm = &comm[..comm.iter().position(|&b| b == 0).unwrap_or(comm.len())];
    let rest = comm.strip_prefix(b"irq/")?;
    let dash = rest.iter().position(|&b| b == b'-')?;
    let irq = std::str::from_utf8(&rest[..dash]).ok()?.parse().ok()?;
    Some((irq, &rest[dash + 1..]))
}

/// The names of the cpuidle driver's states, by index
/// (`/sys/devices/system/cpu/cpu0/cpuidle/stateN/name`: `POLL`, `C1`,
/// `C6`…). A host fact: read by [`IdleStates::read`] at start, given as a
/// value to everything else (tests give their own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdleStates(Vec<String>);

impl IdleStates {
    /// The driver's names under `root` (`/` in production); none when the
    /// machine has no cpuidle driver.
    pub fn read(root: &Path) -> Self {
        let dir = root.join("sys/devices/system/cpu/cpu0/cpuidle");
        Self::new((0..32).map_while(|i| std::fs::read_to_string(dir.join(format!("state{i}/name"))).ok()))
    }

    pub fn new<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Self {
        Self(names.into_iter().map(|n| crate::sanitize::visible(n.as_ref().trim()).into_owned()).collect())
    }

    /// State `state`'s name; without a driver the kernel reports 0 for
    /// polling and 1 for its default idle (HLT on x86).
    /// The idle task's time outside a state: leaving the one it was in
    /// (`C6 exit`), or the idle loop itself when none was seen.
    pub fn exit_name(&self, state: u32) -> String {
        if state == crate::record::IDLE_EXIT {
            return crate::cause::IDLE_LOOP.to_string();
        }
        format!("{} exit", self.name(state))
    }

    pub fn name(&self, state: u32) -> String {
        if state == crate::record::IDLE_EXIT {
            return "(state not seen)".to_string();
        }
        match (self.0.get(state as usize), state) {
            (Some(n), _) => n.clone(),
            (None, 0) => "poll".to_string(),
            (None, 1) => "halt (default idle)".to_string(),
            (None, n) => format!("state {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::comm;
    use crate::record::Vector;

    #[test]
    fn resolves_each_context() {
        let k = Kallsyms::parse("ffffffff81001000 t vmstat_update\nffffffff81002000 t tick_nohz_handler\n");
        let mut n = Namer::new(k, IdleStates::default());
        n.note_irq(24, b"virtio0-input.0\0junk");
        let label = |n: &mut Namer, c| n.cause(c).label();
        assert_eq!(label(&mut n, Context::Task { pid: 412, comm: comm(b"kworker/6:1") }), "task:kworker/6:1[412]");
        assert_eq!(label(&mut n, Context::Program(comm(b"cc1"))), "task:cc1[*]");
        assert_eq!(label(&mut n, Context::Work(0xffffffff81001000)), "work:vmstat_update");
        assert_eq!(label(&mut n, Context::Irq(24)), "irq:24:virtio0-input.0");
        assert_eq!(label(&mut n, Context::Irq(25)), "irq:25");
        assert_eq!(label(&mut n, Context::Timer(0xffffffff81002000)), "timer:tick_nohz_handler");
        assert_eq!(label(&mut n, Context::Vector(Vector::LocalTimer)), "irq:local_timer");
        assert_eq!(label(&mut n, Context::Nmi(0x10)), "nmi:0x10");
        assert_eq!(n.cause(Context::Probe), CauseId::UNEXPLAINED);
        n.note_irq(24, b"renamed\0");
        assert_eq!(label(&mut n, Context::Irq(24)), "irq:24:renamed");
    }

    /// PREEMPT_RT: the thread that runs IRQ 24's handler is IRQ 24.
    #[test]
    fn a_threaded_irq_is_named_as_its_irq() {
        let mut n = Namer::new(Kallsyms::empty(), IdleStates::default());
        let label = |n: &mut Namer, c| n.cause(c).label();
        assert_eq!(label(&mut n, Context::Task { pid: 90, comm: comm(b"irq/31-virtio0-") }), "irq:31:virtio0-");
        n.note_irq(24, b"virtio0-input.0\0");
        assert_eq!(label(&mut n, Context::Task { pid: 91, comm: comm(b"irq/24-virtio0-") }), "irq:24:virtio0-input.0");
        assert_eq!(label(&mut n, Context::Program(comm(b"irq/24-virtio0-"))), "irq:24:virtio0-input.0");
        // Not a threaded IRQ: a task as before.
        assert_eq!(label(&mut n, Context::Task { pid: 92, comm: comm(b"irq/xx-nope") }), "task:irq/xx-nope[92]");
        assert_eq!(label(&mut n, Context::Task { pid: 93, comm: comm(b"ksoftirqd/3") }), "task:ksoftirqd/3[93]");
    }

    #[test]
    fn idle_states_are_named_by_the_driver_given() {
        let none = IdleStates::default();
        assert_eq!(none.name(0), "poll");
        assert_eq!(none.name(1), "halt (default idle)");
        assert_eq!(none.name(4), "state 4");
        let haltpoll = IdleStates::new(["POLL\n", "haltpoll idle\n"]);
        assert_eq!(haltpoll.name(1), "haltpoll idle");
        let hostile = IdleStates::new(["C1\x1b[2J"]);
        assert_eq!(hostile.name(0), "C1\\x1b[2J");
        let d = tempfile::tempdir().unwrap();
        for (i, n) in ["POLL", "C1", "C6"].iter().enumerate() {
            let s = d.path().join(format!("sys/devices/system/cpu/cpu0/cpuidle/state{i}"));
            std::fs::create_dir_all(&s).unwrap();
            std::fs::write(s.join("name"), format!("{n}\n")).unwrap();
        }
        assert_eq!(IdleStates::read(d.path()), IdleStates::new(["POLL", "C1", "C6"]));
        assert_eq!(IdleStates::read(&d.path().join("nothing")), IdleStates::default());
    }
}
