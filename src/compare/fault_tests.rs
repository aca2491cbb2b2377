//! compare on inputs made to hurt it (issue 40): each test reproduced a
//! fault before its fix.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::tests::{load, unexplained, Fixture};
use super::*;

/// 10⁵ distinct thread names in 10⁵ rows took 25 s here (a pass over the
/// rows per name); linear, a few tens of ms in a debug build. The bound is
/// 100 times that, against a unit-test run sharing one CPU (`cargo xtask
/// hermetic`): it tells linear from quadratic, not a speed.
#[test]
fn many_thread_names_are_compared_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..100_000).map(|i| format!("app-{i:06}[{i}]")).collect();
    let rows = names.iter().map(|n| (2, 40_000, "task:hog[5]=40000".to_string(), n.as_str())).collect();
    let mut f = Fixture::probe("names", 10, &[(2, 1000)], rows);
    f.mode = "passive";
    let csv = f.write(dir.path());
    let runs = load(&[csv]);
    let t0 = Instant::now();
    let c = compare(&runs, None).unwrap();
    let took = t0.elapsed();
    assert_eq!(c.blocks.len(), 1 + THREADS, "CPU 2 and the first {THREADS} names");
    assert!(c.notes.iter().any(|n| n.starts_with("99992 more watched threads")), "{:?}", c.notes);
    assert!(took < Duration::from_secs(5), "10⁵ names took {took:?}");
}

/// A summary is jitterwatch's only if it lists each CPU once and only
/// CPUs it can watch: 900,000 repeats of one CPU were accepted, and 10⁵
/// CPUs made 17 s and 68 MB of tables. Every CPU it can watch is compared,
/// a table each.
#[test]
fn duplicate_and_absurd_cpu_lists_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = Fixture::probe("cpus", 1, &[(1, 800)], vec![(1, 5_000, unexplained(5_000), "")]).write(dir.path());
    let summary = crate::summary::sidecar(&csv);
    let with = |cpus: Vec<u32>| {
        // By hand: serde_json's Values are slow in a test build.
        let cpus: Vec<String> = cpus.iter().map(|c| format!(r#"{{"cpu":{c},"threshold_ns":800,"hiccups":0}}"#)).collect();
        let meta = format!(r#"{{"mode":"probe","duration_ns":1000000000,"cpus":[{}],"csv":{:?}}}"#, cpus.join(","), csv);
        std::fs::write(&summary, meta).unwrap();
        input::load(&csv, None).err().map(|e| format!("{e:#}")).unwrap_or_default()
    };
    let e = with(vec![1; 900_000]);
    let give = "not a summary jitterwatch wrote; give the one its run wrote beside its CSV";
    assert!(e.ends_with(&format!("cpus.summary.json lists CPU 1 twice: {give}")), "{e}");
    let e = with((0..100_000).collect());
    let max = crate::record::MAX_CPUS;
    assert!(e.ends_with(&format!("cpus.summary.json lists CPU {max}, beyond the {max} jitterwatch watches: {give}")), "{e}");
    assert!(with(vec![]).ends_with(&format!("cpus.summary.json lists no CPU: {give}")));
    assert_eq!(with((0..crate::record::MAX_CPUS as u32).collect()), "");
    let c = compare(&load(&[csv]), None).unwrap();
    assert_eq!(c.blocks.len(), 1 + crate::record::MAX_CPUS);
    assert_eq!(c.blocks[2].figures[0].as_ref().unwrap().count, 1);
}

/// A run written as given, however impossible: `lines` after the header,
/// and a summary listing `cpus` as (cpu, hiccups) over `secs` seconds.
fn raw_run(dir: &Path, name: &str, secs: u64, cpus: &[(u32, u64)], lines: &[String]) -> PathBuf {
    let csv = dir.join(format!("{name}.csv"));
    std::fs::write(&csv, crate::export::HEADER.join(",") + "\n" + &lines.concat()).unwrap();
    let cpus: Vec<serde_json::Value> =
        cpus.iter().map(|&(cpu, n)| serde_json::json!({"cpu": cpu, "threshold_ns": 1000, "hiccups": n})).collect();
    let meta = serde_json::json!({"mode": "probe", "duration_ns": secs * 1_000_000_000, "cpus": cpus, "csv": csv});
    std::fs::write(crate::summary::sidecar(&csv), meta.to_string()).unwrap();
    csv
}

/// A row on `cpu`: a gap and its causes field as given.
fn line(cpu: u32, gap: u64, causes: &str) -> String {
    format!("1000,{cpu},{gap},0,{gap},unexplained,,{gap},{causes},probe,,,,,\n")
}

/// Causes adding up past u64 wrapped to a small sum that passed the
/// "causes add up" check (`task:a[1]=2⁶⁴-1;task:b[2]=2` on a 5 ns gap
/// reported 9115481228 s/s, 20% named); causes past their gap refused the
/// whole file. Either row is left out now, and a note says so, in the
/// singular for one.
#[test]
fn causes_past_u64_or_past_their_gap_are_a_note_not_a_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        line(1, 5, &format!("task:a[1]={};task:b[2]=2", u64::MAX)),
        line(1, 9_000, "task:c[3]=5000;unexplained:=4000"),
        line(1, 4_000, "task:d[4]=4001"),
    ];
    let csv = raw_run(dir.path(), "wrap", 10, &[(1, 3)], &lines);
    let run = input::load(&csv, None).unwrap();
    assert_eq!(run.rows.len(), 1, "the sound row alone");
    assert_eq!(
        run.notes,
        [format!(
            "{}: 2 rows left out, their causes adding up to more than their gap (the first on line 2): the CSV was edited or is damaged",
            csv.display()
        )]
    );
    let one = raw_run(dir.path(), "one", 10, &[(1, 1)], &lines[..1]);
    let note = &input::load(&one, None).unwrap().notes;
    assert!(
        note[0].ends_with(
            ": 1 row left out, its causes adding up to more than its gap (the first on line 2): the CSV was edited or is damaged"
        ),
        "{note:?}"
    );
    let c = compare(&[run], None).unwrap();
    let f = c.blocks[0].figures[0].as_ref().unwrap();
    assert_eq!((f.count, f.explained_pct), (1, Some(5_000.0 / 9_000.0 * 100.0)));
    assert_eq!(c.causes.iter().map(|k| k.cause.as_str()).collect::<Vec<_>>(), ["task:c", "unexplained"]);
}

/// Figures that add up past u64 over the rows or the summary's CPUs: the
/// sums wrapped (or panicked in a debug build); each is added in u128 now,
/// and more than the run stolen is said.
#[test]
fn sums_over_rows_and_cpus_do_not_wrap_and_more_than_the_run_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let big = 1u64 << 63;
    let lines = [line(1, big, &format!("task:a[1]={big}")), line(1, big, &format!("task:a[1]={big}"))];
    let csv = raw_run(dir.path(), "huge", 10, &[(1, u64::MAX), (2, 1)], &lines);
    let run = input::load(&csv, None).unwrap();
    assert_eq!(run.rows.len(), 2);
    let c = compare(&[run], None).unwrap();
    let rate = c.causes.iter().find(|k| k.cause == "task:a").unwrap().ns_per_s[0].unwrap();
    assert_eq!(rate, 2.0 * big as f64 / 10.0);
    let cpu1 = c.blocks.iter().find(|b| b.scope == "CPU 1").unwrap().figures[0].as_ref().unwrap();
    assert_eq!(cpu1.mean_ns, Some(big as f64));
    assert!(c.notes.contains(&"huge: the CSV holds 2 rows and the summary counted 18446744073709551616 hiccups (a reset during the run, or a file cut short)".to_string()), "{:?}", c.notes);
    let over: Vec<&String> = c.notes.iter().filter(|n| n.contains("more than the run lasted")).collect();
    assert_eq!(over.len(), 1, "{:?}", c.notes);
    assert!(over[0].starts_with("huge: its gaps add up to more than the run lasted on all CPUs, CPU 1 (up to "), "{}", over[0]);
    assert!(over[0].ends_with("% of the time stolen): its CSV and summary are not of one run, or were edited"), "{}", over[0]);
    // 166648% of the time stolen, said where it was silent before.
    let lines: Vec<String> = (0..20).map(|_| line(1, 900_000_000, "unexplained:=900000000")).collect();
    let csv = raw_run(dir.path(), "long", 1, &[(1, 20)], &lines);
    let c = compare(&load(&[csv]), None).unwrap();
    // The longest gap a file can hold, on the chart's log axis.
    let csv = raw_run(dir.path(), "max", 1, &[(1, 1)], &[line(1, u64::MAX, &format!("unexplained:={}", u64::MAX))]);
    chart::svg(&compare(&load(&[csv]), None).unwrap(), &dir.path().join("max.svg")).unwrap();
    assert_eq!(c.notes, ["long: its gaps add up to more than the run lasted on CPU 1 (up to 1800% of the time stolen): its CSV and summary are not of one run, or were edited"]);
}

/// Rows on a CPU the summary does not list were dropped from every table
/// of one CPU and counted in "all CPUs", without a word.
#[test]
fn rows_on_a_cpu_the_summary_does_not_list_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![line(1, 5_000, "unexplained:=5000")];
    lines.extend((0..3).map(|_| line(7, 6_000, "unexplained:=6000")));
    lines.extend((100..120).map(|cpu| line(cpu, 6_000, "unexplained:=6000")));
    let csv = raw_run(dir.path(), "other", 1, &[(1, 1)], &lines);
    let run = input::load(&csv, None).unwrap();
    assert_eq!(run.rows.len(), 1);
    assert_eq!(
        run.notes,
        [format!(
            "{}: 23 rows on CPUs 7,100-106 and 13 more left out (the first on line 3): its summary does not list those CPUs; is it this run's summary?",
            csv.display()
        )]
    );
    let csv = raw_run(dir.path(), "one", 1, &[(1, 1)], &[line(1, 5_000, "unexplained:=5000"), line(4, 5_000, "unexplained:=5000")]);
    let run = input::load(&csv, None).unwrap();
    assert!(
        run.notes[0]
            .ends_with("1 row on CPU 4 left out (the first on line 3): its summary does not list that CPU; is it this run's summary?"),
        "{:?}",
        run.notes
    );
}

/// A summary whose `csv` names another file (/etc/shadow, read as root)
/// had its first line printed: `its header begins `root:*:20228:…``. A
/// file reached through a summary, and a summary, are named with what is
/// wrong, never quoted; a CSV named on the command line still is (it is
/// the user's own).
#[test]
fn another_files_contents_are_never_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "root:*:20228:0:99999:7:::";
    let err = |p: &Path| input::load(p, None).err().map(|e| format!("{e:#}")).unwrap_or_default();
    let summary = |name: &str, csv: &Path, duration: serde_json::Value| {
        let p = dir.path().join(format!("{name}.summary.json"));
        let cpus = [serde_json::json!({"cpu": 1, "threshold_ns": 1000, "hiccups": 0})];
        std::fs::write(&p, serde_json::json!({"mode": "probe", "duration_ns": duration, "cpus": cpus, "csv": csv}).to_string()).unwrap();
        p
    };
    let shadow = dir.path().join("shadow");
    std::fs::write(&shadow, format!("{secret}\ndaemon:*:20228:0:99999:7:::\n")).unwrap();
    let e = err(&summary("to-shadow", &shadow, 1_000_000_000u64.into()));
    assert_eq!(
        e,
        format!(
            "{}, the CSV {} names, is not a jitterwatch CSV: its header is not `time_ns,cpu,gap_ns,explained_ns,unexplained_ns,top_kind,top_name,top_ns,causes`",
            shadow.display(),
            dir.path().join("to-shadow.summary.json").display()
        )
    );
    // Past a right header: neither a field nor a cause is quoted.
    let header = crate::export::HEADER.join(",");
    for (row, what) in [
        (format!("1000,{secret},5000,0,5000,unexplained,,5000,unexplained:=5000,probe,,,,,"), "line 2: cpu is not a number"),
        (format!("1000,1,5000,0,5000,unexplained,,5000,{secret},probe,,,,,"), "line 2: a cause is not kind:name=ns"),
    ] {
        std::fs::write(&shadow, format!("{header}\n{row}\n")).unwrap();
        let e = err(&summary("to-shadow", &shadow, 1_000_000_000u64.into()));
        assert!(!e.contains("root:") && e.ends_with(what), "{e}");
    }
    // A summary's own text: serde quotes a string found where a number goes.
    let csv = dir.path().join("mine.csv");
    std::fs::write(&csv, format!("{header}\n")).unwrap();
    summary("mine", &csv, secret.into());
    let e = err(&csv);
    assert!(!e.contains("root:"), "{e}");
    assert!(e.contains("mine.summary.json is not a jitterwatch run summary: line 1, column ") && e.ends_with(": expected u64"), "{e}");
    std::fs::write(crate::summary::sidecar(&csv), format!("{{\"{secret}\" 1}}")).unwrap();
    let e = err(&csv);
    assert!(!e.contains("root:") && e.ends_with("is not a jitterwatch run summary: line 1, column 30: it is not JSON"), "{e}");
    std::fs::write(crate::summary::sidecar(&csv), r#"{"mode":"probe","cpus":[]}"#).unwrap();
    assert!(err(&csv).ends_with("is not a jitterwatch run summary: line 1, column 26: it has no `duration_ns`"), "{}", err(&csv));
    // A layout newer than this build reads: refused, not compared silently.
    std::fs::write(
        crate::summary::sidecar(&csv),
        r#"{"schema_version":99,"mode":"probe","duration_ns":1000000000,"cpus":[{"cpu":1,"threshold_ns":1000,"hiccups":0}]}"#,
    )
    .unwrap();
    let e = err(&csv);
    assert!(e.contains("mine.summary.json is a run summary of layout 99, newer than this jitterwatch reads (up to 3)"), "{e}");
    // The CSV the user named: its header is quoted, escaped, to help.
    std::fs::write(&csv, "when,where\x1b[2J\n").unwrap();
    summary("mine", &csv, 1_000_000_000u64.into());
    assert!(err(&csv).contains("mine.csv is not a jitterwatch CSV: its header begins `when,where\\x1b[2J`"), "{}", err(&csv));
}

/// The mode is the summary's text too: it reached the terminal raw.
#[test]
fn the_mode_is_escaped_and_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = Fixture::probe("m", 1, &[(1, 800)], vec![]);
    let mode = format!("\x1b[2J\u{202e}{}", "p".repeat(1000));
    f.mode = &mode;
    let c = compare(&load(&[f.write(dir.path())]), None).unwrap();
    assert!(c.runs[0].mode.starts_with("\\x1b[2J\\u{202e}ppp") && c.runs[0].mode.chars().count() == label::MAX, "{}", c.runs[0].mode);
}
