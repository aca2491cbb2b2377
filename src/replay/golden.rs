//! Golden outputs (issue 66): a scripted run of the spin probe's source
//! (replay's stream: one CPU, one 10 ms cycle of ticks, a device IRQ, a
//! call-function IPI, a work item and a switch storm, with the probe's
//! gaps over them) through the real decoder, engine, attribution,
//! aggregates and sinks, and what each output makes of it: the CSV, the
//! summary's JSON and text, the Prometheus text, the live screen at 80×24
//! (TestBackend, colour dropped), and `compare` of two of the runs. Each is compared byte for
//! byte with its file under tests/golden/, so a change to what a user
//! reads shows here and is named in the commit that makes it (the results
//! model's rework must leave them as they are). `JITTERWATCH_BLESS=1 cargo
//! test --lib golden` writes the files anew.

use std::sync::{Arc, Mutex};

use super::*;
use crate::export::CsvSink;
use crate::interval::{Hiccup, Method};
use crate::metrics::Slot;
use crate::sink::outputs::Metrics;
use crate::sink::Sink;
use crate::stats::{Counters, SourceFigures, SpinFigures, WakeFigures};
use crate::summary::Summary;

/// The files, as they were when this was built (a blessed file is read
/// at the next build).
const GOLDEN: [(&str, &str); 17] = [
    ("probe.csv", include_str!("../../tests/golden/probe.csv")),
    ("probe.summary.json", include_str!("../../tests/golden/probe.summary.json")),
    ("probe.summary.txt", include_str!("../../tests/golden/probe.summary.txt")),
    ("probe.metrics.txt", include_str!("../../tests/golden/probe.metrics.txt")),
    ("passive.csv", include_str!("../../tests/golden/passive.csv")),
    ("passive.summary.json", include_str!("../../tests/golden/passive.summary.json")),
    ("passive.summary.txt", include_str!("../../tests/golden/passive.summary.txt")),
    ("passive.metrics.txt", include_str!("../../tests/golden/passive.metrics.txt")),
    ("wakeup.csv", include_str!("../../tests/golden/wakeup.csv")),
    ("wakeup.summary.json", include_str!("../../tests/golden/wakeup.summary.json")),
    ("wakeup.summary.txt", include_str!("../../tests/golden/wakeup.summary.txt")),
    ("wakeup.metrics.txt", include_str!("../../tests/golden/wakeup.metrics.txt")),
    ("compare.txt", include_str!("../../tests/golden/compare.txt")),
    ("compare.json", include_str!("../../tests/golden/compare.json")),
    ("probe.screen.txt", include_str!("../../tests/golden/probe.screen.txt")),
    ("passive.screen.txt", include_str!("../../tests/golden/passive.screen.txt")),
    ("wakeup.screen.txt", include_str!("../../tests/golden/wakeup.screen.txt")),
];

/// The CSV as the run's sink writes it, into memory.
struct CsvTap(Arc<Mutex<CsvSink<Vec<u8>>>>);

impl Sink for CsvTap {
    fn what(&self) -> &'static str {
        "the CSV"
    }

    fn on_hiccup(&mut self, h: &Hiccup, _: Option<u64>) -> std::io::Result<()> {
        self.0.lock().expect("one thread").write(h)
    }
}

const START: u64 = 1_000_000_000;
const US: u64 = 1_000;

/// A scripted source: its intervals, and its own figures for the
/// aggregates before the summary (as `Source::report` gives them).
trait Scripted: Intervals {
    fn report(&self, _now: u64, _stats: &mut Stats) {}
}

impl Scripted for Gaps {}

/// A run of `events` (read in one drain, then a last one at `end`) with
/// `source`, through every output. Each output's text, by its file's name
/// (`prefix` and the output's).
fn outputs(
    prefix: &str,
    method: Method,
    events: &mut dyn EventSource,
    source: &mut dyn Scripted,
    end: u64,
    probe_tid: Option<u32>,
) -> Vec<(String, String)> {
    let mut engine = Engine::new(&[0], START, crate::collector::WINDOW, Namer::new(Kallsyms::parse(SYMBOLS), IdleStates::default()));
    if let Some(tid) = probe_tid {
        engine.set_probe_tids(0, &[tid]);
    }
    let csv = Arc::new(Mutex::new(CsvSink::new(Vec::new()).expect("into memory")));
    let slot = Slot::default();
    let list: Vec<Box<dyn Sink>> = vec![Box::new(Metrics::new(&[0], 5, method.label(), slot.clone())), Box::new(CsvTap(csv.clone()))];
    let mut sinks = Sinks::new(Stats::new(&[0], START).measuring(method), list, None);
    sinks.start(START);
    let mut drain = Drain::new(engine, sinks, START);
    drain.step(events, source, end, false).expect("in memory: cannot fail");
    drain.step(events, source, end, true).expect("in memory: cannot fail");
    source.report(end, &mut drain.sinks.stats);
    // What each source's counters carry, as a real one reports them.
    let mut counters = Counters::new(&[0]);
    counters.cpus[0].own = match method {
        Method::Spin => SourceFigures::Spin(SpinFigures::default()),
        Method::Wakeup => SourceFigures::Wakeup(WakeFigures::default()),
        Method::Passive => SourceFigures::Passive,
    };
    drain.sinks.on_counters(counters, end, true);
    let (stats, outcome) = drain.sinks.finish(end, &mut drain.engine.namer);
    let screen = crate::tui::screenshot::screen_of(&stats, 80, 24);
    let summary = Summary::from_stats(&stats, &outcome);
    let (mut json, mut text) = (Vec::new(), Vec::new());
    summary.write_json(&mut json).expect("into memory");
    summary.write_text(&mut text).expect("into memory");
    let view = slot.lock().expect("one thread").clone().expect("published at the last counters");
    // The tap went with the sinks: the writer is the only one left.
    let csv = Arc::try_unwrap(csv).ok().expect("the sinks are finished").into_inner().expect("one thread").into_inner();
    let utf8 = |b: Vec<u8>| String::from_utf8(b).expect("UTF-8");
    vec![
        (format!("{prefix}.csv"), utf8(csv)),
        (format!("{prefix}.summary.json"), utf8(json)),
        (format!("{prefix}.summary.txt"), utf8(text)),
        (format!("{prefix}.metrics.txt"), crate::metrics::encode(view)),
        (format!("{prefix}.screen.txt"), screen),
    ]
}

/// The spin probe: replay's stream and gaps, one cycle.
fn probe() -> Vec<(String, String)> {
    let (mut replay, mut gaps) = Replay::new(1, START);
    let end = replay.offset() + CYCLE_NS + crate::collector::MARGIN_NS;
    outputs("probe", Method::Spin, &mut replay, &mut gaps, end, Some(PROBE_TID))
}

/// Events handed over once, in order.
struct Script(Vec<Event>);

impl EventSource for Script {
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize> {
        let n = max.min(self.0.len());
        out.extend(self.0.drain(..n));
        Ok(n)
    }

    fn drop_totals(&mut self, _: &mut Vec<(u32, u64)>) -> Result<u64> {
        Ok(0)
    }
}

/// Passive mode's tracker as the run's intervals.
struct Passive(crate::passive::Tracker);

impl Intervals for Passive {
    fn horizons(&self, upto: u64, out: &mut dyn FnMut(u32, u64)) {
        self.0.horizons(upto, out);
    }

    fn on_event(&mut self, ev: &Event, out: &mut dyn FnMut(Interval)) {
        self.0.on_event(ev, out);
    }

    fn flush(&mut self, upto: u64, out: &mut dyn FnMut(Interval)) {
        self.0.flush(upto, out);
    }
}

impl Scripted for Passive {
    fn report(&self, now: u64, stats: &mut Stats) {
        stats.set_threads(self.0.threads().map(|i| {
            let mut i = i.clone();
            i.books = self.0.books_until(i.tid, now);
            i
        }));
    }
}

/// Passive mode: a thread `app` (tid 500) on CPU 0, interrupted by an
/// IRQ and the tick, preempted by a hog, asleep and woken, and a softirq
/// inside its own system call.
fn passive() -> Vec<(String, String)> {
    use crate::record::{Payload, Task, Vector};
    let task = |pid: u32, name: &str| Task { pid, tgid: pid, prio: 120, comm: crate::cause::comm(name.as_bytes()) };
    let (app, hog, idle) = (task(500, "app"), task(77, "hog"), task(0, "swapper/0"));
    let at = |us: u64, payload| Event { ts: START + us * US, cpu: 0, dropped: 0, own_ns: 0, payload };
    let switch = |us: u64, prev: Task, next: Task, state: u32, ran_us: u64| {
        at(
            us,
            Payload::Switch {
                prev,
                next,
                prev_state: state,
                prev_ran_ns: (ran_us * US) as u32,
                delays: (Some(0), Some(0)),
                runtimes: ((ran_us * US) as u32, 0),
                preempt: state == 0,
            },
        )
    };
    let mut name = [0u8; crate::record::IRQ_NAME_LEN];
    name[..7].copy_from_slice(b"virtio0");
    let events = vec![
        switch(0, idle, app, 1, 0),
        at(100, Payload::IrqEntry { irq: 24, name }),
        at(120, Payload::IrqExit { irq: 24, ret: 1 }),
        at(1_000, Payload::VectorEntry(Vector::LocalTimer)),
        at(1_002, Payload::HrtimerEntry { func: TICK, timer: 7 }),
        at(1_010, Payload::HrtimerExit { timer: 7 }),
        at(1_015, Payload::VectorExit(Vector::LocalTimer)),
        switch(2_000, app, hog, 0, 2_000),
        switch(2_300, hog, app, 1, 300),
        switch(3_000, app, idle, 1, 700),
        Event {
            ts: START + 4_000 * US,
            cpu: 1,
            dropped: 0,
            own_ns: 0,
            payload: Payload::Wakeup { task: app, target_cpu: 0, waker_cpu: 1 },
        },
        switch(4_012, idle, app, 1, 1_012),
        at(5_000, Payload::SoftirqEntry { vec: 3, syscall: Some(44) }),
        at(5_030, Payload::SoftirqExit { vec: 3 }),
        switch(6_000, app, idle, 1, 1_988),
    ];
    let filter = crate::passive::Filter { tids: vec![500], ..Default::default() };
    let mut tracker = Passive(crate::passive::Tracker::new(filter, &[0], US));
    tracker.0.started_at(START);
    let end = START + 10_000 * US;
    outputs("passive", Method::Passive, &mut Script(events), &mut tracker, end, None)
}

/// The wake-up probe's late wake-ups as its source hands them over.
struct Late(Vec<Interval>);

impl Intervals for Late {
    fn take(&mut self, out: &mut dyn FnMut(Interval)) {
        self.0.drain(..).for_each(out);
    }

    fn horizons(&self, upto: u64, out: &mut dyn FnMut(u32, u64)) {
        out(0, upto);
    }
}

impl Scripted for Late {}

/// The wake-up probe (tid 4000) on CPU 0: three sleeps, each woken by its
/// timer inside the tick; the second finds a hog running, which it waits
/// for; the third is woken late by an IRQ before its timer.
fn wakeup() -> Vec<(String, String)> {
    use crate::record::{Payload, Task, Vector};
    let task = |pid: u32, name: &str| Task { pid, tgid: pid, prio: 120, comm: crate::cause::comm(name.as_bytes()) };
    let (probe, hog, idle) = (task(PROBE_TID, "jitterwatch-wak"), task(77, "hog"), task(0, "swapper/0"));
    let at = |us: u64, payload| Event { ts: START + us * US, cpu: 0, dropped: 0, own_ns: 0, payload };
    let switch = |us: u64, prev: Task, next: Task, state: u32| {
        at(
            us,
            Payload::Switch { prev, next, prev_state: state, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: state == 0 },
        )
    };
    let fire = |us: u64| {
        [
            at(us, Payload::VectorEntry(Vector::LocalTimer)),
            at(us + 1, Payload::HrtimerEntry { func: TICK, timer: 9 }),
            Event { cpu: 0, ..at(us + 2, Payload::Wakeup { task: probe, target_cpu: 0, waker_cpu: 0 }) },
            at(us + 3, Payload::HrtimerExit { timer: 9 }),
            at(us + 4, Payload::VectorExit(Vector::LocalTimer)),
        ]
    };
    let mut name = [0u8; crate::record::IRQ_NAME_LEN];
    name[..7].copy_from_slice(b"virtio0");
    let mut events = vec![switch(500, probe, idle, 1)];
    events.extend(fire(1_000));
    events.push(switch(1_006, idle, probe, 0));
    events.push(switch(1_500, probe, hog, 1));
    events.extend(fire(2_000));
    events.push(switch(2_040, hog, probe, 0));
    events.push(switch(2_500, probe, idle, 1));
    events.push(at(2_999, Payload::IrqEntry { irq: 24, name }));
    events.push(at(3_020, Payload::IrqExit { irq: 24, ret: 1 }));
    events.extend(fire(3_020));
    events.push(switch(3_026, idle, probe, 0));
    let late = |from: u64, to: u64| Interval {
        cpu: 0,
        t0: START + from * US,
        t1: START + to * US,
        source: crate::interval::Source::WakeupProbe,
        victim: None,
        smis: 0,
        delivery: false,
    };
    let mut source = Late(vec![late(1_000, 1_007), late(2_000, 2_041), late(2_998, 3_027)]);
    outputs("wakeup", Method::Wakeup, &mut Script(events), &mut source, START + 10_000 * US, Some(PROBE_TID))
}

/// `compare` of the probe's run and the wake-up probe's, from their CSVs
/// and summaries in `dir` (as a user would give them), as a table and as
/// JSON; `dir` is said as `tests/golden`, where their golden files are.
fn compare(dir: &std::path::Path) -> Vec<(String, String)> {
    let run = |json| {
        let o = crate::compare::Options {
            inputs: vec![dir.join("probe.csv"), dir.join("wakeup.csv")],
            labels: vec!["spin".into(), "wake-up".into()],
            cpu: None,
            svg: None,
            png: None,
            json,
        };
        let mut out = Vec::new();
        crate::compare::run(o, &mut out).expect("the golden runs compare");
        String::from_utf8(out).expect("UTF-8").replace(&dir.display().to_string(), "tests/golden")
    };
    vec![("compare.txt".to_string(), run(false)), ("compare.json".to_string(), run(true))]
}

#[test]
fn each_sources_outputs_are_as_they_were() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("JITTERWATCH_BLESS").is_some();
    let mut differ = Vec::new();
    let runs: Vec<(String, String)> = probe().into_iter().chain(passive()).chain(wakeup()).collect();
    // compare reads the runs' files as this build wrote them.
    let written = tempfile::tempdir().expect("a temporary directory");
    for (name, got) in &runs {
        std::fs::write(written.path().join(name), got).expect("writing a run's output");
    }
    let compared = compare(written.path());
    for (name, got) in runs.into_iter().chain(compared) {
        let path = dir.join(&name);
        if bless {
            std::fs::create_dir_all(&dir).expect("tests/golden");
            std::fs::write(&path, &got).expect("writing a golden file");
            continue;
        }
        let want = GOLDEN.iter().find(|g| g.0 == name).map_or("", |g| g.1);
        if got != want {
            let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(got.lines().count().min(want.lines().count()));
            differ.push(format!(
                "{name} differs from line {}: got {:?}, want {:?}",
                line + 1,
                got.lines().nth(line),
                want.lines().nth(line)
            ));
        }
    }
    assert!(differ.is_empty(), "{}\n(JITTERWATCH_BLESS=1 writes them anew; name the difference in the commit)", differ.join("\n"));
}
