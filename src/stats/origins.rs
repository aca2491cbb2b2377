//! Causes grouped by who sent them, per CPU: "IPIs to CPU 6 by sender".
//! A sender is its program (pids folded, as the metrics do) or the CPU's
//! own interrupt-level code; the table is bounded per CPU.

use crate::fastmap::Map;

use crate::cause::Sender;
use crate::cause::{CauseId, Kind};
use crate::interval::Hiccup;
use crate::record::Comm;

/// Senders kept per CPU and kind of cause; later ones are not counted
/// (the summary says how many stalls had an origin left out).
const KEPT: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SenderKey {
    Program(Comm),
    Local(CauseId),
    /// An IPI, work item or wake-up whose sender was not traced (origins
    /// off, a kernel without the send tracepoint, a sender that came
    /// before tracing, wake-ups without --wake-origins).
    Unknown,
    /// Time no one sends: interrupts, timers, idle, the host, jitterwatch
    /// itself, and what no kernel event explains. With the senders and the
    /// unknown ones, a CPU's rows add up to its stolen time.
    NotSent,
}

/// The kinds of cause something else sends to a CPU.
fn sendable(k: Kind) -> bool {
    matches!(k, Kind::Ipi | Kind::Work | Kind::Task)
}

impl SenderKey {
    /// A sender as the tables know it: a task by its program.
    pub fn of(s: &Sender) -> Self {
        match s {
            Sender::Task { comm, .. } => SenderKey::Program(*comm),
            Sender::Local(c) => SenderKey::Local(*c),
        }
    }

    /// As the summary writes it: `java`, or `(softirq:TIMER)`.
    pub fn name(&self) -> String {
        match self {
            SenderKey::Program(comm) => crate::sanitize::visible_bytes(comm),
            SenderKey::Local(c) => format!("({})", c.label()),
            SenderKey::Unknown => "(sender unknown)".into(),
            SenderKey::NotSent => "(not sent)".into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    pub count: u64,
    pub ns: u64,
    /// What it sent that cost the most in one stall (an IPI's function, a
    /// work item): what its hint is about (a TLB flush, a remote call).
    pub what: Option<(CauseId, u64)>,
}

/// Where the time no origin covers is tallied, per CPU and kind: one
/// fixed row per CPU, indexed, so a stall's causes cost no hashing here.
type Unsent = [[Sent; 2]; Kind::ALL.len()];
const UNKNOWN: usize = 0;
const NOT_SENT: usize = 1;
/// The keys [`BySender::top`] lends for the tallies' two columns.
static UNSENT_KEYS: [SenderKey; 2] = [SenderKey::Unknown, SenderKey::NotSent];

#[derive(Debug, Default)]
pub struct BySender {
    /// Senders known: their CPU, the kind of what they sent, who.
    map: Map<(u32, Kind, SenderKey), Sent>,
    unsent: Map<u32, Unsent>,
    entries: Map<(u32, Kind), usize>,
    /// Origins not counted: their CPU and kind had [`KEPT`] senders already.
    pub left_out: u64,
}

impl BySender {
    pub fn record(&mut self, h: &Hiccup) {
        // What no origin covers: unknown senders, and what no one sends.
        let row = self.unsent.entry(h.cpu).or_insert_with(|| std::array::from_fn(|_| Default::default()));
        for (cause, ns) in &h.causes {
            // A stopped probe's time is not stolen: not in the view.
            if cause.kind() == Kind::Stopped || h.origins.iter().any(|(c, _)| c == cause) {
                continue;
            }
            let who = if sendable(cause.kind()) { UNKNOWN } else { NOT_SENT };
            add_unsent(row, cause.kind(), who, *ns);
        }
        if h.unexplained > 0 {
            add_unsent(row, Kind::Unexplained, NOT_SENT, h.unexplained);
        }
        for (cause, origin) in &h.origins {
            let ns = h.causes.iter().find(|(c, _)| c == cause).map_or(0, |c| c.1);
            let key = (h.cpu, cause.kind(), SenderKey::of(&origin.sender));
            if let Some(s) = self.map.get_mut(&key) {
                s.count += 1;
                s.ns += ns;
                if s.what.as_ref().is_none_or(|w| ns > w.1) {
                    s.what = Some((*cause, ns));
                }
                continue;
            }
            let n = self.entries.entry((h.cpu, cause.kind())).or_default();
            if *n >= KEPT {
                self.left_out += 1;
                continue;
            }
            *n += 1;
            self.map.insert(key, Sent { count: 1, ns, what: Some((*cause, ns)) });
        }
    }

    /// `cpu`'s senders, most time first: (kind of cause, sender, totals).
    /// With no sender seen on it, nothing: the rest alone would hide why
    /// (origins off, a kernel without their tracepoints).
    pub fn top(&self, cpu: u32) -> Vec<(Kind, &SenderKey, &Sent)> {
        let mut v: Vec<_> = self.map.iter().filter(|((c, _, _), _)| *c == cpu).map(|((_, k, s), t)| (*k, s, t)).collect();
        if let Some(row) = self.unsent.get(&cpu) {
            for (k, cols) in Kind::ALL.into_iter().zip(row) {
                v.extend(UNSENT_KEYS.iter().zip(cols).filter(|(_, t)| t.count > 0).map(|(s, t)| (k, s, t)));
            }
        }
        if v.iter().all(|(_, s, _)| matches!(s, SenderKey::Unknown | SenderKey::NotSent)) {
            return Vec::new();
        }
        v.sort_by(|a, b| b.2.ns.cmp(&a.2.ns).then(b.2.count.cmp(&a.2.count)).then_with(|| (a.0, a.1).cmp(&(b.0, b.1))));
        v
    }
}

fn add_unsent(row: &mut Unsent, kind: Kind, who: usize, ns: u64) {
    let s = &mut row[kind.index()][who];
    s.count += 1;
    s.ns += ns;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::comm;
    use crate::cause::Cause;
    use crate::cause::Origin;
    use crate::interval::Source;

    fn hiccup(cause: Cause, ns: u64, sender: Sender) -> Hiccup {
        Hiccup {
            cpu: 6,
            t0: 0,
            gap: ns,
            source: Source::Probe,
            victim: None,
            causes: vec![(cause.clone().into(), ns)],
            unexplained: 0,
            parts: None,
            freq: None,
            origins: vec![(cause.into(), Origin { sender, via: None })],
            stack: None,
        }
    }

    #[test]
    fn grouped_by_program_and_kind_most_time_first() {
        let mut b = BySender::default();
        let ipi = Cause::Csd("flush_tlb_func".into());
        let java = |pid| Sender::Task { comm: comm(b"java"), pid, tgid: 1, cpu: 0 };
        b.record(&hiccup(ipi.clone(), 100, java(11)));
        b.record(&hiccup(ipi.clone(), 300, java(12)));
        b.record(&hiccup(ipi, 50, Sender::Task { comm: comm(b"go"), pid: 3, tgid: 3, cpu: 1 }));
        b.record(&hiccup(Cause::Work("vmstat_update".into()), 900, Sender::Local(Cause::Softirq(1).into())));
        let top: Vec<(Kind, String, u64, u64)> = b.top(6).into_iter().map(|(k, s, t)| (k, s.name(), t.count, t.ns)).collect();
        assert_eq!(
            top,
            vec![(Kind::Work, "(softirq:TIMER)".into(), 1, 900), (Kind::Ipi, "java".into(), 2, 400), (Kind::Ipi, "go".into(), 1, 50)]
        );
        assert!(b.top(7).is_empty());
        // What each sent that cost the most: what its hint is about.
        let java = b.top(6).into_iter().find(|t| t.1.name() == "java").expect("java sent IPIs").2.clone();
        assert_eq!(java.what, Some((Cause::Csd("flush_tlb_func".into()).into(), 300)));
    }

    #[test]
    fn bounded_per_cpu_and_kind() {
        let mut b = BySender::default();
        for i in 0..(KEPT as u32 + 5) {
            let name = format!("p{i}");
            b.record(&hiccup(Cause::Csd("f".into()), 1, Sender::Task { comm: comm(name.as_bytes()), pid: i, tgid: i, cpu: 0 }));
        }
        assert_eq!(b.top(6).len(), KEPT);
        assert_eq!(b.left_out, 5);
    }

    /// The rows add up to the CPU's stolen time: senders, IPIs and work
    /// whose sender is unknown (kfree_rcu_work had 18.8% of one view and no
    /// row), and what no one sends (an IRQ, unexplained time); a stopped
    /// probe's time is not stolen and is not there.
    #[test]
    fn every_stolen_ns_has_a_row() {
        let mut b = BySender::default();
        let ipi = Cause::Csd("flush_tlb_func".into());
        let rcu = Cause::Work("kfree_rcu_work".into());
        let irq = Cause::Irq { irq: 24, name: std::sync::Arc::from(&b"eth0"[..]) };
        let mut h = hiccup(ipi, 100, Sender::Task { comm: comm(b"java"), pid: 1, tgid: 1, cpu: 0 });
        h.causes.extend([(rcu.into(), 200), (irq.into(), 300), (CauseId::STOPPED, 5_000)]);
        (h.unexplained, h.gap) = (400, 6_000);
        b.record(&h);
        let top: Vec<(Kind, String, u64)> = b.top(6).into_iter().map(|(k, s, t)| (k, s.name(), t.ns)).collect();
        assert_eq!(
            top,
            vec![
                (Kind::Unexplained, "(not sent)".into(), 400),
                (Kind::Irq, "(not sent)".into(), 300),
                (Kind::Work, "(sender unknown)".into(), 200),
                (Kind::Ipi, "java".into(), 100),
            ]
        );
        assert_eq!(top.iter().map(|r| r.2).sum::<u64>(), 1_000, "the stall less its stopped time");
    }
}
