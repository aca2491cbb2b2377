//! Passive mode as a run's [`Source`]: no probe; the watched threads'
//! intervals come from the kernel's events themselves (passive/tracker.rs),
//! the threads already running when tracing began from /proc, and what is
//! known of each thread (its books, classes, migrations) goes to the
//! aggregates at the screen's rate.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::bpf::Programs;
use crate::engine::Engine;
use crate::interval::Interval;
use crate::passive::{self, AtAttach, Exits, Target, Tracker};
use crate::record::Event;
use crate::source::{Ended, Intervals, Source, Started};
use crate::stats::{CpuCounters, Stats};

pub struct PassiveSource {
    /// Where /proc is (the live system's root, or a fixture's).
    root: PathBuf,
    target: Target,
    threshold: u64,
    tracker: Tracker,
    /// What /proc said of the threads found at start, once tracing was on.
    at_attach: Option<AtAttach>,
    attach_ns: Option<u64>,
    exits: Option<Exits>,
}

impl PassiveSource {
    /// `rt`: the kernel is PREEMPT_RT (softirqs run in threads).
    pub fn new(root: &Path, target: Target, cpus: &[usize], threshold: u64, rt: bool) -> Self {
        let tracker = Tracker::new(target.filter.clone(), cpus, threshold).softirqs_in_threads(rt);
        PassiveSource { root: root.to_path_buf(), target, threshold, tracker, at_attach: None, attach_ns: None, exits: None }
    }
}

impl Intervals for PassiveSource {
    fn horizons(&self, upto: u64, out: &mut dyn FnMut(u32, u64)) {
        // A thread preempted long ago still needs the history since then.
        self.tracker.horizons(upto, out);
    }

    fn on_event(&mut self, ev: &Event, out: &mut dyn FnMut(Interval)) {
        self.tracker.on_event(ev, out);
    }

    fn flush(&mut self, upto: u64, out: &mut dyn FnMut(Interval)) {
        self.tracker.flush(upto, out);
    }
}

impl Source for PassiveSource {
    fn programs(&self) -> Programs {
        Programs { passive: true, wakeups: true, ..Programs::default() }
    }

    /// A thread already running on an isolated CPU may never switch: /proc
    /// says where the found threads are now that tracing is on.
    fn attach(&mut self, at: u64, _engine: &mut Engine) {
        self.tracker.started_at(at);
        let a = passive::at_attach(&self.root, &self.target);
        self.tracker.seed(&a.running, crate::clock::now_ns());
        self.at_attach = Some(a);
        self.attach_ns = Some(at);
    }

    fn start(&mut self) {
        self.exits = Some(passive::watch_exits(&self.target));
    }

    fn started(&mut self) -> Option<Result<Started>> {
        let a = self.at_attach.as_ref()?;
        Some(Ok(Started {
            notices: passive::start_lines(&self.target, a, self.threshold),
            lines: Vec::new(),
            found: a.found(&self.target),
            thresholds: self.target.cpus.iter().map(|&c| (c as u32, self.threshold)).collect(),
            shared_threshold: Some(self.threshold),
        }))
    }

    /// Without probes the run starts when tracing does.
    fn start_ns(&self) -> Option<u64> {
        self.attach_ns
    }

    fn threshold(&self, _cpu: u32) -> u64 {
        self.threshold
    }

    fn counters(&self, c: &mut CpuCounters, _stats: &Stats) {
        c.threshold_ns = self.threshold;
    }

    /// The watched threads as known at `now`.
    fn report(&self, now: u64, stats: &mut Stats) {
        let t = &self.tracker;
        stats.set_threads(t.threads().map(|i| {
            let mut i = i.clone();
            i.books = t.books_until(i.tid, now);
            i
        }));
        let idle = self
            .target
            .threads
            .iter()
            .filter(|(tid, _)| t.threads().all(|i| i.tid != *tid))
            .map(|(tid, name)| format!("{name}[{tid}]"))
            .collect();
        stats.set_threads_away(t.seen_elsewhere.clone(), idle);
    }

    fn stop(&mut self) -> Ended {
        let mut notes: Vec<String> = self.exits.as_ref().and_then(Exits::note).into_iter().collect();
        notes.push(passive::HOST_PAUSES.to_string());
        Ended { notes, failure: None }
    }
}
