//! A `Trace` as Chrome's trace-event JSON (`--trace-format json`), for
//! tools that read only that (chrome://tracing, older viewers): complete
//! (`X`) slices, instants (`i`), flow arrows (`s`/`f`), and metadata naming
//! each track. Every value goes through serde_json, never concatenation.
//! A track is a (pid, tid) pair here: CPU tracks share one process,
//! `jitterwatch`; a task's tracks are threads of its own process.

use std::collections::HashMap;
use std::io::Write;

use serde_json::{json, Map, Value as J};

use super::model::{Arg, Group, Trace, Value};

/// The pid jitterwatch's own tracks (CPUs, probes, senders) share; far
/// above any kernel pid (PID_MAX_LIMIT is 4,194,304).
const TRACKS_PID: u64 = 1 << 31;

pub fn write(trace: &Trace, out: &mut impl Write) -> serde_json::Result<()> {
    // Each track's (pid, tid) and its metadata.
    let mut ids: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut events: Vec<J> = vec![json!({"ph": "M", "name": "process_name", "pid": TRACKS_PID, "tid": 0, "args": {"name": "jitterwatch"}})];
    for t in &trace.tracks {
        let id = match &t.group {
            Group::None | Group::Process { .. } => {
                let pid = match &t.group {
                    Group::Process { pid, .. } => u64::from(*pid),
                    _ => TRACKS_PID,
                };
                (pid, t.uuid)
            }
            Group::Child(parent) => (ids.get(parent).map_or(TRACKS_PID, |p| p.0), t.uuid),
        };
        ids.insert(t.uuid, id);
        if let Group::Process { name, .. } = &t.group {
            events.push(json!({"ph": "M", "name": "process_name", "pid": id.0, "tid": 0, "args": {"name": name}}));
        }
        events.push(json!({"ph": "M", "name": "thread_name", "pid": id.0, "tid": id.1, "args": {"name": t.name}}));
    }
    let at = |track: u64| ids.get(&track).copied().unwrap_or((TRACKS_PID, 0));
    for e in super::order::events(trace) {
        match e {
            super::order::Event::Begin(s) => {
                let (pid, tid) = at(s.track);
                events.push(json!({
                    "ph": "X", "name": s.name, "cat": s.category, "pid": pid, "tid": tid,
                    "ts": us(s.start), "dur": us(s.end - s.start), "args": args(&s.args),
                }));
                if let Some(id) = s.flow_in {
                    events.push(json!({"ph": "f", "bp": "e", "id": id, "name": "origin", "cat": "origin", "pid": pid, "tid": tid, "ts": us(s.start)}));
                }
            }
            super::order::Event::End(_) => {}
            super::order::Event::Instant(i) => {
                let (pid, tid) = at(i.track);
                events.push(json!({"ph": "i", "s": "t", "name": i.name, "cat": i.category, "pid": pid, "tid": tid, "ts": us(i.ts), "args": args(&i.args)}));
                if let Some(id) = i.flow_out {
                    events.push(json!({"ph": "s", "id": id, "name": "origin", "cat": "origin", "pid": pid, "tid": tid, "ts": us(i.ts)}));
                }
            }
        }
    }
    let doc = json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"clock": "CLOCK_MONOTONIC", "from_ns": trace.from, "to_ns": trace.to},
    });
    serde_json::to_writer(out, &doc)
}

/// Microseconds, the format's unit, keeping the nanoseconds as decimals.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn args(a: &[Arg]) -> J {
    J::Object(a.iter().map(|a| (a.name.to_string(), value(&a.value))).collect::<Map<_, _>>())
}

fn value(v: &Value) -> J {
    match v {
        Value::Uint(n) => J::from(*n),
        Value::Str(s) => J::from(s.as_str()),
        Value::List(items) => J::Array(items.iter().map(|fields| args(fields)).collect()),
    }
}
