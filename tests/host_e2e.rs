//! Root, end to end: the hypervisor's steal clock, read by the BPF side,
//! against the kernel's own steal accounting in /proc/stat.

mod common;
use common::*;

/// CPU `cpu`'s steal time in /proc/stat, in USER_HZ ticks.
fn steal_ticks(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let line = stat.lines().find(|l| l.starts_with(&format!("cpu{cpu} "))).expect("cpu line");
    line.split_whitespace().nth(8).expect("steal column").parse().unwrap()
}

#[test]
fn host_time_matches_the_kernels_steal_accounting() {
    if !require_root_btf("host_time_matches_the_kernels_steal_accounting") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let c = cpu.to_string();
    // SAFETY: sysconf has no preconditions.
    let tick_ns = 1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let secs = 10;
    let before = steal_ticks(cpu);
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--json", "--duration", &format!("{secs}s")], &[]);
    let out = child.wait_with_output().unwrap();
    let after = steal_ticks(cpu);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let rows = read_csv(&csv);
    let host_rows: u64 = rows.iter().flat_map(|r| r.causes.iter()).filter(|c| c.0 == "host").map(|c| c.2).sum();
    let Some(st) = v["cpus"][0].get("steal").filter(|s| !s.is_null()) else {
        // No reading: the kernel has no steal clock, which /proc/stat agrees with.
        assert_eq!(before, 0, "/proc/stat accounts steal on CPU {cpu}, but no steal clock reading came");
        assert!(v["notes"].to_string().contains("no steal clock"), "{}", v["notes"]);
        assert_eq!(host_rows, 0);
        return;
    };
    let n = |k: &str| st[k].as_u64().unwrap_or_else(|| panic!("{k} in {st}"));
    let (first, last, host, outside) = (n("clock_first_ns"), n("clock_last_ns"), n("host_ns"), n("outside_ns"));
    eprintln!(
        "steal clock {first}..{last} ns: {} ns over the run, host {host} ns, outside {outside} ns; /proc/stat {before}..{after} ticks of {tick_ns} ns",
        last - first
    );
    // The clock read is the one the kernel accounts from (since boot),
    // and it moved as the kernel's accounting did, within a tick a second.
    let slack = (secs + 2) * tick_ns;
    assert!(first.abs_diff(before * tick_ns) <= slack, "first reading {first} ns, /proc/stat {before} ticks");
    assert!((last - first).abs_diff((after - before) * tick_ns) <= slack, "seen {} ns, /proc/stat {} ticks", last - first, after - before);
    // Every increment went to a stall or is counted outside them, and the
    // rows carry exactly what was charged.
    assert_eq!(host + outside, last - first, "{st}");
    assert_eq!(host_rows, host, "host time in the CSV vs the summary");
    for r in &rows {
        let h: u64 = r.causes.iter().filter(|c| c.0 == "host").map(|c| c.2).sum();
        let named: u64 = r.causes.iter().filter(|c| c.0 != "host" && c.0 != "unexplained").map(|c| c.2).sum();
        assert!(h <= r.gap_ns - named, "host beyond the stall's unexplained time: {r:?}");
    }
}
