//! Each output through the trait, as the drain drives it (the drain's own
//! tests drive a registered sink with scripted sources).

use std::io;

use super::outputs::{Metrics, Outputs};
use super::*;
use crate::cause::Cause;
use crate::engine::IdleStates;
use crate::export::CsvSink;
use crate::interval::hiccup;
use crate::kallsyms::Kallsyms;

fn namer() -> Namer {
    Namer::new(Kallsyms::empty(), IdleStates::default())
}

/// The aggregates count a stall, and keep the one that stopped the run;
/// what began after it ended is not kept (a stall on another CPU that
/// began before is).
#[test]
fn the_sinks_keep_the_first_stall_that_stops_the_run() {
    let mut sinks = Sinks::new(Stats::new(&[2, 3], 0), Vec::new(), Some(60));
    for (cpu, t0, ns) in [(2, 10, 50), (2, 90, 70), (3, 150, 10), (2, 200, 80), (3, 160, 10)] {
        assert!(!sinks.on_hiccup(&hiccup(cpu, t0, vec![(Cause::Softirq(1), ns)], 0)));
    }
    assert_eq!((sinks.stats.cpus()[0].hiccups, sinks.stats.cpus()[1].hiccups), (2, 1), "the stall at 200 and 160 began after 90 + 70");
    let st = sinks.outcome.stopped_on.expect("stopped");
    assert_eq!((st.cpu, st.time_ns, st.gap_ns, st.limit_ns), (2, 90, 70, 60));
    // A thread's own system call's softirq stops nothing, and breaks no bound.
    let mut sinks = Sinks::new(Stats::new(&[2], 0), Vec::new(), Some(60)).failing_above(Some(60));
    let mut own = hiccup(2, 10, vec![(Cause::Softirq(3), 500)], 0);
    own.source = crate::interval::Source::InSyscall;
    sinks.on_hiccup(&own);
    assert!(sinks.outcome.stopped_on.is_none());
    assert_eq!(sinks.outcome.broken.map(|b| b.count), Some(0));
}

/// --fail-above counts every stall at or over its bound and keeps the
/// five worst, largest first, named by their largest cause; the run goes on.
#[test]
fn the_sinks_count_the_stalls_that_break_the_bound_and_keep_the_worst() {
    let mut sinks = Sinks::new(Stats::new(&[2], 0), Vec::new(), None).failing_above(Some(60));
    for (t0, ns) in [(10, 50), (20, 70), (30, 100), (40, 65), (50, 200), (60, 61), (70, 62), (80, 90), (90, 59)] {
        assert!(!sinks.on_hiccup(&hiccup(2, t0, vec![(Cause::Softirq(1), ns - 5)], 5)));
    }
    assert!(sinks.outcome.stopped_on.is_none(), "the run goes on");
    let b = sinks.outcome.broken.expect("a bound");
    assert_eq!((b.limit_ns, b.count), (60, 7));
    let worst: Vec<(u64, u64)> = b.worst.iter().map(|w| (w.time_ns, w.gap_ns)).collect();
    assert_eq!(worst, [(50, 200), (30, 100), (80, 90), (20, 70), (40, 65)]);
    assert!(b.worst.iter().all(|w| w.cause == "softirq:TIMER" && w.cpu == 2 && w.tid.is_none()), "{:?}", b.worst);
    // Without the option there is no verdict at all (not a passed one).
    assert!(Sinks::new(Stats::new(&[2], 0), Vec::new(), None).outcome.broken.is_none());
}

/// The CSV's header reaches the file as it is created (a path that cannot
/// take it fails before anything runs), its rows at the end of a drain,
/// whole.
#[test]
fn the_csv_writes_its_rows_at_the_end_of_a_drain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.csv");
    let mut list = Outputs { csv: Some(CsvSink::create(&path).unwrap()), ..Outputs::default() }.into_list();
    let s = list[0].as_mut();
    assert_eq!(s.what(), "the CSV");
    s.on_hiccup(&hiccup(3, 1_000, vec![(Cause::Softirq(1), 50)], 5), None).unwrap();
    let header = format!("{}\n", crate::export::HEADER.join(","));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), header, "a row written before the drain ended");
    s.after_drain(2_000, false, &mut namer()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[1].contains(",55,"), "{text}");
}

/// The Prometheus counters ask for the counters once a second from the
/// start, and publish a view when handed them.
#[test]
fn the_metrics_publish_once_a_second_from_the_start() {
    let slot = crate::metrics::Slot::default();
    let mut m = Metrics::new(&[4], 10, "probe", slot.clone());
    let s: &mut dyn Sink = &mut m;
    s.start(5_000);
    assert!(!s.wants_counters(4_999));
    assert!(s.wants_counters(5_000));
    s.on_hiccup(&hiccup(4, 5_100, vec![(Cause::Softirq(1), 50)], 0), None).unwrap();
    s.on_counters(&Counters::new(&[4]), 5_200, false);
    assert!(!s.wants_counters(5_200 + 999_999_999));
    assert!(s.wants_counters(5_200 + 1_000_000_000));
    let view = slot.lock().unwrap().clone().expect("published");
    assert_eq!((view.mode, view.cpus[0].cpu, view.cpus[0].hiccups), ("probe", 4, 1));
}

struct Failing;

impl Sink for Failing {
    fn what(&self) -> &'static str {
        "the failing sink"
    }
    fn on_hiccup(&mut self, _: &Hiccup, _: Option<u64>) -> io::Result<()> {
        Err(io::Error::other("gone"))
    }
}

/// A sink that fails (a full disk) is dropped and kept in the outcome,
/// once, and keeps no other from the stall or the ones after it.
#[test]
fn a_failing_sink_is_dropped_and_keeps_no_other_from_a_stall() {
    let slot = crate::metrics::Slot::default();
    let list: Vec<Box<dyn Sink>> = vec![Box::new(Failing), Box::new(Metrics::new(&[1], 10, "probe", slot.clone()))];
    let mut sinks = Sinks::new(Stats::new(&[1], 0), list, None);
    assert!(sinks.on_hiccup(&hiccup(1, 0, vec![(Cause::Softirq(1), 50)], 0)), "one failed just now");
    assert!(!sinks.on_hiccup(&hiccup(1, 90, vec![(Cause::Softirq(1), 50)], 0)), "dropped: it fails no more");
    assert_eq!(sinks.outcome.failed, ["writing the failing sink: gone"]);
    assert_eq!(sinks.stats.cpus()[0].hiccups, 2);
    sinks.on_counters(Counters::new(&[1]), 10, true);
    assert_eq!(slot.lock().unwrap().as_ref().map(|v| v.cpus[0].hiccups), Some(2));
}
