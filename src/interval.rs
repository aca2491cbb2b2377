//! The seam between sources, the engine and sinks. Everything jitterwatch
//! reports is an interval on a CPU: a source (the spin or wake-up probe,
//! or passive mode: `source.rs`) says when a CPU was taken from what it
//! watches, the engine explains the
//! interval from that CPU's timeline, and sinks (aggregates, CSV, summary,
//! screen) consume the explained `Hiccup`. A new source produces
//! `Interval`s and touches no sink; a new sink reads `Hiccup`s.

use crate::cause::CauseId;

/// Who produced an interval, and so what kind of lost time it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A gap in the spin probe's loop: the probe read its clock at `t0`
    /// and next at `t1`.
    Probe,
    /// Passive mode: kernel activity at interrupt level while the watched
    /// thread ran.
    Interrupted,
    /// Passive mode: the watched thread was switched out while runnable,
    /// until it ran again.
    Preempted,
    /// Passive mode: from the watched thread's wake-up to its switch-in.
    Wakeup,
    /// The wake-up probe: from its deadline to its first clock read after
    /// the sleep (its latency).
    WakeupProbe,
    /// Passive mode: a softirq the watched thread's own system call ran on
    /// its CPU (a loopback send's NET_RX inside write()): its own work,
    /// shown apart from what other CPUs and devices did to it.
    InSyscall,
}

impl Source {
    pub const ALL: [Source; 6] =
        [Source::Probe, Source::Interrupted, Source::Preempted, Source::Wakeup, Source::WakeupProbe, Source::InSyscall];

    /// Its place in [`Source::ALL`] (a test keeps the two in step).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether its time was taken from what is watched: a stall. Not so a
    /// softirq of the watched thread's own system call (`InSyscall`): its
    /// own work, kept per thread apart from what the CPU's stalls add up
    /// to; it counts as lost nowhere, breaks no `--fail-above` bound, stops
    /// nothing, runs no `--on-stall` command, and reaches the CSV only with
    /// `--in-syscall`. Every output asks this, none names the source.
    pub const fn is_stall(self) -> bool {
        !matches!(self, Source::InSyscall)
    }

    /// As the CSV's `source` column writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Probe => "probe",
            Source::Interrupted => "interrupted",
            Source::Preempted => "preempted",
            Source::Wakeup => "wakeup",
            Source::WakeupProbe => "wakeup-probe",
            Source::InSyscall => "in-syscall",
        }
    }
}

/// What a run measures: the one fact every output asks of the mode (its
/// label, its words for lost time, its trace track), so none compares a
/// label as text or guesses the mode from the data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Method {
    /// The spin probe's gaps.
    #[default]
    #[serde(rename = "probe")]
    Spin,
    /// The wake-up probe's late wake-ups.
    #[serde(rename = "wakeup")]
    Wakeup,
    /// Passive mode: the watched threads' own time.
    #[serde(rename = "passive")]
    Passive,
}

impl Method {
    pub const ALL: [Method; 3] = [Method::Spin, Method::Wakeup, Method::Passive];

    /// As the summary and the metrics' `mode` label write it.
    pub fn label(self) -> &'static str {
        match self {
            Method::Spin => "probe",
            Method::Wakeup => "wakeup",
            Method::Passive => "passive",
        }
    }

    /// The method a summary's `mode` names (None: one this version does
    /// not know).
    pub fn of_label(label: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.label() == label)
    }

    /// What its lost time is: a probe's time was stolen from it; passive
    /// mode's threads were delayed (mostly their own wake-ups and waits,
    /// the CPU often asleep).
    pub fn taken(self) -> &'static str {
        match self {
            Method::Passive => "delayed",
            Method::Spin | Method::Wakeup => "stolen",
        }
    }

    /// Whether a probe of ours runs on the watched CPUs.
    pub fn has_probe(self) -> bool {
        self != Method::Passive
    }

    /// Whose stalls a trace's track shows.
    pub fn track(self) -> &'static str {
        match self {
            Method::Passive => "watched threads",
            Method::Spin | Method::Wakeup => "probe",
        }
    }
}

/// The watched thread an interval was taken from (passive mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Victim {
    pub tid: u32,
    pub comm: crate::record::Comm,
}

impl Victim {
    /// `comm[tid]`, escaped as every name is.
    pub fn push_name(&self, out: &mut String) {
        crate::cause::Cause::Task { comm: self.comm, pid: Some(self.tid) }.push_name(out);
    }

    pub fn name(&self) -> String {
        let mut s = String::new();
        self.push_name(&mut s);
        s
    }
}

/// The parts of one late wake-up, ns, and the largest cause of each
/// (timer latency, scheduling delay, return to user; None: no named cause).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parts {
    pub timer_ns: u64,
    pub sched_ns: u64,
    pub user_ns: u64,
    pub top: [Option<(CauseId, u64)>; 3],
}

impl Parts {
    pub fn ns(&self) -> [u64; 3] {
        [self.timer_ns, self.sched_ns, self.user_ns]
    }
}

/// Time a CPU was taken: `[t0, t1)` in CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub cpu: u32,
    pub t0: u64,
    pub t1: u64,
    pub source: Source,
    /// Passive mode: whose time it was (None for a probe's gap).
    pub victim: Option<Victim>,
    /// System management interrupts the CPU counted during it (the spin
    /// probe reads MSR_SMI_COUNT after a gap, where it can).
    pub smis: u32,
    /// Passive mode's wake-up that preempted what ran there (the kernel
    /// booked none of its wait: its runqueue clock stopped at the
    /// wake-up): until the reschedule IPI reached the CPU, the task still
    /// running there kept the thread waiting no more than the IPI's way
    /// did, and that time is the IPI's (engine/attribute.rs).
    pub delivery: bool,
}

/// An interval explained: its causes, largest first, and the time no
/// kernel event covers. `causes` holds no `Cause::Unexplained`; their sum
/// plus `unexplained` is `gap`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hiccup {
    pub cpu: u32,
    pub t0: u64,
    pub gap: u64,
    pub source: Source,
    pub victim: Option<Victim>,
    pub causes: Vec<(CauseId, u64)>,
    pub unexplained: u64,
    /// The wake-up probe's split of its latency (None for other sources).
    pub parts: Option<Parts>,
    /// The CPU's frequency changed inside it: from (None: not known) → to, kHz.
    pub freq: Option<(Option<u32>, u32)>,
    /// Who caused some of its causes (an IPI's sender, a work item's
    /// queuer, a task's waker), where the sending was seen.
    pub origins: Vec<(CauseId, crate::cause::Origin)>,
    /// `--stacks-above`: the kernel stack of its largest cause (a task
    /// that left the CPU inside it).
    /// Behind a pointer: a stall is moved and kept in thousands (spares,
    /// held for a steal reading), and most have none.
    pub stack: Option<std::sync::Arc<Stack>>,
}

/// `--stacks-above`: where a stall's largest cause was, innermost frame
/// first: a task's kernel stack as it left the CPU, an IRQ's functions.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    /// Whose: the stall's largest cause, a task or an IRQ.
    pub cause: CauseId,
    /// `function+0xoffset` (or the address), as kallsyms names them.
    pub frames: std::sync::Arc<[crate::cause::Symbol]>,
}

/// Nothing yet: what the engine fills in (and reuses).
impl Default for Hiccup {
    fn default() -> Self {
        Hiccup {
            cpu: 0,
            t0: 0,
            gap: 0,
            source: Source::Probe,
            victim: None,
            causes: Vec::new(),
            unexplained: 0,
            parts: None,
            freq: None,
            origins: Vec::new(),
            stack: None,
        }
    }
}

impl Hiccup {
    /// Time charged to a cause, `lost` included (the CSV's explained_ns).
    pub fn explained(&self) -> u64 {
        self.gap - self.unexplained
    }

    /// An in-syscall stretch's part: the softirq that took most of it, or
    /// `names::SOFTIRQS.len()` (`other`) when something else did (an IRQ
    /// inside it). Each stretch counts once, whole, under it.
    pub fn in_syscall_part(&self) -> usize {
        let other = crate::names::SOFTIRQS.len();
        match self.causes.first().and_then(|c| c.0.softirq_no()) {
            Some(n) => usize::from(n).min(other),
            None => other,
        }
    }

    /// Time while the CPU's events were dropped: charged to `lost`.
    pub fn lost(&self) -> u64 {
        self.causes.iter().filter(|(c, _)| *c == CauseId::LOST).map(|(_, ns)| ns).sum()
    }

    /// Every cause including unexplained time, largest first.
    pub fn all_causes(&self) -> impl Iterator<Item = (CauseId, u64)> + '_ {
        let at = self.causes.partition_point(|c| c.1 >= self.unexplained);
        let (before, after) = self.causes.split_at(at);
        let un = (self.unexplained > 0).then_some((CauseId::UNEXPLAINED, self.unexplained));
        before.iter().copied().chain(un).chain(after.iter().copied())
    }
}

#[cfg(test)]
pub(crate) fn hiccup(cpu: u32, t0: u64, causes: Vec<(crate::cause::Cause, u64)>, unexplained: u64) -> Hiccup {
    let gap = causes.iter().map(|c| c.1).sum::<u64>() + unexplained;
    let causes = causes.iter().map(|(c, ns)| (CauseId::of(c), *ns)).collect();
    Hiccup { cpu, t0, gap, causes, unexplained, ..Hiccup::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Cause;

    /// Thousands of stalls are kept at once (the engine's spares, those
    /// held for a steal reading): one that grows costs every run memory.
    #[test]
    fn a_stall_stays_small() {
        let size = std::mem::size_of::<Hiccup>();
        eprintln!("a Hiccup is {size} bytes");
        assert!(size <= 272, "a Hiccup is {size} bytes");
    }

    #[test]
    fn every_source_is_at_its_index_in_all() {
        for (i, s) in Source::ALL.iter().enumerate() {
            assert_eq!(s.index(), i, "{s:?}");
        }
        assert_eq!(Source::ALL.len(), Source::InSyscall.index() + 1, "a source added after InSyscall is in ALL");
    }

    #[test]
    fn unexplained_time_takes_its_place_by_size() {
        let h = hiccup(1, 0, vec![(Cause::Softirq(1), 50), (Cause::Softirq(9), 10)], 20);
        let order: Vec<u64> = h.all_causes().map(|c| c.1).collect();
        assert_eq!(order, vec![50, 20, 10]);
        assert_eq!((h.gap, h.explained()), (80, 60));
        assert_eq!(hiccup(1, 0, vec![], 0).all_causes().count(), 0);
    }
}
