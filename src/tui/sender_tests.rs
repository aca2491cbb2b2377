//! The culprits by sender (key o) and the stalls' origins, drawn with
//! ratatui's TestBackend from a fixed snapshot.

use super::app::{Action, App, Sort};
use super::tests::{app, draw, info, line_with, stats, task, text, S, START};
use crate::cause::{comm, Cause, Symbol};
use crate::cause::{Origin, Sender};
use crate::interval::{hiccup, Hiccup};
use crate::snapshot::Snapshot;
use crate::stats::Stats;

/// A name with an escape sequence and a right-to-left override.
const HOSTILE: &[u8] = b"ev\x1b[2J\xe2\x80\xaeil";
/// How the screen must show it.
const HOSTILE_SHOWN: &str = "ev\\x1b[2J\\u{202e}il";

fn shootdown() -> Cause {
    Cause::Csd(Symbol::from("flush_tlb_func"))
}

fn from(name: &[u8], pid: u32, cpu: u32, via: Option<&str>) -> Origin {
    Origin { sender: Sender::Task { comm: comm(name), pid, tgid: pid, cpu }, via: via.map(Symbol::from) }
}

/// A stall on `cpu` whose causes (largest first) came with these origins.
fn sent(cpu: u32, t: u64, causes: Vec<(Cause, u64)>, origins: Vec<(Cause, Origin)>) -> Hiccup {
    let mut h = hiccup(cpu, START + t, causes, 0);
    h.origins = origins.into_iter().map(|(c, o)| (c.into(), o)).collect();
    h
}

/// The test screen's stats, plus: CPU 6 shot down 3 times by
/// mprotect-storm (60 µs), its vmstat work queued by its own timer softirq
/// (9 µs); CPU 7 woken once by a hostile name (5 µs, behind a bigger task).
fn with_senders() -> Stats {
    let mut s = stats();
    let storm = from(b"mprotect-storm", 4242, 0, Some("flush_tlb_mm_range"));
    for i in 0..3 {
        s.record(&sent(6, 6 * S + i, vec![(shootdown(), 20_000)], vec![(shootdown(), storm.clone())]));
    }
    let vmstat = Cause::Work(Symbol::from("vmstat_update"));
    let timer = Origin { sender: Sender::Local(Cause::Softirq(1).into()), via: None };
    s.record(&sent(6, 7 * S, vec![(vmstat.clone(), 9_000)], vec![(vmstat, timer)]));
    let woken = task(b"app", 77);
    s.record(&sent(7, 8 * S, vec![(task(b"big", 5), 50_000), (woken.clone(), 5_000)], vec![(woken, from(HOSTILE, 66, 1, None))]));
    s
}

/// A row of the focused pane (its rows start with ┃) holds `what`.
fn in_pane_any(screen: &str, what: &str) -> bool {
    screen.lines().any(|l| l.starts_with('┃') && l.contains(what))
}

fn senders_app() -> App {
    let mut a = App::new(info(), Snapshot::of(&with_senders()), true);
    a.apply(Action::BySender);
    a
}

#[test]
fn by_sender_lists_each_sender_with_its_count_and_time() {
    let mut a = senders_app();
    let screen = text(&draw(&a, 160, 48));
    assert!(screen.contains("Culprits by sender (IPIs, work, wake-ups)"), "{screen}");
    // CPU, kind, sender, count, total, share; most time first.
    let storm = line_with(&screen, " mprotect-storm ");
    // The focused pane's border is thick.
    let cells: Vec<&str> = storm.split('┃').nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&cells[..5], ["6", "ipi", "mprotect-storm", "3", "60.0µs"], "{storm}");
    let timer = line_with(&screen, "(softirq:TIMER)");
    assert!(timer.contains(" work ") && timer.contains("9.0µs"), "{timer}");
    let hostile = line_with(&screen, HOSTILE_SHOWN);
    assert!(hostile.contains("wake-up") && hostile.contains("5.0µs"), "{hostile}");
    assert!(screen.find("mprotect-storm").unwrap() < screen.find("(softirq:TIMER)").unwrap());
    // With the senders, those unknown and what no one sends: each CPU's
    // rows add up to its stolen time (100% of the view).
    for cpu in [6, 7] {
        let rows: u64 = a.senders().iter().filter(|s| s.cpu == cpu).map(|s| s.total_ns).sum();
        let stolen = a.view().cpus.iter().find(|c| c.cpu == cpu).unwrap().stolen_ns;
        assert_eq!(rows, stolen, "CPU {cpu}: {:?}", a.senders());
    }
    assert!(in_pane_any(&screen, "(not sent)") && in_pane_any(&screen, "(sender unknown)"), "{screen}");
    // No cause rows in this view (the focused pane's rows start with ┃).
    let in_pane = |screen: &str, what: &str| screen.lines().any(|l| l.starts_with('┃') && l.contains(what));
    assert!(!in_pane(&screen, "24:virtio0-input.0"), "{screen}");
    // The CPU filter applies; back by cause with o.
    a.apply(Action::CycleCpu);
    a.apply(Action::CycleCpu);
    let cpu7 = text(&draw(&a, 160, 48));
    assert!(in_pane(&cpu7, HOSTILE_SHOWN) && !cpu7.contains("mprotect-storm"), "{cpu7}");
    a.apply(Action::BySender);
    let causes = text(&draw(&a, 160, 48));
    assert!(in_pane(&causes, "24:virtio0-input.0") && !causes.contains("Culprits by sender"), "{causes}");
}

#[test]
fn by_sender_sorts_by_count_or_name_but_not_by_max_or_last_seen() {
    let mut a = senders_app();
    // The senders' order (the rows for the rest are another test's).
    let names =
        |a: &App| a.senders().iter().map(|s| s.sender.clone()).filter(|n| n != "(sender unknown)" && n != "(not sent)").collect::<Vec<_>>();
    assert_eq!(names(&a), ["mprotect-storm", "(softirq:TIMER)", HOSTILE_SHOWN]);
    a.apply(Action::CycleSort);
    assert_eq!(a.sort, Sort::Count);
    assert_eq!(names(&a)[0], "mprotect-storm");
    assert!(text(&draw(&a, 160, 48)).contains("count▼"));
    a.apply(Action::CycleSort);
    assert_eq!(a.sort, Sort::Name, "max and last seen are skipped");
    assert_eq!(names(&a), ["(softirq:TIMER)", HOSTILE_SHOWN, "mprotect-storm"]);
    a.apply(Action::CycleSort);
    assert_eq!(a.sort, Sort::Total);
    // Sorted by max by cause: by sender falls back to total.
    a.apply(Action::BySender);
    a.apply(Action::CycleSort);
    a.apply(Action::CycleSort);
    assert_eq!(a.sort, Sort::Max);
    a.apply(Action::BySender);
    assert_eq!(a.sort, Sort::Total);
}

#[test]
fn a_hostile_sender_is_shown_escaped() {
    let b = draw(&senders_app(), 160, 48);
    let screen = text(&b);
    assert!(screen.contains(HOSTILE_SHOWN), "{screen}");
    let raw = |ch: char| ch.is_control() || ch == '\u{202e}';
    assert!(!b.content.iter().any(|c| c.symbol().chars().any(raw)), "raw control or bidi character on screen:\n{screen}");
}

#[test]
fn no_sender_says_why() {
    let mut a = app();
    a.apply(Action::BySender);
    let screen = text(&draw(&a, 160, 48));
    assert!(screen.contains("no sender seen yet: no IPI or work on these CPUs traced to its sender"), "{screen}");
    a.origins = false;
    let screen = text(&draw(&a, 160, 48));
    assert!(screen.contains("no sender: --no-origins was given"), "{screen}");
    // A kernel without the IPI send tracepoints: named (irq_work_entry is not an origin's).
    let mut s = stats();
    let mut raw = s.counters().clone();
    raw.missing_tracepoints = vec!["irq_work_entry", "ipi_send_cpu", "csd_queue_cpu"];
    s.update_counters(raw, START + 10 * S);
    let mut a = App::new(info(), Snapshot::of(&s), true);
    a.apply(Action::BySender);
    a.apply(Action::CycleCpu);
    let screen = text(&draw(&a, 200, 48));
    let line = line_with(&screen, "no sender seen yet on CPU 6");
    assert!(line.contains("this kernel lacks ipi_send_cpu, csd_queue_cpu (IPI senders need Linux ≥ 6.3)"), "{line}");
    // Small screens wrap it rather than cut it.
    let small = text(&draw(&a, 80, 24));
    assert!(small.contains("no sender seen yet") && small.contains("Linux ≥ 6.3"), "{small}");
}

#[test]
fn a_stall_names_its_top_cause_s_origin() {
    let screen = text(&draw(&App::new(info(), Snapshot::of(&with_senders()), true), 160, 48));
    let stall = line_with(&screen, "ipi:flush_tlb_func 20.0µs");
    assert!(stall.contains("ipi:flush_tlb_func 20.0µs ← mprotect-storm[4242] on cpu 0 via flush_tlb_mm_range"), "{stall}");
    assert!(line_with(&screen, "vmstat_update 9.0µs").contains("vmstat_update 9.0µs ← (softirq:TIMER)"), "{screen}");
    // Only the top cause's: the woken app's is not its stall's top cause.
    let big = line_with(&screen, "big[5] 50.0µs");
    assert!(!big.contains('←') && !big.contains("ev\\x1b"), "{big}");
}

#[test]
fn a_stall_s_hostile_origin_is_escaped() {
    let mut s = stats();
    let woken = task(b"app", 77);
    s.record(&sent(7, 8 * S, vec![(woken.clone(), 5_000_000)], vec![(woken, from(HOSTILE, 66, 1, None))]));
    let b = draw(&App::new(info(), Snapshot::of(&s), true), 160, 48);
    let screen = text(&b);
    assert!(line_with(&screen, "app[77] 5.0ms").contains(&format!("← {HOSTILE_SHOWN}[66] on cpu 1")), "{screen}");
    assert!(!b.content.iter().any(|c| c.symbol().contains('\u{202e}')), "{screen}");
}

#[test]
fn by_sender_hints_the_fix_for_the_top_sender() {
    let screen = text(&draw(&senders_app(), 160, 48));
    let hint = line_with(&screen, "hint:");
    // Its stalls show flush_tlb_func: a TLB shootdown's fix.
    assert!(hint.contains("mprotect-storm sent IPIs to CPU 6 (3 stalls), TLB shootdowns:"), "{hint}");
}

/// A sender of reschedule IPIs (wake-ups) gets a wake-up's hint, not a
/// TLB shootdown's.
#[test]
fn a_wake_up_ipi_sender_is_not_blamed_for_tlb_shootdowns() {
    let mut s = stats();
    let resched = Cause::Vector(crate::record::Vector::Reschedule);
    let bench = from(b"redis-benchmark", 4242, 0, None);
    for i in 0..4 {
        s.record(&sent(6, 6 * S + i, vec![(resched.clone(), 90_000)], vec![(resched.clone(), bench.clone())]));
    }
    let mut a = App::new(info(), Snapshot::of(&s), true);
    a.apply(Action::BySender);
    let screen = text(&draw(&a, 160, 48));
    let hint = line_with(&screen, "hint:");
    assert!(hint.contains("redis-benchmark sent IPIs to CPU 6 (4 stalls), wake-ups:") && !hint.contains("TLB"), "{hint}");
}
