//! The screen read at a glance, at every size: names whole, the header in
//! words, passive mode's values whole and labelled. Sizes and facts are
//! given as values; nothing here reads the host.

use super::app::{Action, App, Pane};
use super::tests::{draw, info, line_with, stats, task, text, S, START};
use crate::cause::{comm, Cause, Symbol};
use crate::interval::hiccup;
use crate::snapshot::Snapshot;
use crate::stats::{Counters, Stats};

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
    use crate::cause::{Origin, Sender};
    let mut s = stats();
    let work = Cause::Work(Symbol::from("vmstat_update"));
    let timer = Cause::Timer(Symbol::from("intel_gt_retire_requests_timer"));
    let mut h = hiccup(6, START + 7 * S, vec![(work.clone(), 9_000)], 0);
    h.origins = vec![(work.into(), Origin { sender: Sender::Local(timer.into()), via: None })];
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

/// Passive mode as redis on CPU 1 showed it: five threads found at start,
/// one seen since, having lost 73.3% of its runnable time in 12,345
/// interruptions, 1.2 M preemptions and 999 late wake-ups.
fn redis() -> App {
    use crate::interval::{Source, Victim};
    let mut s = Stats::new(&[1], START).measuring(crate::interval::Method::Passive);
    let main = Victim { tid: 23769, comm: comm(b"redis-server") };
    for (source, n) in [(Source::Interrupted, 12_345u64), (Source::Preempted, 1_234_567), (Source::Wakeup, 999)] {
        let mut h = hiccup(1, START + 2 * S, vec![(task(b"redis-benchmark", 4242), 1_000)], 0);
        h.source = source;
        h.victim = Some(main);
        for _ in 0..n.min(3) {
            s.record(&h);
        }
    }
    s.set_threads(std::iter::once(crate::passive::ThreadInfo {
        tid: 23769,
        tgid: 23769,
        comm: comm(b"redis-server"),
        books: {
            let mut b = crate::passive::Books::default();
            b.ran_ns = 4 * S;
            b.kernel_ran_ns = 4 * S;
            b.booked.kernel_queued_ns = 250_000;
            b
        },
        migrations: vec![],
        last_cpu: Some(1),
        found: crate::passive::Found::Switch,
        classes: crate::passive::Classes::default(),
    }));
    s.update_counters(Counters::new(&[1]), START + 10 * S);
    let mut snap = Snapshot::of(&s);
    // Figures as a long run has them (the counts above stay small).
    let t = &mut snap.threads[0];
    (t.hiccups, t.by_kind, t.lost_pct) = (1_247_911, [12_345, 1_234_567, 999], Some(73.3));
    let mut a = App::new(info_of(&[1]), snap, true);
    a.found = [23769, 23770, 23771, 23772, 23773]
        .into_iter()
        .zip(["redis-server", "bio_close_file", "bio_aof", "bio_lazy_free", "io_thd_1"])
        .map(|(tid, n)| (tid, format!("{n}[{tid}]")))
        .collect();
    a
}

fn info_of(cpus: &[usize]) -> super::sysinfo::SysInfo {
    let mut i = info();
    i.cpus = cpus.iter().map(|&c| (c, super::sysinfo::Isolation { isolcpus: false, nohz_full: false })).collect();
    i
}

/// The row of `name` in the watched threads' pane, cell by cell.
fn thread_row(screen: &str, name: &str) -> Vec<String> {
    let row = screen.lines().find(|l| l.contains(&format!("│{name}")) || l.contains(&format!("┃{name}")));
    let row = row.unwrap_or_else(|| panic!("no row of {name} in\n{screen}"));
    let inner = row.split(['│', '┃']).find(|c| c.starts_with(name)).unwrap_or_else(|| panic!("{row}"));
    inner.split_whitespace().map(String::from).collect()
}

#[test]
fn passive_mode_shows_every_value_whole_and_counts_every_thread() {
    let mut a = redis();
    // The watched threads' pane in front at every size.
    a.focus = Pane::Histogram;
    for (w, h) in [(80, 24), (120, 40), (200, 50)] {
        let s = text(&draw(&a, w, h));
        // Five watched, one seen running: the count is five, names as fit.
        let names = match w {
            80 => " ",
            120 => ": redis-server[23769], bio_close_file[23770] +3 more ",
            _ => ": redis-server[23769], bio_close_file[23770], bio_aof[23771] +2 more ",
        };
        assert!(s.contains(&format!("passive, watching 5 threads{names}")), "{w}×{h}:\n{s}");
        // The culprit's name whole beside the threads (whose time it took, cut first).
        if w >= 120 {
            assert!(line_with(&s, " redis-benchmark[4242] ").contains("9.0µs"), "{w}×{h}:\n{s}");
        }
        if w >= 200 {
            assert!(line_with(&s, " redis-benchmark[4242] → redis-server[23769] ").contains("9.0µs"), "{w}×{h}:\n{s}");
        }
        // The CPU row names the thread that last ran there, whole.
        assert!(line_with(&s, "│   1 ").contains(" redis-server[23769] "), "{w}×{h}:\n{s}");
        assert!(s.contains("delayed: % of wall time"), "{w}×{h}:\n{s}");
        assert!(s.contains("lost: % of"), "{w}×{h}:\n{s}");
        let row = thread_row(&s, "redis-server[23769]");
        assert!(row.contains(&"73.3%".to_string()) && row.contains(&"1.2M".to_string()), "{w}×{h}: {row:?}\n{s}");
        // The four not seen since are listed, with nothing to say yet.
        for n in ["bio_close_file[23770]", "bio_aof[23771]", "bio_lazy_free[23772]", "io_thd_1[23773]"] {
            assert_eq!(thread_row(&s, n)[1..3], ["0", "-"], "{w}×{h}:\n{s}");
        }
    }
    // Wide enough for every column: each whole, the split by kind too.
    let s = text(&draw(&a, 200, 50));
    assert!(s.contains("Watched threads · lost: % of its runnable time"), "{s}");
    assert_eq!(
        thread_row(&s, "redis-server[23769]"),
        ["redis-server[23769]", "1.2M", "12.3k/1.2M/999", "1.0µs", "1.0µs", "73.3%", "0", "0"],
        "{s}"
    );
}

/// Narrow, the least telling columns go before a value is cut.
#[test]
fn the_threads_pane_drops_columns_never_digits() {
    let a = redis();
    let all = ["hiccups", "int/pre/wk", "p99", "max", "lost", "migr"];
    // The widest name (21) and each column whole (12.3k/1.2M/999 takes 14) need 67.
    assert_eq!(super::threads::thread_columns_for_test(&a, 67), all);
    assert_eq!(super::threads::thread_columns_for_test(&a, 66), all[..5]);
    assert_eq!(super::threads::thread_columns_for_test(&a, 61), ["hiccups", "p99", "max", "lost"]);
    assert_eq!(super::threads::thread_columns_for_test(&a, 46), ["hiccups", "max", "lost"]);
    assert_eq!(super::threads::thread_columns_for_test(&a, 20), ["hiccups", "lost"]);
    // Wider, the kernel's books join: time on a CPU and run_delay.
    let every = super::threads::thread_columns_for_test(&a, 200);
    assert_eq!(every[6..], ["in-sys", "ran", "run_delay"]);
}

/// The kernel's own books of a thread (schedstat's two fields) are on the
/// screen beside what it lost, so a user can hold them against schedstat.
#[test]
fn the_threads_pane_shows_the_kernels_books() {
    let mut a = redis();
    a.focus = Pane::Histogram;
    let s = text(&draw(&a, 260, 50));
    let row = thread_row(&s, "redis-server[23769]");
    assert_eq!(row[row.len() - 2..], ["4.00s", "250.0µs"], "{s}");
}

/// Where the watched threads go, as docs/screen.md says: from 120×36,
/// beside the culprits where the culprits' names leave them room (the
/// redis culprits take 80 columns), else in front with Tab.
#[test]
fn the_threads_pane_goes_beside_the_culprits_where_their_names_leave_room() {
    let mut a = redis();
    a.focus = Pane::Culprits;
    let beside = |a: &App, w, h| {
        let s = text(&draw(a, w, h));
        s.contains("hreads · lost: % of") && s.contains("Culprits")
    };
    assert_eq!(super::panes::culprits_width(&a), 80);
    // 120 - 80 leaves 40 columns, over the threads' 37: beside, its title
    // shortened; one column or one line less and it goes.
    assert!(beside(&a, 120, 40) && beside(&a, 200, 50));
    assert!(!beside(&a, 119, 40) && !beside(&a, 120, 35));
    a.focus = Pane::Histogram;
    assert!(text(&draw(&a, 100, 40)).contains("hreads · lost: % of"), "Tab brings it in front");
}
