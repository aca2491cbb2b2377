//! One run of the collector: commands in, a drain, the counters and a
//! snapshot when due, until told to stop. The loop reads in one screen;
//! what it carries from one pass to the next is `Run`'s, each flag named.

use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread;
use std::time::Duration;

use anyhow::Result;

use crate::bpf::Tracer;
use crate::clock::now_ns;
use crate::engine::{Engine, Namer, Stacks};
use crate::sink::Sinks;
use crate::snapshot::Snapshot;
use crate::source::{Ended, Source};
use crate::stats::Stats;

use super::own::Own;
use super::ring::Ring;
use super::{Command, Config, Drain, Finished, Ready, MARGIN_NS, POLL, POLL_QUIET, QUIET_RECORDS, SNAPSHOT_NS, WINDOW};

/// What the collector carries from one pass of its loop to the next.
struct Run<'t, 'o> {
    tracer: &'t Tracer<'o>,
    cpus: Vec<usize>,
    /// Where snapshots go, when a screen shows them.
    snapshots: Option<SyncSender<Snapshot>>,
    bpf_stats: bool,
    ring: Ring<'t>,
    drain: Drain,
    own: Own,
    /// The source has said when its measuring began.
    started: bool,
    /// Asked to start (Command::Start); it has not said how yet.
    starting: bool,
    /// Each CPU's threshold as last passed to the sinks.
    thresholds: Vec<u64>,
    /// How the source ended, once stopped.
    ended: Option<Ended>,
    /// The run asked itself to stop (--stop-above, a failed output).
    stop_asked: bool,
    next_snapshot: u64,
}

pub(super) fn collect(
    tracer: &Tracer<'_>,
    cfg: Config,
    source: &mut dyn Source,
    namer: Namer,
    rx: &Receiver<Command>,
    ready: &mpsc::Sender<Ready>,
) -> Result<Finished> {
    let mut run = Run::new(tracer, cfg, source, namer)?;
    loop {
        let mut last = run.commands(rx, source);
        last |= run.source_started(source, ready);
        if last {
            run.stop_source(source)?;
        }
        run.pass_thresholds(source);
        let records = run.drain_once(source, last)?;
        run.report_if_due(source, last);
        if last {
            return Ok(run.finish());
        }
        thread::sleep(if records < QUIET_RECORDS { POLL_QUIET } else { POLL });
    }
}

impl<'t, 'o> Run<'t, 'o> {
    /// The engine and the sinks set up, the source attached to the engine.
    fn new(tracer: &'t Tracer<'o>, mut cfg: Config, source: &mut dyn Source, namer: Namer) -> Result<Self> {
        let attach_ns = now_ns();
        let mut engine = Engine::new(&cfg.cpus, attach_ns, WINDOW, namer);
        engine.set_own_tgid(cfg.own_tgid);
        engine.set_dispatch_ns(tracer.dispatch.map_or(0, |d| d.ns), tracer.dispatch.map_or(0, |d| d.warm_ns));
        if cfg.stacks_above > 0 {
            let map = tracer.stacks()?;
            engine.set_stacks(Stacks::new(cfg.stacks_above, Box::new(move |id| map.take(id))));
        }
        source.attach(attach_ns, &mut engine);
        let ring = Ring::open(tracer)?;
        let mut sinks = Sinks::new(Stats::new(&cfg.cpus, attach_ns).measuring(cfg.method), std::mem::take(&mut cfg.sinks), cfg.stop_above)
            .failing_above(cfg.fail_above);
        sinks.start(attach_ns);
        Ok(Run {
            tracer,
            thresholds: vec![0; cfg.cpus.len()],
            cpus: cfg.cpus,
            snapshots: cfg.snapshots,
            bpf_stats: cfg.bpf_stats,
            ring,
            drain: Drain::new(engine, sinks, attach_ns),
            own: Own::new(tracer),
            started: false,
            starting: false,
            ended: None,
            stop_asked: false,
            next_snapshot: attach_ns,
        })
    }

    /// The commands waiting; true when this pass is the last (asked to
    /// stop, or every sender gone).
    fn commands(&mut self, rx: &Receiver<Command>, source: &mut dyn Source) -> bool {
        loop {
            match rx.try_recv() {
                Ok(Command::Start) => {
                    source.start();
                    self.starting = true;
                }
                Ok(Command::Reset) => self.drain.sinks.stats.reset(now_ns()),
                Ok(Command::Stop) | Err(TryRecvError::Disconnected) => return true,
                Err(TryRecvError::Empty) => return false,
            }
        }
    }

    /// Once the source says how it started, the main thread hears it;
    /// true when it failed (the run ends: the main thread says why).
    fn source_started(&mut self, source: &mut dyn Source, ready: &mpsc::Sender<Ready>) -> bool {
        if !self.starting {
            return false;
        }
        let Some(r) = source.started() else { return false };
        self.starting = false;
        let failed = r.is_err();
        let _ = ready.send(Ready::Started(r));
        failed
    }

    /// The source stops first (its last intervals are reported), then the
    /// kernel stops producing (a storm could outrun the reader for ever);
    /// records stamped before that are committed meanwhile. While the
    /// source's threads see the request (a probe starved by a storm on its
    /// CPU waits for its boost, a quarter of a second), the ring is drained
    /// as before: else the storm fills it.
    fn stop_source(&mut self, source: &mut dyn Source) -> Result<()> {
        source.stopping();
        while !source.stopped() {
            self.drain.step(&mut self.ring, source, now_ns(), false)?;
            thread::sleep(POLL);
        }
        self.ended = Some(source.stop());
        self.tracer.unwatch()?;
        thread::sleep(Duration::from_nanos(MARGIN_NS));
        Ok(())
    }

    /// A CPU's threshold, as its source chose it, to the sinks that follow
    /// it (the flight recorder's default --trace-above).
    fn pass_thresholds(&mut self, source: &dyn Source) {
        for (i, &cpu) in self.cpus.iter().enumerate() {
            let t = source.threshold(cpu as u32);
            if t != self.thresholds[i] {
                self.thresholds[i] = t;
                self.drain.sinks.on_threshold(cpu as u32, t);
            }
        }
    }

    /// One drain of the kernel's records; how many it read.
    fn drain_once(&mut self, source: &mut dyn Source, last: bool) -> Result<usize> {
        let seen = self.drain.step(&mut self.ring, source, now_ns(), last)?;
        let outcome = &self.drain.sinks.outcome;
        if (outcome.stopped_on.is_some() || !outcome.failed.is_empty()) && !self.stop_asked {
            // --stop-above, or an output failed (a full disk): the run ends
            // as on SIGINT (the stall's trace is written by the drains that
            // follow; the summary covers the run until now).
            self.stop_asked = true;
            crate::lifecycle::request_stop();
        }
        self.own.drained(seen.oldest_ts, now_ns());
        if !self.started {
            if let Some(t) = source.start_ns() {
                self.drain.sinks.stats.started_at(t);
                self.started = true;
            }
        }
        self.own.note_ticks(self.tracer, &self.cpus);
        Ok(seen.records)
    }

    /// The counters to the sinks and a snapshot to the screen, at the
    /// screen's rate, when a sink asks, and at the end. Never waits on the
    /// screen: a frame it has not taken yet is enough.
    fn report_if_due(&mut self, source: &mut dyn Source, last: bool) {
        let now = now_ns();
        let snapshot_due = self.snapshots.is_some() && now >= self.next_snapshot;
        if !(snapshot_due || self.drain.sinks.wants_counters(now) || last) {
            return;
        }
        self.next_snapshot = now + SNAPSHOT_NS;
        let raw = self.own.counters(&self.drain, self.tracer, &self.cpus, &*source, self.bpf_stats);
        self.drain.sinks.on_counters(raw, now, last);
        source.report(now, &mut self.drain.sinks.stats);
        self.drain.sinks.stats.look_for_periods(now, last);
        if let Some(tx) = self.snapshots.as_ref() {
            let _ = tx.try_send(Snapshot::of(&self.drain.sinks.stats));
        }
        self.own.reported();
    }

    /// The final aggregates, what the run came to, how the source ended.
    fn finish(mut self) -> Finished {
        let (stats, outcome) = self.drain.sinks.finish(now_ns(), &mut self.drain.engine.namer);
        Finished { stats, outcome, ended: self.ended.unwrap_or_default() }
    }
}
