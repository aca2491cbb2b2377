//! The order a trace's events are written in, which every format shares:
//! by time; at one instant, ends before begins (a slice that ends where its
//! sibling begins closes first), inner ends before outer ends, outer begins
//! before inner begins. A slice of no length is an instant in this order
//! (its end would otherwise come before its begin).

use super::model::{Instant, Slice, Trace};

pub enum Event<'a> {
    Begin(&'a Slice),
    End(&'a Slice),
    Instant(&'a Instant),
}

impl Event<'_> {
    pub fn ts(&self) -> u64 {
        match self {
            Event::Begin(s) => s.start,
            Event::End(s) => s.end,
            Event::Instant(i) => i.ts,
        }
    }

    fn key(&self) -> (u64, u8, i32) {
        match self {
            Event::End(s) => (s.end, 0, -i32::from(s.depth)),
            Event::Begin(s) => (s.start, 1, i32::from(s.depth)),
            Event::Instant(i) => (i.ts, 2, 0),
        }
    }
}

/// Slices of no length are left out (they would close before they open);
/// instants take their place in the order after the slices opening with them.
pub fn events(trace: &Trace) -> Vec<Event<'_>> {
    let mut v: Vec<Event<'_>> = Vec::with_capacity(2 * trace.slices.len() + trace.instants.len());
    for s in trace.slices.iter().filter(|s| s.end > s.start) {
        v.push(Event::Begin(s));
        v.push(Event::End(s));
    }
    v.extend(trace.instants.iter().map(Event::Instant));
    // Stable: equal keys keep the order the builder produced them in.
    v.sort_by_key(Event::key);
    v
}
