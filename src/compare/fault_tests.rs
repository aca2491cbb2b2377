//! compare on inputs made to hurt it (issue 40): each test reproduced a
//! fault before its fix.

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
