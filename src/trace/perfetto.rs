//! A `Trace` as Perfetto's native protobuf (`.perfetto-trace`): one packet
//! sequence; track descriptors first, then slice begin/end and instant
//! events in time order, stamped CLOCK_MONOTONIC. Strings go into protobuf
//! string fields (length-prefixed UTF-8): nothing in a name can break the
//! framing, and they are already escaped for a screen.

use prost::Message;

use crate::perfetto_proto as pb;
use pb::trace_packet::{Data, OptionalTrustedPacketSequenceId};
use pb::track_event::{NameField, Type};

use super::model::{Arg, Group, Trace, Value};

/// The one packet sequence jitterwatch writes.
const SEQUENCE: u32 = 1;
const MONOTONIC: u32 = pb::BuiltinClock::Monotonic as u32;

/// The trace's bytes: a `Trace` message, packet after packet.
pub fn encode(trace: &Trace) -> Vec<u8> {
    let packets = packets(trace);
    let mut out = Vec::with_capacity(packets.iter().map(|p| p.encoded_len() + 4).sum());
    // `Trace { repeated TracePacket packet = 1 }`, written packet by packet:
    // the same bytes as encoding the whole message.
    for p in &packets {
        prost::encoding::message::encode(1, p, &mut out);
    }
    out
}

fn packet(ts: Option<u64>, data: Data) -> pb::TracePacket {
    pb::TracePacket {
        timestamp: ts,
        timestamp_clock_id: ts.map(|_| MONOTONIC),
        data: Some(data),
        optional_trusted_packet_sequence_id: Some(OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(SEQUENCE)),
    }
}

/// Every packet in the order a reader needs them.
pub fn packets(trace: &Trace) -> Vec<pb::TracePacket> {
    let mut out = Vec::with_capacity(trace.tracks.len() + 2 * trace.slices.len() + trace.instants.len() + 1);
    if let Some((mono, boot)) = trace.clocks {
        let clock = |id: pb::BuiltinClock, ts| pb::clock_snapshot::Clock { clock_id: Some(id as u32), timestamp: Some(ts) };
        out.push(packet(
            None,
            Data::ClockSnapshot(pb::ClockSnapshot {
                clocks: vec![clock(pb::BuiltinClock::Monotonic, mono), clock(pb::BuiltinClock::Boottime, boot)],
                primary_trace_clock: Some(pb::BuiltinClock::Monotonic as i32),
            }),
        ));
    }
    for t in &trace.tracks {
        let mut d = pb::TrackDescriptor { uuid: Some(t.uuid), name: Some(t.name.clone()), ..Default::default() };
        match &t.group {
            Group::None => {}
            Group::Process { pid, name } => {
                d.process = Some(pb::ProcessDescriptor { pid: Some(*pid as i32), process_name: Some(name.clone()) })
            }
            Group::Child(parent) => d.parent_uuid = Some(*parent),
        }
        out.push(packet(None, Data::TrackDescriptor(d)));
    }
    for e in super::order::events(trace) {
        let ev = match e {
            super::order::Event::Begin(s) => pb::TrackEvent {
                terminating_flow_ids: s.flow_in.into_iter().collect(),
                ..named(Type::SliceBegin, s.track, s.category, &s.name, &s.args)
            },
            super::order::Event::End(s) => {
                pb::TrackEvent { r#type: Some(Type::SliceEnd as i32), track_uuid: Some(s.track), ..Default::default() }
            }
            super::order::Event::Instant(i) => {
                pb::TrackEvent { flow_ids: i.flow_out.into_iter().collect(), ..named(Type::Instant, i.track, i.category, &i.name, &i.args) }
            }
        };
        out.push(packet(Some(e.ts()), Data::TrackEvent(ev)));
    }
    out
}

/// A slice's begin or an instant: what both carry.
fn named(kind: Type, track: u64, category: &str, name: &str, args: &[Arg]) -> pb::TrackEvent {
    pb::TrackEvent {
        r#type: Some(kind as i32),
        track_uuid: Some(track),
        categories: vec![category.to_string()],
        name_field: Some(NameField::Name(name.to_string())),
        debug_annotations: args.iter().map(annotation).collect(),
        ..Default::default()
    }
}

fn annotation(a: &Arg) -> pb::DebugAnnotation {
    use pb::debug_annotation::{NameField, Value as V};
    let mut d = pb::DebugAnnotation { name_field: Some(NameField::Name(a.name.to_string())), ..Default::default() };
    match &a.value {
        Value::Uint(v) => d.value = Some(V::UintValue(*v)),
        Value::Str(s) => d.value = Some(V::StringValue(s.clone())),
        Value::List(items) => {
            d.array_values = items
                .iter()
                .map(|fields| pb::DebugAnnotation { dict_entries: fields.iter().map(annotation).collect(), ..Default::default() })
                .collect();
        }
    }
    d
}
