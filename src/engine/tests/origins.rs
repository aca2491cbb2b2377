//! The culprit behind the culprit on synthetic streams: an IPI joined to
//! its sender by callback, work to its queuer by function, a task to its
//! waker by pid; nothing when the sending was not seen.

use super::*;
use crate::cause::{Origin, Sender};
use crate::record::OriginKind;

const FLUSH_FN: u64 = 0xffff_ffff_8100_4000;
const CALLSITE: u64 = 0xffff_ffff_8100_5000;

fn origins_engine(cpus: &[usize]) -> Engine {
    let syms = format!("{SYMS}ffffffff81004000 t flush_tlb_func\nffffffff81005000 t flush_tlb_mm_range\n");
    let mut e = Engine::new(cpus, 0, 1024, Namer::new(Kallsyms::parse(&syms), IdleStates::default()));
    for &c in cpus {
        e.set_probe_tids(c as u32, &[PROBE]);
    }
    e
}

fn sent(ts: u64, cpu: u32, kind: OriginKind, from_cpu: u32, sender: Task, func: u64, woken: u32) -> Event {
    Event { ts, cpu, dropped: 0, own_ns: 0, payload: Payload::Origin { kind, sender, from_cpu, callsite: CALLSITE, func, woken } }
}

/// A csd callback flush_tlb_func on `cpu` from `at` for 20 ns.
fn flush_ipi(cpu: u32, at: u64) -> Vec<Event> {
    [
        Payload::VectorEntry(Vector::CallFunction),
        Payload::CsdEntry { func: FLUSH_FN, csd: 0x9 },
        Payload::CsdExit { func: FLUSH_FN, csd: 0x9 },
        Payload::VectorExit(Vector::CallFunction),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, p)| Event { ts: at + [0, 5, 25, 30][i], cpu, dropped: 0, own_ns: 0, payload: p })
    .collect()
}

fn hiccups(e: &mut Engine, events: &[Event], gaps: &[(u32, u64, u64)]) -> Vec<Hiccup> {
    for x in events {
        e.on_event(x);
    }
    for &(cpu, t0, t1) in gaps {
        e.on_interval(Interval { cpu, ..gap(t0, t1) });
    }
    let mut got = Vec::new();
    e.attribute_ready(1_000_000, |h| got.push(h.clone()));
    got
}

fn origin_of<'a>(h: &'a Hiccup, label: &str) -> Option<&'a Origin> {
    h.origins.iter().find(|(c, _)| c.label() == label).map(|(_, o)| o)
}

#[test]
fn an_ipi_names_its_sender_and_call_site() {
    let mut e = origins_engine(&[CPU as usize]);
    let java = task(4242, "java");
    let mut evs = vec![switch(10, task(1, "x"), probe()), sent(90, CPU, OriginKind::Ipi, 0, java, FLUSH_FN, 0)];
    evs.extend(flush_ipi(CPU, 100));
    let got = hiccups(&mut e, &evs, &[(CPU, 95, 140)]);
    let o = origin_of(&got[0], "ipi:flush_tlb_func").expect("an origin");
    assert_eq!(o.sender, Sender::Task { comm: comm("java"), pid: 4242, tgid: 4242, cpu: 0 });
    assert_eq!(o.via.as_deref(), Some("flush_tlb_mm_range"));
    let mut line = String::new();
    crate::export::push_origin(o, &mut line);
    assert_eq!(line, "java[4242] on cpu 0 via flush_tlb_mm_range");
}

#[test]
fn an_ipi_whose_sending_was_not_seen_has_no_origin() {
    let mut e = origins_engine(&[CPU as usize]);
    let mut evs = vec![switch(10, task(1, "x"), probe())];
    evs.extend(flush_ipi(CPU, 100));
    // Another callback's sending does not stand in for it.
    evs.insert(1, sent(90, CPU, OriginKind::Ipi, 0, task(7, "other"), 0xdead, 0));
    let got = hiccups(&mut e, &evs, &[(CPU, 95, 140)]);
    assert!(got[0].origins.is_empty(), "{:?}", got[0].origins);
}

#[test]
fn a_sending_read_after_the_receivers_events_still_joins() {
    let mut e = origins_engine(&[CPU as usize]);
    let mut evs = vec![switch(10, task(1, "x"), probe())];
    evs.extend(flush_ipi(CPU, 100));
    // The sender's CPU wrote it first, but its record is drained later.
    evs.push(sent(90, CPU, OriginKind::Ipi, 0, task(4242, "java"), FLUSH_FN, 0));
    let got = hiccups(&mut e, &evs, &[(CPU, 95, 140)]);
    assert!(origin_of(&got[0], "ipi:flush_tlb_func").is_some());
}

#[test]
fn a_mask_send_reaches_each_watched_cpu() {
    let mut e = origins_engine(&[1, 2]);
    let java = task(4242, "java");
    let mut evs = vec![
        Event {
            ts: 10,
            cpu: 1,
            dropped: 0,
            own_ns: 0,
            payload: Payload::Switch {
                prev: task(1, "x"),
                next: probe(),
                prev_state: 0,
                prev_ran_ns: 0,
                delays: (None, None),
                runtimes: (0, 0),
                preempt: true,
            },
        },
        Event {
            ts: 10,
            cpu: 2,
            dropped: 0,
            own_ns: 0,
            payload: Payload::Switch {
                prev: task(1, "x"),
                next: probe(),
                prev_state: 0,
                prev_ran_ns: 0,
                delays: (None, None),
                runtimes: (0, 0),
                preempt: true,
            },
        },
        // One ipi_send_cpumask: a record per watched CPU in the mask.
        sent(90, 1, OriginKind::Ipi, 0, java, FLUSH_FN, 0),
        sent(90, 2, OriginKind::Ipi, 0, java, FLUSH_FN, 0),
    ];
    evs.extend(flush_ipi(1, 100));
    evs.extend(flush_ipi(2, 110));
    let got = hiccups(&mut e, &evs, &[(1, 95, 140), (2, 105, 150)]);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|h| origin_of(h, "ipi:flush_tlb_func").is_some()));
}

#[test]
fn work_queued_by_a_timer_on_the_cpu_itself_names_that_context() {
    let mut e = origins_engine(&[CPU as usize]);
    let kw = task(88, "kworker/1:1");
    let evs = [
        switch(10, task(1, "x"), probe()),
        // The TIMER softirq (a delayed work's timer) queues vmstat_update here.
        ev(50, Payload::SoftirqEntry { vec: 1, syscall: None }),
        sent(55, CPU, OriginKind::Work, CPU, probe(), WORK_FN, 0),
        ev(60, Payload::SoftirqExit { vec: 1 }),
        switch(100, probe(), kw),
        ev(110, Payload::WorkStart { func: WORK_FN, work: 0xabc }),
        ev(150, Payload::WorkEnd { func: WORK_FN, work: 0xabc }),
        switch(160, kw, probe()),
    ];
    let got = hiccups(&mut e, &evs, &[(CPU, 100, 160)]);
    let o = origin_of(&got[0], "work:vmstat_update").expect("an origin");
    let mut line = String::new();
    crate::export::push_origin(o, &mut line);
    assert_eq!(line, "(softirq:TIMER)");
    // The kworker itself was woken by nobody seen.
    assert!(origin_of(&got[0], "task:kworker/1:1[88]").is_none());
}

#[test]
fn a_task_names_its_waker_the_latest_before_the_stall() {
    let mut e = origins_engine(&[CPU as usize]);
    let hog = task(77, "hog");
    let evs = [
        switch(10, task(1, "x"), probe()),
        sent(20, CPU, OriginKind::Wake, 0, task(5, "old-waker"), 0, 77),
        sent(80, CPU, OriginKind::Wake, 0, task(6, "bash"), 0, 77),
        switch(100, probe(), hog),
        switch(300, hog, probe()),
        // After the stall: not its waker.
        sent(400, CPU, OriginKind::Wake, 0, task(9, "late"), 0, 77),
    ];
    let got = hiccups(&mut e, &evs, &[(CPU, 100, 300)]);
    let o = origin_of(&got[0], "task:hog[77]").expect("an origin");
    assert_eq!(o.sender, Sender::Task { comm: comm("bash"), pid: 6, tgid: 6, cpu: 0 });
}

#[test]
fn a_reused_stall_carries_nothing_of_the_one_before() {
    // The engine hands out stalls by reference and reuses them: the second
    // attribution (an empty gap) must not keep the first's causes or origins.
    let mut e = origins_engine(&[CPU as usize]);
    let java = task(4242, "java");
    let mut evs = vec![switch(10, task(1, "x"), probe()), sent(90, CPU, OriginKind::Ipi, 0, java, FLUSH_FN, 0)];
    evs.extend(flush_ipi(CPU, 100));
    let first = hiccups(&mut e, &evs, &[(CPU, 95, 140)]);
    assert!(!first[0].causes.is_empty() && !first[0].origins.is_empty());
    e.on_interval(Interval { cpu: CPU, ..gap(200_000, 200_050) });
    let mut seen = Vec::new();
    e.attribute_ready(2_000_000, |h| seen.push((h.t0, h.gap, h.causes.len(), h.origins.len(), h.unexplained)));
    assert_eq!(seen, vec![(200_000, 50, 0, 0, 50)]);
}
