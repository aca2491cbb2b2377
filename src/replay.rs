//! `jitterwatch replay-bench` (hidden; run by `cargo xtask bench`): how many
//! CPUs one consumer core can watch. Synthetic per-CPU event streams, a mix
//! of what a watched CPU sees (the tick with its timer softirq, a device
//! IRQ with NET_RX, a work item, a call-function IPI and its csd callback,
//! context switches, and every tenth millisecond a switch storm), are
//! encoded as the BPF programs write them and pass through the real
//! decoder, engine, attribution and aggregates in this one thread, with a
//! probe gap over every tick. It prints one JSON line: events per second of
//! this thread's CPU time, and the memory the engine and aggregates grew by
//! per watched CPU. No BPF, no root.

use std::io::Write;

use anyhow::{bail, Result};

use crate::bpf::types::{jw_event, jw_func, jw_irq, jw_kind, jw_payload, jw_switch, jw_vector};
use crate::collector::{Drain, EventSource};
use crate::engine::{Engine, IdleStates, Namer};
use crate::interval::{Interval, Source};
use crate::kallsyms::Kallsyms;
use crate::record::{c_comm as comm, Event};
use crate::sink::Sinks;
use crate::source::Intervals;
use crate::stats::Stats;

/// Simulated time per drain: each drain reads one cycle of every CPU.
const CYCLE_NS: u64 = 10_000_000;
const MS: u64 = 1_000_000;
/// The probe thread of CPU n is PROBE_TID + n.
const PROBE_TID: u32 = 4000;
/// Switches in a storm millisecond.
const STORM: u64 = 60;

/// The kernel functions the streams name, as kallsyms lists them.
const SYMBOLS: &str = "ffffffff81001000 t vmstat_update\nffffffff81002000 t tick_nohz_handler\nffffffff81003000 t flush_tlb_func\n";
const VMSTAT: u64 = 0xffff_ffff_8100_1000;
const TICK: u64 = 0xffff_ffff_8100_2000;
const FLUSH: u64 = 0xffff_ffff_8100_3000;

fn record(cpu: u16, ts: u64, kind: jw_kind, sub: u8, u: jw_payload) -> jw_event {
    jw_event { ts, cpu, kind: kind.0 as u8, sub, dropped: 0, u }
}

fn func(func: u64, obj: u64) -> jw_payload {
    jw_payload { r#fn: jw_func { func, obj } }
}

fn switch(cpu: u16, ts: u64, prev: (u32, &str), next: (u32, &str)) -> jw_event {
    let sw = jw_switch {
        prev_pid: prev.0,
        prev_tgid: prev.0,
        next_pid: next.0,
        next_tgid: next.0,
        prev_prio: 120,
        next_prio: 120,
        prev_state: 1,
        prev_comm: comm(prev.1),
        next_comm: comm(next.1),
        ..Default::default()
    };
    record(cpu, ts, jw_kind::JW_SWITCH, 1, jw_payload { sw })
}

/// One cycle of one CPU's records, timestamps from 0, in order; and the
/// probe's gaps in it (one over each tick).
fn cycle(cpu: u16, out: &mut Vec<jw_event>, gaps: &mut Vec<(u64, u64)>) {
    let v = |x: jw_vector| x.0 as u8;
    let probe = (PROBE_TID + cpu as u32, "jitterwatch");
    let worker = (100 + cpu as u32, "kworker/u:1");
    for ms in 0..CYCLE_NS / MS {
        let t = ms * MS;
        let timer = 0xffff_8880_0000_0000 + cpu as u64 * 64;
        out.extend([
            record(cpu, t + 1_000, jw_kind::JW_VECTOR_ENTRY, v(jw_vector::JW_VEC_LOCAL_TIMER), func(0, 0)),
            record(cpu, t + 1_500, jw_kind::JW_HRTIMER_ENTRY, 0, func(TICK, timer)),
            record(cpu, t + 4_000, jw_kind::JW_HRTIMER_EXIT, 0, func(TICK, timer)),
            record(cpu, t + 4_500, jw_kind::JW_VECTOR_EXIT, v(jw_vector::JW_VEC_LOCAL_TIMER), func(0, 0)),
            record(cpu, t + 4_600, jw_kind::JW_SOFTIRQ_ENTRY, 1, func(0, 0)),
            record(cpu, t + 6_000, jw_kind::JW_SOFTIRQ_EXIT, 1, func(0, 0)),
        ]);
        gaps.push((t + 900, t + 6_100));
        let mut name = [0i8; crate::record::IRQ_NAME_LEN];
        name.iter_mut().zip(b"virtio0-input.0").for_each(|(d, &b)| *d = b as i8);
        out.extend([
            record(cpu, t + 200_000, jw_kind::JW_IRQ_ENTRY, 0, jw_payload { irq: jw_irq { irq: 24, ret: 0, name, ..Default::default() } }),
            record(cpu, t + 202_000, jw_kind::JW_IRQ_EXIT, 0, jw_payload { irq: jw_irq { irq: 24, ret: 1, name, ..Default::default() } }),
            record(cpu, t + 202_100, jw_kind::JW_SOFTIRQ_ENTRY, 3, func(0, 0)),
            record(cpu, t + 205_000, jw_kind::JW_SOFTIRQ_EXIT, 3, func(0, 0)),
            record(cpu, t + 400_000, jw_kind::JW_VECTOR_ENTRY, v(jw_vector::JW_VEC_CALL_FUNCTION), func(0, 0)),
            record(cpu, t + 400_300, jw_kind::JW_CSD_ENTRY, 0, func(FLUSH, 0x1000 + cpu as u64)),
            record(cpu, t + 401_000, jw_kind::JW_CSD_EXIT, 0, func(FLUSH, 0x1000 + cpu as u64)),
            record(cpu, t + 401_200, jw_kind::JW_VECTOR_EXIT, v(jw_vector::JW_VEC_CALL_FUNCTION), func(0, 0)),
            switch(cpu, t + 600_000, probe, worker),
            record(cpu, t + 600_500, jw_kind::JW_WORK_START, 0, func(VMSTAT, 0x2000 + cpu as u64)),
            record(cpu, t + 608_000, jw_kind::JW_WORK_END, 0, func(VMSTAT, 0x2000 + cpu as u64)),
            switch(cpu, t + 608_500, worker, probe),
        ]);
        gaps.push((t + 599_000, t + 609_000));
        // A storm: the probe and a task taking turns.
        if ms == 5 {
            let other = (7000 + cpu as u32, "storm");
            for i in 0..STORM {
                let at = t + 700_000 + i * 2_000;
                out.push(if i % 2 == 0 { switch(cpu, at, probe, other) } else { switch(cpu, at, other, probe) });
            }
        }
    }
}

/// The template replayed cycle after cycle, shifted in time: records as
/// bytes, CPU after CPU, each CPU's in order (as the ring buffer keeps them).
struct Replay {
    bytes: Vec<u8>,
    per_cycle: usize,
    cycle: u64,
    next: usize,
    start: u64,
}

impl Replay {
    fn new(cpus: usize, start: u64) -> (Self, Gaps) {
        let mut events = Vec::new();
        let mut gaps = Vec::new();
        for cpu in 0..cpus {
            let mut g = Vec::new();
            cycle(cpu as u16, &mut events, &mut g);
            gaps.extend(g.into_iter().map(|(a, b)| (cpu as u32, a, b)));
        }
        let size = std::mem::size_of::<jw_event>();
        let mut bytes = Vec::with_capacity(events.len() * size);
        for e in &events {
            // SAFETY: the bytes of a plain-old-data struct, as the ring buffer carries it.
            bytes.extend_from_slice(unsafe { std::slice::from_raw_parts((e as *const jw_event).cast::<u8>(), size) });
        }
        let replay = Replay { bytes, per_cycle: events.len(), cycle: 0, next: 0, start };
        (replay, Gaps { gaps, offset: start, cpus, given: std::cell::Cell::new(false) })
    }

    fn offset(&self) -> u64 {
        self.start + self.cycle * CYCLE_NS
    }
}

impl EventSource for Replay {
    fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize> {
        let size = std::mem::size_of::<jw_event>();
        let offset = self.offset();
        let n = max.min(self.per_cycle - self.next);
        for i in self.next..self.next + n {
            if let Ok(mut ev) = Event::decode(&self.bytes[i * size..(i + 1) * size]) {
                ev.ts += offset;
                out.push(ev);
            }
        }
        self.next += n;
        Ok(n)
    }

    fn drop_totals(&mut self, _: &mut Vec<(u32, u64)>) -> Result<u64> {
        Ok(self.offset() + CYCLE_NS)
    }
}

/// The probe's side: the cycle's gaps (at `offset`), once per cycle.
struct Gaps {
    gaps: Vec<(u32, u64, u64)>,
    offset: u64,
    cpus: usize,
    given: std::cell::Cell<bool>,
}

impl Intervals for Gaps {
    fn take(&mut self, out: &mut dyn FnMut(Interval)) {
        if self.given.replace(true) {
            return;
        }
        for &(cpu, t0, t1) in &self.gaps {
            out(Interval {
                cpu,
                t0: self.offset + t0,
                t1: self.offset + t1,
                source: Source::Probe,
                victim: None,
                smis: 0,
                delivery: false,
            });
        }
    }

    fn horizons(&self, _upto: u64, out: &mut dyn FnMut(u32, u64)) {
        (0..self.cpus).for_each(|c| out(c as u32, self.offset + CYCLE_NS));
    }
}

fn status_kib(field: &str) -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    let line = s.lines().find(|l| l.starts_with(field)).ok_or_else(|| anyhow::anyhow!("no {field} in /proc/self/status"))?;
    Ok(line[field.len()..].trim().trim_end_matches("kB").trim().parse()?)
}

/// What a replay did: the drain (engine and aggregates) after it, the
/// records decoded, and the thread's CPU time for it.
struct Replayed {
    drain: Drain,
    decoded: u64,
    cpu_ns: u64,
    per_cycle: usize,
    gaps_per_cycle: usize,
}

/// Replays `cpus` CPUs for about `events` events; prints the JSON line.
pub fn run(cpus: usize, events: u64, out: &mut dyn Write) -> Result<i32> {
    if cpus == 0 || cpus > crate::record::MAX_CPUS {
        bail!("--cpus {cpus}: give 1 to {}", crate::record::MAX_CPUS);
    }
    // What the engine and aggregates grow by, from here: the replayed
    // input is built after the reset, so it is subtracted below by size.
    std::fs::write("/proc/self/clear_refs", "5")?;
    let rss_before = status_kib("VmRSS:")?;
    let r = replay(cpus, events)?;
    let hwm = status_kib("VmHWM:")?;
    let input_kib = (r.per_cycle * std::mem::size_of::<jw_event>()) as u64 / 1024;
    let hiccups: u64 = r.drain.sinks.stats.cpus().iter().map(|c| c.hiccups).sum();
    let per_cpu_sec = 1e9 / CYCLE_NS as f64 / cpus as f64;
    let v = serde_json::json!({
        "cpus": cpus,
        "stream_events_per_cpu_sec": r.per_cycle as f64 * per_cpu_sec,
        "stream_gaps_per_cpu_sec": r.gaps_per_cycle as f64 * per_cpu_sec,
        "storm_switches": STORM,
        "events": r.decoded,
        "hiccups": hiccups,
        "consumer_cpu_ns": r.cpu_ns,
        "events_per_core_sec": r.decoded as f64 * 1e9 / r.cpu_ns as f64,
        "memory_per_cpu_bytes": (hwm.saturating_sub(rss_before + input_kib) * 1024) as f64 / cpus as f64,
    });
    writeln!(out, "{v}")?;
    Ok(0)
}

fn replay(cpus: usize, events: u64) -> Result<Replayed> {
    let start = 1_000_000_000;
    let (mut replay, mut gaps) = Replay::new(cpus, start);
    let cycles = (events / replay.per_cycle as u64).max(1);
    let list: Vec<usize> = (0..cpus).collect();
    let cpu0 = crate::clock::thread_cpu_ns();
    let mut engine = Engine::new(&list, start, crate::collector::WINDOW, Namer::new(Kallsyms::parse(SYMBOLS), IdleStates::default()));
    for cpu in 0..cpus as u32 {
        // As the collector does: the probe's own time is never a cause.
        engine.set_probe_tids(cpu, &[PROBE_TID + cpu]);
    }
    let mut drain = Drain::new(engine, Sinks::new(Stats::new(&list, start), Vec::new(), None), start);
    let mut decoded = 0u64;
    for c in 0..cycles {
        replay.cycle = c;
        replay.next = 0;
        let now = replay.offset() + CYCLE_NS + crate::collector::MARGIN_NS;
        gaps.offset = replay.offset();
        gaps.given.set(false);
        loop {
            let d = drain.step(&mut replay, &mut gaps, now, false)?;
            decoded += d.records as u64;
            if replay.next == replay.per_cycle {
                break;
            }
        }
    }
    let cpu_ns = crate::clock::thread_cpu_ns() - cpu0;
    Ok(Replayed { drain, decoded, cpu_ns, per_cycle: replay.per_cycle, gaps_per_cycle: gaps.gaps.len() })
}

#[cfg(test)]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Kind;

    /// The replay goes through attribution for real: the gaps are named by
    /// the stream's contexts (the tick's timer, the kworker's work item),
    /// on every CPU; only their edges, the probe's own time, are not.
    #[test]
    fn replayed_gaps_are_explained_by_the_stream() {
        let r = replay(3, 200_000).unwrap();
        assert!(r.decoded >= 190_000, "{}", r.decoded);
        for c in r.drain.sinks.stats.cpus() {
            assert!(c.hiccups > 1000, "cpu {}: {} hiccups", c.cpu, c.hiccups);
            let top: Vec<(Kind, String)> =
                r.drain.sinks.stats.top_causes(Some(c.cpu)).iter().map(|(k, _)| (k.cause.kind(), k.cause.name())).collect();
            assert!(top.contains(&(Kind::Work, "vmstat_update".into())), "{top:?}");
            assert!(top.contains(&(Kind::Timer, "tick_nohz_handler".into())), "{top:?}");
            assert_eq!(top[..2], [(Kind::Work, "vmstat_update".into()), (Kind::Timer, "tick_nohz_handler".into())]);
            assert!(!top.iter().any(|(k, _)| *k == Kind::Lost), "{top:?}");
            // The edges are 1.7 µs of each 15.2 µs of gaps per ms.
            assert!(c.explained_pct() > 85.0, "cpu {}: {:.1}% explained", c.cpu, c.explained_pct());
        }
    }
}
