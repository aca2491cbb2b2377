//! Synthetic streams → traces, checked the way a viewer reads them: the
//! protobuf decoded with the generated types, the JSON with serde_json.

use prost::Message;

use super::build::{Builder, Mark};
use super::model::{Trace, Value};
use super::writer::Format;
use crate::cause::Cause;
use crate::engine::{IdleStates, Namer};
use crate::interval::{hiccup, Hiccup};
use crate::kallsyms::Kallsyms;
use crate::perfetto_proto as pb;
use crate::record::{c_comm, Event, OriginKind, Payload, Task, Vector};

pub(super) const CPU: u32 = 1;
const WORK_FN: u64 = 0xffff_ffff_8100_1000;
const CSD_FN: u64 = 0xffff_ffff_8100_2000;
const SYMS: &str = "ffffffff81001000 t vmstat_update\nffffffff81002000 t flush_tlb_func\n";

pub(super) fn namer() -> Namer {
    Namer::new(Kallsyms::parse(SYMS), IdleStates::default())
}

pub(super) fn task(pid: u32, name: &str) -> Task {
    Task { pid, tgid: pid, prio: 120, comm: c_comm(name).map(|c| c as u8) }
}

pub(super) fn ev(ts: u64, payload: Payload) -> Event {
    Event { ts, cpu: CPU, dropped: 0, own_ns: 0, payload }
}

pub(super) fn switch(ts: u64, prev: Task, next: Task) -> Event {
    ev(ts, Payload::Switch { prev, next, prev_state: 0, prev_ran_ns: 0, delays: (None, None), runtimes: (0, 0), preempt: true })
}

/// A hog preempting the probe for 2 ms, a timer IRQ with a softirq inside
/// it, a work item queued from CPU 0, and a TLB-flush IPI sent from CPU 0.
pub(super) fn stream() -> Vec<Event> {
    let (probe, hog, kw) = (task(900, "jw-probe"), task(4242, "hog"), task(88, "kworker/1:1"));
    let mut sender = task(77, "mprotect-storm");
    sender.tgid = 70;
    let origin = |ts, kind, func, woken| {
        // A work item's sender names its work_struct (as callsite).
        let callsite = if kind == OriginKind::Work { 0xabc } else { 0 };
        ev(ts, Payload::Origin { kind, sender, from_cpu: 0, callsite, func, woken })
    };
    vec![
        // The probe ran since before the window.
        ev(1_000, Payload::IrqEntry { irq: 24, name: [0; crate::record::IRQ_NAME_LEN] }),
        ev(1_500, Payload::SoftirqEntry { vec: 1, syscall: None }),
        ev(2_500, Payload::SoftirqExit { vec: 1 }),
        ev(3_000, Payload::IrqExit { irq: 24, ret: 1 }),
        origin(9_000, OriginKind::Wake, 0, 4242),
        switch(10_000, probe, hog),
        switch(2_010_000, hog, probe),
        origin(2_100_000, OriginKind::Work, WORK_FN, 0),
        switch(2_200_000, probe, kw),
        ev(2_210_000, Payload::WorkStart { func: WORK_FN, work: 0xabc }),
        ev(2_260_000, Payload::WorkEnd { func: WORK_FN, work: 0xabc }),
        switch(2_300_000, kw, probe),
        origin(2_400_000, OriginKind::Ipi, CSD_FN, 0),
        ev(2_401_000, Payload::VectorEntry(Vector::CallFunctionSingle)),
        ev(2_401_100, Payload::CsdEntry { func: CSD_FN, csd: 0xdef }),
        ev(2_401_900, Payload::CsdExit { func: CSD_FN, csd: 0xdef }),
        ev(2_402_000, Payload::VectorExit(Vector::CallFunctionSingle)),
        // An exit whose entry came before the window.
        ev(2_500_000, Payload::SoftirqExit { vec: 9 }),
    ]
}

pub(super) fn stall() -> Hiccup {
    let mut h = hiccup(CPU, 10_000, vec![(Cause::Task { comm: task(4242, "hog").comm, pid: Some(4242) }, 1_990_000)], 10_000);
    h.gap = 2_000_000;
    h
}

pub(super) fn build(from: u64, to: u64, events: &[Event], details: &[&Hiccup], marks: &[Mark]) -> Trace {
    let mut n = namer();
    let mut b = Builder::new(from, to, &mut n);
    b.cpu(CPU, events);
    b.stalls(CPU, crate::interval::Method::Spin, marks, details);
    b.finish()
}

/// A decoded slice: its track, name, nesting depth as a reader finds it
/// from the begin/end order, times, and the flow ids it ends.
#[derive(Debug, Clone)]
pub(super) struct Read {
    pub track: u64,
    pub name: String,
    pub depth: usize,
    pub start: u64,
    pub end: u64,
    pub parent: Option<String>,
    pub flows_in: Vec<u64>,
    pub annotations: Vec<pb::DebugAnnotation>,
}

/// Replays the packets as a reader does: an END closes the innermost open
/// BEGIN of its track; panics on an END with nothing open or time going
/// backwards, and on a slice left open at the end.
pub(super) fn read(bytes: &[u8]) -> (Vec<Read>, Vec<pb::TrackEvent>, Vec<pb::TrackDescriptor>) {
    use pb::trace_packet::Data;
    let trace = pb::Trace::decode(bytes).expect("a valid Trace message");
    let mut open: std::collections::HashMap<u64, Vec<Read>> = Default::default();
    let (mut done, mut instants, mut tracks) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = 0;
    for p in trace.packet {
        match p.data {
            Some(Data::TrackDescriptor(d)) => tracks.push(d),
            Some(Data::TrackEvent(e)) => {
                let ts = p.timestamp.expect("events carry a time");
                assert_eq!(p.timestamp_clock_id, Some(pb::BuiltinClock::Monotonic as u32));
                assert!(ts >= last, "time goes backwards at {ts}");
                last = ts;
                let track = e.track_uuid.expect("events name their track");
                let stack = open.entry(track).or_default();
                match e.r#type() {
                    pb::track_event::Type::SliceBegin => {
                        let Some(pb::track_event::NameField::Name(name)) = e.name_field.clone() else { panic!("a begin has a name") };
                        let parent = stack.last().map(|r| r.name.clone());
                        let (flows_in, annotations) = (e.terminating_flow_ids.clone(), e.debug_annotations.clone());
                        stack.push(Read { track, name, depth: stack.len(), start: ts, end: 0, parent, flows_in, annotations });
                    }
                    pb::track_event::Type::SliceEnd => {
                        let mut r = stack.pop().expect("an end closes an open slice");
                        r.end = ts;
                        done.push(r);
                    }
                    _ => instants.push(e),
                }
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "every slice closes");
    (done, instants, tracks)
}

fn find<'a>(slices: &'a [Read], name: &str) -> &'a Read {
    slices
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no slice {name} in {:?}", slices.iter().map(|r| &r.name).collect::<Vec<_>>()))
}

#[test]
fn slices_nest_as_the_cpu_ran_them() {
    let h = stall();
    let t = build(0, 3_000_000, &stream(), &[&h], &[]);
    let (slices, _, tracks) = read(&super::perfetto::encode(&t));
    let irq = find(&slices, "irq:24");
    assert_eq!((irq.start, irq.end, irq.parent.as_deref()), (1_000, 3_000, Some("jw-probe[900]")), "{irq:?}");
    let softirq = find(&slices, "softirq:TIMER");
    assert_eq!((softirq.parent.as_deref(), softirq.depth), (Some("irq:24"), 2));
    let hog = find(&slices, "hog[4242]");
    assert_eq!((hog.start, hog.end, hog.depth), (10_000, 2_010_000, 0));
    let work = find(&slices, "work:vmstat_update");
    assert_eq!(work.parent.as_deref(), Some("kworker/1:1[88]"));
    let csd = find(&slices, "ipi:flush_tlb_func");
    assert_eq!(csd.parent.as_deref(), Some("ipi:call_function_single"));
    let early = find(&slices, "softirq:RCU");
    assert_eq!(early.start, 2_300_000, "an exit without its entry begins with what it interrupted");
    // Every slice inside the window, inside its parent, never across a neighbour.
    for s in &slices {
        assert!(t.from <= s.start && s.end <= t.to && s.start < s.end, "{s:?}");
    }
    for track in tracks.iter().filter_map(|d| d.uuid) {
        let on: Vec<&Read> = slices.iter().filter(|s| s.track == track).collect();
        for a in &on {
            for b in &on {
                let disjoint = a.end <= b.start || b.end <= a.start;
                let nested = (a.start <= b.start && b.end <= a.end) || (b.start <= a.start && a.end <= b.end);
                assert!(disjoint || nested, "{a:?} crosses {b:?}");
            }
        }
    }
    let names: Vec<String> = tracks.iter().filter_map(|d| d.name.clone()).collect();
    for want in ["cpu 1", "cpu 1 probe", "cpu 0 (senders)", "hog[4242] on cpu 1"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    let thread = tracks.iter().find(|d| d.name.as_deref() == Some("hog[4242] on cpu 1")).unwrap();
    let process = tracks.iter().find(|d| d.uuid == thread.parent_uuid).expect("a task's track sits under its process");
    assert_eq!(process.process.as_ref().and_then(|p| p.pid), Some(4242));
}

#[test]
fn flow_arrows_join_each_sender_to_what_it_caused() {
    let t = build(0, 3_000_000, &stream(), &[], &[]);
    let (slices, instants, _) = read(&super::perfetto::encode(&t));
    let sent = |what: &str| {
        let i =
            instants.iter().find(|e| matches!(&e.name_field, Some(pb::track_event::NameField::Name(n)) if n.starts_with(what))).unwrap();
        assert_eq!(i.flow_ids.len(), 1);
        i.flow_ids[0]
    };
    assert_eq!(find(&slices, "ipi:flush_tlb_func").flows_in, vec![sent("IPI to cpu 1: flush_tlb_func")]);
    assert_eq!(find(&slices, "work:vmstat_update").flows_in, vec![sent("work queued on cpu 1: vmstat_update")]);
    assert_eq!(find(&slices, "hog[4242]").flows_in, vec![sent("wake-up on cpu 1 of pid 4242")]);
    assert!(find(&slices, "irq:24").flows_in.is_empty(), "nothing sent it: no arrow, never a guess");
}

/// The annotations of a stall slice as (kind, name, ns), like the CSV's causes.
fn causes_of(r: &Read) -> Vec<(String, String, u64)> {
    use pb::debug_annotation::{NameField, Value as V};
    let list = r.annotations.iter().find(|a| matches!(&a.name_field, Some(NameField::Name(n)) if n == "causes")).expect("causes");
    list.array_values
        .iter()
        .map(|d| {
            let get = |k: &str| {
                d.dict_entries.iter().find(|e| matches!(&e.name_field, Some(NameField::Name(n)) if n == k)).and_then(|e| e.value.clone())
            };
            match (get("kind"), get("name"), get("ns")) {
                (Some(V::StringValue(k)), Some(V::StringValue(n)), Some(V::UintValue(ns))) => (k, n, ns),
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

#[test]
fn the_stall_carries_the_csv_rows_causes_and_hostile_names_round_trip() {
    let evil = "\u{1b}[31mx\u{202e}\"\\";
    let mut h = stall();
    h.causes.push((Cause::Task { comm: task(5, evil).comm, pid: Some(5) }.into(), 0));
    let mut csv = crate::export::CsvSink::new(Vec::new()).unwrap();
    csv.write(&h).unwrap();
    let text = String::from_utf8(csv.into_inner()).unwrap();
    let row: Vec<String> = csv::Reader::from_reader(text.as_bytes()).records().next().unwrap().unwrap().iter().map(String::from).collect();
    let from_csv: Vec<(String, String, u64)> =
        crate::export::split_causes(&row[8]).map(|c| c.map(|(k, n, ns)| (k.to_string(), n, ns))).collect::<Result<_, _>>().unwrap();
    let mut events = stream();
    events.push(switch(2_600_000, task(900, "jw-probe"), task(5, evil)));
    let t = build(0, 3_000_000, &events, &[&h], &[Mark { t0: 2_700_000, t1: 2_750_000 }]);
    let (slices, _, _) = read(&super::perfetto::encode(&t));
    let s = find(&slices, "stall 2.0ms");
    assert_eq!(causes_of(s), from_csv);
    assert!(find(&slices, "stall 50.0µs").annotations.len() == 1, "other stalls by size alone");
    // The name arrives as every view shows it: escaped, never raw.
    let shown = Cause::Task { comm: task(5, evil).comm, pid: Some(5) }.name();
    assert!(!shown.contains('\u{1b}') && !shown.contains('\u{202e}'), "{shown}");
    find(&slices, &shown);
    // The JSON form carries the same through a real parser.
    let json: serde_json::Value = serde_json::from_slice(&Format::Json.encode(&t)).unwrap();
    let ev = json["traceEvents"].as_array().unwrap();
    assert!(ev.iter().any(|e| e["name"] == shown.as_str() && e["ph"] == "X"));
    let stall = ev.iter().find(|e| e["name"] == "stall 2.0ms").unwrap();
    let causes: Vec<(String, String, u64)> = stall["args"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["kind"].as_str().unwrap().into(), c["name"].as_str().unwrap().into(), c["ns"].as_u64().unwrap()))
        .collect();
    assert_eq!(causes, from_csv);
    assert_eq!(stall["ts"].as_f64().unwrap(), 10.0, "µs");
    assert!(ev.iter().any(|e| e["ph"] == "s") && ev.iter().any(|e| e["ph"] == "f"), "flows");
}

#[test]
fn the_window_is_what_it_says() {
    let t = build(1_900_000, 2_250_000, &stream(), &[], &[]);
    assert_eq!((t.from, t.to), (1_900_000, 2_250_000));
    let (slices, _, _) = read(&super::perfetto::encode(&t));
    let hog = find(&slices, "hog[4242]");
    assert_eq!((hog.start, hog.end), (1_900_000, 2_010_000), "running when the window opens: drawn from its start");
    let work = find(&slices, "work:vmstat_update");
    assert_eq!(work.end, 2_250_000, "still running when it closes: drawn to its end");
    assert!(slices.iter().all(|s| s.start >= t.from && s.end <= t.to));
    if let Value::List(_) = super::build::stall_args(&stall()).last().unwrap().value {
    } else {
        panic!("causes are a list");
    }
}

/// Without a probe the CPU idles, and the per-CPU switch event does not
/// report the idle task switched out: the task that ran is placed by how
/// long it ran, as the attribution places it, never cutting a slice drawn.
#[test]
fn a_switch_out_of_idle_not_seen_is_placed_by_the_run_time() {
    let (idle, hog, sh) = (task(0, "swapper/1"), task(4242, "hog"), task(7, "sh"));
    let events = vec![
        switch(1_000, sh, idle),
        ev(1_100, Payload::Idle { state: 1 }),
        ev(1_900, Payload::Idle { state: crate::record::IDLE_EXIT }),
        // idle → hog at 2,000 is not reported; a tick inside the hog's run:
        ev(3_000, Payload::VectorEntry(Vector::LocalTimer)),
        ev(3_100, Payload::VectorExit(Vector::LocalTimer)),
        ev(
            5_000,
            Payload::Switch {
                prev: hog,
                next: idle,
                prev_state: 1,
                prev_ran_ns: 3_000,
                delays: (None, None),
                runtimes: (0, 0),
                preempt: false,
            },
        ),
        // And one whose run time would cut the tick: moved past it.
        ev(6_000, Payload::VectorEntry(Vector::LocalTimer)),
        ev(6_500, Payload::VectorExit(Vector::LocalTimer)),
        ev(
            7_000,
            Payload::Switch {
                prev: sh,
                next: idle,
                prev_state: 1,
                prev_ran_ns: 800,
                delays: (None, None),
                runtimes: (0, 0),
                preempt: false,
            },
        ),
    ];
    let t = build(0, 8_000, &events, &[], &[]);
    let (slices, _, _) = read(&super::perfetto::encode(&t));
    let hog_s = find(&slices, "hog[4242]");
    assert_eq!((hog_s.start, hog_s.end), (2_000, 5_000));
    let ticks: Vec<&Read> = slices.iter().filter(|s| s.name == "irq:local_timer").collect();
    assert_eq!(ticks[0].parent.as_deref(), Some("hog[4242]"));
    let sh_s = slices.iter().filter(|s| s.name == "sh[7]").max_by_key(|s| s.start).unwrap();
    assert_eq!((sh_s.start, sh_s.end), (6_500, 7_000), "starts after the tick it would have cut");
    assert_eq!(ticks[1].parent.as_deref(), Some("swapper/1[0]"));
    // Named as the tests' namer has it: no cpuidle driver, state 1 is HLT.
    let idle_s = slices.iter().find(|s| s.name == "idle:halt (default idle)").expect("the idle state's slice");
    assert_eq!(idle_s.parent.as_deref(), Some("swapper/1[0]"));
}

/// Two queuings of one function: the arrow comes from the one that queued
/// this work_struct, not merely the latest.
#[test]
fn a_work_item_is_joined_to_its_own_queuing() {
    let mut a = task(10, "queuer-a");
    a.tgid = 10;
    let b = task(11, "queuer-b");
    let sent = |ts, who: Task, obj| {
        ev(ts, Payload::Origin { kind: OriginKind::Work, sender: who, from_cpu: 0, callsite: obj, func: WORK_FN, woken: 0 })
    };
    let kw = task(88, "kworker/1:1");
    let events = vec![
        switch(100, task(900, "jw-probe"), kw),
        sent(200, a, 0x111),
        sent(300, b, 0x222),
        ev(400, Payload::WorkStart { func: WORK_FN, work: 0x111 }),
        ev(500, Payload::WorkEnd { func: WORK_FN, work: 0x111 }),
    ];
    let t = build(0, 1_000, &events, &[], &[]);
    let (slices, instants, _) = read(&super::perfetto::encode(&t));
    let from_a = instants
        .iter()
        .find(|i| {
            i.debug_annotations.iter().any(|d| matches!(&d.value, Some(pb::debug_annotation::Value::StringValue(v)) if v == "queuer-a[10]"))
        })
        .unwrap();
    assert_eq!(find(&slices, "work:vmstat_update").flows_in, from_a.flow_ids);
}

/// The docs give the cap the start line says (they said 22 MiB once the
/// events had grown to 28).
#[test]
fn the_docs_give_the_cap_the_start_line_says() {
    let usage = include_str!("../../docs/usage.md");
    let said = format!("capped at {:.0} MiB per CPU", super::cap_mib());
    assert!(usage.contains(&said), "docs/usage.md does not say {said:?}");
}
