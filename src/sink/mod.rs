//! Everything that consumes what the engine explains: the aggregates, the
//! CSV, the Prometheus counters, the flight recorder and the whole-run
//! recording. Each is a [`Sink`]; the drain hands every event and every
//! explained interval to [`Sinks`], which passes them down one list, so a
//! new output is a new `Sink` registered in [`outputs`] and touches no
//! drain. Pure logic: no BPF, no threads of its own.

pub mod outputs;

use std::io;

use anyhow::Result;

use crate::engine::Namer;
use crate::interval::Hiccup;
use crate::outcome::{Outcome, StopStall};
use crate::record::Event;
use crate::stats::{Counters, Stats};

/// One consumer of the drain's output. Only `what` and `on_hiccup` are
/// needed; the rest is for sinks that keep events, write files or publish.
pub trait Sink: Send {
    /// What it is, for error messages ("the CSV": "writing the CSV").
    fn what(&self) -> &'static str;
    /// The run starts here (the collector's attach time, CLOCK_MONOTONIC ns).
    fn start(&mut self, _at: u64) {}
    /// Every kernel event read, in the order read.
    fn on_event(&mut self, _ev: &Event) {}
    /// Every explained interval. `stop`: Some(limit) for the stall that
    /// stops the run (--stop-above limit), once.
    fn on_hiccup(&mut self, h: &Hiccup, stop: Option<u64>) -> io::Result<()>;
    /// After every drain: every event before `watermark` has been read
    /// (`last`: every event there will be). What was written reaches its
    /// file whole here.
    fn after_drain(&mut self, _watermark: u64, _last: bool, _namer: &mut Namer) -> io::Result<()> {
        Ok(())
    }
    /// Nothing before `horizon` on `cpu` will be explained any more.
    fn prune(&mut self, _cpu: u32, _horizon: u64) {}
    /// `cpu`'s threshold as the source chose it (or changed it).
    fn on_threshold(&mut self, _cpu: u32, _ns: u64) {}
    /// Whether it wants the counters at `now` (see `on_counters`).
    fn wants_counters(&self, _now: u64) -> bool {
        false
    }
    /// What the probes and the kernel count, since the start, as read at
    /// `now` (`last`: the final reading).
    fn on_counters(&mut self, _raw: &Counters, _now: u64, _last: bool) {}
    /// The run is over at `end`: what the sink adds to the run's outcome.
    fn finish(self: Box<Self>, _end: u64, _namer: &mut Namer, _outcome: &mut Outcome) -> Result<()> {
        Ok(())
    }
}

/// The aggregates, which the collector also reads (snapshots, counters,
/// the final summary), then every other sink of the run, in one list.
pub struct Sinks {
    pub stats: Stats,
    /// What the run comes to besides the aggregates (the stall that
    /// stops it, what the traces wrote).
    pub outcome: Outcome,
    list: Vec<Box<dyn Sink>>,
    /// --stop-above: the first stall at or over it stops the run.
    stop_above: Option<u64>,
}

impl Sinks {
    pub fn new(stats: Stats, list: Vec<Box<dyn Sink>>, stop_above: Option<u64>) -> Self {
        Sinks { stats, outcome: Outcome::default(), list, stop_above }
    }

    /// --fail-above: stalls at or over `limit` break the run's bound; it
    /// goes on to its end (the outcome names them).
    pub fn failing_above(mut self, limit: Option<u64>) -> Self {
        self.outcome.broken = limit.map(crate::outcome::Broken::new);
        self
    }

    /// Every sink, the aggregates first.
    fn each(&mut self) -> impl Iterator<Item = &mut dyn Sink> {
        std::iter::once(&mut self.stats as &mut dyn Sink).chain(self.list.iter_mut().map(|s| s.as_mut() as &mut dyn Sink))
    }

    pub fn start(&mut self, at: u64) {
        self.each().for_each(|s| s.start(at));
    }

    pub fn on_event(&mut self, ev: &Event) {
        // Only the trace sinks keep events: skip the aggregates' no-op.
        self.list.iter_mut().for_each(|s| s.on_event(ev));
    }

    /// Every sink sees `h`. A sink that fails (a full disk, EIO) is said
    /// once, dropped and recorded in the outcome; the others go on. Returns
    /// whether one failed just now (the run ends: the collector stops it).
    pub fn on_hiccup(&mut self, h: &Hiccup) -> bool {
        let stall = h.source.is_stall();
        // The run ended at the end of the stall that stopped it: what began
        // after (the ~100 ms the stop takes to reach every CPU) is not kept.
        if self.outcome.stopped_on.as_ref().is_some_and(|s| h.t0 >= s.time_ns.saturating_add(s.gap_ns)) {
            return false;
        }
        let stop = self.stop_above.filter(|&limit| stall && h.gap >= limit && self.outcome.stopped_on.is_none());
        if let Some(limit_ns) = stop {
            self.outcome.stopped_on = Some(StopStall { cpu: h.cpu, time_ns: h.t0, gap_ns: h.gap, limit_ns });
        }
        if let Some(b) = &mut self.outcome.broken {
            b.record(h);
        }
        // The aggregates write nothing and never fail.
        let _ = self.stats.on_hiccup(h, stop);
        self.each_failing(|s| s.on_hiccup(h, stop))
    }

    /// After every drain (see `Sink::after_drain`); a failing sink as in
    /// `on_hiccup`.
    pub fn after_drain(&mut self, watermark: u64, last: bool, namer: &mut Namer) -> bool {
        self.each_failing(|s| s.after_drain(watermark, last, namer))
    }

    /// `f` on every sink of the list; those that fail are dropped, each
    /// said in one line naming it and why, and kept in the outcome.
    fn each_failing(&mut self, mut f: impl FnMut(&mut dyn Sink) -> io::Result<()>) -> bool {
        let before = self.outcome.failed.len();
        let failed = &mut self.outcome.failed;
        self.list.retain_mut(|s| match f(s.as_mut()) {
            Ok(()) => true,
            Err(e) => {
                let why = format!("writing {}: {e}", s.what());
                crate::say::say!("{why}: the run ends here; the summary covers it until now");
                failed.push(why);
                false
            }
        });
        self.outcome.failed.len() > before
    }

    pub fn prune(&mut self, cpu: u32, horizon: u64) {
        self.each().for_each(|s| s.prune(cpu, horizon));
    }

    pub fn on_threshold(&mut self, cpu: u32, ns: u64) {
        self.list.iter_mut().for_each(|s| s.on_threshold(cpu, ns));
    }

    pub fn wants_counters(&self, now: u64) -> bool {
        self.list.iter().any(|s| s.wants_counters(now))
    }

    /// The counters to every sink, then into the aggregates (which keep
    /// them since their last reset).
    pub fn on_counters(&mut self, raw: Counters, now: u64, last: bool) {
        self.list.iter_mut().for_each(|s| s.on_counters(&raw, now, last));
        self.stats.update_counters(raw, now);
    }

    /// Finishes every sink in order: the aggregates, and the outcome
    /// they completed. A sink that fails to finish (its file cannot be
    /// written) is said and kept in the outcome, as in `on_hiccup`: the
    /// others finish, and the summary is still drawn.
    pub fn finish(self, end: u64, namer: &mut Namer) -> (Stats, Outcome) {
        let mut outcome = self.outcome;
        for s in self.list {
            let what = s.what();
            if let Err(e) = s.finish(end, namer, &mut outcome) {
                let why = format!("writing {what}: {e:#}");
                crate::say::say!("{why}");
                outcome.failed.push(why);
            }
        }
        (self.stats, outcome)
    }
}

#[cfg(test)]
mod tests;
