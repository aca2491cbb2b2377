//! Passive mode's per-thread aggregates: each watched thread's hiccups by
//! kind, their distribution and top causes, with what the tracker knows of
//! it (runnable time, migrations).

use crate::fastmap::Map;

use hdrhistogram::Histogram;

use crate::cause::CauseId;
use crate::interval::{Hiccup, Source, Victim};
use crate::passive::ThreadInfo;

/// Distinct causes kept per thread before the rest fold (by program, then
/// by kind), as the per-CPU causes do.
const MAX_THREAD_CAUSES: usize = 64;

pub struct ThreadStats {
    pub victim: Victim,
    /// Per `Source::ALL`: hiccups and their time (`InSyscall`: its own
    /// work, kept apart from what it lost).
    pub count: [u64; Source::ALL.len()],
    pub ns: [u64; Source::ALL.len()],
    pub gaps: Histogram<u64>,
    pub max_ns: u64,
    pub causes: Map<CauseId, u64>,
    /// Its own system calls' softirqs (in-syscall), per softirq: count,
    /// time and the largest, in the order first seen.
    pub in_syscall: Vec<InSyscall>,
    /// From the tracker (None until it has said).
    pub info: Option<ThreadInfo>,
}

/// One part of what its own system calls ran (a loopback send's NET_RX),
/// by `vec`: a softirq, or `names::SOFTIRQS.len()` for the stretches an
/// IRQ inside them took most of (`names::in_syscall_part`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InSyscall {
    pub vec: u16,
    pub count: u64,
    pub ns: u64,
    pub max_ns: u64,
}

impl ThreadStats {
    fn new(victim: Victim) -> Self {
        const N: usize = Source::ALL.len();
        ThreadStats {
            victim,
            count: [0; N],
            ns: [0; N],
            gaps: super::histogram(2),
            max_ns: 0,
            causes: Map::default(),
            in_syscall: Vec::new(),
            info: None,
        }
    }

    pub fn of(&self, s: Source) -> (u64, u64) {
        (self.count[s.index()], self.ns[s.index()])
    }

    /// Hiccups: what others took from it, its own system calls' work apart.
    pub fn hiccups(&self) -> u64 {
        Source::ALL.iter().filter(|s| s.is_stall()).map(|s| self.of(*s).0).sum()
    }

    pub fn lost_ns(&self) -> u64 {
        Source::ALL.iter().filter(|s| s.is_stall()).map(|s| self.of(*s).1).sum()
    }

    /// Share of the time it ran or wanted to that hiccups took, %.
    pub fn lost_pct(&self) -> Option<f64> {
        let runnable = self.info.as_ref()?.runnable_ns();
        (runnable > 0).then(|| 100.0 * self.lost_ns() as f64 / runnable as f64)
    }

    pub fn pct(&self, q: f64) -> u64 {
        if self.hiccups() == 0 {
            0
        } else {
            super::quantile(&self.gaps, q, self.max_ns)
        }
    }

    /// The largest causes, largest first.
    pub fn top_causes(&self, n: usize) -> Vec<(CauseId, u64)> {
        let mut v: Vec<(CauseId, u64)> = self.causes.iter().map(|(c, ns)| (*c, *ns)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }

    fn add_cause(&mut self, cause: CauseId, ns: u64) {
        if let Some(t) = self.causes.get_mut(&cause) {
            *t += ns;
            return;
        }
        let mut key = cause;
        // A program already folded takes its new pids: one program, one cause.
        if let Some(program) = key.task_pid().and(key.program()) {
            if self.causes.contains_key(&program) {
                key = program;
            }
        }
        // Past the cap, fold until the entry exists or the cause cannot fold.
        while self.causes.len() >= MAX_THREAD_CAUSES && !self.causes.contains_key(&key) {
            match key.folded() {
                Some(f) => key = f,
                None => break,
            }
        }
        if key.is_task() && key.task_pid().is_none() && !self.causes.contains_key(&key) {
            // The program's first entry takes in its pids listed so far.
            let pids: Vec<CauseId> = self.causes.keys().filter(|c| c.task_pid().is_some() && c.program() == Some(key)).copied().collect();
            let moved: u64 = pids.iter().filter_map(|c| self.causes.remove(c)).sum();
            *self.causes.entry(key).or_default() += moved;
        }
        *self.causes.entry(key).or_default() += ns;
    }
}

#[derive(Default)]
pub struct Threads {
    pub by_tid: Map<u32, ThreadStats>,
}

impl Threads {
    pub fn record(&mut self, h: &Hiccup) {
        let Some(v) = h.victim else { return };
        let t = self.by_tid.entry(v.tid).or_insert_with(|| ThreadStats::new(v));
        t.victim = v;
        let k = h.source.index();
        t.count[k] += 1;
        t.ns[k] += h.gap;
        if !h.source.is_stall() {
            // Its own work, kept per part (a few at most): no histogram, no
            // cause of a stall. Each stretch counts once, whole, under its
            // largest part, so the parts add up to the total (as /metrics
            // counts them).
            let vec = h.in_syscall_part() as u16;
            match t.in_syscall.iter_mut().find(|s| s.vec == vec) {
                Some(s) => {
                    s.count += 1;
                    s.ns += h.gap;
                    s.max_ns = s.max_ns.max(h.gap);
                }
                None => t.in_syscall.push(InSyscall { vec, count: 1, ns: h.gap, max_ns: h.gap }),
            }
            return;
        }
        t.gaps.saturating_record(h.gap.max(1));
        t.max_ns = t.max_ns.max(h.gap);
        for (c, ns) in h.all_causes() {
            t.add_cause(c, ns);
        }
    }

    /// What the tracker knows; threads with no hiccup yet get a row too.
    pub fn set_info(&mut self, infos: impl Iterator<Item = ThreadInfo>) {
        for i in infos {
            let v = Victim { tid: i.tid, comm: i.comm };
            let tid = i.tid;
            self.by_tid.entry(tid).or_insert_with(|| ThreadStats::new(v)).info = Some(i);
        }
    }

    /// Sorted by time lost, most first.
    pub fn sorted(&self) -> Vec<&ThreadStats> {
        let mut v: Vec<&ThreadStats> = self.by_tid.values().collect();
        v.sort_by(|a, b| b.lost_ns().cmp(&a.lost_ns()).then(a.victim.tid.cmp(&b.victim.tid)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::comm;
    use crate::cause::Cause;
    use crate::interval::{hiccup, Victim};

    #[test]
    fn a_thread_sees_each_program_once() {
        let task = |pid| Cause::Task { comm: comm(b"qemu"), pid };
        let mut th = Threads::default();
        let victim = Victim { tid: 7, comm: comm(b"app") };
        for (cause, ns) in [(task(Some(23769)), 100), (task(None), 50), (task(Some(23770)), 25)] {
            let mut h = hiccup(1, 0, vec![(cause, ns)], 0);
            (h.victim, h.source) = (Some(victim), Source::Preempted);
            th.record(&h);
        }
        assert_eq!(th.by_tid[&7].top_causes(5), [(CauseId::of(&task(None)), 175)]);
    }

    #[test]
    fn in_syscall_parts_add_up_to_the_total() {
        // Stretches of NET_RX alone, of NET_RX with an IRQ and the kernel
        // between, of TIMER, and one an IRQ inside took most of.
        let irq = Cause::Irq { irq: 24, name: std::sync::Arc::from(&b"virtio0"[..]) };
        let mut th = Threads::default();
        let victim = Victim { tid: 7, comm: comm(b"app") };
        let stretches = [
            (vec![(Cause::Softirq(3), 9_000)], 0),
            (vec![(Cause::Softirq(3), 6_000), (irq.clone(), 2_000)], 500),
            (vec![(Cause::Softirq(1), 3_000)], 0),
            (vec![(irq, 5_000), (Cause::Softirq(3), 1_000)], 0),
        ];
        for (causes, unexplained) in stretches {
            let mut h = hiccup(1, 0, causes, unexplained);
            (h.victim, h.source) = (Some(victim), Source::InSyscall);
            th.record(&h);
        }
        let t = &th.by_tid[&7];
        let (count, ns) = (t.count[Source::InSyscall.index()], t.ns[Source::InSyscall.index()]);
        assert_eq!((count, ns), (4, 26_500));
        let parts: Vec<(&str, u64, u64)> =
            t.in_syscall.iter().map(|s| (crate::names::in_syscall_part(s.vec.into()), s.count, s.ns)).collect();
        assert_eq!(parts, [("NET_RX", 2, 17_500), ("TIMER", 1, 3_000), ("other", 1, 6_000)]);
        assert_eq!(parts.iter().map(|p| p.1).sum::<u64>(), count);
        assert_eq!(parts.iter().map(|p| p.2).sum::<u64>(), ns);
    }
}
