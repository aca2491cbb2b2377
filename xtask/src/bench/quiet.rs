//! The figures assume an otherwise idle machine: check for one before and
//! during the bench, and say so in the report when it was not.

use std::thread;
use std::time::{Duration, Instant};

/// Waits up to 30 s for an idle machine, then goes on; returns how busy
/// it was, for the report.
pub fn quiet_check() -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let busy = busy_pct(Duration::from_secs(1));
        let others = intruders();
        let loud = busy.iter().any(|(_, p)| *p > 15.0) || !others.is_empty();
        let busy_txt = busy.iter().map(|(n, p)| format!("{n} {p:.0}%")).collect::<Vec<_>>().join(", ");
        let txt = if others.is_empty() {
            format!("busy before the bench: {busy_txt}")
        } else {
            format!("busy before the bench: {busy_txt}; also running: {}", others.join(" "))
        };
        if !loud {
            return txt;
        }
        if Instant::now() >= deadline {
            println!("bench: WARNING: the machine is not quiet ({txt}); the figures will be skewed");
            return format!("**not quiet**: {txt}");
        }
        println!("bench: waiting for the machine to quiet down ({txt})");
        thread::sleep(Duration::from_secs(4));
    }
}

/// Per CPU, the percentage of `window` it was busy (not idle or iowait),
/// from two reads of /proc/stat.
pub fn busy_pct(window: Duration) -> Vec<(String, f64)> {
    let read = || -> Vec<(String, u64, u64)> {
        std::fs::read_to_string("/proc/stat")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let name = f.next()?.to_string();
                let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                let idle = v.get(3)? + v.get(4)?;
                Some((name, v.iter().take(8).sum(), idle))
            })
            .collect()
    };
    let a = read();
    thread::sleep(window);
    let b = read();
    a.iter()
        .zip(&b)
        .map(|((n, t0, i0), (_, t1, i1))| {
            let (dt, di) = (t1.saturating_sub(*t0), i1.saturating_sub(*i0));
            (n.clone(), if dt == 0 { 0.0 } else { 100.0 * (dt - di.min(dt)) as f64 / dt as f64 })
        })
        .collect()
}

/// Other processes that would skew the figures: tracers and loads.
pub fn intruders() -> Vec<String> {
    const NAMES: &[&str] = &["jitterwatch", "bpftrace", "perf", "cloop", "pingpong", "stress", "stress-ng", "rustc"];
    let me = std::process::id();
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if NAMES.contains(&comm) {
            v.push(format!("{comm}[{pid}]"));
        }
    }
    v
}
