//! The culprit behind the culprit. What runs on a watched CPU was often
//! caused elsewhere: an IPI sent from another CPU, work queued from
//! another, a task woken by another. The BPF side reports each of those
//! from the sender's context; this log keeps a watched CPU's recent ones
//! and finds, for a cause in a stall, the one that brought it: an IPI by
//! its callback, a work item by its function, a task by its pid, each the
//! latest sent before the stall ended and not too long before. A cause
//! whose sending was not seen has no origin: it is never guessed.
//! Pure logic: no BPF, no threads.

use std::collections::VecDeque;

use super::context::Context;
use crate::record::{Comm, OriginKind, Vector};

/// Origins kept per watched CPU (the oldest go first).
const KEPT: usize = 4096;

/// How long before a stall's end its cause's sending may be: an IPI is
/// handled within microseconds; a queued work item waits for its worker
/// (a delayed one was queued when its timer fired); a woken task waits for
/// the CPU.
fn max_age(kind: OriginKind) -> u64 {
    match kind {
        OriginKind::Ipi => 10_000_000,
        OriginKind::Work => 1_000_000_000,
        OriginKind::Wake => 1_000_000_000,
    }
}

/// How a context's origin is looked up: the sending's kind and key (an
/// IPI's callback, a work item's function, a woken task's pid). None for
/// a context nothing sends.
pub fn key_of(ctx: Context) -> Option<(OriginKind, u64)> {
    match ctx {
        Context::Csd(f) => Some((OriginKind::Ipi, f)),
        // A reschedule IPI has no callback.
        Context::Vector(Vector::Reschedule) => Some((OriginKind::Ipi, 0)),
        Context::Work(f) => Some((OriginKind::Work, f)),
        Context::Task { pid, .. } if pid != 0 => Some((OriginKind::Wake, u64::from(pid))),
        _ => None,
    }
}

/// One sending, raw (names are resolved when a stall reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub ts: u64,
    pub kind: OriginKind,
    /// The callback (IPI), the work function (work), the woken pid (wake).
    pub key: u64,
    pub sender: RawSender,
    pub callsite: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawSender {
    Task {
        comm: Comm,
        pid: u32,
        tgid: u32,
        cpu: u32,
    },
    /// The watched CPU's own interrupt-level context (see [`crate::cause::Sender::Local`]).
    Local(super::context::Context),
}

#[derive(Debug, Default)]
pub struct OriginLog {
    sent: VecDeque<Sent>,
}

impl OriginLog {
    pub fn push(&mut self, s: Sent) {
        if self.sent.len() == KEPT {
            self.sent.pop_front();
        }
        // Senders on other CPUs come in their own order: keep ours by time.
        let at = self.sent.iter().rposition(|x| x.ts <= s.ts).map_or(0, |i| i + 1);
        self.sent.insert(at, s);
    }

    /// The latest sending of `kind` with `key` at or before `end`, within
    /// that kind's age.
    pub fn find(&self, kind: OriginKind, key: u64, end: u64) -> Option<&Sent> {
        let oldest = end.saturating_sub(max_age(kind));
        self.sent.iter().rev().filter(|s| s.ts <= end).take_while(|s| s.ts >= oldest).find(|s| s.kind == kind && s.key == key)
    }

    /// Forgets what no stall still to come can need.
    pub fn prune(&mut self, before: u64) {
        let keep_from = before.saturating_sub(max_age(OriginKind::Work));
        while self.sent.front().is_some_and(|s| s.ts < keep_from) {
            self.sent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(ts: u64, kind: OriginKind, key: u64, pid: u32) -> Sent {
        Sent { ts, kind, key, sender: RawSender::Task { comm: [0; 16], pid, tgid: pid, cpu: 0 }, callsite: 0 }
    }

    fn pid(s: Option<&Sent>) -> Option<u32> {
        s.map(|s| match s.sender {
            RawSender::Task { pid, .. } => pid,
            RawSender::Local(_) => 0,
        })
    }

    #[test]
    fn the_latest_sending_before_the_end_by_key() {
        let mut log = OriginLog::default();
        log.push(sent(100, OriginKind::Ipi, 0xf1, 1));
        log.push(sent(300, OriginKind::Ipi, 0xf1, 2));
        log.push(sent(200, OriginKind::Ipi, 0xf2, 3));
        // Out of order across senders: still found by time.
        log.push(sent(250, OriginKind::Ipi, 0xf1, 4));
        assert_eq!(pid(log.find(OriginKind::Ipi, 0xf1, 290)), Some(4));
        assert_eq!(pid(log.find(OriginKind::Ipi, 0xf1, 400)), Some(2));
        assert_eq!(pid(log.find(OriginKind::Ipi, 0xf2, 400)), Some(3));
        assert_eq!(pid(log.find(OriginKind::Work, 0xf1, 400)), None, "another kind");
        assert_eq!(pid(log.find(OriginKind::Ipi, 0xf3, 400)), None, "never sent: never guessed");
        assert_eq!(pid(log.find(OriginKind::Ipi, 0xf1, 50)), None, "sent after the stall");
    }

    #[test]
    fn too_old_is_not_an_origin() {
        let mut log = OriginLog::default();
        log.push(sent(1_000, OriginKind::Ipi, 0xf1, 1));
        assert_eq!(pid(log.find(OriginKind::Ipi, 0xf1, 1_000 + max_age(OriginKind::Ipi) + 1)), None);
        log.push(sent(1_000, OriginKind::Wake, 42, 7));
        assert_eq!(pid(log.find(OriginKind::Wake, 42, 500_000_000)), Some(7));
    }

    #[test]
    fn bounded_and_pruned() {
        let mut log = OriginLog::default();
        for i in 0..(KEPT as u64 + 10) {
            log.push(sent(i, OriginKind::Wake, i, i as u32));
        }
        assert_eq!(log.sent.len(), KEPT);
        log.prune(5_000_000_000);
        assert!(log.sent.is_empty());
    }
}
