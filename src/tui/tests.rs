//! The screen drawn from a fixed snapshot with ratatui's TestBackend, and
//! the keys acting on the view model.

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::Terminal;

use super::app::{Action, App, Pane};
pub(super) use super::screenshot::text;
use super::sysinfo::{Isolation, SysInfo};
use crate::bpf::ProgStat;
use crate::cause::{comm, Cause, Symbol};
use crate::interval::hiccup;
use crate::record::Vector;
use crate::snapshot::Snapshot;
use crate::stats::{Counters, Stats};

pub(super) const S: u64 = 1_000_000_000;
pub(super) const START: u64 = 100 * S;

pub(super) fn task(name: &[u8], pid: u32) -> Cause {
    Cause::Task { comm: comm(name), pid: Some(pid) }
}

pub(super) fn virtio() -> Cause {
    Cause::Irq { irq: 24, name: std::sync::Arc::from(&b"virtio0-input.0"[..]) }
}

pub(super) fn stats() -> Stats {
    let mut s = Stats::new(&[6, 7], START);
    s.record(&hiccup(
        6,
        START + 2 * S,
        vec![
            (Cause::Work(Symbol::from("vmstat_update")), 42_000),
            (Cause::Vector(Vector::LocalTimer), 3_000),
            (task(b"kworker/6:1", 412), 2_000),
        ],
        1_000,
    ));
    s.record(&hiccup(6, START + 5 * S, vec![(task(b"evil\x1b[2J", 666), 1_500_000)], 0));
    for i in 0..5 {
        s.record(&hiccup(7, START + (3 + i) * S, vec![(virtio(), 8_000)], 2_000));
    }
    let mut raw = Counters::new(&[6, 7]);
    for c in &mut raw.cpus {
        c.threshold_ns = 1_000;
        let mut l = crate::stats::SpinFigures { floor_ns: 25, ..Default::default() };
        (l.hist[5], l.hist[6], l.hist[11], l.hist[21]) = (40_000_000, 120_000, 300, 1);
        c.own = crate::stats::SourceFigures::Spin(l);
    }
    raw.cpus[0].drops = 3;
    raw.events = 123_456;
    raw.lag_ns = 2_500_000;
    raw.consumer_cpu_ns = 50_000_000;
    raw.prog_stats = vec![ProgStat { name: "on_switch".into(), run_cnt: 1000, run_time_ns: 85_000 }];
    raw.switch_hook = "tp_btf/sched_switch on every CPU (the default: the cheapest hook on the watched CPUs)".into();
    s.update_counters(raw, START + 10 * S);
    s
}

pub(super) fn info() -> SysInfo {
    let iso = Isolation { isolcpus: true, nohz_full: true };
    SysInfo {
        host: "testhost".into(),
        kernel: "6.18.0-test".into(),
        cpus: vec![(6, iso), (7, iso)],
        topology: "node 0 · SMT 6+14 7+15".into(),
        sibling_open: true,
    }
}

pub(super) fn app() -> App {
    App::new(info(), Snapshot::of(&stats()), true)
}

pub(super) fn draw(app: &App, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| f.render_widget(app, f.area())).unwrap();
    t.backend().buffer().clone()
}

pub(super) fn line_with<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no line with {needle:?} in\n{screen}"))
}

#[test]
fn small_terminal_shows_every_essential() {
    let b = draw(&app(), 80, 24);
    let s = text(&b);
    assert!(s.contains("jitterwatch testhost · kernel 6.18.0-test"), "{s}");
    assert!(s.contains("CPU 6-7 isolated: yes · nohz_full: yes · tick: off with one task") && s.contains("threshold 1.0µs"), "{s}");
    assert!(s.contains("drops 3") && s.contains("lag 2.5ms") && s.contains("bpf 85ns/ev"), "{s}");
    // A row per CPU, figures right-aligned in their columns.
    let cpu6 = line_with(&s, "   6       2");
    assert!(cpu6.contains("1.5ms") && cpu6.contains("25ns"), "{cpu6}");
    let cpu7 = line_with(&s, "   7       5");
    assert!(cpu7.contains("10.0µs"), "{cpu7}");
    // Culprits, largest total first; the hostile name shows escaped.
    let evil = s.find("evil\\x1b[2J[666]").expect("escaped name shown");
    let irq = s.find("24:virtio0-input.0").expect("irq shown");
    assert!(evil < irq, "{s}");
    assert!(!b.content.iter().any(|c| c.symbol().chars().any(|ch| ch.is_control())), "raw control character on screen");
    for k in [" q ", "quit", " space ", "pause", " Tab ", "pane", " s ", "sort", " c ", "cpu", " r ", "reset", " ? ", "help"] {
        assert!(line_with(&s, "quit").contains(k), "footer lacks {k:?}");
    }
}

#[test]
fn large_terminal_shows_all_panes() {
    let b = draw(&app(), 160, 48);
    let s = text(&b);
    // A sibling open to other work is flagged (white on red).
    let first = s.lines().next().unwrap();
    let at = first[..first.find("SMT").unwrap()].chars().count();
    assert_eq!((b.content[at].fg, b.content[at].bg), (Color::White, Color::Red), "{first}");
    assert!(
        s.lines().next().unwrap().contains(
            "kernel 6.18.0-test · CPU 6-7 isolated: yes · nohz_full: yes · tick: off with one task · node 0 · SMT 6+14 7+15 · threshold 1.0µs"
        ),
        "{s}"
    );
    assert!(s.contains("Culprits") && s.contains("Loop gaps") && s.contains("Recent worst stalls"), "{s}");
    assert!(s.contains("vmstat_update 42.0µs + irq:local_timer 3.0µs + kworker/6:1[412] 2.0µs + unexplained 1.0µs"), "{s}");
    assert!(s.contains("worst gap of each second (log scale)"), "{s}");
    // Histogram: log2 buckets, ≥ threshold marked ▓ (2^20 ns = 1.0ms).
    assert!(line_with(&s, "  1.0ms").contains('▓'), "{s}");
    assert!(line_with(&s, "  16ns").contains("40.0M"), "{s}");
    // Sparkline: a bar at the second of each hiccup, newest at the right.
    let cpu7 = line_with(&s, "   7       5");
    assert!(cpu7.trim_end_matches('│').ends_with("█████   "), "{cpu7:?}");
    assert!(s.contains("(no kernel event"), "{s}");
}

/// The kernel's last verdict on each CPU's tick reaches the header, a
/// tick kept on flagged with its dependency.
#[test]
fn the_header_says_why_the_tick_runs() {
    let mut snap = Snapshot::of(&stats());
    let mut on = crate::tick::Tally { refusals: 40, last_dep: 1 << 2, nohz_full: true, ..Default::default() };
    on.deps[2] = 40;
    snap.cpus[1].counters.tick = Some(on);
    snap.cpus[0].counters.tick = Some(crate::tick::Tally { stops: 2, last_success: true, nohz_full: true, ..Default::default() });
    let b = draw(&App::new(info(), snap, true), 160, 48);
    let t = text(&b);
    assert!(t.contains("tick now CPU 7: on (SCHED)") && t.contains("tick now CPU 6: off"), "{t}");
    let first = t.lines().position(|l| l.contains("tick now CPU 7")).unwrap();
    let line = t.lines().nth(first).unwrap();
    let at = line[..line.find("tick now CPU 7").unwrap()].chars().count();
    assert_eq!(b.content[first * 160 + at].bg, Color::Red, "{line}");
}

/// A cause whose stalls recur says its period beside its name.
#[test]
fn a_periodic_culprit_shows_its_period() {
    let mut s = stats();
    for k in 0..200u64 {
        s.record(&hiccup(7, START + k * 4_000_000, vec![(Cause::Softirq(1), 2_000)], 0));
    }
    s.look_for_periods(START + 10 * S, true);
    let b = draw(&App::new(info(), Snapshot::of(&s), true), 160, 48);
    let t = text(&b);
    assert!(line_with(&t, "TIMER").contains("TIMER every 4.0ms"), "{t}");
    // The others recur on nothing: no period beside them.
    assert_eq!(t.matches(" every ").count(), 1, "{t}");
}

#[test]
fn no_color_means_no_colour() {
    let mut a = app();
    a.color = false;
    let b = draw(&a, 160, 48);
    assert!(b.content.iter().all(|c| c.fg == Color::Reset && c.bg == Color::Reset));
    // Drops are still flagged, by reverse video.
    let s = text(&b);
    assert!(s.contains("drops 3"));
}

#[test]
fn tiny_terminal_says_so() {
    assert!(text(&draw(&app(), 30, 8)).contains("too small"));
}

/// Passive mode: the CPU pane says whose threads it watches, the stalls
/// say whose time and how it was lost, and the watched threads take the
/// loop-gap histogram's place.
#[test]
fn passive_mode_shows_its_threads_and_victims() {
    use crate::interval::{Source, Victim};
    let mut s = Stats::new(&[6, 7], START).measuring(crate::interval::Method::Passive);
    let app_thread = Victim { tid: 500, comm: comm(b"matcher") };
    let mut h = hiccup(6, START + 2 * S, vec![(task(b"jwhog", 77), 2_000_000)], 0);
    h.source = Source::Preempted;
    h.victim = Some(app_thread);
    s.record(&h);
    let mut irq = hiccup(6, START + 3 * S, vec![(virtio(), 9_000)], 0);
    irq.source = Source::Interrupted;
    irq.victim = Some(app_thread);
    s.record(&irq);
    // A NET_RX its own write() ran: its own work, counted apart (in-sys).
    let mut own = hiccup(6, START + 4 * S, vec![(crate::cause::Cause::Softirq(3), 3_000)], 0);
    own.source = Source::InSyscall;
    own.victim = Some(app_thread);
    s.record(&own);
    s.set_threads(std::iter::once(crate::passive::ThreadInfo {
        tid: 500,
        tgid: 500,
        comm: comm(b"matcher"),
        books: {
            let mut b = crate::passive::Books::default();
            b.ran_ns = 4 * S;
            b.kernel_ran_ns = 4 * S;
            b.booked.kernel_queued_ns = 250_000;
            b
        },
        migrations: vec![(6, 7, 2)],
        last_cpu: Some(7),
        found: crate::passive::Found::Switch,
        classes: crate::passive::Classes::default(),
    }));
    s.update_counters(Counters::new(&[6, 7]), START + 10 * S);
    let app = App::new(info(), Snapshot::of(&s), false);
    let screen = text(&draw(&app, 160, 48));
    assert!(screen.contains("passive, watching 1 thread: matcher[500]"), "{screen}");
    // One thread watched: whose time it was goes without saying, in no row.
    let culprit = line_with(&screen, " jwhog[77] ");
    assert!(culprit.contains("2.0ms") && !culprit.contains("→"), "{culprit}");
    let culprits: String = screen.lines().skip_while(|l| !l.contains("Culprits")).take(8).collect::<Vec<_>>().join("\n");
    assert!(!culprits.contains("→ matcher"), "{culprits}");
    assert!(line_with(&screen, " CPU hiccups").contains("thread"), "{screen}");
    // The threads' hiccups are their delays (the CPU often asleep): never
    // called stolen in the CPUs pane.
    let pane: String = screen.lines().take_while(|l| !l.contains("Culprits")).collect::<Vec<_>>().join("\n");
    assert!(pane.contains("delayed: % of wall time") && line_with(&screen, " CPU hiccups").contains("delayed"), "{screen}");
    assert!(!pane.contains("stolen"), "{pane}");
    assert!(line_with(&screen, "│   7 ").contains("matcher[500]"), "the CPU it last ran on names it:\n{screen}");
    let stall = line_with(&screen, "preempted matcher[500]:");
    assert!(stall.contains("jwhog[77]"), "{stall}");
    assert!(screen.contains("Watched threads") && !screen.contains("Loop gaps"), "{screen}");
    let row = line_with(&screen, "│matcher[500]");
    // 2 hiccups: 1 interrupted, 1 preempted, 0 wake-ups; 2.009 ms of 4 s lost; 2 migrations.
    let cells: Vec<&str> = row.split('│').nth(1).unwrap().split_whitespace().collect();
    assert_eq!(cells, ["matcher[500]", "2", "1/1/0", "2.0ms", "2.0ms", "0.050%", "2", "1"], "{row}");
    assert!(line_with(&screen, "int/pre/wk").contains("in-sys"), "{screen}");
}

/// The wake-up probe: its latencies where the loop gaps go, its smallest
/// latency where the floor goes.
#[test]
fn the_wakeup_probe_shows_latencies() {
    let mut s = Stats::new(&[6, 7], START).measuring(crate::interval::Method::Wakeup);
    let mut raw = Counters::new(&[6, 7]);
    for c in &mut raw.cpus {
        c.threshold_ns = 100_000;
        let mut w = crate::stats::WakeFigures { min_ns: 61_000, ..Default::default() };
        (w.hist[16], w.hist[18]) = (2_900, 4);
        w.latency = Some(crate::probe::Latency {
            period_ns: 1_000_000,
            slack_ns: 50_000,
            wakeups: 2_904,
            min_ns: 61_000,
            avg_ns: 75_000.0,
            max_ns: 210_000,
            p50_ns: 72_000,
            p99_ns: 106_000,
            p999_ns: 200_000,
        });
        c.own = crate::stats::SourceFigures::Wakeup(w);
    }
    s.update_counters(raw, START + 3 * S);
    let mut late = hiccup(6, START + 2 * S, vec![(Cause::Slack, 50_000), (task(b"kdamond.0", 71), 1_200_000)], 8_000);
    late.source = crate::interval::Source::WakeupProbe;
    late.parts = Some(crate::interval::Parts { timer_ns: 52_000, sched_ns: 1_198_000, user_ns: 8_000, top: Default::default() });
    late.freq = Some((Some(2_400_000), 800_000));
    s.record(&late);
    let a = App::new(info(), Snapshot::of(&s), true);
    let t = text(&draw(&a, 160, 48));
    let stall = line_with(&t, "timer 52.0µs · sched 1.2ms · user 8.0µs: ");
    assert!(stall.contains("kdamond.0[71]") && stall.contains("freq 2400 MHz → 800 MHz"), "{t}");
    assert!(t.contains("Wake-up latency, log2 buckets") && t.contains("lat ≥") && !t.contains("Loop gaps"), "{t}");
    assert!(line_with(&t, "hiccups").contains(" min ") && line_with(&t, "   6       1").contains("61.0µs"), "{t}");
}

/// Enter shows the selected stall in full, with the kernel stack of its
/// largest cause (frames escaped); Esc closes it; without a stack it
/// says how to get one.
#[test]
fn enter_shows_the_top_stall_with_its_stack() {
    let mut s = stats();
    let hog = task(b"hog", 50);
    let mut h = hiccup(6, START + 6 * S, vec![(hog.clone(), 3_000_000)], 0);
    h.stack = Some(std::sync::Arc::new(crate::interval::Stack {
        cause: hog.into(),
        frames: vec![Symbol::from("__schedule+0x2c4"), Symbol::from("evil\x1b[2J"), Symbol::from("do_nanosleep+0x7b")].into(),
    }));
    s.record(&h);
    let mut a = App::new(info(), Snapshot::of(&s), true);
    a.apply(Action::Detail);
    let b = draw(&a, 100, 30);
    let t = text(&b);
    assert!(t.contains("Kernel stack of task:hog[50] as it left the CPU"), "{t}");
    let schedule = t.find("  __schedule+0x2c4").expect("innermost frame");
    let sleep = t.find("  do_nanosleep+0x7b").expect("outer frame");
    assert!(schedule < sleep, "innermost first\n{t}");
    assert!(t.contains("evil\\x1b[2J"), "{t}");
    assert!(!b.content.iter().any(|c| c.symbol().chars().any(|ch| ch.is_control())), "raw control character on screen");
    assert!(a.overlay_open());
    a.apply(Action::CloseHelp);
    assert!(!text(&draw(&a, 100, 30)).contains("Kernel stack of"));
    // The next stall down has none.
    a.apply(Action::NextPane);
    a.apply(Action::NextPane);
    while a.focus != Pane::Stalls {
        a.apply(Action::NextPane);
    }
    a.apply(Action::Scroll(1));
    a.apply(Action::Detail);
    let t = text(&draw(&a, 100, 30));
    assert!(t.contains("No kernel stack.") && t.contains("--stacks-above DUR takes one") && t.contains("task:evil\\x1b[2J[666]"), "{t}");
    assert!(!t.contains("\\\\x1b"), "escaped twice\n{t}");
}

/// A stall of many causes lists the largest few and sums the rest, so
/// its stack still fits below them.
#[test]
fn a_stall_of_many_causes_still_shows_its_stack() {
    let mut s = stats();
    let causes: Vec<(Cause, u64)> = (0..20).map(|i| (task(b"bash", 100 + i), 3_000_000 - u64::from(i) * 1_000)).collect();
    let mut h = hiccup(6, START + 6 * S, causes, 0);
    h.stack = Some(std::sync::Arc::new(crate::interval::Stack {
        cause: task(b"bash", 100).into(),
        frames: vec![Symbol::from("schedule+0x23"), Symbol::from("do_wait+0x1f"), Symbol::from("entry_SYSCALL_64+0x76")].into(),
    }));
    s.record(&h);
    let mut a = App::new(info(), Snapshot::of(&s), true);
    a.apply(Action::Detail);
    let t = text(&draw(&a, 100, 30));
    assert!(t.contains("and 12 more causes") && t.contains("  entry_SYSCALL_64+0x76"), "{t}");
}
