//! One CPU's recent kernel events for the flight recorder: a FIFO bounded
//! twice, by age (what no trace still to come can need is dropped) and by a
//! hard cap (a storm that outruns the age bound evicts the oldest, and the
//! next trace says where it was cut). Grown as needed up to the cap, then
//! never reallocated: pushing allocates nothing once warmed up.

use std::collections::VecDeque;

use crate::record::Event;

/// Events that fit in `bytes`, rounded down to a power of two: a buffer
/// grown by doubling then stops exactly there, never above `bytes`.
pub fn events_within(bytes: usize) -> usize {
    1 << (bytes / std::mem::size_of::<Event>()).ilog2()
}

pub struct Ring {
    events: VecDeque<Event>,
    cap: usize,
    /// The newest timestamp evicted by the cap: windows before it are cut.
    pub cut_before: u64,
    /// Events evicted by the cap since the start.
    pub evicted: u64,
}

impl Ring {
    pub fn new(cap: usize) -> Self {
        Ring { events: VecDeque::with_capacity(cap.min(4096)), cap, cut_before: 0, evicted: 0 }
    }

    pub fn push(&mut self, ev: &Event) {
        if self.events.len() == self.cap {
            if let Some(old) = self.events.pop_front() {
                self.cut_before = self.cut_before.max(old.ts);
                self.evicted += 1;
            }
        }
        self.events.push_back(*ev);
    }

    /// Drops events older than `before` (from the front: records arrive
    /// roughly in time order; a late sender's record is kept until the
    /// ones before it go).
    pub fn prune(&mut self, before: u64) {
        while self.events.front().is_some_and(|e| e.ts < before) {
            self.events.pop_front();
        }
    }

    /// The events in `[from, to)`, in time order, appended to `out`.
    pub fn window(&self, from: u64, to: u64, out: &mut Vec<Event>) {
        let at = out.len();
        out.extend(self.events.iter().filter(|e| e.ts >= from && e.ts < to));
        // Senders' records come in their CPU's order, not this one's.
        out[at..].sort_by_key(|e| e.ts);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Bytes it holds reserved.
    pub fn reserved_bytes(&self) -> usize {
        self.events.capacity() * std::mem::size_of::<Event>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Payload;

    fn ev(ts: u64) -> Event {
        Event { ts, cpu: 1, dropped: 0, own_ns: 0, payload: Payload::SoftirqEntry { vec: 1, syscall: None } }
    }

    #[test]
    fn bounded_by_age_and_by_its_cap() {
        let mut r = Ring::new(4);
        for t in [10, 20, 30] {
            r.push(&ev(t));
        }
        r.prune(15);
        assert_eq!(r.len(), 2);
        for t in [40, 50, 60] {
            r.push(&ev(t));
        }
        assert_eq!((r.len(), r.evicted, r.cut_before), (4, 1, 20), "the cap evicts the oldest and says where");
        let mut w = Vec::new();
        r.window(35, 60, &mut w);
        assert_eq!(w.iter().map(|e| e.ts).collect::<Vec<_>>(), vec![40, 50]);
    }

    #[test]
    fn a_window_is_in_time_order() {
        let mut r = Ring::new(8);
        for t in [10, 30, 20, 40] {
            r.push(&ev(t));
        }
        let mut w = Vec::new();
        r.window(0, 100, &mut w);
        assert_eq!(w.iter().map(|e| e.ts).collect::<Vec<_>>(), vec![10, 20, 30, 40]);
        assert!(r.reserved_bytes() >= 4 * std::mem::size_of::<Event>());
    }
}
