//! The Prometheus endpoint's figures. The collector folds each explained
//! stall into monotonic counters (per CPU, per CPU × cause with a bounded
//! label set, per watched thread) and, once a second, publishes an owned
//! `View` of them; the endpoint's thread encodes the latest view when
//! scraped. The collector never waits on the endpoint: it swaps the view
//! in with `try_lock`, skipping a second if a scrape holds the slot.
//! Counters here never go back: a reset of the screen's aggregates does
//! not reach them.

mod encode;
mod http;
mod ranked;

use std::sync::{Arc, Mutex};

use crate::cause::{Cause, CauseId, Kind};
use crate::interval::{Hiccup, Victim};
use crate::sanitize::visible_bytes;
use crate::slots::CpuSlots;
use crate::stats::origins::SenderKey;
use crate::stats::{Counters, CpuCounters};

pub use encode::{classic_text, encode};
pub use http::Endpoint;
use ranked::Ranked;

/// Series of their own per CPU by default (`--prometheus-top`).
pub const DEFAULT_TOP: u16 = 10;

/// Upper bounds of the gap histogram's buckets, in seconds: 1 µs to 1 s,
/// three a decade.
pub const BUCKETS: [f64; 19] =
    [1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1.0];

/// Where the collector leaves the latest view for the endpoint.
pub type Slot = Arc<Mutex<Option<Arc<View>>>>;

/// One series of a cause (or of a kind's folded rest).
#[derive(Debug, Clone, PartialEq)]
pub struct CauseSeries {
    pub kind: &'static str,
    /// Escaped as every view escapes names; `(others)` for the folded rest.
    pub name: String,
    pub ns: u64,
    pub hiccups: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CpuView {
    pub cpu: u32,
    pub hiccups: u64,
    pub stolen_ns: u64,
    /// Stalls per bucket of [`BUCKETS`] (not cumulative), and over 1 s last.
    pub counts: [u64; BUCKETS.len() + 1],
    pub causes: Vec<CauseSeries>,
    /// Causes by who sent them (`name` is the sender; kind the cause's).
    pub senders: Vec<CauseSeries>,
    /// What its source and the kernel count for it, as the stats keep
    /// them (its floor, threshold, drops and overflows are read there).
    pub counters: CpuCounters,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    pub mode: &'static str,
    pub cpus: Vec<CpuView>,
    /// Passive mode: per watched thread (`comm[tid]`, bounded as causes are).
    pub threads: Vec<CauseSeries>,
    /// Passive mode: the softirqs each watched thread's own system calls
    /// ran (its own work, not lost), by thread (`name`) and softirq
    /// (`kind`), bounded as threads are.
    pub in_syscall: Vec<CauseSeries>,
    pub events: u64,
    pub consumer_cpu_ns: u64,
}

struct CpuTally {
    cpu: u32,
    hiccups: u64,
    stolen_ns: u64,
    /// Per bucket (not cumulative); the last one is over 1 s.
    counts: [u64; BUCKETS.len() + 1],
    causes: Ranked<CauseId>,
    senders: Ranked<(usize, SenderKey)>,
}

/// The collector's side: folds stalls in, publishes views.
pub struct Exporter {
    mode: &'static str,
    cpus: Vec<CpuTally>,
    slots: CpuSlots,
    threads: Ranked<Victim>,
    /// Keyed by (softirq, thread); the kind is the softirq.
    in_syscall: Ranked<(usize, Victim)>,
    slot: Slot,
    last_publish_ns: u64,
}

/// A cause as its series knows it: a task by its program (pids churn).
fn series_key(c: CauseId) -> CauseId {
    c.program().unwrap_or(c)
}

/// A series' `name` label: the name every view shows, a task by its comm.
/// A real cause named like the folded rest is told apart from it by a
/// leading backslash (an escaped name never has a lone one).
fn series_name(c: CauseId) -> String {
    let name = match c.cause() {
        Cause::Task { comm, .. } => visible_bytes(&comm),
        other => other.name(),
    };
    if name == crate::cause::OTHERS {
        format!("\\{name}")
    } else {
        name
    }
}

impl Exporter {
    pub fn new(cpus: &[usize], top: usize, mode: &'static str, slot: Slot, now: u64) -> Self {
        Self {
            mode,
            cpus: cpus
                .iter()
                .map(|&c| CpuTally {
                    cpu: c as u32,
                    hiccups: 0,
                    stolen_ns: 0,
                    counts: [0; BUCKETS.len() + 1],
                    causes: Ranked::new(top, Kind::ALL.len()),
                    senders: Ranked::new(top, Kind::ALL.len()),
                })
                .collect(),
            slots: CpuSlots::new(cpus),
            threads: Ranked::new(top, 1),
            in_syscall: Ranked::new(top, crate::names::SOFTIRQS.len() + 1),
            slot,
            last_publish_ns: now,
        }
    }

    /// The run starts at `at`: the first publication's rates count from there.
    pub fn start(&mut self, at: u64) {
        self.last_publish_ns = at;
    }

    /// One explained stall. Allocates only for a cause never seen before.
    pub fn record(&mut self, h: &Hiccup) {
        // Counted apart, per thread and softirq.
        if !h.source.is_stall() {
            if let Some(v) = h.victim {
                let vec = h.in_syscall_part();
                self.in_syscall.add(&(vec, v), vec, h.gap);
            }
            return;
        }
        if let Some(v) = h.victim {
            self.threads.add(&v, 0, h.gap);
        }
        let Some(c) = self.slots.get(h.cpu).map(|i| &mut self.cpus[i]) else { return };
        c.hiccups += 1;
        c.stolen_ns += h.gap;
        let secs = h.gap as f64 / 1e9;
        c.counts[BUCKETS.partition_point(|&b| b < secs)] += 1;
        for (cause, ns) in h.all_causes() {
            c.causes.add(&series_key(cause), cause.kind().index(), ns);
        }
        for (cause, origin) in &h.origins {
            let ns = h.causes.iter().find(|(x, _)| x == cause).map_or(0, |x| x.1);
            let k = cause.kind().index();
            c.senders.add(&(k, SenderKey::of(&origin.sender)), k, ns);
        }
    }

    /// Publishes a view at `now`, with what the probes and the kernel
    /// count (`raw`: since the start). Never blocks.
    pub fn publish(&mut self, raw: &Counters, now: u64) {
        let dt = now.saturating_sub(self.last_publish_ns) as f64 * 1e-9;
        self.last_publish_ns = now;
        for c in &mut self.cpus {
            c.causes.evaluate(dt);
            c.senders.evaluate(dt);
        }
        self.threads.evaluate(dt);
        self.in_syscall.evaluate(dt);
        let view = Arc::new(self.view(raw));
        if let Ok(mut slot) = self.slot.try_lock() {
            *slot = Some(view);
        }
    }

    fn view(&self, raw: &Counters) -> View {
        let cpus = self
            .cpus
            .iter()
            .map(|c| {
                let counters = raw.cpus.iter().find(|p| p.cpu == c.cpu);
                let (own, others) = c.causes.series();
                let mut causes: Vec<CauseSeries> = own
                    .into_iter()
                    .map(|(cause, (ns, n))| CauseSeries { kind: cause.kind().as_str(), name: series_name(*cause), ns, hiccups: n })
                    .collect();
                causes.extend(others.into_iter().map(|(k, (ns, n))| CauseSeries {
                    kind: Kind::ALL[k].as_str(),
                    name: crate::cause::OTHERS.to_string(),
                    ns,
                    hiccups: n,
                }));
                let (own, others) = c.senders.series();
                let mut senders: Vec<CauseSeries> = own
                    .into_iter()
                    .map(|((k, s), (ns, n))| CauseSeries { kind: Kind::ALL[*k].as_str(), name: s.name(), ns, hiccups: n })
                    .collect();
                senders.extend(others.into_iter().map(|(k, (ns, n))| CauseSeries {
                    kind: Kind::ALL[k].as_str(),
                    name: crate::cause::OTHERS.to_string(),
                    ns,
                    hiccups: n,
                }));
                CpuView {
                    cpu: c.cpu,
                    senders,
                    hiccups: c.hiccups,
                    stolen_ns: c.stolen_ns,
                    counts: c.counts,
                    causes,
                    counters: counters.cloned().unwrap_or_else(|| CpuCounters::new(c.cpu)),
                }
            })
            .collect();
        let (own, others) = self.threads.series();
        let mut threads: Vec<CauseSeries> =
            own.into_iter().map(|(v, (ns, n))| CauseSeries { kind: "thread", name: v.name(), ns, hiccups: n }).collect();
        threads.extend(others.into_iter().map(|(_, (ns, n))| CauseSeries {
            kind: "thread",
            name: crate::cause::OTHERS.to_string(),
            ns,
            hiccups: n,
        }));
        // The softirq's name as the label (a number past the table's: "softirq").
        let softirq = crate::names::in_syscall_part;
        let (own, others) = self.in_syscall.series();
        let mut in_syscall: Vec<CauseSeries> =
            own.into_iter().map(|((k, v), (ns, n))| CauseSeries { kind: softirq(*k), name: v.name(), ns, hiccups: n }).collect();
        in_syscall.extend(others.into_iter().map(|(k, (ns, n))| CauseSeries {
            kind: softirq(k),
            name: crate::cause::OTHERS.to_string(),
            ns,
            hiccups: n,
        }));
        View { mode: self.mode, cpus, threads, in_syscall, events: raw.events, consumer_cpu_ns: raw.consumer_cpu_ns }
    }
}

#[cfg(test)]
mod http_tests;
#[cfg(test)]
mod tests;
