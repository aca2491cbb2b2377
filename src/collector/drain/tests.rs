//! The drain against scripted sources: events that come late, a drain
//! capped by its batch size, and the last drain.

use std::cell::RefCell;
use std::collections::VecDeque;

use super::*;
use crate::cause::comm;
use crate::engine::Namer;
use crate::interval::Source;
use crate::kallsyms::Kallsyms;
use crate::record::{Payload, Task};

const CPU: u32 = 1;
const PROBE: u32 = 999;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;

struct Script(VecDeque<Event>);

impl EventSource for Script {
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize> {
        let n = max.min(self.0.len());
        out.extend(self.0.drain(..n));
        Ok(n)
    }
}

struct Gaps(RefCell<Vec<Interval>>);

impl IntervalSource for Gaps {
    fn take(&self, out: &mut dyn FnMut(Interval)) {
        self.0.borrow_mut().drain(..).for_each(out);
    }
    fn horizons(&self, out: &mut dyn FnMut(u32, u64)) {
        out(CPU, 0);
    }
}

fn task(pid: u32, name: &str) -> Task {
    Task { pid, tgid: pid, prio: 120, comm: comm(name.as_bytes()) }
}

fn switch(ts: u64, prev: Task, next: Task) -> Event {
    Event { ts, cpu: CPU, payload: Payload::Switch { prev, next, prev_state: 0, prev_ran_ns: 0, preempt: true } }
}

fn drain() -> Drain {
    let mut e = Engine::new(&[CPU as usize], 0, 1 << 16, Namer::new(Kallsyms::empty()));
    e.set_probe_tids(CPU, &[PROBE]);
    Drain::new(e, Stats::new(&[CPU as usize], 0), Vec::new(), 0)
}

fn gap(t0: u64, t1: u64) -> Gaps {
    Gaps(RefCell::new(vec![Interval { cpu: CPU, t0, t1, source: Source::Probe }]))
}

fn none() -> Gaps {
    Gaps(RefCell::new(Vec::new()))
}

/// The only hiccup's causes as `label=ns`.
fn causes(d: &Drain) -> Vec<String> {
    d.stats.worst.iter().flat_map(|h| h.all_causes().map(|(c, ns)| format!("{}={ns}", c.label()))).collect()
}

/// A hog ran 100-300 µs inside the probe's gap; its switch back out is
/// committed late. The gap waits for the watermark, then names the hog.
#[test]
fn late_events_wait_for_the_watermark() {
    let (probe, hog) = (task(PROBE, "probe"), task(50, "hog"));
    let mut d = drain();
    let mut src = Script(VecDeque::from([switch(50 * US, task(0, "swapper/1"), probe), switch(100 * US, probe, hog)]));
    d.step(&mut src, &gap(100 * US, 300 * US), 1200 * US, false).unwrap();
    assert_eq!(d.stats.cpus[0].hiccups, 0, "explained before its events were read");
    src.0.push_back(switch(300 * US, hog, probe));
    let seen = d.step(&mut src, &none(), 2 * MS, false).unwrap();
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
    let mut src = Script(events);
    let first = d.step(&mut src, &gap(100 * US, 200 * US), 100 * MS, false).unwrap();
    assert_eq!(first.records, MAX_PER_DRAIN);
    assert_eq!(d.stats.cpus[0].hiccups, 0, "explained from a capped drain");
    d.step(&mut src, &none(), 100 * MS, false).unwrap();
    assert_eq!(d.events, storm as u64 + 3);
    assert_eq!(d.stats.cpus[0].hiccups, 1);
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
    let seen = d.step(&mut Script(events), &gap(100 * US, end), end + 10, true).unwrap();
    assert_eq!(seen.records, 2 * MAX_PER_DRAIN + 2);
    assert_eq!(d.stats.cpus[0].hiccups, 1);
    assert_eq!(d.stats.cpus[0].explained_ns, end - 100 * US);
}

struct Broken;

impl HiccupSink for Broken {
    fn write(&mut self, _: &Hiccup) -> io::Result<()> {
        Err(io::Error::other("disk full"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn what(&self) -> &'static str {
        "the CSV"
    }
}

#[test]
fn a_failing_sink_stops_the_drain_with_its_name() {
    let mut d = drain();
    d.sinks.push(Box::new(Broken));
    let e = d.step(&mut Script(VecDeque::new()), &gap(10, 20), 10 * MS, false).unwrap_err();
    assert_eq!(format!("{e:#}"), "writing the CSV: disk full");
}
