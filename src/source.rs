//! What a watch run measures, as the collector drives it: one lifecycle
//! for the spin probe, the wake-up probe and passive mode (`sources/`
//! implements it for each; `Mode` builds one), after rtla's `tool_ops`.
//!
//! In order: `programs` (what to load), `attach` (tracing is on: what the
//! engine must know, what to read now), `start` (measure), `started`
//! (polled until it says how it started, or that it cannot), then each
//! drain: `horizons`, `take`, `on_event` per kernel event, `flush` to the
//! watermark; `threshold` and `counters` per CPU, `report` at the
//! screen's rate; `stop` (bounded, and on every way out) and what it says
//! of how the run ended. The collector thread owns the source; nothing
//! else reaches into it.

use anyhow::Result;

use crate::bpf::Programs;
use crate::engine::Engine;
use crate::interval::Interval;
use crate::record::Event;
use crate::stats::{CpuCounters, Stats};

/// The part of a source the drain reads: its intervals, and how far each
/// CPU's have got.
pub trait Intervals {
    /// For each CPU: no interval still to come starts before this. `upto`:
    /// every event before it has been read (the drain prunes no later).
    fn horizons(&self, upto: u64, out: &mut dyn FnMut(u32, u64));
    /// The intervals it reported since the last call.
    fn take(&mut self, _out: &mut dyn FnMut(Interval)) {}
    /// Every kernel event, as the drain reads it: the intervals it ends.
    fn on_event(&mut self, _ev: &Event, _out: &mut dyn FnMut(Interval)) {}
    /// Every event before `upto` has been read: the intervals nothing
    /// later can continue.
    fn flush(&mut self, _upto: u64, _out: &mut dyn FnMut(Interval)) {}
}

/// How a source started, for the start-up lines and the screen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Started {
    /// Said in any case (what it found, what it cannot see).
    pub notices: Vec<String>,
    /// Said when no screen shows: the rule each CPU is measured by.
    pub lines: Vec<String>,
    /// The watched threads found at start: (tid, `comm[tid]`), escaped.
    pub found: Vec<(u32, String)>,
    /// Each CPU's threshold as chosen.
    pub thresholds: Vec<(u32, u64)>,
    /// One threshold for every CPU by rule (passive mode's), not each
    /// CPU's own.
    pub shared_threshold: Option<u64>,
}

/// How a source ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ended {
    /// For the summary (said as they happened).
    pub notes: Vec<String>,
    /// Why the run fails though it measured until here (a CPU went
    /// offline under a probe), said last.
    pub failure: Option<String>,
}

pub trait Source: Intervals + Send {
    /// The BPF programs it needs besides those every run loads.
    fn programs(&self) -> Programs;
    /// Tracing is on since `at`: what the engine must know of the CPUs,
    /// and what is read now (before any event is).
    fn attach(&mut self, at: u64, engine: &mut Engine);
    /// Measure from now on.
    fn start(&mut self);
    /// Polled after `start` until it is Some: how it started, or why it
    /// cannot measure (one line; the run ends).
    fn started(&mut self) -> Option<Result<Started>>;
    /// When its measuring began: elapsed time counts from it.
    fn start_ns(&self) -> Option<u64>;
    /// The threshold it reports intervals by on `cpu` (0: not chosen yet).
    fn threshold(&self, cpu: u32) -> u64;
    /// Its part of `cpu`'s counters (the collector has filled in the
    /// kernel's: drops, the steal clock), since the start.
    fn counters(&self, c: &mut CpuCounters, stats: &Stats);
    /// What it knows at `now` besides intervals, into the aggregates.
    fn report(&self, _now: u64, _stats: &mut Stats) {}
    /// Asked to stop, without waiting: the collector drains the ring
    /// until `stopped` says so, then calls `stop`. A probe starved on its
    /// CPU takes up to half its bound to see it; a storm there meanwhile
    /// filled the ring (25,000 events dropped at the end of 1 run in 5).
    fn stopping(&mut self) {}
    /// After `stopping`: whether `stop` would return at once.
    fn stopped(&mut self) -> bool {
        true
    }
    /// Stops measuring, within a bound; what the summary says of the end.
    fn stop(&mut self) -> Ended;
}
