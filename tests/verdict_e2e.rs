//! Root, end to end: the CI gate (`--fail-above`: the run goes to its end,
//! exit status 3 with the stalls named) and `--on-stall` (a command that
//! sees each stall's fields and never stalls the measuring), on the last
//! CPU with the spin probe.

mod common;
use common::*;

use std::time::{Duration, Instant};

/// The CSV's (time_ns, gap_ns) per row.
fn rows(csv: &std::path::Path) -> Vec<(u64, u64)> {
    let mut r = ::csv::Reader::from_path(csv).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|x| x == name).unwrap();
    let (t, g) = (col("time_ns"), col("gap_ns"));
    r.records().map(|x| x.unwrap()).map(|x| (x[t].parse().unwrap(), x[g].parse().unwrap())).collect()
}

#[test]
fn fail_above_runs_to_the_end_and_names_the_stalls_that_broke_it() {
    if !require_root_btf("fail_above_runs_to_the_end_and_names_the_stalls_that_broke_it") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    // Every stall over the threshold (the default: 1 µs here, or lowered
    // to the gate) breaks 1 µs: on any machine some come.
    let started = Instant::now();
    let (child, _dir, csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "2s", "--json", "--fail-above", "1us"], &[]);
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(took >= Duration::from_secs(2), "the run went to its end, not stopped at the first stall ({took:?})");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the summary");
    let rows = rows(&csv);
    assert!(!rows.is_empty());
    let f = &v["failed_above"];
    assert_eq!(f["limit_ns"], 1_000);
    assert_eq!(f["count"].as_u64().unwrap(), rows.len() as u64, "every row broke 1 µs: {f}");
    let max = rows.iter().map(|r| r.1).max().unwrap();
    assert_eq!(f["worst"][0]["gap_ns"].as_u64().unwrap(), max, "{f}");
    let worst = f["worst"].as_array().unwrap();
    assert_eq!(worst.len(), rows.len().min(5));
    for w in worst {
        let at = (w["time_ns"].as_u64().unwrap(), w["gap_ns"].as_u64().unwrap());
        assert!(rows.contains(&at), "{w} is no row of the CSV");
        assert!(!w["cause"].as_str().unwrap().is_empty());
    }
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(notes.iter().any(|n| n.starts_with(&format!("FAILED: {} stall(s) at or over --fail-above 1.0µs", rows.len()))), "{notes:?}");

    // A bound no stall reaches: exit 0, and the summary says it held.
    let (status, stdout, err) = run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "1s", "--fail-above", "10s"], Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(stdout.contains("passed: no stall reached --fail-above 10.00s"), "{stdout}");
}

#[test]
fn on_stall_runs_the_command_with_the_stalls_fields() {
    if !require_root_btf("on_stall_runs_the_command_with_the_stalls_fields") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let cmd = format!(
        "printf '%s %s %s %s %s %s\\n' \"$JW_CPU\" \"$JW_TIME_NS\" \"$JW_GAP_NS\" \"$JW_SKIPPED\" \"$JW_SOURCE\" \"$JW_CAUSE\" >> '{}'",
        seen.display()
    );
    let (child, _d, csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "3s", "--on-stall", &cmd], &[]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = rows(&csv);
    let lines = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<Vec<&str>> = lines.lines().map(|l| l.splitn(6, ' ').collect()).collect();
    // At most one a second over 3 s, and at least one: stalls come every
    // few ms on any machine.
    assert!((1..=4).contains(&lines.len()), "{lines:?}");
    for l in &lines {
        assert_eq!(l[0], cpu);
        let at = (l[1].parse::<u64>().unwrap(), l[2].parse::<u64>().unwrap());
        assert!(rows.contains(&at), "{l:?} is no row of the CSV");
        assert_eq!(l[4], "probe");
        assert!(l[5].contains(':'), "{l:?}: a cause is kind:name");
    }
    if rows.len() > 10 {
        assert!(lines.iter().skip(1).any(|l| l[3] != "0"), "stalls between commands are counted: {lines:?}");
    }
}

#[test]
fn a_slow_or_failing_command_never_stalls_the_measuring() {
    if !require_root_btf("a_slow_or_failing_command_never_stalls_the_measuring") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    // Slow: still running when the run ends; the run is not held up.
    let started = Instant::now();
    let (child, _d, csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "2s", "--on-stall", "sleep 8"], &[]);
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // 2 s of run, then 2 s for the command to end, then it is ended (the
    // pipes close: a CI step that reads them is not held up either).
    assert!(took < Duration::from_secs(7), "the run waited for the command: {took:?}");
    assert!(err.contains("--on-stall: a command's process group still ran 2 s after the run ended: ended (SIGTERM)"), "{err}");
    // Stalls were measured to the end: rows in the run's last half second.
    let rows = rows(&csv);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(csv.with_extension("summary.json")).unwrap()).expect("the summary file");
    let end = v["overhead"]["first_sample_ns"].as_u64().unwrap() + v["duration_ns"].as_u64().unwrap();
    assert!(rows.iter().any(|r| r.0 + 500_000_000 >= end), "no row in the last 0.5 s: the collector stalled");

    // Failing: said in one line, the run's own status untouched.
    let (status, _, err) = run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "1500ms", "--on-stall", "exit 7"], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    assert!(err.contains("--on-stall: the command exit status: 7 (failure 1; said once per 100)"), "{err}");
}

/// `--stop-above` ends the run's outputs with the stall it stops on:
/// nothing that began after its end is a row or counted (the stop takes
/// ~100 ms to reach every CPU: 8 stalls were recorded past it).
#[test]
fn stop_above_keeps_nothing_past_the_stall_it_stops_on() {
    if !require_root_btf("stop_above_keeps_nothing_past_the_stall_it_stops_on") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let (child, _d, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--duration", "20s", "--json", "--stop-above", "3ms"], &[]);
    fifo_bursts(cpu, random_name("jwstp"), Duration::from_millis(300), 1, 5_000_000).join().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the summary");
    let s = &v["stopped_on"];
    let end = s["time_ns"].as_u64().unwrap() + s["gap_ns"].as_u64().unwrap();
    let rows = rows(&csv);
    assert!(rows.iter().any(|r| r.0 == s["time_ns"].as_u64().unwrap()), "the stall it stopped on is a row: {s}");
    let past: Vec<_> = rows.iter().filter(|r| r.0 >= end).collect();
    assert!(past.is_empty(), "{} rows began after the stall it stopped on ended: {past:?}", past.len());
    assert_eq!(v["cpus"][0]["hiccups"].as_u64().unwrap(), rows.len() as u64, "the summary counts what the CSV holds");
}
