//! The screen read at a glance, at every size: names whole, the header in
//! words, passive mode's values whole and labelled. Sizes and facts are
//! given as values; nothing here reads the host.

use super::app::{Action, App, Pane};
use super::tests::{draw, info, line_with, stats, task, text, S, START};
use crate::cause::{Cause, Symbol};
use crate::interval::hiccup;
use crate::snapshot::Snapshot;

/// A kworker's name with its pid: 20 columns.
const KWORKER: &str = "kworker/u16:3[12345]";
/// A work function's name of 40 columns, the most a name is promised.
const LONG: &str = "amdgpu_device_delayed_init_work_handler2";

/// The fixture's culprits, with the two long names the largest.
fn long_names(forty: bool) -> App {
    let mut s = stats();
    s.record(&hiccup(6, START + 8 * S, vec![(task(b"kworker/u16:3", 12345), 5_000_000)], 0));
    if forty {
        s.record(&hiccup(7, START + 9 * S, vec![(Cause::Work(Symbol::from(LONG)), 4_000_000)], 0));
    }
    App::new(info(), Snapshot::of(&s), true)
}

#[test]
fn the_fixture_names_are_as_long_as_they_say() {
    assert_eq!((KWORKER.chars().count(), LONG.chars().count()), (20, 40));
}

#[test]
fn a_20_column_name_is_whole_at_every_size() {
    for (w, h) in [(80, 24), (100, 30), (120, 40), (160, 48), (200, 50)] {
        let s = text(&draw(&long_names(false), w, h));
        let row = line_with(&s, KWORKER);
        assert!(row.contains("5.0ms"), "{w}×{h}: {row}");
    }
}

#[test]
fn a_40_column_name_is_whole_from_100_columns() {
    for (w, h) in [(100, 30), (120, 40), (160, 48), (200, 50)] {
        let s = text(&draw(&long_names(true), w, h));
        let row = line_with(&s, LONG);
        assert!(row.contains("4.0ms"), "{w}×{h}: {row}");
        assert!(line_with(&s, KWORKER).contains("5.0ms"), "{w}×{h}:\n{s}");
    }
    // At 80 columns the name column has 21: the start of it, marked cut.
    let s = text(&draw(&long_names(true), 80, 24));
    assert!(line_with(&s, "amdgpu_device_delaye… ").contains("4.0ms"), "{s}");
}

/// At 120×40 the histogram keeps its place while the names fit beside it,
/// gives way to a 40-column name, and comes back with Tab.
#[test]
fn the_histogram_gives_way_first() {
    let s = text(&draw(&long_names(false), 120, 40));
    assert!(s.contains("Loop gaps") && s.contains("Culprits"), "{s}");
    let mut a = long_names(true);
    let s = text(&draw(&a, 120, 40));
    assert!(!s.contains("Loop gaps") && s.contains("Culprits") && s.contains("Recent worst stalls"), "{s}");
    while a.focus != Pane::Histogram {
        a.apply(Action::NextPane);
    }
    let s = text(&draw(&a, 120, 40));
    assert!(s.contains("▶ Loop gaps") && !s.contains("Culprits"), "{s}");
    // 200 columns hold both.
    let s = text(&draw(&long_names(true), 200, 50));
    assert!(s.contains("Loop gaps") && line_with(&s, LONG).contains("4.0ms"), "{s}");
}

/// Unexplained time says what it is in full where the name column has room.
#[test]
fn unexplained_time_is_worded_to_fit() {
    let s = text(&draw(&long_names(false), 80, 24));
    assert!(s.contains("(no kernel event)"), "{s}");
    let s = text(&draw(&long_names(false), 200, 50));
    assert!(s.contains("(no kernel event: hypervisor, SMI, hardware)"), "{s}");
}

/// By sender (key o), a long sender's name is whole too: the histogram
/// gives way to it as to a culprit's.
#[test]
fn a_long_sender_is_whole() {
    use crate::engine::{Origin, Sender};
    let mut s = stats();
    let work = Cause::Work(Symbol::from("vmstat_update"));
    let timer = Cause::Timer(Symbol::from("intel_gt_retire_requests_timer"));
    let mut h = hiccup(6, START + 7 * S, vec![(work.clone(), 9_000)], 0);
    h.origins = vec![(work, Origin { sender: Sender::Local(timer), via: None })];
    s.record(&h);
    let mut a = App::new(info(), Snapshot::of(&s), true);
    a.apply(Action::BySender);
    let shown = "(timer:intel_gt_retire_requests_timer)";
    assert_eq!(shown.chars().count(), 38);
    for (w, h) in [(100, 30), (120, 40), (200, 50)] {
        let screen = text(&draw(&a, w, h));
        assert!(line_with(&screen, shown).contains("9.0µs"), "{w}×{h}:\n{screen}");
    }
}

/// The header says how each CPU is isolated in words, each fact whole on
/// its line at every size; CPUs isolated alike share their words.
#[test]
fn the_header_says_each_cpu_s_isolation_in_words() {
    use super::sysinfo::Isolation;
    let mut i = info();
    i.cpus = vec![
        (1, Isolation { isolcpus: false, nohz_full: false }),
        (6, Isolation { isolcpus: true, nohz_full: true }),
        (7, Isolation { isolcpus: true, nohz_full: true }),
    ];
    let a = App::new(i, Snapshot::of(&stats()), true);
    for (w, h) in [(80, 24), (120, 40), (200, 50)] {
        let s = text(&draw(&a, w, h));
        let head: Vec<&str> = s.lines().take_while(|l| !l.starts_with('┌') && !l.starts_with('┏')).collect();
        for fact in [
            "jitterwatch testhost",
            "kernel 6.18.0-test",
            "CPU 1 isolated: no · nohz_full: no · tick: on",
            "CPU 6-7 isolated: yes · nohz_full: yes · tick: off with one task",
            "node 0 · SMT 6+14 7+15",
            "threshold 1.0µs",
            "elapsed 0:10",
            "drops 3",
            "lag 2.5ms",
            "bpf 85ns/ev",
        ] {
            assert!(head.iter().any(|l| l.contains(fact)), "{w}×{h}: {fact:?} not whole in\n{}", head.join("\n"));
        }
        assert!(!s.contains("neither") && !s.contains("isolcpus+"), "{s}");
    }
}
