//! What the live screen draws, made by the collector from its aggregates a
//! few times a second: figures already reduced (percentiles, not
//! histograms), every cause of every CPU with its totals, each CPU's top
//! senders, and the recent worst stalls. Small enough to send across a
//! channel each frame.

use crate::cause::Kind;
use crate::interval::{Hiccup, Source};
use crate::stats::{CauseKey, Counters, CpuFigures, Stats};

/// Senders sent per CPU: the table is sent ten times a second, and a
/// screen shows fewer rows than this.
pub const SENDERS_SHOWN: usize = 20;

/// One cause on one CPU, with its totals.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    pub key: CauseKey,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub last_seen_ns: u64,
    /// Passive mode: the watched thread this cause took most from, and how
    /// many others it also took from.
    pub victim: Option<(String, usize)>,
    /// The period its stalls recur on, as last looked for (stats/periodic.rs).
    pub period_ns: Option<u64>,
}

/// Who sent one kind of cause (IPIs, work, wake-ups) to one CPU, and how
/// much of it: "IPIs to CPU 6 by sender".
#[derive(Debug, Clone, PartialEq)]
pub struct SenderLine {
    pub cpu: u32,
    /// The cause's kind: ipi, work, or task (a wake-up).
    pub kind: Kind,
    /// The sender's program, or `(kind:name)` of the CPU's own
    /// interrupt-level code; escaped (`SenderKey::name`).
    pub sender: String,
    pub count: u64,
    pub total_ns: u64,
}

/// Passive mode: one watched thread, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadLine {
    pub tid: u32,
    /// `comm[tid]`, escaped.
    pub name: String,
    pub hiccups: u64,
    /// Per kind: interrupted, preempted, wakeup.
    pub by_kind: [u64; 3],
    pub p99_ns: u64,
    pub max_ns: u64,
    pub lost_pct: Option<f64>,
    pub migrations: u64,
    /// Softirqs its own system calls ran (its own work, not lost).
    pub in_syscall: u64,
    /// The CPU it last ran on.
    pub last_cpu: Option<u32>,
    /// Its books as the kernel keeps them, read at each switch: time on a
    /// CPU and run_delay (schedstat's two fields) over its window.
    pub ran_ns: u64,
    pub run_delay_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub start_ns: u64,
    pub now_ns: u64,
    /// The aggregates were reset during the run (they count from start_ns).
    pub was_reset: bool,
    pub cpus: Vec<CpuFigures>,
    /// Every cause kept, largest total first.
    pub culprits: Vec<Culprit>,
    /// Each CPU's top senders (at most [`SENDERS_SHOWN`]), CPUs in
    /// `cpus` order, most time first within each.
    pub senders: Vec<SenderLine>,
    /// Recent worst stalls, largest first.
    pub worst: Vec<Hiccup>,
    pub counters: Counters,
    /// Passive mode: the watched threads, most time lost first.
    pub threads: Vec<ThreadLine>,
    /// What the run measures.
    pub method: crate::interval::Method,
}

/// Passive mode: which watched thread `cause` took the most time from
/// (and how many others it took from), from each thread's top causes.
fn victim_of(s: &Stats, cause: &crate::cause::CauseId) -> Option<(String, usize)> {
    let mut hit: Vec<(u64, &crate::stats::ThreadStats)> =
        s.threads().by_tid.values().filter_map(|t| t.causes.get(cause).map(|&ns| (ns, t))).collect();
    hit.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.victim.tid.cmp(&b.1.victim.tid)));
    let (_, top) = hit.first()?;
    Some((top.victim.name(), hit.len() - 1))
}

impl Snapshot {
    pub fn of(s: &Stats) -> Self {
        Snapshot {
            start_ns: s.start_ns(),
            now_ns: s.now_ns(),
            was_reset: s.was_reset(),
            method: s.method(),
            cpus: s.cpus().iter().map(|c| c.figures()).collect(),
            culprits: s
                .top_causes(None)
                .into_iter()
                .map(|(k, c)| Culprit {
                    key: *k,
                    count: c.count,
                    total_ns: c.total_ns,
                    max_ns: c.max_ns,
                    last_seen_ns: c.last_seen_ns,
                    victim: victim_of(s, &k.cause),
                    period_ns: c.period.map(|p| p.period_ns),
                })
                .collect(),
            senders: s
                .cpus()
                .iter()
                .flat_map(|c| {
                    s.by_sender().top(c.cpu).into_iter().take(SENDERS_SHOWN).map(|(kind, sender, t)| SenderLine {
                        cpu: c.cpu,
                        kind,
                        sender: sender.name(),
                        count: t.count,
                        total_ns: t.ns,
                    })
                })
                .collect(),
            worst: s.worst().to_vec(),
            counters: s.counters().clone(),
            threads: s
                .threads()
                .sorted()
                .into_iter()
                .map(|t| ThreadLine {
                    tid: t.victim.tid,
                    name: t.victim.name(),
                    hiccups: t.hiccups(),
                    by_kind: [Source::Interrupted, Source::Preempted, Source::Wakeup].map(|s| t.of(s).0),
                    p99_ns: t.pct(0.99),
                    max_ns: t.max_ns,
                    lost_pct: t.lost_pct(),
                    migrations: t.info.as_ref().map_or(0, |i| i.migrations.iter().map(|m| m.2).sum()),
                    in_syscall: t.of(Source::InSyscall).0,
                    last_cpu: t.info.as_ref().and_then(|i| i.last_cpu),
                    ran_ns: t.info.as_ref().map_or(0, |i| i.books.kernel_on_cpu_ns()),
                    run_delay_ns: t.info.as_ref().map_or(0, |i| i.books.booked.kernel_queued_ns),
                })
                .collect(),
        }
    }

    /// An empty view of `cpus`, before the first snapshot arrives.
    pub fn empty(cpus: &[usize]) -> Self {
        Snapshot::of(&Stats::new(cpus, 0))
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.now_ns.saturating_sub(self.start_ns)
    }

    pub fn per_sec(&self, n: u64) -> f64 {
        match self.elapsed_ns() {
            0 => 0.0,
            e => n as f64 * 1e9 / e as f64,
        }
    }

    pub fn stolen_pct(&self, c: &CpuFigures) -> f64 {
        match self.elapsed_ns() {
            0 => 0.0,
            e => 100.0 * c.stolen_ns as f64 / e as f64,
        }
    }

    /// The causes of one CPU (or all), largest total first.
    pub fn culprits_of(&self, cpu: Option<u32>) -> impl Iterator<Item = &Culprit> {
        self.culprits.iter().filter(move |c| cpu.is_none_or(|f| c.key.cpu == f))
    }

    /// The senders to one CPU (or all), most time first within a CPU.
    pub fn senders_of(&self, cpu: Option<u32>) -> impl Iterator<Item = &SenderLine> {
        self.senders.iter().filter(move |s| cpu.is_none_or(|f| s.cpu == f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Cause;
    use crate::interval::hiccup;

    #[test]
    fn reduces_the_aggregates() {
        let mut s = Stats::new(&[1, 2], 0);
        s.record(&hiccup(1, 5, vec![(Cause::Softirq(9), 700)], 300));
        s.record(&hiccup(2, 6, vec![], 50));
        s.set_now_ns(1_000_000);
        let snap = Snapshot::of(&s);
        assert_eq!((snap.cpus[0].hiccups, snap.cpus[0].max_ns, snap.cpus[1].stolen_ns), (1, 1000, 50));
        assert!((995..=1005).contains(&snap.cpus[0].p99_ns), "{}", snap.cpus[0].p99_ns);
        let names: Vec<String> = snap.culprits.iter().map(|c| format!("{}@{}", c.key.cause.label(), c.key.cpu)).collect();
        assert_eq!(names, vec!["softirq:RCU@1", "unexplained:@1", "unexplained:@2"]);
        assert_eq!(snap.culprits_of(Some(2)).count(), 1);
        assert_eq!(snap.worst.len(), 2);
        assert!((snap.stolen_pct(&snap.cpus[0]) - 0.1).abs() < 1e-9);
        assert!(snap.senders.is_empty());
    }

    /// Senders per CPU, most time first, bounded per CPU.
    #[test]
    fn carries_the_top_senders_of_each_cpu() {
        use crate::cause::{Origin, Sender};
        let mut s = Stats::new(&[1, 2], 0);
        let ipi = Cause::Csd("flush_tlb_func".into());
        for i in 0..(SENDERS_SHOWN as u64 + 5) {
            let mut h = hiccup(1, i, vec![(ipi.clone(), 100 + i)], 0);
            let comm = crate::cause::comm(format!("p{i}").as_bytes());
            h.origins = vec![(ipi.clone().into(), Origin { sender: Sender::Task { comm, pid: 9, tgid: 9, cpu: 0 }, via: None })];
            s.record(&h);
        }
        let mut h = hiccup(2, 0, vec![(Cause::Work("vmstat_update".into()), 7)], 0);
        h.origins = vec![(h.causes[0].0, Origin { sender: Sender::Local(Cause::Softirq(1).into()), via: None })];
        s.record(&h);
        let snap = Snapshot::of(&s);
        let one: Vec<&SenderLine> = snap.senders_of(Some(1)).collect();
        assert_eq!(one.len(), SENDERS_SHOWN);
        assert_eq!((one[0].sender.as_str(), one[0].count, one[0].total_ns), ("p24", 1, 124));
        let two: Vec<_> = snap.senders_of(Some(2)).map(|l| (l.kind, l.sender.as_str(), l.total_ns)).collect();
        assert_eq!(two, vec![(Kind::Work, "(softirq:TIMER)", 7)]);
    }
}
