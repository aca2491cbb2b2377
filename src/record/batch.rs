//! Decoding every record the ring buffer carries, batches included: a
//! watched CPU's interruption comes as one `jw_batch` record of items, and
//! becomes the same events, in order, that one record per tracepoint made,
//! each with the time our own program took (`Event::own_ns`). What records
//! say once is kept here: each IRQ's name (sent when its action changes,
//! not with every entry) and each CPU's last steal reading (a batch carries
//! the reading, an event follows only when it moved).

use crate::bpf::types::{jw_batch, jw_event, jw_item, jw_kind, jw_limits};
use crate::fastmap::Map;
use std::mem::offset_of;

use super::{bytes, DecodeError, Event, Payload, Vector, IRQ_NAME_LEN};

/// Items a batch holds at most.
const ITEMS: usize = jw_limits::JW_BATCH_ITEMS.0 as usize;
/// One item's bytes.
const ITEM: usize = std::mem::size_of::<jw_item>();
/// A batch's header: the record less its items.
const HEADER: usize = std::mem::size_of::<jw_batch>() - ITEMS * ITEM;
/// CPUs the programs write records for.
const MAX_CPUS: usize = jw_limits::JW_MAX_CPUS.0 as usize;

#[derive(Default)]
pub struct Decoder {
    irq_names: Map<i32, [u8; IRQ_NAME_LEN]>,
    /// Each CPU's last steal reading, by CPU number (0: none yet).
    steal: Vec<u64>,
}

impl Decoder {
    /// Appends the events of one record to `out`; returns how many.
    pub fn decode(&mut self, data: &[u8], out: &mut Vec<Event>) -> Result<usize, DecodeError> {
        let kind = *data.get(10).ok_or(DecodeError::Short(data.len()))?;
        match jw_kind(kind.into()) {
            jw_kind::JW_BATCH => self.batch(data, out),
            jw_kind::JW_IRQ_NAME => {
                if data.len() < std::mem::size_of::<jw_event>() {
                    return Err(DecodeError::Short(data.len()));
                }
                // SAFETY: the length is checked and jw_event is plain old data;
                // JW_IRQ_NAME writes the irq member.
                let e: jw_event = unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) };
                // SAFETY: as above.
                let irq = unsafe { e.u.irq };
                self.irq_names.insert(irq.irq, bytes(&irq.name));
                let payload = Payload::IrqAction { irq: irq.irq, handler: irq.handler, thread_fn: irq.thread_fn };
                out.push(Event { ts: e.ts, cpu: e.cpu.into(), dropped: e.dropped, own_ns: 0, payload });
                Ok(1)
            }
            _ => {
                out.push(Event::decode(data)?);
                Ok(1)
            }
        }
    }

    fn batch(&mut self, data: &[u8], out: &mut Vec<Event>) -> Result<usize, DecodeError> {
        if data.len() < HEADER {
            return Err(DecodeError::Short(data.len()));
        }
        let n = usize::from(data[11]).min(ITEMS);
        if data.len() < HEADER + n * ITEM {
            return Err(DecodeError::Short(data.len()));
        }
        // Fields read where they lie, not the whole record copied into a
        // zeroed jw_batch first (at figure 4c's TCP ping-pong, memset was
        // 1.2% of the collector's samples and memmove 2.4%, not all of it
        // this copy; the change read within that host's noise).
        // SAFETY: the header's bytes are there (checked above); the
        // fields are plain integers, read unaligned.
        let (ts, cpu, dropped, steal) = unsafe {
            let at = |off: usize| data.as_ptr().add(off);
            (
                std::ptr::read_unaligned(at(offset_of!(jw_batch, ts)).cast::<u64>()),
                u32::from(std::ptr::read_unaligned(at(offset_of!(jw_batch, cpu)).cast::<u16>())),
                std::ptr::read_unaligned(at(offset_of!(jw_batch, dropped)).cast::<u32>()),
                std::ptr::read_unaligned(at(offset_of!(jw_batch, steal)).cast::<u64>()),
            )
        };
        let start = out.len();
        for i in 0..n {
            // SAFETY: item i lies within the checked length; jw_item is
            // plain old data.
            let it: jw_item = unsafe { std::ptr::read_unaligned(data.as_ptr().add(HEADER + i * ITEM).cast()) };
            let payload = self.payload(&it)?;
            out.push(Event { ts: ts + u64::from(it.dt), cpu, dropped, own_ns: u32::from(it.own_ns), payload });
        }
        // In time order: a program that ran inside another of ours may
        // have taken the slot after it with an earlier time. Stable, so
        // items of one time keep their slots' order; most batches are in
        // order already and are only checked.
        let items = &mut out[start..];
        if !items.is_sorted_by_key(|e| e.ts) {
            items.sort_by_key(|e| e.ts);
        }
        if steal != 0 {
            // Each CPU's last reading: an event only when it moved.
            let last = match self.steal.get_mut(cpu as usize) {
                Some(last) => last,
                None if (cpu as usize) < MAX_CPUS => {
                    self.steal.resize(cpu as usize + 1, 0);
                    &mut self.steal[cpu as usize]
                }
                None => return Ok(out.len() - start),
            };
            if std::mem::replace(last, steal) != steal {
                let at = out[start..].last().map_or(ts, |e| e.ts);
                out.push(Event { ts: at, cpu, dropped, own_ns: 0, payload: Payload::Steal { ns: steal } });
            }
        }
        Ok(out.len() - start)
    }

    fn payload(&self, it: &jw_item) -> Result<Payload, DecodeError> {
        let (a, b) = (it.a, it.b);
        Ok(match jw_kind(it.kind.into()) {
            jw_kind::JW_IRQ_ENTRY => {
                let irq = a as i32;
                Payload::IrqEntry { irq, name: self.irq_names.get(&irq).copied().unwrap_or([0; IRQ_NAME_LEN]) }
            }
            jw_kind::JW_IRQ_EXIT => Payload::IrqExit { irq: a as i32, ret: b as i32 },
            jw_kind::JW_SOFTIRQ_ENTRY => Payload::SoftirqEntry { vec: it.sub.into(), syscall: u32::try_from(a as i64).ok() },
            jw_kind::JW_SOFTIRQ_EXIT => Payload::SoftirqExit { vec: it.sub.into() },
            jw_kind::JW_WORK_START => Payload::WorkStart { func: a, work: b },
            jw_kind::JW_WORK_END => Payload::WorkEnd { func: a, work: b },
            jw_kind::JW_HRTIMER_ENTRY => Payload::HrtimerEntry { func: a, timer: b },
            jw_kind::JW_HRTIMER_EXIT => Payload::HrtimerExit { timer: b },
            jw_kind::JW_VECTOR_ENTRY => Payload::VectorEntry(Vector::from_raw(it.sub).ok_or(DecodeError::Vector(it.sub))?),
            jw_kind::JW_VECTOR_EXIT => Payload::VectorExit(Vector::from_raw(it.sub).ok_or(DecodeError::Vector(it.sub))?),
            jw_kind::JW_CSD_ENTRY => Payload::CsdEntry { func: a, csd: b },
            jw_kind::JW_CSD_EXIT => Payload::CsdExit { func: a, csd: b },
            jw_kind::JW_IDLE => Payload::Idle { state: b as u32 },
            _ => return Err(DecodeError::Kind(it.kind)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::types::{jw_irq, jw_payload, jw_vector};

    const CPU: u16 = 3;

    fn item(dt: u32, own: u16, kind: jw_kind, sub: u8, a: u64, b: u64) -> jw_item {
        jw_item { dt, own_ns: own, kind: kind.0 as u8, sub, a, b }
    }

    fn raw_batch(ts: u64, steal: u64, items: &[jw_item]) -> Vec<u8> {
        let mut b = jw_batch { ts, cpu: CPU, kind: jw_kind::JW_BATCH.0 as u8, n: items.len() as u8, steal, ..Default::default() };
        b.items[..items.len()].copy_from_slice(items);
        // As the BPF side writes it: the header and the items of its size class.
        let len = HEADER + items.len().next_power_of_two().max(2) * std::mem::size_of::<jw_item>();
        // SAFETY: reading the bytes of a plain-old-data struct.
        let all = unsafe { std::slice::from_raw_parts((&b as *const jw_batch).cast::<u8>(), std::mem::size_of::<jw_batch>()) };
        all[..len].to_vec()
    }

    fn tick(ts: u64, steal: u64) -> Vec<u8> {
        let v = jw_vector::JW_VEC_LOCAL_TIMER.0 as u8;
        raw_batch(
            ts,
            steal,
            &[
                item(0, 90, jw_kind::JW_VECTOR_ENTRY, v, 0, 0),
                item(2_000, 60, jw_kind::JW_HRTIMER_ENTRY, 0, 0xffff_ffff_8100_2000, 0x77),
                item(5_000, 50, jw_kind::JW_HRTIMER_EXIT, 0, 0, 0x77),
                item(9_000, 140, jw_kind::JW_VECTOR_EXIT, v, 0, 0),
            ],
        )
    }

    #[test]
    fn a_tick_in_one_record_is_the_events_of_four_tracepoints() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        assert_eq!(d.decode(&tick(1_000_000, 0), &mut out), Ok(4));
        let got: Vec<(u64, u32, u32, Payload)> = out.iter().map(|e| (e.ts, e.cpu, e.own_ns, e.payload)).collect();
        assert_eq!(
            got,
            [
                (1_000_000, 3, 90, Payload::VectorEntry(Vector::LocalTimer)),
                (1_002_000, 3, 60, Payload::HrtimerEntry { func: 0xffff_ffff_8100_2000, timer: 0x77 }),
                (1_005_000, 3, 50, Payload::HrtimerExit { timer: 0x77 }),
                (1_009_000, 3, 140, Payload::VectorExit(Vector::LocalTimer)),
            ]
        );
    }

    #[test]
    fn items_come_out_in_time_order_and_the_steal_clock_when_it_moved() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        // A program inside another took the slot after it, with a later time first.
        let exit = item(700, 0, jw_kind::JW_SOFTIRQ_EXIT, 1, 0, 0);
        let entry = item(100, 0, jw_kind::JW_SOFTIRQ_ENTRY, 1, u64::MAX, 0);
        d.decode(&raw_batch(5_000, 42, &[exit, entry]), &mut out).unwrap();
        d.decode(&raw_batch(9_000, 42, &[item(0, 0, jw_kind::JW_IDLE, 0, 0, 1)]), &mut out).unwrap();
        d.decode(&raw_batch(9_500, 43, &[item(0, 0, jw_kind::JW_IDLE, 0, 0, u64::from(u32::MAX))]), &mut out).unwrap();
        let got: Vec<(u64, Payload)> = out.iter().map(|e| (e.ts, e.payload)).collect();
        assert_eq!(
            got,
            [
                (5_100, Payload::SoftirqEntry { vec: 1, syscall: None }),
                (5_700, Payload::SoftirqExit { vec: 1 }),
                (5_700, Payload::Steal { ns: 42 }),
                (9_000, Payload::Idle { state: 1 }),
                (9_500, Payload::Idle { state: u32::MAX }),
                (9_500, Payload::Steal { ns: 43 }),
            ],
            "the second reading of 42 says nothing"
        );
    }

    #[test]
    fn an_irq_is_named_by_the_record_sent_when_its_action_changed() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let mut name = [0i8; IRQ_NAME_LEN];
        name.iter_mut().zip(b"virtio0-input.0").for_each(|(n, &b)| *n = b as i8);
        let named = jw_event {
            ts: 10,
            cpu: CPU,
            kind: jw_kind::JW_IRQ_NAME.0 as u8,
            u: jw_payload { irq: jw_irq { irq: 24, ret: 0, name, handler: 0xffff_ffff_8100_1000, thread_fn: 0 } },
            ..Default::default()
        };
        // SAFETY: reading the bytes of a plain-old-data struct.
        let raw = unsafe { std::slice::from_raw_parts((&named as *const jw_event).cast::<u8>(), std::mem::size_of::<jw_event>()) };
        let entry = item(0, 0, jw_kind::JW_IRQ_ENTRY, 0, 24, 0);
        d.decode(&raw_batch(5, 0, &[entry]), &mut out).unwrap();
        assert_eq!(d.decode(raw, &mut out), Ok(1), "a name comes with its action's functions");
        assert_eq!(out.last().unwrap().payload, Payload::IrqAction { irq: 24, handler: 0xffff_ffff_8100_1000, thread_fn: 0 });
        d.decode(&raw_batch(20, 0, &[entry, item(3_000, 0, jw_kind::JW_IRQ_EXIT, 0, 24, 1)]), &mut out).unwrap();
        let names: Vec<String> = out
            .iter()
            .filter_map(|e| match e.payload {
                Payload::IrqEntry { irq: 24, name } => Some(String::from_utf8_lossy(&name).trim_end_matches('\0').to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["", "virtio0-input.0"], "named from the record on, not before");
        assert_eq!(out.last().unwrap().payload, Payload::IrqExit { irq: 24, ret: 1 });
    }

    #[test]
    fn a_short_batch_is_refused() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let raw = tick(0, 0);
        assert_eq!(d.decode(&raw[..HEADER + 10], &mut out), Err(DecodeError::Short(HEADER + 10)));
        assert_eq!(d.decode(&raw[..8], &mut out), Err(DecodeError::Short(8)));
        assert!(out.is_empty());
    }
}
