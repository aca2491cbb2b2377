//! The BPF side's records as an event source: the ring buffers, then the
//! watched CPUs' regions (x86); each record is decoded into a buffer the
//! drain hands in (no allocation once warm); records that do not decode
//! are skipped, not fatal.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use anyhow::Result;
use libbpf_rs::RingBuffer;

use super::EventSource;
use crate::bpf::{Regions, Tracer};
use crate::record::{in_time_order, Decoder, Event};

pub struct Ring<'a> {
    rb: RingBuffer<'a>,
    tracer: &'a Tracer<'a>,
    /// Filled by the ring buffer's callback, swapped with the drain's batch.
    decoded: Rc<RefCell<Vec<Event>>>,
    records: Rc<Cell<usize>>,
    decoder: Rc<RefCell<Decoder>>,
    regions: Option<Regions>,
}

impl<'a> Ring<'a> {
    pub fn open(tracer: &'a Tracer<'_>) -> Result<Self> {
        let decoded = Rc::new(RefCell::new(Vec::with_capacity(super::drain::MAX_PER_DRAIN)));
        let records = Rc::new(Cell::new(0));
        let decoder = Rc::new(RefCell::new(Decoder::default()));
        let (d, r, dec) = (decoded.clone(), records.clone(), decoder.clone());
        let rb = tracer.ring_buffer(move |data| {
            r.set(r.get() + 1);
            // A record that does not decode is skipped, not fatal.
            let _ = dec.borrow_mut().decode(data, &mut d.borrow_mut());
            0
        })?;
        let regions = tracer.regions()?;
        Ok(Ring { rb, tracer, decoded, records, decoder, regions })
    }
}

impl EventSource for Ring<'_> {
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize> {
        self.records.set(0);
        // Both buffers keep their capacity: swapping moves no event.
        std::mem::swap(out, &mut *self.decoded.borrow_mut());
        let n = self.rb.consume_raw_n(max);
        std::mem::swap(out, &mut *self.decoded.borrow_mut());
        // Then the regions. A watched CPU writes to the events ring only
        // inside another of its programs, whose record goes to its region
        // microseconds later: a read that falls between the two takes them
        // in two reads, and the timeline takes the later read's earlier
        // event at the time it has reached (counted as reordered).
        if let Some(regions) = &mut self.regions {
            let left = max.saturating_sub(self.records.get());
            let mut decoder = self.decoder.borrow_mut();
            let got = regions.read(left, |data| {
                let _ = decoder.decode(data, out);
            });
            self.records.set(self.records.get() + got);
        }
        // In time order: a record written while a CPU's batch was open (a
        // sending, a wake-up, an NMI) comes before the batch's earlier events.
        in_time_order(out);
        if n < 0 {
            return Err(std::io::Error::from_raw_os_error(-n).into());
        }
        Ok(self.records.get())
    }

    fn drop_totals(&mut self, out: &mut Vec<(u32, u64)>) -> Result<u64> {
        self.tracer.drop_counts(out)?;
        let at = crate::clock::now_ns();
        // A region read that gave up on a header lost what it held: drops.
        if let Some(regions) = &self.regions {
            for (cpu, n) in regions.refused() {
                match out.iter_mut().find(|(c, _)| *c as usize == cpu) {
                    Some((_, total)) => *total += n,
                    None => out.push((cpu as u32, n)),
                }
            }
        }
        Ok(at)
    }
}
