//! The keys acting on the view model: sorting, the CPU filter, pause,
//! reset, help, scrolling the overlays, and moving between panes. Sizes and
//! facts are given as values; nothing here reads the host.

use super::app::{Action, App, Pane, Sort};
use super::tests::{app, draw, info, line_with, stats, task, text, virtio, S, START};
use crate::interval::hiccup;
use crate::snapshot::Snapshot;

#[test]
fn sort_cycles_and_reorders_culprits() {
    let mut a = app();
    let first = |a: &App| a.culprits()[0].key.cause.cause();
    assert_eq!((a.sort, first(&a)), (Sort::Total, task(b"evil\x1b[2J", 666)));
    a.apply(Action::CycleSort);
    assert_eq!(a.sort, Sort::Count);
    assert_eq!(first(&a), virtio());
    assert!(text(&draw(&a, 80, 24)).contains("count▼"));
    for _ in 0..4 {
        a.apply(Action::CycleSort);
    }
    assert_eq!(a.sort, Sort::Total);
}

#[test]
fn cpu_filter_cycles_through_each_cpu() {
    let mut a = app();
    let mut seen = vec![a.cpu_filter];
    for _ in 0..3 {
        a.apply(Action::CycleCpu);
        seen.push(a.cpu_filter);
    }
    assert_eq!(seen, vec![None, Some(6), Some(7), None]);
    a.apply(Action::CycleCpu);
    // CPU 6's five: vmstat_update, the tick, kworker, unexplained and evil.
    assert_eq!(a.culprits().len(), 5, "CPU 6's culprits");
    assert!(a.culprits().iter().all(|c| c.key.cpu == 6));
    let s = text(&draw(&a, 80, 24));
    assert!(s.contains("cpu 6 (c)") && !s.contains("24:virtio0"), "{s}");
}

#[test]
fn pause_freezes_the_view() {
    let mut a = app();
    a.apply(Action::Pause);
    let mut later = stats();
    later.record(&hiccup(6, START + 11 * S, vec![(task(b"late", 9), 5_000)], 0));
    later.set_now_ns(START + 12 * S);
    a.update(Snapshot::of(&later));
    assert_eq!(a.view().cpus[0].hiccups, 2);
    assert!(text(&draw(&a, 80, 24)).contains("PAUSED"));
    a.apply(Action::Pause);
    a.update(Snapshot::of(&later));
    assert_eq!(a.view().cpus[0].hiccups, 3);
}

/// The reset happens where the aggregates are kept (stats.rs tests it);
/// the screen shows the fresh snapshot the collector sends after it.
#[test]
fn a_reset_snapshot_shows_zeros_and_says_reset() {
    let mut a = app();
    let mut s = stats();
    s.reset(START + 10 * S);
    a.apply(Action::Reset);
    a.update(Snapshot::of(&s));
    assert!(a.view().cpus.iter().all(|c| c.hiccups == 0 && c.max_ns == 0 && c.counters.drops == 0));
    assert_eq!((a.view().counters.events, a.view().counters.consumer_cpu_ns), (0, 0));
    assert!(a.culprits().is_empty() && a.stalls().next().is_none());
    let screen = text(&draw(&a, 80, 24));
    assert!(screen.contains("no hiccup yet") && screen.contains("elapsed 0:00 (reset)") && screen.contains("drops 0"), "{screen}");
    s.record(&hiccup(7, START + 11 * S, vec![(task(b"late", 9), 5_000)], 0));
    s.set_now_ns(START + 12 * S);
    a.update(Snapshot::of(&s));
    assert_eq!((a.view().cpus[0].hiccups, a.view().cpus[1].hiccups, a.view().cpus[1].max_ns), (0, 1, 5_000));
    assert_eq!(a.culprits().len(), 1);
}

#[test]
fn help_toggles_and_shows_the_cost() {
    let mut a = app();
    a.apply(Action::Help);
    let s = text(&draw(&a, 80, 24));
    assert!(s.contains("Help") && s.contains("Cost of jitterwatch") && s.contains("on_switch"), "{s}");
    assert!(line_with(&s, "on_switch").contains("85 ns/event"), "{s}");
    assert!(line_with(&s, "context switches").contains("tp_btf/sched_switch on every CPU"), "{s}");
    // 50 ms of consumer CPU over 10 s, for 123,456 events.
    assert!(line_with(&s, "consumer thread").contains("0.5% of one CPU, 405ns per event"), "{s}");
    a.apply(Action::Help);
    assert!(!text(&draw(&a, 80, 24)).contains("Cost of jitterwatch"));
}

/// At 80×24 neither the help nor a stall fits: each says which rows show
/// and scrolls to its last (the help's end and the pop-up's last line
/// were cut off, with no way to reach them).
#[test]
fn overlays_too_tall_for_the_screen_scroll_to_their_end() {
    let mut a = app();
    a.apply(Action::Help);
    let s = text(&draw(&a, 80, 24));
    assert!(s.contains("rows 1–20 of") && s.contains("↑↓ scroll"), "{s}");
    assert!(!s.contains("unexplained: time no kernel event covers"), "{s}");
    for _ in 0..10 {
        a.apply(Action::Scroll(10));
    }
    let s = text(&draw(&a, 80, 24));
    assert!(s.contains("unexplained: time no kernel event covers"), "the help's last line:\n{s}");
    a.apply(Action::Top);
    assert!(text(&draw(&a, 80, 24)).contains("rows 1–20 of"));
    a.apply(Action::Help);
    assert_eq!(a.overlay_scroll, 0, "closing resets it");
    // A stall without a stack: its hint line is wrapped whole at 80 columns.
    let mut st = stats();
    st.record(&hiccup(6, START + 6 * S, vec![(task(b"hog", 50), 3_000_000)], 0));
    let mut a = App::new(info(), Snapshot::of(&st), false);
    a.apply(Action::Detail);
    for _ in 0..5 {
        a.apply(Action::Scroll(10));
    }
    let t = text(&draw(&a, 80, 24));
    assert!(t.contains("DUR in one go, or an IRQ."), "the pop-up's last line whole:\n{t}");
}

#[test]
fn tab_moves_between_panes_and_small_screens_swap_in_the_histogram() {
    let mut a = app();
    let panes: Vec<_> = (0..4)
        .map(|_| {
            a.apply(Action::NextPane);
            a.focus
        })
        .collect();
    assert_eq!(panes, [Pane::Stalls, Pane::Histogram, Pane::Cpus, Pane::Culprits]);
    a.apply(Action::PrevPane);
    assert_eq!(a.focus, Pane::Cpus);
    while a.focus != Pane::Histogram {
        a.apply(Action::NextPane);
    }
    let s = text(&draw(&a, 80, 24));
    assert!(s.contains("▶ Loop gaps") && !s.contains("Culprits"), "{s}");
}
