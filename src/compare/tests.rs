//! compare on small runs the tests write (a CSV and its summary), never on
//! captures of a real machine.

use std::path::{Path, PathBuf};

use super::*;

/// A run to write: its duration, CPUs (cpu, threshold) and rows as
/// (cpu, gap, causes field, victim).
pub(super) struct Fixture<'a> {
    pub name: &'a str,
    pub mode: &'a str,
    pub secs: u64,
    pub cpus: &'a [(u32, u64)],
    pub rows: Vec<(u32, u64, String, &'a str)>,
}

impl Fixture<'_> {
    pub fn probe<'a>(name: &'a str, secs: u64, cpus: &'a [(u32, u64)], rows: Vec<(u32, u64, String, &'a str)>) -> Fixture<'a> {
        Fixture { name, mode: "probe", secs, cpus, rows }
    }

    pub fn write(&self, dir: &Path) -> PathBuf {
        let csv = dir.join(format!("{}.csv", self.name));
        let mut text = crate::export::HEADER.join(",") + "\n";
        for (cpu, gap, causes, victim) in &self.rows {
            let named: u64 = crate::export::split_causes(causes).map(|c| c.unwrap()).filter(|c| c.0 != "unexplained").map(|c| c.2).sum();
            let source = if victim.is_empty() { "probe" } else { "preempted" };
            text += &format!("1000,{cpu},{gap},{named},{},task,x,1,{causes},{source},{victim},,,,\n", gap - named);
        }
        std::fs::write(&csv, text).unwrap();
        let cpus: Vec<serde_json::Value> = self
            .cpus
            .iter()
            .map(|&(cpu, thr)| {
                let n = self.rows.iter().filter(|r| r.0 == cpu).count();
                serde_json::json!({"cpu": cpu, "threshold_ns": thr, "hiccups": n})
            })
            .collect();
        let meta = serde_json::json!({"mode": self.mode, "duration_ns": self.secs * 1_000_000_000, "cpus": cpus, "csv": csv});
        std::fs::write(crate::summary::sidecar(&csv), meta.to_string()).unwrap();
        csv
    }
}

pub(super) fn unexplained(gap: u64) -> String {
    format!("unexplained:={gap}")
}

pub(super) fn load(paths: &[PathBuf]) -> Vec<Run> {
    paths.iter().map(|p| input::load(p, None).unwrap()).collect()
}

pub(super) fn text(c: &Comparison) -> String {
    let mut out = Vec::new();
    table::write(c, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn percentiles_are_exact_over_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    // Gaps of 1..=100 µs: nearest rank gives the p-th value itself.
    let rows = (1..=100u64).map(|us| (3, us * 1000, unexplained(us * 1000), "")).collect();
    let a = Fixture::probe("a", 10, &[(3, 500)], rows).write(dir.path());
    let c = compare(&load(&[a]), None).unwrap();
    assert_eq!(c.blocks.len(), 1, "one CPU: one block");
    let f = c.blocks[0].figures[0].as_ref().unwrap();
    assert_eq!(f.count, 100);
    assert_eq!(f.mean_ns, Some(50_500.0));
    assert_eq!((f.min_ns, f.max_ns), (Some(1_000), Some(100_000)));
    assert_eq!(f.percentiles_ns, [Some(50_000), Some(90_000), Some(99_000), Some(100_000), Some(100_000)]);
    // Over the run's time (10 s): the top 100 µs of it lies in the 100 µs
    // gap, so the moment at 99.999% is in the next, 99 µs; the top 1 ms
    // reaches into the 90 µs gap (100 + 99 + ... + 91 = 955 µs); 10 ms
    // is more than the 5.05 ms in all hiccups: under the threshold.
    assert_eq!(f.time_percentiles_ns, [None, None, Some(90_000), Some(99_000)]);
    assert_eq!(f.hiccups_per_sec, 10.0);
    // 5.05 ms stolen in 10 s.
    assert!((f.stolen_pct - 0.0505).abs() < 1e-12, "{}", f.stolen_pct);
    assert_eq!(f.explained_pct, Some(0.0));
    let t = text(&c);
    for want in ["CPU 3", "50.5µs", "99.99%", "100.0µs", "% of time stolen", "0.0505", "time 99.99%", "<thr", "90.0µs"] {
        assert!(t.contains(want), "{want} missing in\n{t}");
    }
}

#[test]
fn a_cause_only_in_the_tuned_run_appeared_and_rates_are_per_second() {
    let dir = tempfile::tempdir().unwrap();
    // 10 s with stress-ng 10 ms in all (1 ms/s) and the tick 1 ms/s; 2 s
    // with the tick 2 ms (1 ms/s: unchanged) and a new kworker.
    let base = (0..10).map(|_| (1, 2_000_000, "task:stress-ng[77]=1000000;irq:local_timer=1000000".to_string(), "")).collect();
    let tuned = vec![
        (1, 1_500_000, "irq:local_timer=1000000;task:kworker/1:1[9]=500000".to_string(), ""),
        (1, 1_000_000, "irq:local_timer=1000000".to_string(), ""),
    ];
    let a = Fixture::probe("untuned", 10, &[(1, 800)], base).write(dir.path());
    let b = Fixture::probe("tuned", 2, &[(1, 800)], tuned).write(dir.path());
    let c = compare(&load(&[a, b]), None).unwrap();
    let v = &c.changes[0];
    assert_eq!((v.run.as_str(), v.base.as_str()), ("tuned", "untuned"));
    let names = |l: &Vec<causes::Change>| l.iter().map(|x| x.cause.clone()).collect::<Vec<_>>();
    assert_eq!(names(&v.changes.appeared), ["task:kworker/1:1"]);
    assert_eq!(names(&v.changes.vanished), ["task:stress-ng"]);
    assert!(v.changes.grew.is_empty() && v.changes.shrank.is_empty(), "the tick is 1 ms/s in both: {:?}", v.changes);
    assert_eq!(c.blocks[0].figures[0].as_ref().unwrap().hiccups_per_sec, 1.0);
    assert_eq!(c.blocks[0].figures[1].as_ref().unwrap().hiccups_per_sec, 1.0);
    let t = text(&c);
    assert!(t.contains("appeared: task:kworker/1:1 (0ns/s → 250.0µs/s)"), "{t}");
    assert!(t.contains("vanished: task:stress-ng (1.0ms/s → 0ns/s)"), "{t}");
}

#[test]
fn a_run_without_hiccups_has_no_percentiles_not_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let a = Fixture::probe("busy", 5, &[(1, 800)], vec![(1, 5_000, unexplained(5_000), "")]).write(dir.path());
    let b = Fixture::probe("quiet", 5, &[(1, 800)], vec![]).write(dir.path());
    let c = compare(&load(&[a, b]), None).unwrap();
    let f = c.blocks[0].figures[1].as_ref().unwrap();
    assert_eq!((f.count, f.mean_ns, f.max_ns, f.explained_pct), (0, None, None, None));
    assert!(f.percentiles_ns.iter().all(Option::is_none));
    assert_eq!(f.stolen_pct, 0.0);
    let t = text(&c);
    let max = t.lines().find(|l| l.starts_with("max")).unwrap();
    assert!(max.trim_end().ends_with('-'), "{max}");
    let dir2 = tempfile::tempdir().unwrap();
    let png = dir2.path().join("c.png");
    chart::png(&c, &png).unwrap();
}

#[test]
fn mismatched_cpus_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let a = Fixture::probe("a", 1, &[(1, 800)], vec![(1, 5_000, unexplained(5_000), "")]).write(dir.path());
    let b = Fixture::probe("b", 1, &[(0, 800), (1, 900)], vec![(0, 7_000, unexplained(7_000), "")]).write(dir.path());
    let runs = load(&[a, b]);
    let c = compare(&runs, None).unwrap();
    assert!(c.notes.iter().any(|n| n.contains("watched different CPUs (a watched 1; b watched 0-1)")), "{:?}", c.notes);
    assert!(c.notes.iter().any(|n| n.contains("thresholds differ")), "{:?}", c.notes);
    let titles: Vec<&str> = c.blocks.iter().map(|b| b.scope.as_str()).collect();
    assert_eq!(titles, ["all CPUs", "CPU 0", "CPU 1"]);
    assert!(c.blocks[1].figures[0].is_none(), "run a did not watch CPU 0");
    assert!(text(&c).contains("not watched"));
    let e = compare(&runs, Some(0)).err().unwrap().to_string();
    assert_eq!(e, "a did not watch CPU 0 (it watched 1)");
    let c = compare(&runs, Some(1)).unwrap();
    assert_eq!(c.blocks.len(), 1);
    assert_eq!(c.blocks[0].figures[1].as_ref().unwrap().count, 0);
}

#[test]
fn passive_runs_have_a_table_per_thread_name() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |tid: u32| {
        vec![
            (2, 40_000, "task:hog[5]=40000".to_string(), if tid == 1 { "app[101]" } else { "app[201]" }),
            (2, 9_000, "irq:local_timer=9000".to_string(), if tid == 1 { "io[102]" } else { "io[202]" }),
        ]
    };
    let mut a = Fixture::probe("a", 1, &[(2, 1000)], rows(1));
    a.mode = "passive";
    let mut b = Fixture::probe("b", 1, &[(2, 1000)], rows(2));
    b.mode = "passive";
    let (a, b) = (a.write(dir.path()), b.write(dir.path()));
    let c = compare(&load(&[a, b]), None).unwrap();
    let titles: Vec<&str> = c.blocks.iter().map(|b| b.scope.as_str()).collect();
    assert_eq!(titles, ["CPU 2", "threads app", "threads io"]);
    assert_eq!(c.blocks[1].figures[1].as_ref().unwrap().max_ns, Some(40_000), "one name across runs, whatever the tid");
}

#[test]
fn the_summary_jitterwatch_writes_is_what_compare_reads() {
    use crate::stats::{Counters, Stats};
    let mut s = Stats::new(&[4], 0);
    let mut raw = Counters::new(&[4]);
    raw.cpus[0].threshold_ns = 321;
    s.update_counters(raw, 2_000_000_000);
    let mut json = Vec::new();
    crate::summary::Summary::from_stats(&s, &Default::default()).write_json(&mut json).unwrap();
    let meta: input::Meta = serde_json::from_slice(&json).unwrap();
    assert_eq!((meta.mode.as_str(), meta.cpus[0].cpu, meta.cpus[0].threshold_ns), ("probe", 4, 321));
    assert!(meta.duration_ns > 0);
}

/// Each bad input: one clear line.
#[test]
fn bad_input_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = |p: &Path| input::load(p, None).err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(
        err(&d.join("nope.csv")).starts_with(&format!("cannot read {}/nope.csv: No such file", d.display())),
        "{}",
        err(&d.join("nope.csv"))
    );

    let good = Fixture::probe("good", 1, &[(1, 800)], vec![(1, 5_000, unexplained(5_000), ""), (1, 6_000, unexplained(6_000), "")]);
    let path = good.write(d);
    let whole = std::fs::read_to_string(&path).unwrap();

    std::fs::write(&path, whole.replacen("time_ns,cpu,gap_ns", "when,where,what", 1)).unwrap();
    let e = err(&path);
    assert!(e.contains("good.csv is not a jitterwatch CSV: its header begins `when,where,what,"), "{e}");

    // The last row cut in the middle: the whole rows are compared, and it is said.
    let cut = &whole[..whole.len() - 7];
    std::fs::write(&path, cut).unwrap();
    let run = input::load(&path, None).unwrap();
    assert_eq!(run.rows.len(), 1);
    assert!(run.notes.iter().any(|n| n.contains("its last line is cut short")), "{:?}", run.notes);
    assert!(run.notes.iter().any(|n| n.contains("the CSV holds 1 rows and the summary counted 2 hiccups")), "{:?}", run.notes);

    std::fs::write(&path, "").unwrap();
    assert!(err(&path).contains("good.csv is empty: not a jitterwatch CSV"), "{}", err(&path));

    std::fs::write(&path, whole.replace("unexplained:=5000", "unexplained:5000")).unwrap();
    let e = err(&path);
    assert!(e.contains("good.csv, line 2: a cause `unexplained:5000` is not kind:name=ns"), "{e}");

    std::fs::write(&path, &whole).unwrap();
    // A run killed before its end: no summary; rebuilt from the rows, said.
    std::fs::remove_file(crate::summary::sidecar(&path)).unwrap();
    let run = input::load(&path, None).unwrap();
    assert_eq!((run.rows.len(), run.meta.cpus.len(), run.meta.cpus[0].threshold_ns), (2, 1, 5_000));
    assert_eq!(run.meta.mode, "probe");
    assert!(run.notes.iter().any(|n| n.contains("no summary beside it (") && n.contains("rebuilt from its rows")), "{:?}", run.notes);
    assert!(!run.notes.iter().any(|n| n.contains("the summary counted")), "{:?}", run.notes);
    // And none to rebuild from: one line.
    std::fs::write(&path, crate::export::HEADER.join(",") + "\n").unwrap();
    let e = err(&path);
    assert!(e.contains("no run summary beside") && e.contains("good.summary.json is missing"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

/// Names from a file made by hand reach the terminal and the chart
/// escaped; the summary can be named instead of the CSV.
#[test]
fn hostile_names_are_escaped_and_the_summary_leads_to_its_csv() {
    let dir = tempfile::tempdir().unwrap();
    let rows = vec![(1, 9_000, "task:ev\x1b[2Jil\u{202e}[4]=9000".to_string(), "")];
    let csv = Fixture::probe("h", 1, &[(1, 800)], rows).write(dir.path());
    let run = input::load(&crate::summary::sidecar(&csv), Some("lab\x1bel".into())).unwrap();
    assert_eq!(run.label, "lab\\x1bel");
    assert_eq!(run.keys, ["task:ev\\x1b[2Jil\\u{202e}"]);
    let c = compare(&[run], None).unwrap();
    let t = text(&c);
    assert!(!t.contains('\x1b') && !t.contains('\u{202e}'), "{t}");
    let svg = dir.path().join("h.svg");
    chart::svg(&c, &svg).unwrap();
    let s = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&s).unwrap();
    assert!(s.contains("ev\\x1b[2Jil\\u{202e}"));
}

fn two_runs(dir: &Path) -> Comparison {
    let base = (1..=200u64).map(|i| (1, 2_000 + i * 97, format!("task:stress-ng[7]={};irq:local_timer=500", 1_500 + i * 97), "")).collect();
    let tuned = (1..=50u64).map(|i| (1, 1_500 + i * 13, format!("irq:local_timer={}", 1_000 + i * 13), "")).collect();
    let a = Fixture::probe("untuned", 10, &[(1, 800)], base).write(dir);
    let b = Fixture::probe("tuned", 10, &[(1, 800)], tuned).write(dir);
    compare(&load(&[a, b]), None).unwrap()
}

/// The SVG is XML with one line per run, the runs' names and the axes'.
#[test]
fn the_svg_chart_has_a_series_per_run_and_labelled_axes() {
    let dir = tempfile::tempdir().unwrap();
    let c = two_runs(dir.path());
    let path = dir.path().join("c.svg");
    chart::svg(&c, &path).unwrap();
    let s = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&s).unwrap();
    let texts: Vec<String> =
        doc.descendants().filter(|n| n.has_tag_name("text")).map(|n| n.text().unwrap_or("").trim().to_string()).collect();
    for want in [
        "percentile of the run's time",
        "gap (log scale)",
        "99.9%",
        "99.999%",
        "99.99999%",
        "untuned (200 hiccups)",
        "tuned (50 hiccups)",
        "stolen (µs/s)",
        "task:stress-ng",
    ] {
        assert!(texts.iter().any(|t| t == want), "no text {want:?} in {texts:?}");
    }
    // A run's line: a polyline of its colour with many points (its legend
    // sample is a two-point line of the same colour).
    let series: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("points").is_some_and(|p| p.split_whitespace().count() > 10))
        .map(|n| n.attribute("stroke").unwrap_or("").to_string())
        .collect();
    assert_eq!(series.len(), 2, "{series:?}");
    assert_ne!(series[0], series[1]);
    // 200 gaps of 2-21 µs against 50 of 1.5-2.2 µs over 10 s: the tuned
    // run starts further right (0.0009% of its time in hiccups against
    // 0.023%) and lies below wherever both are drawn.
    assert_eq!((c.curve_axis.from_nines, c.curve_axis.to_nines), (3.0, 7.0));
    let (untuned, tuned) = (&c.curves[0].points, &c.curves[1].points);
    assert!(tuned[0].nines > untuned[0].nines && tuned.len() < untuned.len());
    for p in tuned {
        let q = untuned.iter().find(|q| q.nines == p.nines).unwrap();
        assert!(p.gap_ns < q.gap_ns, "{p:?} not below {q:?}");
    }
}

/// The PNG decodes, at the chart's size, with a picture on it.
#[test]
fn the_png_chart_decodes_with_content() {
    let dir = tempfile::tempdir().unwrap();
    let c = two_runs(dir.path());
    let path = dir.path().join("c.png");
    chart::png(&c, &path).unwrap();
    let img = image::open(&path).unwrap().to_rgb8();
    assert_eq!(img.dimensions(), chart::SIZE);
    let inked = img.pixels().filter(|p| p.0 != [255, 255, 255]).count();
    let share = inked as f64 / (chart::SIZE.0 * chart::SIZE.1) as f64;
    assert!(share > 0.03, "only {:.1}% of the pixels are not white", share * 100.0);
    // The runs' colours are there (the first two of the palette).
    for colour in [[31, 119, 180], [255, 127, 14]] {
        assert!(img.pixels().filter(|p| p.0 == colour).count() > 200, "no line in {colour:?}");
    }
}

/// A label of any length: the table's columns are as wide as their
/// labels, and a width past 65535 panicked in the formatter.
#[test]
fn a_long_label_is_clamped_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let csv = Fixture::probe("base", 1, &[(1, 800)], vec![(1, 5_000, unexplained(5_000), "")]).write(dir.path());
    let run = input::load(&csv, Some("W".repeat(70_000))).unwrap();
    assert_eq!(run.label.chars().count(), label::MAX);
    let t = text(&compare(&[run], None).unwrap());
    assert!(t.lines().all(|l| l.chars().count() < 200), "{t}");
}

/// `--csv-in-syscall` rows are the watched thread's own work: the summary
/// does not count them as hiccups, so neither does compare (they made a
/// run of 8,613 hiccups read as 13,489, and a false note that the file was
/// cut or reset).
#[test]
fn in_syscall_rows_are_not_hiccups() {
    let dir = tempfile::tempdir().unwrap();
    let csv = Fixture { name: "p", mode: "passive", secs: 1, cpus: &[(1, 1_000)], rows: vec![(1, 5_000, unexplained(5_000), "app[7]")] }
        .write(dir.path());
    let mut text = std::fs::read_to_string(&csv).unwrap();
    for _ in 0..3 {
        text += "2000,1,9000,9000,0,softirq,NET_RX,1,softirq:NET_RX=9000,in-syscall,app[7],,,,\n";
    }
    std::fs::write(&csv, text).unwrap();
    let run = input::load(&csv, None).unwrap();
    assert_eq!(run.rows.len(), 1, "{:?}", run.notes);
    assert_eq!(run.by_cpu[&1].rows.len(), 1);
    assert!(!run.notes.iter().any(|n| n.contains("the summary counted")), "{:?}", run.notes);
    assert!(run.notes.iter().any(|n| n.contains("3 rows of the watched threads' own system calls (source in-syscall")), "{:?}", run.notes);
}

/// Passive runs' time is delayed, as the screen says, not stolen; and a
/// huge value never runs into the cell before it.
#[test]
fn passive_runs_say_delayed_and_huge_cells_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let rows = vec![(1, 9_100_000, unexplained(9_100_000), "app[7]"), (1, u64::MAX / 2, unexplained(u64::MAX / 2), "app[7]")];
    let p = Fixture { name: "p", mode: "passive", secs: 1, cpus: &[(1, 1_000)], rows }.write(dir.path());
    let c = compare(&load(&[p]), None).unwrap();
    assert_eq!(c.taken(), "delayed");
    let t = text(&c);
    assert!(t.contains("% of time delayed") && t.contains("% of delayed time named") && !t.contains("stolen"), "{t}");
    for l in t.lines().filter(|l| l.starts_with("max") || l.starts_with("p99")) {
        let cells: Vec<&str> = l.split_whitespace().collect();
        assert!(cells.iter().all(|c| c.matches('s').count() <= 1), "cells run together: {l}");
    }
    let q = Fixture::probe("q", 1, &[(1, 1_000)], vec![(1, 5_000, unexplained(5_000), "")]).write(dir.path());
    let both = compare(&load(&[q.clone(), dir.path().join("p.csv")]), None).unwrap();
    assert_eq!(both.taken(), "stolen or delayed");
    assert_eq!(compare(&load(&[q]), None).unwrap().taken(), "stolen");
}
