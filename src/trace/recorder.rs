//! The flight recorder (`--trace-dir`): each watched CPU's recent events
//! kept in memory; a stall at or above `--trace-above` becomes a trace of
//! `--trace-keep` before it and `AFTER_NS` after it, built once the drain
//! has passed its end and written by a thread of its own (the collector
//! never waits on a file). At most `--trace-max` a minute; the rest are
//! counted. Free of BPF: the drain feeds it events and explained stalls.

use std::collections::VecDeque;
use std::path::PathBuf;

use anyhow::Result;

use crate::engine::Namer;
use crate::interval::Hiccup;
use crate::record::Event;
use crate::slots::CpuSlots;

use super::build::Mark;
use super::ring::Ring;
use super::writer::{Format, Job, Window, Writer};
use super::Totals;

/// How long after a stall its trace goes on: what the CPU did next.
pub const AFTER_NS: u64 = 5_000_000;
/// The memory each CPU's events may take at most, whatever `--trace-keep`.
pub const CAP_BYTES_PER_CPU: usize = 32 << 20;
/// `--trace-above` unless given: this many times the CPU's threshold.
pub const ABOVE_THRESHOLDS: u64 = 10;
/// Stalls kept per CPU to draw beside the one a trace is about.
const MARKS: usize = 1024;
const MINUTE_NS: u64 = 60_000_000_000;

#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub keep_ns: u64,
    /// None: `ABOVE_THRESHOLDS` × each CPU's threshold.
    pub above_ns: Option<u64>,
    pub max_per_minute: u32,
    pub format: Format,
    pub method: crate::interval::Method,
    /// Say a write failure as it happens (false under the live screen).
    pub announce: bool,
}

/// Events a CPU's ring holds at most.
pub fn cap_events() -> usize {
    super::ring::events_within(CAP_BYTES_PER_CPU)
}

struct Pending {
    slot: usize,
    from: u64,
    to: u64,
    hiccup: Hiccup,
}

pub struct FlightRecorder {
    opts: Options,
    cpus: Vec<u32>,
    slots: CpuSlots,
    rings: Vec<Ring>,
    marks: Vec<VecDeque<Mark>>,
    /// Each CPU's threshold as its source chose it (0: not yet), for the
    /// default `--trace-above`.
    thresholds: Vec<u64>,
    pending: Vec<Pending>,
    /// When the traces of the last minute were taken (their stalls' times).
    taken: VecDeque<u64>,
    totals: Totals,
    writer: Writer,
}

impl FlightRecorder {
    /// Creates the directory (one clear error if it cannot be written) and
    /// starts the writer thread.
    pub fn new(opts: Options, cpus: &[usize]) -> Result<Self> {
        let writer = Writer::start(&opts.dir, opts.format, opts.announce)?;
        let cap = cap_events();
        Ok(FlightRecorder {
            cpus: cpus.iter().map(|&c| c as u32).collect(),
            slots: CpuSlots::new(cpus),
            rings: cpus.iter().map(|_| Ring::new(cap)).collect(),
            marks: cpus.iter().map(|_| VecDeque::with_capacity(MARKS)).collect(),
            thresholds: vec![0; cpus.len()],
            pending: Vec::new(),
            taken: VecDeque::new(),
            totals: Totals { cap_bytes: (cap * std::mem::size_of::<Event>()) as u64, ..Totals::default() },
            writer,
            opts,
        })
    }

    fn slot(&self, cpu: u32) -> Option<usize> {
        self.slots.get(cpu)
    }

    /// `cpu`'s threshold, as its source chose it.
    pub fn set_threshold(&mut self, cpu: u32, ns: u64) {
        if let Some(i) = self.slot(cpu) {
            self.thresholds[i] = ns;
        }
    }

    pub fn on_event(&mut self, ev: &Event) {
        if let Some(i) = self.slot(ev.cpu) {
            self.rings[i].push(ev);
        }
    }

    /// An explained stall: kept to draw, and traced if large enough and
    /// the minute's budget allows (`force`: the stall that stops the run).
    pub fn on_hiccup(&mut self, h: &Hiccup, force: bool) {
        let Some(i) = self.slot(h.cpu) else { return };
        let m = &mut self.marks[i];
        if m.len() == MARKS {
            m.pop_front();
        }
        m.push_back(Mark { t0: h.t0, t1: h.t0 + h.gap });
        let above = self.opts.above_ns.unwrap_or(ABOVE_THRESHOLDS * self.thresholds[i]);
        if !force && (above == 0 || h.gap < above) {
            return;
        }
        self.totals.triggered += 1;
        while self.taken.front().is_some_and(|&t| t + MINUTE_NS <= h.t0) {
            self.taken.pop_front();
        }
        if !force && self.taken.len() >= self.opts.max_per_minute as usize {
            self.totals.skipped_rate += 1;
            return;
        }
        self.taken.push_back(h.t0);
        let from = h.t0.saturating_sub(self.opts.keep_ns);
        self.pending.push(Pending { slot: i, from, to: h.t0 + h.gap + AFTER_NS, hiccup: h.clone() });
    }

    /// Hands the traces whose windows the drain has passed (all of them at
    /// the last drain, cut at `watermark`) to the writer, which builds them.
    pub fn flush(&mut self, watermark: u64, last: bool, namer: &mut Namer) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].to > watermark && !last {
                i += 1;
                continue;
            }
            let p = self.pending.swap_remove(i);
            let to = p.to.min(watermark.max(p.hiccup.t0 + p.hiccup.gap));
            let ring = &self.rings[p.slot];
            if ring.cut_before >= p.from {
                self.totals.cut += 1;
            }
            // A copy of the window (one allocation per trace, not per
            // event); the writer thread builds and writes it.
            let mut events = Vec::new();
            ring.window(p.from, to, &mut events);
            let cpu = self.cpus[p.slot];
            let name = super::writer::file_name(cpu, p.hiccup.t0, p.hiccup.gap, self.opts.format);
            let window = Window {
                cpu,
                from: p.from,
                to,
                method: self.opts.method,
                events,
                marks: self.marks[p.slot].iter().copied().collect(),
                hiccup: p.hiccup,
            };
            if !self.writer.send(Job::Window { window: Box::new(window), namer: namer.fork(), name }) {
                self.totals.skipped_busy += 1;
            }
        }
        let held = self.rings.iter().map(Ring::reserved_bytes).max().unwrap_or(0);
        self.totals.peak_bytes = self.totals.peak_bytes.max(held as u64);
    }

    /// Drops what no trace can need: events `--trace-keep` before what
    /// `cpu` may still report (`horizon`), and never those of a trace
    /// waiting for its end.
    pub fn prune(&mut self, cpu: u32, horizon: u64) {
        let Some(i) = self.slot(cpu) else { return };
        let mut before = horizon.saturating_sub(self.opts.keep_ns);
        for p in self.pending.iter().filter(|p| p.slot == i) {
            before = before.min(p.from);
        }
        self.rings[i].prune(before);
    }

    /// Waits for the writer to finish the traces handed to it.
    pub fn finish(self) -> Totals {
        let mut t = self.totals;
        t.evicted = self.rings.iter().map(|r| r.evicted).sum();
        let w = self.writer.finish();
        t.written = w.written;
        t.failed = w.failed;
        t.largest_bytes = w.largest_bytes;
        t.first_error = w.first_error;
        t.dir = Some(self.opts.dir.display().to_string());
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::{namer, read, stall, stream, CPU};

    fn recorder(dir: &std::path::Path, max_per_minute: u32) -> FlightRecorder {
        let opts = Options {
            dir: dir.to_path_buf(),
            keep_ns: 1_000_000,
            above_ns: Some(1_000_000),
            max_per_minute,
            format: Format::Perfetto,
            method: crate::interval::Method::Spin,
            announce: false,
        };
        FlightRecorder::new(opts, &[CPU as usize]).unwrap()
    }

    #[test]
    fn a_large_stall_is_written_once_its_window_has_passed() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = recorder(dir.path(), 10);
        let mut n = namer();
        for e in stream() {
            r.on_event(&e);
        }
        let h = stall();
        r.on_hiccup(&h, false);
        r.flush(h.t0 + h.gap, false, &mut n);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "waits for what follows the stall");
        r.prune(CPU, h.t0 + h.gap + AFTER_NS);
        r.flush(h.t0 + h.gap + AFTER_NS, false, &mut n);
        let t = r.finish();
        assert_eq!((t.triggered, t.written, t.skipped_rate), (1, 1, 0));
        let file = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with("-cpu1-2000us.perfetto-trace"), "{name}");
        let (slices, _, _) = read(&std::fs::read(&file).unwrap());
        let s = slices.iter().find(|s| s.name == "stall 2.0ms").expect("the stall");
        let hog = slices.iter().find(|s| s.name == "hog[4242]").expect("the hog's slice");
        assert!(hog.start <= s.start && s.end <= hog.end + 10_000, "the hog over the stall");
        assert!(slices.iter().all(|s| s.end <= h.t0 + h.gap + AFTER_NS), "ends {AFTER_NS} ns after the stall");
        assert!(t.peak_bytes > 0 && t.peak_bytes <= t.cap_bytes);
    }

    #[test]
    fn at_most_max_a_minute_the_rest_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = recorder(dir.path(), 2);
        let mut n = namer();
        for i in 0..5u64 {
            let mut h = stall();
            h.t0 = 1_000_000_000 * (i + 1);
            r.on_hiccup(&h, false);
        }
        // A minute after the first, the budget is back.
        let mut late = stall();
        late.t0 = 61_000_000_001;
        r.on_hiccup(&late, false);
        // Small stalls are no trigger; the stall that stops the run always is.
        let mut small = stall();
        small.gap = 999_999;
        r.on_hiccup(&small, false);
        r.on_hiccup(&small, true);
        r.flush(u64::MAX, true, &mut n);
        let t = r.finish();
        assert_eq!((t.triggered, t.written, t.skipped_rate), (7, 4, 3));
    }

    #[test]
    fn by_default_ten_times_the_threshold_as_its_source_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = recorder(dir.path(), 10);
        r.opts.above_ns = None;
        let mut small = stall();
        small.gap = 999_999;
        r.on_hiccup(&stall(), false);
        assert_eq!(r.totals.triggered, 0, "no threshold known yet: nothing traced");
        r.set_threshold(CPU, 100_000);
        r.on_hiccup(&small, false);
        r.on_hiccup(&stall(), false);
        assert_eq!(r.totals.triggered, 1, "2 ms is over 10 × 100 µs, 0.99 ms is not");
    }

    #[test]
    fn the_cap_in_events_is_a_power_of_two_within_the_bytes() {
        let n = cap_events();
        assert!(n.is_power_of_two());
        assert!(n * std::mem::size_of::<Event>() <= CAP_BYTES_PER_CPU && 2 * n * std::mem::size_of::<Event>() > CAP_BYTES_PER_CPU);
    }
}
