//! Root, end to end: the flight recorder on the last CPU. A hog's 2 ms
//! bursts are traced (the stall names the hog, the CPU track has the hog's
//! slice over it), --record writes the run, --trace-max bounds a storm of
//! stalls, the recorder's memory stays under its cap under a context-switch
//! storm, and --stop-above ends the run with its own exit status.

mod common;
use common::*;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn traces_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "perfetto-trace"))
        .collect();
    v.sort();
    v
}

/// Runs `jitterwatch --cpus CPU --no-tui --json ARGS` while `load` runs;
/// returns its exit code, summary JSON and stderr.
fn run_with(cpu: usize, args: &[&str], load: impl FnOnce()) -> (Option<i32>, serde_json::Value, String) {
    let child = spawn_started(Command::new(bin()).args(["--cpus", &cpu.to_string(), "--no-tui", "--json"]).args(args));
    load();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON summary ({e}): {err}"));
    (out.status.code(), v, err)
}

#[test]
fn a_hogs_stall_is_traced_and_the_run_recorded() {
    if !require_root_btf("a_hogs_stall_is_traced_and_the_run_recorded") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let (traces, record) = (dir.path().join("traces"), dir.path().join("run.perfetto-trace"));
    let name = random_name("jwtr");
    let mut hog = None;
    let args = ["--duration", "3s", "--trace-dir", traces.to_str().unwrap(), "--trace-above", "1ms", "--record", record.to_str().unwrap()];
    let (code, v, err) = run_with(cpu, &args, || {
        hog = Some(fifo_bursts(cpu, name.clone(), Duration::from_millis(100), 3, 2_000_000).join().unwrap());
    });
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("flight recorder: stalls at or above 1.0ms"), "{err}");
    let (tid, bursts) = hog.unwrap();
    let me = format!("{name}[{tid}]");
    let t = &v["traces"];
    assert!(t["written"].as_u64().unwrap() >= 1, "{t}");
    assert_eq!(t["written"].as_u64().unwrap() as usize, traces_in(&traces).len(), "{t}");
    assert!(t["peak_bytes"].as_u64().unwrap() <= t["cap_bytes"].as_u64().unwrap(), "{t}");

    // A trace whose stall names the hog, with the hog's slice over it on the CPU's track.
    let mut found = 0;
    for path in traces_in(&traces) {
        let slices = read_trace(&path);
        let size = std::fs::metadata(&path).unwrap().len();
        let Some(stall) =
            slices.iter().find(|s| s.track == format!("cpu {cpu} probe") && stall_causes(s).iter().any(|c| c.0 == "task" && c.1 == me))
        else {
            continue;
        };
        let on_cpu = slices
            .iter()
            .find(|s| s.track == format!("cpu {cpu}") && s.name == me && s.start < stall.end && stall.start < s.end)
            .expect("the hog's slice on the CPU track, over the stall");
        eprintln!("{}: stall {}..{}, hog {}..{}, {size} bytes", path.display(), stall.start, stall.end, on_cpu.start, on_cpu.end);
        // The slice covers the burst the stall holds: the rest is the kernel
        // switching to the hog and back. Measured against the burst, not the
        // stall: a stall may also hold time the hog did not take (CI once saw
        // a 3.5 ms stall around a 2 ms burst, the host's pause beside it).
        let burst = bursts.iter().find(|b| b.0 < stall.end && stall.start < b.1).expect("the stall is one of the hog's bursts");
        let burst_in_stall = burst.1.min(stall.end).saturating_sub(burst.0.max(stall.start));
        let over = on_cpu.end.min(burst.1).min(stall.end).saturating_sub(on_cpu.start.max(burst.0).max(stall.start));
        assert!(burst_in_stall * 10 >= (burst.1 - burst.0) * 9, "the stall holds {burst_in_stall} ns of a {} ns burst", burst.1 - burst.0);
        assert!(
            over * 10 >= burst_in_stall * 9,
            "the hog's slice covers {over} ns of the {burst_in_stall} ns its burst spends in the stall"
        );
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.contains(&format!("-cpu{cpu}-")), "{name}");
        // 50 ms of context before it.
        let first = slices.iter().map(|s| s.start).min().unwrap();
        assert!(stall.start - first >= 45_000_000, "the trace begins {} ns before the stall", stall.start - first);
        found += 1;
    }
    assert!(found >= 1, "no trace names {me}: {err}");

    let r = &v["recorded"];
    assert!(r["events"].as_u64().unwrap() > 0 && r["cut_at"].is_null(), "{r}");
    let whole = read_trace(&record);
    let named = bursts
        .iter()
        .filter(|b| whole.iter().any(|s| s.track == format!("cpu {cpu}") && s.name == me && s.start < b.1 && b.0 < s.end))
        .count();
    // The first burst may run under the thread's old name: it renames
    // itself after it is switched in on the CPU (no switch until it sleeps).
    assert!(named + 1 >= bursts.len(), "{named} of {} bursts in the recording", bursts.len());
}

#[test]
fn trace_max_bounds_a_storm_of_stalls() {
    if !require_root_btf("trace_max_bounds_a_storm_of_stalls") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--duration", "3s", "--trace-dir", dir.path().to_str().unwrap(), "--trace-above", "100us", "--trace-max", "3"];
    let (code, v, err) = run_with(cpu, &args, || {
        fifo_bursts(cpu, random_name("jwtm"), Duration::from_millis(100), 40, 300_000).join().unwrap();
    });
    assert_eq!(code, Some(0), "{err}");
    let t = &v["traces"];
    eprintln!("{t}");
    assert_eq!(t["written"], 3, "{t}");
    assert_eq!(traces_in(dir.path()).len(), 3);
    assert!(t["skipped_rate"].as_u64().unwrap() >= 30, "{t}");
}

#[test]
fn the_recorder_stays_under_its_cap_in_a_context_switch_storm() {
    if !require_root_btf("the_recorder_stays_under_its_cap_in_a_context_switch_storm") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    // What the recorder holds on a quiet CPU: what it reserves at start.
    let quiet = tempfile::tempdir().unwrap();
    let (code, v, err) = run_with(cpu, &["--duration", "1s", "--trace-dir", quiet.path().to_str().unwrap(), "--trace-above", "5ms"], || {});
    assert_eq!(code, Some(0), "{err}");
    let quiet_peak = v["traces"]["peak_bytes"].as_u64().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let args = ["--duration", "4s", "--trace-dir", dir.path().to_str().unwrap(), "--trace-above", "5ms"];
    let (code, v, err) = run_with(cpu, &args, || {
        thread::sleep(Duration::from_millis(500));
        for h in storm(cpu, stop.clone(), None, Duration::from_secs(3)) {
            h.join().unwrap();
        }
    });
    assert_eq!(code, Some(0), "{err}");
    let (t, events) = (&v["traces"], v["events"].as_u64().unwrap());
    eprintln!("{events} events; recorder {t}; {quiet_peak} bytes at peak when quiet");
    assert!(events > 100_000, "a storm: {events} events");
    // The storm's events went into the recorder: it held more than when
    // quiet (a recorder fed nothing stays under any cap).
    assert!(t["peak_bytes"].as_u64().unwrap() > quiet_peak, "held no more than when quiet ({quiet_peak} bytes): {t}");
    assert!(t["peak_bytes"].as_u64().unwrap() <= t["cap_bytes"].as_u64().unwrap(), "{t}");
    assert_eq!(t["evicted"], 0, "pruned by age, never by the cap: {t}");
}

#[test]
fn stop_above_ends_the_run_at_the_first_large_stall() {
    if !require_root_btf("stop_above_ends_the_run_at_the_first_large_stall") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let args = ["--duration", "20s", "--trace-dir", dir.path().to_str().unwrap(), "--stop-above", "3ms"];
    let (code, v, err) = run_with(cpu, &args, || {
        fifo_bursts(cpu, random_name("jwstop"), Duration::from_millis(100), 1, 5_000_000).join().unwrap();
    });
    assert_eq!(code, Some(3), "exit 3 on a stall: {err}");
    assert!(started.elapsed() < Duration::from_secs(10), "stopped early");
    let s = &v["stopped_on"];
    assert!(s["gap_ns"].as_u64().unwrap() >= 3_000_000 && s["limit_ns"] == 3_000_000, "{s}");
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("stopped on a stall")));
    let files = traces_in(dir.path());
    assert!(!files.is_empty(), "its trace written before the end");
    // Any of them: stalls over the default --trace-above (10 × the
    // threshold) while the run stops may be traced after it.
    let at = s["time_ns"].as_u64().unwrap();
    assert!(
        files.iter().any(|f| read_trace(f).iter().any(|x| x.start == at)),
        "no trace holds the stall that stopped the run ({s}): {files:?}"
    );
}

/// Passive mode: the traced stall is the watched thread's, on the track
/// of the watched threads, naming the hog that preempted it.
#[test]
fn a_watched_threads_preemption_is_traced() {
    if !require_root_btf("a_watched_threads_preemption_is_traced") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let spinner = {
        let stop = stop.clone();
        thread::spawn(move || {
            pin_self(cpu);
            set_thread_name("jwvictim");
            tx.send(jitterwatch::sys::gettid()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let tid = rx.recv().unwrap();
    let name = random_name("jwpre");
    let child =
        spawn_started(
            Command::new(bin())
                .args(["--tid", &tid.to_string(), "--cpus", &cpu.to_string(), "--no-tui", "--json", "--duration", "3s"])
                .args(["--trace-dir", dir.path().to_str().unwrap(), "--trace-above", "2ms"]),
        );
    let hog_tid = fifo_bursts(cpu, name.clone(), Duration::from_millis(100), 3, 3_000_000).join().unwrap().0;
    let out = child.wait_with_output().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let (victim, hog) = (format!("jwvictim[{tid}]"), format!("{name}[{hog_tid}]"));
    let found = traces_in(dir.path()).iter().any(|p| {
        read_trace(p).iter().any(|s| s.track == format!("cpu {cpu} watched threads") && stall_causes(s).iter().any(|c| c.1 == hog))
    });
    assert!(found, "no trace of {victim} preempted by {hog} in {:?}: {err}", traces_in(dir.path()));
}
