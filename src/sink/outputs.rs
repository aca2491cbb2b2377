//! The sinks a run can have, each a thin seam over the module that does
//! the work, and the one place they are listed ([`Outputs::into_list`]).

use std::io;

use anyhow::Result;

use super::Sink;
use crate::engine::Namer;
use crate::export::{CsvSink, Rows};
use crate::interval::Hiccup;
use crate::metrics::{Exporter, Slot};
use crate::outcome::Outcome;
use crate::record::Event;
use crate::stats::{Counters, Stats};
use crate::trace::{FlightRecorder, Whole};

/// How often the Prometheus endpoint's figures are published.
const PUBLISH_NS: u64 = 1_000_000_000;

/// The outputs a run asked for besides the aggregates, opened before
/// anything spins (a path that cannot be written fails the run there).
#[derive(Default)]
pub struct Outputs {
    pub csv: Option<CsvSink<Rows>>,
    pub metrics: Option<Metrics>,
    pub recorder: Option<FlightRecorder>,
    pub whole: Option<Whole>,
    pub on_stall: Option<OnStall>,
}

impl Outputs {
    /// With the Prometheus counters, once their CPUs are known.
    pub fn with_metrics(self, metrics: Option<Metrics>) -> Self {
        Outputs { metrics, ..self }
    }

    /// Every output as a sink, in the order they see each stall.
    pub fn into_list(self) -> Vec<Box<dyn Sink>> {
        let Outputs { csv, metrics, recorder, whole, on_stall } = self;
        let mut list: Vec<Box<dyn Sink>> = Vec::new();
        list.extend(metrics.map(|m| Box::new(m) as Box<dyn Sink>));
        list.extend(recorder.map(|r| Box::new(r) as Box<dyn Sink>));
        list.extend(whole.map(|w| Box::new(w) as Box<dyn Sink>));
        list.extend(csv.map(|c| Box::new(c) as Box<dyn Sink>));
        list.extend(on_stall.map(|c| Box::new(c) as Box<dyn Sink>));
        list
    }
}

/// The aggregates: the screen's, the summary's, replay's count.
impl Sink for Stats {
    fn what(&self) -> &'static str {
        "the aggregates"
    }

    fn on_hiccup(&mut self, h: &Hiccup, _: Option<u64>) -> io::Result<()> {
        self.record(h);
        Ok(())
    }
}

/// --csv: a row per stall, the rows of a drain written at its end.
impl Sink for CsvSink<Rows> {
    fn what(&self) -> &'static str {
        "the CSV"
    }

    fn on_hiccup(&mut self, h: &Hiccup, _: Option<u64>) -> io::Result<()> {
        self.write(h)
    }

    fn after_drain(&mut self, _: u64, _: bool, _: &mut Namer) -> io::Result<()> {
        self.flush()
    }
}

/// --prometheus: counters folded from every stall, published once a second.
pub struct Metrics {
    exporter: Exporter,
    next_publish: u64,
}

impl Metrics {
    /// `top`: series of their own per CPU; `mode`: the run's, as a label.
    pub fn new(cpus: &[usize], top: usize, mode: &'static str, slot: Slot) -> Self {
        Metrics { exporter: Exporter::new(cpus, top, mode, slot, 0), next_publish: 0 }
    }
}

impl Sink for Metrics {
    fn what(&self) -> &'static str {
        "the Prometheus counters"
    }

    fn start(&mut self, at: u64) {
        self.exporter.start(at);
        self.next_publish = at;
    }

    fn on_hiccup(&mut self, h: &Hiccup, _: Option<u64>) -> io::Result<()> {
        self.exporter.record(h);
        Ok(())
    }

    fn wants_counters(&self, now: u64) -> bool {
        now >= self.next_publish
    }

    fn on_counters(&mut self, raw: &Counters, now: u64, last: bool) {
        if now >= self.next_publish || last {
            self.next_publish = now + PUBLISH_NS;
            self.exporter.publish(raw, now);
        }
    }
}

/// --trace-dir: the events around each large stall, traced.
impl Sink for FlightRecorder {
    fn what(&self) -> &'static str {
        "the flight recorder"
    }

    fn on_event(&mut self, ev: &Event) {
        FlightRecorder::on_event(self, ev);
    }

    fn on_hiccup(&mut self, h: &Hiccup, stop: Option<u64>) -> io::Result<()> {
        // The stall that stops the run is traced whatever the budget.
        FlightRecorder::on_hiccup(self, h, stop.is_some());
        Ok(())
    }

    fn after_drain(&mut self, watermark: u64, last: bool, namer: &mut Namer) -> io::Result<()> {
        self.flush(watermark, last, namer);
        Ok(())
    }

    fn prune(&mut self, cpu: u32, horizon: u64) {
        FlightRecorder::prune(self, cpu, horizon);
    }

    fn on_threshold(&mut self, cpu: u32, ns: u64) {
        self.set_threshold(cpu, ns);
    }

    fn finish(self: Box<Self>, _: u64, _: &mut Namer, outcome: &mut Outcome) -> Result<()> {
        outcome.traces = Some(FlightRecorder::finish(*self));
        Ok(())
    }
}

/// --record: every event and stall of the run, one trace at its end.
impl Sink for Whole {
    fn what(&self) -> &'static str {
        "the recording"
    }

    fn start(&mut self, at: u64) {
        self.start_at(at);
    }

    fn on_event(&mut self, ev: &Event) {
        Whole::on_event(self, ev);
    }

    fn on_hiccup(&mut self, h: &Hiccup, _: Option<u64>) -> io::Result<()> {
        Whole::on_hiccup(self, h);
        Ok(())
    }

    fn finish(self: Box<Self>, end: u64, namer: &mut Namer, outcome: &mut Outcome) -> Result<()> {
        outcome.recorded = Some(Whole::finish(*self, end, namer)?);
        Ok(())
    }
}

/// --on-stall: the stalls that meet its rule handed to the command's
/// thread without waiting (on_stall.rs).
pub struct OnStall {
    runner: crate::on_stall::Runner,
    gate: crate::on_stall::Gate,
    start_ns: u64,
}

impl OnStall {
    pub fn new(runner: crate::on_stall::Runner, bound_ns: Option<u64>) -> Self {
        OnStall { runner, gate: crate::on_stall::Gate::new(bound_ns), start_ns: 0 }
    }
}

impl Sink for OnStall {
    fn what(&self) -> &'static str {
        "--on-stall"
    }

    fn start(&mut self, at: u64) {
        self.start_ns = at;
    }

    fn on_hiccup(&mut self, h: &Hiccup, _: Option<u64>) -> io::Result<()> {
        if !h.source.is_stall() {
            return Ok(());
        }
        // The stall's own time is the rate limit's clock: no clock read here.
        if let Some(skipped) = self.gate.admit(h.gap, h.t0, self.runner.idle()) {
            let f = crate::on_stall::Fields::of(h, self.start_ns, skipped, self.gate.bound_ns);
            if !self.runner.hand(f) {
                self.gate.refused(skipped);
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _: u64, _: &mut Namer, _: &mut Outcome) -> Result<()> {
        self.runner.finish();
        Ok(())
    }
}
