//! One drain of the collector, free of BPF and threads so it is tested on
//! scripted sources: the intervals reported so far go to the engine, then a
//! bounded batch of kernel events, then every interval the events have
//! passed is explained and handed to the aggregates and the sinks.

use std::io;

use anyhow::{Context as _, Result};

use crate::engine::Engine;
use crate::interval::{Hiccup, Interval};
use crate::passive::Tracker;
use crate::record::Event;
use crate::stats::Stats;

/// Records read per drain at most, so a producer faster than the reader
/// cannot keep it in one drain for ever; and a quarter of a timeline's
/// window, so an interval reported while a drain runs is still in the
/// window at the next one.
pub const MAX_PER_DRAIN: usize = 1 << 14;
/// Records reserved before a drain but not yet committed hold it back for
/// at most a few µs; an interval is attributed once the drain is this far
/// past it.
pub const MARGIN_NS: u64 = 1_000_000;

/// Where kernel events come from: the BPF ring buffer, or a script.
pub trait EventSource {
    /// Appends up to `max` events to `out` (empty on entry); returns how
    /// many records were read, decodable or not.
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize>;
    /// Appends each CPU's count of events the source dropped so far
    /// (`cpu`, total); returns when the counts were read (CLOCK_MONOTONIC
    /// ns). Called after a read that emptied the source.
    fn drop_totals(&mut self, out: &mut Vec<(u32, u64)>) -> Result<u64>;
}

/// Where intervals come from (the probes): what they reported since the
/// last call, and how far each CPU's source has got.
pub trait IntervalSource {
    fn take(&self, out: &mut dyn FnMut(Interval));
    /// For each CPU: no interval reported later starts before this (every
    /// interval that does was reported before the horizon was published).
    fn horizons(&self, out: &mut dyn FnMut(u32, u64));
}

/// A consumer of explained intervals (the CSV; later traces, metrics).
pub trait HiccupSink: Send {
    fn write(&mut self, h: &Hiccup) -> io::Result<()>;
    /// Called after every drain: rows written so far reach the file whole.
    fn flush(&mut self) -> io::Result<()>;
    /// What it is, for error messages ("writing the CSV").
    fn what(&self) -> &'static str;
}

/// What one drain saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    pub records: usize,
    /// Timestamp of the oldest event read (for the consumer's lag).
    pub oldest_ts: Option<u64>,
}

pub struct Drain {
    pub engine: Engine,
    pub stats: Stats,
    sinks: Vec<Box<dyn HiccupSink>>,
    batch: Vec<Event>,
    drops: Vec<(u32, u64)>,
    /// The sources' horizons, read before their intervals are taken.
    horizons: Vec<(u32, u64)>,
    /// Every event stamped before this has been read.
    watermark: u64,
    pub events: u64,
    /// Passive mode: intervals derived from the events themselves.
    tracker: Option<Tracker>,
    /// The Prometheus endpoint's counters, fed every explained stall.
    pub metrics: Option<crate::metrics::Exporter>,
    /// The flight recorder (--trace-dir) and the whole-run recording
    /// (--record): fed every event and every explained stall.
    pub recorder: Option<crate::trace::FlightRecorder>,
    pub whole: Option<crate::trace::Whole>,
    /// --stop-above: the first stall at or over it is `stats.stopped_on`.
    pub stop_above: Option<u64>,
}

impl Drain {
    pub fn new(engine: Engine, stats: Stats, sinks: Vec<Box<dyn HiccupSink>>, start: u64, tracker: Option<Tracker>) -> Self {
        Drain {
            engine,
            stats,
            sinks,
            batch: Vec::with_capacity(MAX_PER_DRAIN),
            drops: Vec::new(),
            horizons: Vec::new(),
            watermark: start,
            events: 0,
            tracker,
            metrics: None,
            recorder: None,
            whole: None,
            stop_above: None,
        }
    }

    /// Passive mode: threads already running when tracing began.
    pub fn seed(&mut self, seeds: &[crate::passive::Seed], at: u64) {
        if let Some(t) = &mut self.tracker {
            t.seed(seeds, at);
        }
    }

    /// Passive mode: the watched threads as known at `now`, into the stats.
    pub fn update_threads(&mut self, now: u64) {
        if let Some(t) = &self.tracker {
            self.stats.set_threads(t.threads().map(|i| {
                let mut i = i.clone();
                i.runnable_ns = t.runnable_until(i.tid, now);
                i
            }));
            self.stats.threads_elsewhere = t.seen_elsewhere.clone();
        }
    }

    /// One drain, begun at `now`. `last`: the sources have stopped and
    /// every record is in the buffer; read it all and explain everything.
    pub fn step(&mut self, events: &mut dyn EventSource, intervals: &dyn IntervalSource, now: u64, last: bool) -> Result<Drained> {
        // Horizons before intervals: a source's horizon is published after
        // every interval that starts before it has been reported, so all of
        // those are in the take below. Read after, a gap reported in
        // between would be pruned away before it is explained.
        self.horizons.clear();
        let hz = &mut self.horizons;
        intervals.horizons(&mut |cpu, t| hz.push((cpu, t)));
        // Intervals next: the engine then explains each as soon as its
        // CPU's events pass it (Engine::on_event).
        intervals.take(&mut |iv| self.engine.on_interval(iv));
        let mut records = 0;
        let mut oldest = u64::MAX;
        loop {
            self.batch.clear();
            let n = events.read(MAX_PER_DRAIN, &mut self.batch).context("reading the ring buffer")?;
            records += n;
            for ev in &self.batch {
                oldest = oldest.min(ev.ts);
                if let Some(t) = self.tracker.as_mut() {
                    let engine = &mut self.engine;
                    t.on_event(ev, &mut |iv| engine.on_interval(iv));
                }
                self.engine.on_event(ev);
                if let Some(r) = self.recorder.as_mut() {
                    r.on_event(ev);
                }
                if let Some(w) = self.whole.as_mut() {
                    w.on_event(ev);
                }
            }
            self.events += self.batch.len() as u64;
            // The last drain empties the buffer; the others take one batch.
            if !last || n < MAX_PER_DRAIN {
                break;
            }
        }
        // A capped drain may have left older records behind: only an
        // emptied buffer moves the watermark.
        let emptied = last || records < MAX_PER_DRAIN;
        if emptied {
            self.watermark = if last { now } else { now.saturating_sub(MARGIN_NS) };
            // Drops after a CPU's last record are in no record yet: the
            // kernel's totals say so before anything is attributed.
            self.drops.clear();
            let at = events.drop_totals(&mut self.drops).context("reading the drop counters")?;
            for &(cpu, total) in &self.drops {
                self.engine.on_drop_total(cpu, total, at);
            }
        }
        if let Some(t) = self.tracker.as_mut() {
            let engine = &mut self.engine;
            t.flush(self.watermark, &mut |iv| engine.on_interval(iv));
        }
        if last {
            self.engine.finish();
        }
        let (stats, sinks, metrics) = (&mut self.stats, &mut self.sinks, &mut self.metrics);
        let (recorder, whole, stop_above) = (&mut self.recorder, &mut self.whole, self.stop_above);
        let mut failed: Option<(&'static str, io::Error)> = None;
        self.engine.attribute_ready(self.watermark, |h| {
            let stops = stop_above.is_some_and(|s| h.gap >= s) && stats.stopped_on.is_none();
            if stops {
                let limit_ns = stop_above.unwrap_or(0);
                stats.stopped_on = Some(crate::stats::StopStall { cpu: h.cpu, time_ns: h.t0, gap_ns: h.gap, limit_ns });
            }
            if let Some(r) = recorder.as_mut() {
                r.on_hiccup(&h, stops);
            }
            if let Some(w) = whole.as_mut() {
                w.on_hiccup(&h);
            }
            stats.record(&h);
            if let Some(m) = metrics.as_mut() {
                m.record(&h);
            }
            for s in sinks.iter_mut() {
                if failed.is_none() {
                    if let Err(e) = s.write(&h) {
                        failed = Some((s.what(), e));
                    }
                }
            }
        });
        for s in self.sinks.iter_mut() {
            if failed.is_none() {
                if let Err(e) = s.flush() {
                    failed = Some((s.what(), e));
                }
            }
        }
        if let Some((what, e)) = failed {
            return Err(e).with_context(|| format!("writing {what}"));
        }
        if let Some(r) = self.recorder.as_mut() {
            r.flush(self.watermark, last, &mut self.engine.namer);
        }
        let watermark = self.watermark;
        for &(cpu, t) in &self.horizons {
            self.engine.prune(cpu, t.min(watermark));
            if let Some(r) = self.recorder.as_mut() {
                r.prune(cpu, t.min(watermark));
            }
        }
        if let Some(t) = &self.tracker {
            // A thread preempted long ago still needs the history since then.
            let (engine, recorder) = (&mut self.engine, &mut self.recorder);
            t.horizons(watermark, &mut |cpu, h| {
                engine.prune(cpu, h);
                if let Some(r) = recorder.as_mut() {
                    r.prune(cpu, h);
                }
            });
        }
        Ok(Drained { records, oldest_ts: (oldest != u64::MAX).then_some(oldest) })
    }
}

#[cfg(test)]
mod tests;
