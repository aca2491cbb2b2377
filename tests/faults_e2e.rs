//! Root, end to end: what jitterwatch does when things go wrong — a
//! consumer that falls behind, a probe starved at quit time.

mod common;
use common::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A SCHED_FIFO busy loop on `cpu` until `deadline` (RT throttling, or the
/// fair server, still lets other tasks run ~50 ms a second).
fn fifo_hog(cpu: usize, prio: i32, deadline: Instant) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        pin_self(cpu);
        set_thread_name("jwfifo-hog");
        set_fifo(prio);
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
    })
}

/// The collector starved on its housekeeping CPUs while a switch storm
/// fills the ring buffer: events are dropped. The stretches they cover
/// must be charged to `lost`, not to whatever ran before them, and the
/// summary must say how much was lost.
#[test]
fn dropped_events_are_marked_lost() {
    if !require_root_btf("dropped_events_are_marked_lost") {
        return;
    }
    let _g = lock();
    let cpus = online_cpus();
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let child = std::process::Command::new(bin())
        .args(["--cpus", &cpu.to_string(), "--no-tui", "--json", "--duration", "4s", "--csv"])
        .arg(&csv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(800));
    let stop = Arc::new(AtomicBool::new(false));
    let storm: Vec<_> = (0..4).flat_map(|_| storm(cpu, stop.clone(), None, Duration::from_millis(2500))).collect();
    // Every housekeeping CPU busy at FIFO 50 for 1.5 s: the collector gets
    // only what throttling leaves, far less than the storm needs.
    let until = Instant::now() + Duration::from_millis(1500);
    let hogs: Vec<_> = cpus.iter().filter(|&&c| c != cpu).map(|&c| fifo_hog(c, 50, until)).collect();
    for h in hogs.into_iter().chain(storm) {
        h.join().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let c = &v["cpus"][0];
    let drops = c["ringbuf_drops"].as_u64().unwrap();
    assert!(drops > 0, "no events were dropped ({} events/s): nothing was tested", v["events_per_sec"]);
    let rows = read_csv(&csv);
    let lost_rows = rows.iter().filter(|r| r.causes.iter().any(|c| c.0 == "lost")).count();
    let lost_ns: u64 = rows.iter().flat_map(|r| r.causes.iter()).filter(|c| c.0 == "lost").map(|c| c.2).sum();
    eprintln!("{drops} drops; {lost_rows} of {} rows marked, {lost_ns} ns lost; summary lost_pct {}", rows.len(), c["lost_pct"]);
    assert!(lost_rows > 0, "{drops} events dropped, but no row is marked lost");
    assert!(c["lost_pct"].as_f64().unwrap() > 0.0, "{}", c);
}

/// A probe starved by a SCHED_FIFO hog on its CPU when the run ends: the
/// run still ends within its bound (the probe is boosted to stop, or
/// reported as stuck), the summary is printed and the exit is clean. The
/// probe runs at FIFO 10 under a FIFO 50 hog: neither RT throttling nor
/// the fair server gives it time (both serve normal tasks), so before the
/// bound the run waited for the hog to end (7.3 s here).
#[test]
fn quitting_is_bounded_when_the_probe_is_starved() {
    if !require_root_btf("quitting_is_bounded_when_the_probe_is_starved") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let started = Instant::now();
    let child = std::process::Command::new(bin())
        .args(["--cpus", &cpu.to_string(), "--no-tui", "--json", "--rt", "10", "--duration", "2s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(1200));
    // Still spinning well after the run is due to end.
    let hog = fifo_hog(cpu, 50, Instant::now() + Duration::from_secs(4));
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    hog.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON summary");
    eprintln!("asked for 2 s under a FIFO hog, took {took:?}");
    // 2 s, start-up, the 500 ms stop bound and the summary: never the hog's 4 s.
    assert!(took < Duration::from_millis(3500), "took {took:?}: {err}");
}
