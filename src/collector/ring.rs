//! The BPF ring buffer as an event source: each record is decoded into a
//! buffer the drain hands in (no allocation once warm); records that do
//! not decode are counted, not fatal.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use anyhow::Result;
use libbpf_rs::RingBuffer;

use super::EventSource;
use crate::bpf::Tracer;
use crate::record::{in_time_order, Decoder, Event};

pub struct Ring<'a> {
    rb: RingBuffer<'a>,
    tracer: &'a Tracer<'a>,
    /// Filled by the ring buffer's callback, swapped with the drain's batch.
    decoded: Rc<RefCell<Vec<Event>>>,
    records: Rc<Cell<usize>>,
}

impl<'a> Ring<'a> {
    pub fn open(tracer: &'a Tracer<'_>) -> Result<Self> {
        let decoded = Rc::new(RefCell::new(Vec::with_capacity(super::drain::MAX_PER_DRAIN)));
        let records = Rc::new(Cell::new(0));
        let (d, r) = (decoded.clone(), records.clone());
        let mut decoder = Decoder::default();
        let rb = tracer.ring_buffer(move |data| {
            r.set(r.get() + 1);
            // A record that does not decode is skipped, not fatal.
            let _ = decoder.decode(data, &mut d.borrow_mut());
            0
        })?;
        Ok(Ring { rb, tracer, decoded, records })
    }
}

impl EventSource for Ring<'_> {
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize> {
        self.records.set(0);
        // Both buffers keep their capacity: swapping moves no event.
        std::mem::swap(out, &mut *self.decoded.borrow_mut());
        let n = self.rb.consume_raw_n(max);
        std::mem::swap(out, &mut *self.decoded.borrow_mut());
        // In time order: a record written while a CPU's batch was open (a
        // sending, a wake-up, an NMI) comes before the batch's earlier events.
        in_time_order(out);
        if n < 0 {
            return Err(std::io::Error::from_raw_os_error(-n).into());
        }
        Ok(self.records.get())
    }

    fn drop_totals(&mut self, out: &mut Vec<(u32, u64)>) -> Result<u64> {
        let per_cpu = self.tracer.drops()?;
        let at = crate::clock::now_ns();
        out.extend(per_cpu.into_iter().enumerate().filter(|&(_, n)| n > 0).map(|(cpu, n)| (cpu as u32, n)));
        Ok(at)
    }
}
