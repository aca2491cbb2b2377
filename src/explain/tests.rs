use std::path::{Path, PathBuf};

use super::model::{find, Slow};
use super::ops::{decimal_ns, Columns, Op, Unit};
use super::overlap::{explain, share, Index, Scratch};
use super::stalls::{Stall, Stalls, Window};
use super::*;
use crate::clock::ClockPair;

#[test]
fn decimals_are_read_exactly_in_their_unit() {
    assert_eq!(decimal_ns("2.425191454", Unit::S), Some(2_425_191_454));
    assert_eq!(decimal_ns("33193.341922413", Unit::S), Some(33_193_341_922_413));
    assert_eq!(decimal_ns("1.5", Unit::Ms), Some(1_500_000));
    assert_eq!(decimal_ns("12", Unit::Us), Some(12_000));
    assert_eq!(decimal_ns("7", Unit::Ns), Some(7));
    assert_eq!(decimal_ns(".25", Unit::Us), Some(250));
    // Past a ns: rounded half up.
    assert_eq!(decimal_ns("0.0000000005", Unit::S), Some(1));
    assert_eq!(decimal_ns("0.0000000004", Unit::S), Some(0));
    for bad in ["", ".", "-1", "1e3", "1.2.3", " 1", "0x10", "99999999999999999999"] {
        assert_eq!(decimal_ns(bad, Unit::Ns), None, "{bad:?}");
    }
}

fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const SOCKPERF: &str = "sockperf: == version #3.7-no.git ==
sockperf: ---> <MIN> observation =   14.726
------------------------------
test was performed using the following parameters: --mps=600000 --burst=1 --reply-every=1 --msg-size=14 --time=1
------------------------------
packet, txTime(sec), rxTime(sec), latency(usec)
0, 2.000000000, 2.000040000, 20.000
1, 2.000050000, 0.000000000, 0.000
2, 2.000100000, 2.050100000, 25000.000
------------------------------
packet, txTime(sec), rxTime(sec), latency(usec)
0, 2.000070000, 2.000090000, 10.000
------------------------------
";

#[test]
fn sockperf_s_full_log_is_found_by_its_header() {
    let d = tempfile::tempdir().unwrap();
    let log = ops::read(&file(d.path(), "sp.log", SOCKPERF), &Columns::default()).unwrap();
    assert_eq!(log.format, "sockperf --full-log");
    // Two servers' blocks, merged by start; the unanswered message left out and said.
    let starts: Vec<u64> = log.ops.iter().map(|o| o.start_ns).collect();
    assert_eq!(starts, [2_000_000_000, 2_000_070_000, 2_000_100_000]);
    assert_eq!(log.ops[2].latency_ns(), 50_000_000);
    assert!(log.notes.iter().any(|n| n.contains("1 messages without a reply")), "{:?}", log.notes);
    // Its columns are known: naming them is refused.
    let cols = Columns { unit: Some(Unit::Us), ..Columns::default() };
    let e = ops::read(&file(d.path(), "sp2.log", SOCKPERF), &cols).unwrap_err().to_string();
    assert!(e.contains("sockperf's --full-log, whose columns and unit are known"), "{e}");
}

#[test]
fn a_csv_is_read_by_the_columns_named() {
    let d = tempfile::tempdir().unwrap();
    let p = file(d.path(), "ops.csv", "id,begin,finish,lat\n1,100,150,50\n2,200,260,60\n\n3,300,301,1\n");
    let named = |s: Option<&str>, e: Option<&str>, l: Option<&str>| Columns {
        start: s.map(Into::into),
        end: e.map(Into::into),
        latency: l.map(Into::into),
        unit: Some(Unit::Us),
    };
    let want = vec![
        Op { start_ns: 100_000, end_ns: 150_000 },
        Op { start_ns: 200_000, end_ns: 260_000 },
        Op { start_ns: 300_000, end_ns: 301_000 },
    ];
    assert_eq!(ops::read(&p, &named(Some("begin"), Some("finish"), None)).unwrap().ops, want);
    assert_eq!(ops::read(&p, &named(Some("2"), None, Some("lat"))).unwrap().ops, want, "by number, with a latency");
    assert_eq!(ops::read(&p, &named(None, Some("finish"), Some("4"))).unwrap().ops, want, "an end and a latency");
    let err = |cols: Columns, text: &str| ops::read(&file(d.path(), "x.csv", text), &cols).unwrap_err().to_string();
    assert!(err(named(Some("begin"), None, None), "begin\n1\n").contains("--start and --end, --start and --latency"));
    assert!(err(named(Some("nope"), Some("finish"), None), "begin,finish\n1,2\n").contains("--start nope: "));
    let e = err(named(Some("begin"), Some("finish"), None), "begin,finish\n5,6\n3,4\n");
    assert!(e.contains("line 3: starts before the row above it"), "{e}");
    let e = err(named(Some("begin"), Some("finish"), None), "begin,finish\n5,x\x1b\n");
    assert!(e.contains("line 2: the end `x\\x1b` is not a number") && !e.contains('\x1b'), "{e}");
    assert!(err(named(Some("begin"), Some("finish"), None), "begin,finish\n5,4\n").contains("ends before it starts"));
    let e = err(Columns::default(), "a,b\n1,2\n");
    assert!(e.contains("is not sockperf's --full-log") && e.contains("--start and --end"), "{e}");
}

fn stall(thread: u32, start: u64, end: u64, from: u32, to: u32) -> Stall {
    Stall { start_ns: start, end_ns: end, cpu: thread, thread, from, to }
}

#[test]
fn concurrent_stalls_share_the_time_they_cover() {
    // Thread 0: [10,30) and [90,120); thread 1: [20,40); thread 0 again,
    // abutting: [30,35) (not an overlap with [10,30)).
    let mut stalls = vec![stall(0, 10, 30, 0, 0), stall(1, 20, 40, 0, 0), stall(0, 90, 120, 0, 0), stall(0, 30, 35, 0, 0)];
    let index = Index::new(&mut stalls);
    let mut scratch = Scratch::default();
    let covered = explain(Op { start_ns: 0, end_ns: 100 }, &stalls, &index, &mut scratch);
    // Covered: [10,40) and [90,100).
    assert_eq!(covered, 40);
    let by: Vec<(u64, u64, u64)> = scratch.parts().iter().map(|p| (stalls[p.stall as usize].start_ns, p.overlap_ns, p.credit_ns)).collect();
    // [10,20) alone, [20,30) shared, [30,35) shared with thread 1, [35,40) thread 1 alone.
    // [30,35): 5 ns between two, the odd ns to the one active first.
    assert_eq!(by, [(10, 20, 15), (20, 20, 13), (30, 5, 2), (90, 10, 10)]);
    assert_eq!(scratch.parts().iter().map(|p| p.credit_ns).sum::<u64>(), covered);
    // An operation no stall touches, and one inside a single stall.
    assert_eq!(explain(Op { start_ns: 40, end_ns: 90 }, &stalls, &index, &mut scratch), 0);
    assert!(scratch.parts().is_empty());
    let inner = explain(Op { start_ns: 95, end_ns: 97 }, &stalls, &index, &mut scratch);
    assert_eq!((inner, scratch.parts().len()), (2, 1));
}

#[test]
fn a_stall_s_share_goes_to_its_causes_every_ns_once() {
    let mut got = Vec::new();
    share(&[(1, 70), (2, 30)], 10, |k, ns| got.push((k, ns)));
    assert_eq!(got, [(1, 7), (2, 3)]);
    for credit in [1u64, 3, 7, 99, 1_000_003] {
        let causes = [(1, 333), (2, 333), (3, 334), (4, 1)];
        let mut sum = 0;
        share(&causes, credit, |_, ns| sum += ns);
        assert_eq!(sum, credit, "credit {credit}");
    }
    let mut got = Vec::new();
    share(&[(5, 0)], 4, |k, ns| got.push((k, ns)));
    assert_eq!(got, [(5, 4)], "a stall of 0 ns still places its credit");
}

fn run_of(stalls: Vec<Stall>, causes: Vec<(u32, u64)>, keys: &[&str], threads: &[&str], window: (u64, u64)) -> Stalls {
    Stalls {
        stalls,
        causes,
        keys: keys.iter().map(|k| k.to_string()).collect(),
        threads: threads.iter().map(|k| k.to_string()).collect(),
        windows: vec![Window { csv: "run.csv".into(), start_ns: window.0, end_ns: window.1, clocks: None }],
        notes: Vec::new(),
    }
}

#[test]
fn the_slowest_one_percent_and_the_tail_s_budget() {
    // 198 operations of 10 ns; two of 1000 ns (the slowest 1% of 200); one
    // more slow one outside the run.
    let mut ops: Vec<Op> = (0..198).map(|i| Op { start_ns: 1_000 + i * 20, end_ns: 1_010 + i * 20 }).collect();
    ops.push(Op { start_ns: 10_000, end_ns: 11_000 });
    ops.push(Op { start_ns: 20_000, end_ns: 21_000 });
    ops.push(Op { start_ns: 90_000, end_ns: 99_000 });
    // Server: a 600 ns stall (hog 500, unexplained 100) in the first slow
    // operation; client: 200 ns of irq in the second.
    let stalls = vec![stall(0, 10_100, 10_700, 0, 2), stall(1, 20_000, 20_200, 2, 3)];
    let causes = vec![(0, 500), (1, 100), (2, 200)];
    let mut run = run_of(stalls, causes, &["task:hog[7]", "unexplained:", "irq:eth0"], &["server[1]", "client[2]"], (0, 50_000));
    let f = find(&ops, &mut run, Slow::SlowestPct(1.0)).unwrap();
    assert_eq!((f.in_runs, f.above_ns, f.slow.len()), (200, 1_000, 2));
    assert_eq!((f.slow_ns, f.explained_ns, f.uncovered_ops), (2_000, 800, 2));
    let named: Vec<(&str, u64, u64)> = f.by_cause.iter().map(|&(k, t)| (run.key(k), t.ns, t.operations)).collect();
    assert_eq!(named, [("task:hog[7]", 500, 1), ("irq:eth0", 200, 1), ("unexplained:", 100, 1)]);
    let threads: Vec<(u32, u64)> = f.by_thread.iter().map(|&(t, n)| (t, n.ns)).collect();
    assert_eq!(threads, [(0, 600), (1, 200)]);
    // --above: every operation at or over it; none at all is an answer.
    assert_eq!(find(&ops, &mut run, Slow::Above(10)).unwrap().slow.len(), 200);
    assert_eq!(find(&ops, &mut run, Slow::Above(5_000)).unwrap().slow.len(), 0);
    // A log that lies outside the run has no answer.
    let late = [Op { start_ns: 60_000, end_ns: 61_000 }];
    assert!(find(&late, &mut run, Slow::Above(0)).is_none());
}

#[test]
fn a_wall_clock_time_goes_onto_the_monotonic_clock() {
    let at = |m: u64, r: u64| ClockPair { monotonic_ns: m, realtime_ns: r };
    let steady = Clocks { start: at(100, 1_000_100), end: at(200, 1_000_200) };
    assert_eq!(to_monotonic(1_000_150, &steady), 150);
    // The wall clock set 50 ns forward during the run: in proportion.
    let moved = Clocks { start: at(100, 1_000_100), end: at(200, 1_000_250) };
    assert_eq!(to_monotonic(1_000_100, &moved), 100);
    assert_eq!(to_monotonic(1_000_250, &moved), 200);
    assert_eq!(to_monotonic(1_000_175, &moved), 150);
    assert_eq!(to_monotonic(2_000_000, &moved), 2_000_000 - 1_000_050);
}

/// A run's CSV with its summary beside it: a server thread with a
/// hostile name preempted by a hog, a client's IRQ.
fn a_run(dir: &Path, clocks: bool) -> PathBuf {
    let header = crate::export::HEADER.join(",");
    let rows = [
        "2000100000,1,50000000,49000000,1000000,task,hog[7],49000000,task:hog[7]=49000000;unexplained:=1000000,preempted,srv\\x1b[1],,,,",
        "2000010000,0,20000,20000,0,irq,eth0,20000,irq:eth0=20000,interrupted,client[2],,,,",
    ];
    let csv = file(dir, "run.csv", &format!("{header}\n{}\n", rows.join("\n")));
    let mut side = serde_json::json!({ "schema_version": 3, "mode": "passive", "duration_ns": 9_000_000_000u64,
        "overhead": { "first_sample_ns": 1_000_000_000u64 }, "cpus": [] });
    if clocks {
        side["clocks"] = serde_json::json!({
            "start": { "monotonic_ns": 1_000_000_000u64, "realtime_ns": 1_700_000_001_000_000_000u64 },
            "end": { "monotonic_ns": 10_000_000_000u64, "realtime_ns": 1_700_000_010_000_000_000u64 } });
    }
    std::fs::write(crate::summary::sidecar(&csv), side.to_string()).unwrap();
    csv
}

fn explain_to_string(o: Options) -> anyhow::Result<String> {
    let mut out = Vec::new();
    run(o, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

fn options(ops: PathBuf, run: PathBuf) -> Options {
    Options {
        ops,
        runs: vec![run],
        columns: Columns::default(),
        clock: LogClock::Monotonic,
        above_ns: None,
        top: 10,
        json: false,
        svg: None,
        png: None,
    }
}

#[test]
fn sockperf_s_slow_message_is_named_for_the_hog_in_text_json_and_chart() {
    let d = tempfile::tempdir().unwrap();
    let csv = a_run(d.path(), false);
    let log = file(d.path(), "sp.log", SOCKPERF);
    let text = explain_to_string(options(log.clone(), csv.clone())).unwrap();
    // The 50 ms message (2.0001 s to 2.0501 s) is the server's 50 ms stall.
    assert!(text.contains("slow: 1 operations, the slowest 1%, at or over 50.0ms"), "{text}");
    assert!(text.contains(" 98.0%     49.0ms       1       1  task:hog[7]"), "{text}");
    assert!(text.contains(" 100.0%     50.0ms       1       1  srv\\x1b[1] on CPU 1"), "{text}");
    assert!(text.contains("   0.0%        0ns       0       0  (not on the watched threads)"), "{text}");
    assert!(text.contains("srv\\x1b[1] CPU 1: 50.0ms of a 50.0ms stall: task:hog[7] 49.0ms, unexplained 1.0ms"), "{text}");
    assert!(!text.contains('\x1b'), "no raw escape reaches the terminal");
    let mut o = options(log.clone(), csv.clone());
    o.json = true;
    o.above_ns = Some(30_000);
    o.svg = Some(d.path().join("c.svg"));
    let v: serde_json::Value = serde_json::from_str(&explain_to_string(o).unwrap()).unwrap();
    assert_eq!(v["slow"], 2, "{v}");
    assert_eq!(v["by_cause"][0]["cause"], "task:hog[7]");
    assert_eq!(v["by_thread"][0]["thread"], "srv\\x1b[1]");
    assert_eq!(v["by_thread"][0]["cpus"], serde_json::json!([1]));
    assert_eq!(v["by_thread"][0]["half_operations"], 1);
    let covered: u64 = v["slowest"].as_array().unwrap().iter().map(|o| o["covered_ns"].as_u64().unwrap()).sum();
    assert_eq!(covered, v["explained_ns"].as_u64().unwrap());
    assert_eq!(v["explained_ns"].as_u64().unwrap() + v["uncovered_ns"].as_u64().unwrap(), v["slow_ns"].as_u64().unwrap());
    let svg = std::fs::read_to_string(d.path().join("c.svg")).unwrap();
    assert!(svg.contains("task:hog[7]") && !svg.contains('\x1b'));
    // A chart over an input is refused before anything is written.
    let mut o = options(log, csv.clone());
    o.svg = Some(csv.clone());
    let e = explain_to_string(o).unwrap_err().to_string();
    assert!(e.contains("it is a run's CSV"), "{e}");
}

#[test]
fn a_wall_clock_log_needs_the_run_s_clocks_and_a_log_elsewhere_is_said() {
    let d = tempfile::tempdir().unwrap();
    // The same slow operation, on the wall clock (1.7e18 ns ahead).
    let ops = file(d.path(), "ops.csv", "start,end\n1700000002000100000,1700000002050100000\n");
    let cols = Columns { start: Some("start".into()), end: Some("end".into()), latency: None, unit: None };
    let mut o = options(ops.clone(), a_run(d.path(), false));
    o.columns = cols.clone();
    o.clock = LogClock::Realtime;
    let e = explain_to_string(o).unwrap_err().to_string();
    assert!(e.contains("--clock realtime needs the runs' clocks"), "{e}");
    let mut o = options(ops.clone(), a_run(d.path(), true));
    o.columns = cols.clone();
    o.clock = LogClock::Realtime;
    let text = explain_to_string(o).unwrap();
    assert!(text.contains("task:hog[7]") && text.contains("CLOCK_REALTIME"), "{text}");
    // Left on CLOCK_MONOTONIC, it lies nowhere near the run: one line says so.
    let mut o = options(ops, a_run(d.path(), true));
    o.columns = cols;
    let e = explain_to_string(o).unwrap_err().to_string();
    assert!(e.starts_with("no operation of ") && e.contains("--clock realtime"), "{e}");
}

#[test]
fn the_text_lists_fifteen_causes_then_the_rest_in_one_row() {
    let d = tempfile::tempdir().unwrap();
    let header = crate::export::HEADER.join(",");
    // One 50 ms stall of 17 causes: 16 of 3 ms, one of 2 ms.
    let causes: Vec<String> = (0..17).map(|i| format!("task:t{i:02}[{i}]={}", if i < 16 { 3_000_000 } else { 2_000_000 })).collect();
    let row = format!("2000100000,1,50000000,50000000,0,task,t00[0],3000000,{},preempted,srv[1],,,,", causes.join(";"));
    let csv = file(d.path(), "run.csv", &format!("{header}\n{row}\n"));
    let side = serde_json::json!({ "duration_ns": 9_000_000_000u64, "overhead": { "first_sample_ns": 1_000_000_000u64 } });
    std::fs::write(crate::summary::sidecar(&csv), side.to_string()).unwrap();
    let text = explain_to_string(options(file(d.path(), "sp.log", SOCKPERF), csv)).unwrap();
    assert!(text.contains("task:t14[14]") && !text.contains("task:t15[15]"), "{text}");
    assert!(text.contains("  10.0%      5.0ms                  (2 more causes: --json lists them)"), "{text}");
}

#[test]
fn a_run_s_last_line_cut_short_is_left_out_and_said_any_other_bad_line_refused() {
    let d = tempfile::tempdir().unwrap();
    let header = crate::export::HEADER.join(",");
    let good = "2000100000,1,50000000,50000000,0,task,hog[7],50000000,task:hog[7]=50000000,preempted,srv[1],,,,";
    let csv = file(d.path(), "run.csv", &format!("{header}\n{good}\n2000200000,1,5000"));
    let text = explain_to_string(options(file(d.path(), "sp.log", SOCKPERF), csv)).unwrap();
    assert!(text.contains("task:hog[7]") && text.contains("its last line, cut short"), "{text}");
    let csv = file(d.path(), "run2.csv", &format!("{header}\n2000200000,1,x5000,0,0,,,,,,,,,,\n{good}\n"));
    let e = explain_to_string(options(file(d.path(), "sp.log", SOCKPERF), csv)).unwrap_err().to_string();
    assert!(e.contains("run2.csv line 2: gap_ns `x5000` is not a number"), "{e}");
}
