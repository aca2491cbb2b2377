//! The drain against scripted sources: events that come late, a drain
//! capped by its batch size, the last drain, and what its sinks see.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;

use super::*;
use crate::cause::comm;
use crate::engine::{IdleStates, Namer};
use crate::interval::{Hiccup, Interval, Source};
use crate::kallsyms::Kallsyms;
use crate::record::{Payload, Task};
use crate::sink::Sink;
use crate::source::Intervals;
use crate::stats::Stats;

const CPU: u32 = 1;
const PROBE: u32 = 999;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;

struct Script(VecDeque<Event>, Drops);

/// The kernel's drop totals a script reports: (cpu, total, read at).
#[derive(Default)]
struct Drops(Vec<(u32, u64)>, u64);

fn script(events: impl IntoIterator<Item = Event>) -> Script {
    Script(events.into_iter().collect(), Drops::default())
}

impl EventSource for Script {
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize> {
        let n = max.min(self.0.len());
        out.extend(self.0.drain(..n));
        Ok(n)
    }
    fn drop_totals(&mut self, out: &mut Vec<(u32, u64)>) -> Result<u64> {
        out.extend_from_slice(&self.1 .0);
        Ok(self.1 .1)
    }
}

struct Gaps(RefCell<Vec<Interval>>);

impl Intervals for Gaps {
    fn take(&mut self, out: &mut dyn FnMut(Interval)) {
        self.0.borrow_mut().drain(..).for_each(out);
    }
    fn horizons(&self, _upto: u64, out: &mut dyn FnMut(u32, u64)) {
        out(CPU, 0);
    }
}

fn task(pid: u32, name: &str) -> Task {
    Task { pid, tgid: pid, prio: 120, comm: comm(name.as_bytes()) }
}

fn switch(ts: u64, prev: Task, next: Task) -> Event {
    Event {
        ts,
        cpu: CPU,
        dropped: 0,
        own_ns: 0,
        payload: Payload::Switch { prev, next, prev_state: 0, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: true },
    }
}

fn drain() -> Drain {
    drain_to(Vec::new())
}

/// A drain whose aggregates are followed by `sinks`.
fn drain_to(sinks: Vec<Box<dyn Sink>>) -> Drain {
    let mut e = Engine::new(&[CPU as usize], 0, 1 << 16, Namer::new(Kallsyms::empty(), IdleStates::default()));
    e.set_probe_tids(CPU, &[PROBE]);
    Drain::new(e, Sinks::new(Stats::new(&[CPU as usize], 0), sinks, None), 0)
}

fn gap(t0: u64, t1: u64) -> Gaps {
    Gaps(RefCell::new(vec![Interval { cpu: CPU, t0, t1, source: Source::Probe, victim: None, smis: 0, delivery: false }]))
}

fn none() -> Gaps {
    Gaps(RefCell::new(Vec::new()))
}

/// The only hiccup's causes as `label=ns`.
fn causes(d: &Drain) -> Vec<String> {
    d.sinks.stats.worst().iter().flat_map(|h| h.all_causes().map(|(c, ns)| format!("{}={ns}", c.label()))).collect()
}

/// A hog ran 100-300 µs inside the probe's gap; its switch back out is
/// committed late. The gap waits for the watermark, then names the hog.
#[test]
fn late_events_wait_for_the_watermark() {
    let (probe, hog) = (task(PROBE, "probe"), task(50, "hog"));
    let mut d = drain();
    let mut src = script([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, hog)]);
    d.step(&mut src, &mut gap(100 * US, 300 * US), 1200 * US, false).unwrap();
    assert_eq!(d.sinks.stats.cpus()[0].hiccups, 0, "explained before its events were read");
    src.0.push_back(switch(300 * US, hog, probe));
    let seen = d.step(&mut src, &mut none(), 2 * MS, false).unwrap();
    assert_eq!(seen, Drained { records: 1, oldest_ts: Some(300 * US) });
    assert_eq!(causes(&d), ["task:hog[50]=200000"]);
}

/// A storm fills a drain's batch: records may be left behind, so the
/// watermark must not move until a drain empties the buffer.
#[test]
fn a_capped_drain_holds_the_watermark() {
    let (probe, hog, a, b) = (task(PROBE, "probe"), task(50, "hog"), task(60, "a"), task(61, "b"));
    let mut events = VecDeque::from([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, hog)]);
    let storm = MAX_PER_DRAIN + 3000;
    for i in 0..storm as u64 {
        let (p, n) = if i % 2 == 0 { (a, b) } else { (b, a) };
        events.push_back(switch(MS + i * US, p, n));
    }
    // The hog's switch-out comes after the storm in the buffer, as a record
    // committed late on a nested program would.
    events.push_back(switch(200 * US, hog, probe));
    let mut d = drain();
    let mut src = script(events);
    let first = d.step(&mut src, &mut gap(100 * US, 200 * US), 100 * MS, false).unwrap();
    assert_eq!(first.records, MAX_PER_DRAIN);
    assert_eq!(d.sinks.stats.cpus()[0].hiccups, 0, "explained from a capped drain");
    d.step(&mut src, &mut none(), 100 * MS, false).unwrap();
    assert_eq!(d.events, storm as u64 + 3);
    assert_eq!(d.sinks.stats.cpus()[0].hiccups, 1);
    assert!(causes(&d)[0].starts_with("task:hog[50]="), "{:?}", causes(&d));
}

/// The last drain reads every record, however many batches, and explains
/// every interval up to the time it began.
#[test]
fn the_last_drain_reads_all_and_explains_all() {
    let (probe, a, b) = (task(PROBE, "probe"), task(60, "a"), task(61, "b"));
    let mut events = VecDeque::from([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, a)]);
    for i in 0..(2 * MAX_PER_DRAIN) as u64 {
        let (p, n) = if i % 2 == 0 { (a, b) } else { (b, a) };
        events.push_back(switch(200 * US + i * 100, p, n));
    }
    let end = 200 * US + 2 * MAX_PER_DRAIN as u64 * 100;
    let mut d = drain();
    let seen = d.step(&mut script(events), &mut gap(100 * US, end), end + 10, true).unwrap();
    assert_eq!(seen.records, 2 * MAX_PER_DRAIN + 2);
    assert_eq!(d.sinks.stats.cpus()[0].hiccups, 1);
    assert_eq!(d.sinks.stats.cpus()[0].explained_ns, end - 100 * US);
}

/// A sink that fails every write, as a full disk does.
struct Broken;

impl Sink for Broken {
    fn what(&self) -> &'static str {
        "the CSV"
    }
    fn on_hiccup(&mut self, _: &Hiccup, _: Option<u64>) -> io::Result<()> {
        Err(io::Error::other("disk full"))
    }
}

/// The drain goes on without a sink that failed; the outcome says which,
/// for the collector to end the run with its summary.
#[test]
fn a_failing_sink_is_named_in_the_outcome_and_the_drain_goes_on() {
    let mut d = drain_to(vec![Box::new(Broken)]);
    d.step(&mut script([]), &mut gap(10, 20), 10 * MS, false).unwrap();
    d.step(&mut script([]), &mut gap(30, 40), 20 * MS, false).unwrap();
    assert_eq!(d.sinks.outcome.failed, ["writing the CSV: disk full"]);
    assert_eq!(d.sinks.stats.cpus()[0].hiccups, 2);
}

/// What a sink was handed, shared with the test that reads it.
#[derive(Default)]
struct Seen {
    events: usize,
    hiccups: Vec<(u64, Option<u64>)>,
    drains: Vec<(u64, bool)>,
    pruned: Vec<(u32, u64)>,
}

struct Spy(std::sync::Arc<std::sync::Mutex<Seen>>);

impl Sink for Spy {
    fn what(&self) -> &'static str {
        "the spy"
    }
    fn on_event(&mut self, _: &Event) {
        self.0.lock().unwrap().events += 1;
    }
    fn on_hiccup(&mut self, h: &Hiccup, stop: Option<u64>) -> io::Result<()> {
        self.0.lock().unwrap().hiccups.push((h.gap, stop));
        Ok(())
    }
    fn after_drain(&mut self, watermark: u64, last: bool, _: &mut Namer) -> io::Result<()> {
        self.0.lock().unwrap().drains.push((watermark, last));
        Ok(())
    }
    fn prune(&mut self, cpu: u32, horizon: u64) {
        self.0.lock().unwrap().pruned.push((cpu, horizon));
    }
}

/// A registered sink gets every event, every explained stall (the first
/// over --stop-above marked, once; none that began after it), the end of each drain and the prunes,
/// as the aggregates do: the drain has no list of its own.
#[test]
fn every_sink_sees_what_the_aggregates_see() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
    let engine = drain().engine;
    let sinks = Sinks::new(Stats::new(&[CPU as usize], 0), vec![Box::new(Spy(seen.clone()))], Some(150 * US));
    let mut d = Drain::new(engine, sinks, 0);
    let (probe, hog) = (task(PROBE, "probe"), task(50, "hog"));
    let mut src = script([
        switch(50 * US, task(0, "swapper/1"), probe),
        switch(100 * US, probe, hog),
        switch(300 * US, hog, probe),
        switch(400 * US, probe, hog),
        switch(700 * US, hog, probe),
    ]);
    let mut gaps = Gaps(RefCell::new(vec![
        Interval { cpu: CPU, t0: 100 * US, t1: 300 * US, source: Source::Probe, victim: None, smis: 0, delivery: false },
        Interval { cpu: CPU, t0: 400 * US, t1: 700 * US, source: Source::Probe, victim: None, smis: 0, delivery: false },
    ]));
    d.step(&mut src, &mut gaps, 10 * MS, false).unwrap();
    let s = seen.lock().unwrap();
    assert_eq!(s.events, 5);
    // The second began after the one that stopped the run: not kept.
    assert_eq!(s.hiccups, [(200 * US, Some(150 * US))]);
    assert_eq!(d.sinks.stats.cpus()[0].hiccups, 1);
    let stop = d.sinks.outcome.stopped_on.as_ref().map(|st| (st.time_ns, st.gap_ns));
    assert_eq!(stop, Some((100 * US, 200 * US)));
    assert_eq!(s.drains, [(10 * MS - MARGIN_NS, false)]);
    assert_eq!(s.pruned, [(CPU, 0)]);
}

fn dropped(mut e: Event, n: u32) -> Event {
    e.dropped = n;
    e
}

/// Events were dropped between two records of the CPU (the second carries
/// the count): that stretch of a gap is `lost`, not the task that ran
/// before it.
#[test]
fn a_stretch_with_dropped_events_is_charged_to_lost() {
    let (probe, hog) = (task(PROBE, "probe"), task(50, "hog"));
    let mut d = drain();
    let mut src =
        script([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, hog), dropped(switch(2000 * US, hog, probe), 3)]);
    d.step(&mut src, &mut gap(99 * US, 2000 * US), 10 * MS, false).unwrap();
    assert_eq!(causes(&d), ["lost:=1900000", "unexplained:=1000"]);
}

/// Drops after the CPU's last record show only in the kernel's totals:
/// the time up to when they were read is lost; the records that later
/// carry the same count mark nothing more.
#[test]
fn drops_no_record_carries_yet_are_taken_from_the_totals() {
    let (probe, hog) = (task(PROBE, "probe"), task(50, "hog"));
    let mut d = drain();
    let mut src = script([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, hog)]);
    src.1 = Drops(vec![(CPU, 4)], 1500 * US);
    d.step(&mut src, &mut gap(99 * US, 1800 * US), 3 * MS, false).unwrap();
    assert_eq!(causes(&d), ["lost:=1400000", "task:hog[50]=300000", "unexplained:=1000"]);
    src.0.extend([
        dropped(switch(1800 * US, hog, probe), 4),
        dropped(switch(2500 * US, probe, hog), 4),
        dropped(switch(2900 * US, hog, probe), 4),
    ]);
    d.step(&mut src, &mut gap(2499 * US, 2900 * US), 6 * MS, false).unwrap();
    let second: Vec<String> = d
        .sinks
        .stats
        .worst()
        .iter()
        .filter(|h| h.t0 == 2499 * US)
        .flat_map(|h| h.all_causes().map(|(c, ns)| format!("{}={ns}", c.label())))
        .collect();
    assert_eq!(second, ["task:hog[50]=400000", "unexplained:=1000"]);
}

/// A probe that reports its gap, then publishes its progress, while a
/// drain runs between taking intervals and pruning: the gap is not lost
/// with the history it needs (it was, when horizons were read last).
struct Racy(std::cell::Cell<u8>);

impl Intervals for Racy {
    fn take(&mut self, out: &mut dyn FnMut(Interval)) {
        match self.0.get() {
            // The gap is reported just after this take, progress after it.
            0 => self.0.set(1),
            1 => {
                out(Interval { cpu: CPU, t0: 100 * US, t1: 300 * US, source: Source::Probe, victim: None, smis: 0, delivery: false });
                self.0.set(2);
            }
            _ => {}
        }
    }
    fn horizons(&self, _upto: u64, out: &mut dyn FnMut(u32, u64)) {
        out(CPU, if self.0.get() == 0 { 0 } else { 400 * US });
    }
}

#[test]
fn a_gap_reported_during_a_drain_keeps_its_history() {
    let (probe, hog) = (task(PROBE, "probe"), task(50, "hog"));
    let mut d = drain();
    let mut src = script([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, hog), switch(300 * US, hog, probe)]);
    let mut racy = Racy(std::cell::Cell::new(0));
    d.step(&mut src, &mut racy, 2 * MS, false).unwrap();
    d.step(&mut src, &mut racy, 3 * MS, false).unwrap();
    assert_eq!(causes(&d), ["task:hog[50]=200000"]);
}
