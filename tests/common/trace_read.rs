//! Reads a trace jitterwatch wrote, as a viewer would: the protobuf decoded
//! with the generated types; an END closes its track's innermost BEGIN.

use jitterwatch::perfetto_proto as pb;
use prost::Message;

#[derive(Debug, Clone)]
pub struct TraceSlice {
    pub track: String,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub annotations: Vec<pb::DebugAnnotation>,
}

/// Every slice of the trace at `path`, with its track's name. Panics on an
/// END with nothing open or a slice left open.
pub fn read_trace(path: &std::path::Path) -> Vec<TraceSlice> {
    use pb::trace_packet::Data;
    let trace = pb::Trace::decode(std::fs::read(path).unwrap().as_slice()).expect("a Perfetto Trace message");
    let mut names = std::collections::HashMap::new();
    let mut open: std::collections::HashMap<u64, Vec<TraceSlice>> = Default::default();
    let mut done = Vec::new();
    for p in trace.packet {
        match p.data {
            Some(Data::TrackDescriptor(d)) => {
                names.insert(d.uuid.unwrap(), d.name.unwrap_or_default());
            }
            Some(Data::TrackEvent(e)) => {
                let (ts, track) = (p.timestamp.unwrap(), e.track_uuid.unwrap());
                let stack = open.entry(track).or_default();
                match e.r#type() {
                    pb::track_event::Type::SliceBegin => {
                        let Some(pb::track_event::NameField::Name(name)) = e.name_field else { panic!("unnamed slice") };
                        let track = names.get(&track).cloned().unwrap_or_default();
                        stack.push(TraceSlice { track, name, start: ts, end: 0, annotations: e.debug_annotations });
                    }
                    pb::track_event::Type::SliceEnd => {
                        let mut s = stack.pop().expect("an END closes an open slice");
                        s.end = ts;
                        done.push(s);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "a slice left open");
    done
}

/// A stall slice's causes: (kind, name, ns).
pub fn stall_causes(s: &TraceSlice) -> Vec<(String, String, u64)> {
    use pb::debug_annotation::{NameField, Value as V};
    let named = |a: &pb::DebugAnnotation, k: &str| matches!(&a.name_field, Some(NameField::Name(n)) if n == k);
    let Some(list) = s.annotations.iter().find(|a| named(a, "causes")) else { return Vec::new() };
    list.array_values
        .iter()
        .filter_map(|d| {
            let get = |k: &str| d.dict_entries.iter().find(|e| named(e, k)).and_then(|e| e.value.clone());
            match (get("kind"), get("name"), get("ns")) {
                (Some(V::StringValue(k)), Some(V::StringValue(n)), Some(V::UintValue(ns))) => Some((k, n, ns)),
                _ => None,
            }
        })
        .collect()
}

/// A stall slice's `--stacks-above` stack: whose (`stack_of`), and its
/// frames innermost first (empty without one).
pub fn stall_stack(s: &TraceSlice) -> (String, Vec<String>) {
    use pb::debug_annotation::{NameField, Value as V};
    let named = |a: &pb::DebugAnnotation, k: &str| matches!(&a.name_field, Some(NameField::Name(n)) if n == k);
    let of = match s.annotations.iter().find(|a| named(a, "stack_of")).and_then(|a| a.value.clone()) {
        Some(V::StringValue(v)) => v,
        _ => String::new(),
    };
    let Some(list) = s.annotations.iter().find(|a| named(a, "stack")) else { return (of, Vec::new()) };
    let frames = list
        .array_values
        .iter()
        .filter_map(|d| match d.dict_entries.iter().find(|e| named(e, "frame")).and_then(|e| e.value.clone()) {
            Some(V::StringValue(f)) => Some(f),
            _ => None,
        })
        .collect();
    (of, frames)
}
