//! One drain of the collector, free of BPF and threads so it is tested on
//! scripted sources: the intervals reported so far go to the engine, then a
//! bounded batch of kernel events, then every interval the events have
//! passed is explained and handed to the sinks (the aggregates among
//! them), which the drain knows only as one list.

use anyhow::{Context as _, Result};

use crate::engine::Engine;
use crate::interval::Hiccup;
use crate::record::Event;
use crate::sink::Sinks;
use crate::source::Intervals;

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
    /// (`cpu`, total; its low 32 bits are what the engine compares, as the
    /// records carry them); returns when the counts were read
    /// (CLOCK_MONOTONIC ns). Called after a read that emptied the source,
    /// so at every drain: it must cost no system call.
    fn drop_totals(&mut self, out: &mut Vec<(u32, u64)>) -> Result<u64>;
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
    /// The aggregates and every other output (sink/).
    pub sinks: Sinks,
    batch: Vec<Event>,
    drops: Vec<(u32, u64)>,
    /// The source's horizons, read before its intervals are taken.
    horizons: Vec<(u32, u64)>,
    /// Every event stamped before this has been read.
    watermark: u64,
    pub events: u64,
}

impl Drain {
    pub fn new(engine: Engine, sinks: Sinks, start: u64) -> Self {
        Drain {
            engine,
            sinks,
            batch: Vec::with_capacity(MAX_PER_DRAIN),
            drops: Vec::new(),
            horizons: Vec::new(),
            watermark: start,
            events: 0,
        }
    }

    /// One drain, begun at `now`. `last`: the sources have stopped and
    /// every record is in the buffer; read it all and explain everything.
    pub fn step(&mut self, events: &mut dyn EventSource, source: &mut dyn Intervals, now: u64, last: bool) -> Result<Drained> {
        // Horizons before intervals: a source's horizon is published after
        // every interval that starts before it has been reported, so all of
        // those are in the take below. Read after, a gap reported in
        // between would be pruned away before it is explained. Up to the
        // last watermark: the events after it are not read yet.
        self.horizons.clear();
        let hz = &mut self.horizons;
        source.horizons(self.watermark, &mut |cpu, t| hz.push((cpu, t)));
        // Intervals next: the engine then explains each as soon as its
        // CPU's events pass it (Engine::on_event).
        source.take(&mut |iv| self.engine.on_interval(iv));
        let mut records = 0;
        let mut oldest = u64::MAX;
        loop {
            self.batch.clear();
            let n = events.read(MAX_PER_DRAIN, &mut self.batch).context("reading the ring buffer")?;
            records += n;
            for ev in &self.batch {
                oldest = oldest.min(ev.ts);
                let engine = &mut self.engine;
                source.on_event(ev, &mut |iv| engine.on_interval(iv));
                self.engine.on_event(ev);
                self.sinks.on_event(ev);
                // A stall explained as its CPU's events passed it goes to
                // the sinks at once, while it is in cache.
                if self.engine.has_done() {
                    let engine = &mut self.engine;
                    to_sinks(&mut self.sinks, |show| engine.hand_out_done(show));
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
        let engine = &mut self.engine;
        source.flush(self.watermark, &mut |iv| engine.on_interval(iv));
        if last {
            self.engine.finish();
        }
        let (engine, watermark) = (&mut self.engine, self.watermark);
        to_sinks(&mut self.sinks, |show| engine.attribute_ready(watermark, show));
        self.sinks.after_drain(self.watermark, last, &mut self.engine.namer);
        let watermark = self.watermark;
        for &(cpu, t) in &self.horizons {
            self.engine.prune(cpu, t.min(watermark));
            self.sinks.prune(cpu, t.min(watermark));
        }
        Ok(Drained { records, oldest_ts: (oldest != u64::MAX).then_some(oldest) })
    }
}

/// Every stall `hand` shows, to every sink (one that fails is dropped by
/// `Sinks` and kept in the outcome).
fn to_sinks(sinks: &mut Sinks, hand: impl FnOnce(&mut dyn FnMut(&Hiccup))) {
    hand(&mut |h| {
        sinks.on_hiccup(h);
    });
}

#[cfg(test)]
mod tests;
