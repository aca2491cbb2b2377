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
    let c = cpu.to_string();
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--json", "--duration", "4s"], &[]);
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
    eprintln!("{drops} drops; {lost_rows} of {} rows marked, {lost_ns} ns lost; summary unknown_pct {}", rows.len(), c["unknown_pct"]);
    assert!(lost_rows > 0, "{drops} events dropped, but no row is marked lost");
    assert!(c["unknown_pct"].as_f64().unwrap() > 0.0, "{}", c);
}

/// A 2 s run on `cpu` with its probe at SCHED_FIFO 10, output piped: a
/// FIFO 50 task there starves it (neither RT throttling nor the fair
/// server gives it time).
fn rt10_run(cpu: usize) -> Watched {
    spawn_started(std::process::Command::new(bin()).args([
        "--cpus",
        &cpu.to_string(),
        "--no-tui",
        "--json",
        "--rt",
        "10",
        "--duration",
        "2s",
    ]))
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
    let child = rt10_run(cpu);
    thread::sleep(Duration::from_millis(700));
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

/// A storm on the watched CPU that outlasts the run, with the probe
/// starved there (FIFO 10 under the storm's FIFO 50): the probe sees the
/// stop only once boosted, half the stop bound later, and the collector
/// drains the ring meanwhile. It used to wait without draining, and the
/// storm filled the ring: about 25,000 events dropped at the end of the
/// run (1 run in 5 at FIFO 1 under figure 4's storms; every run here).
#[test]
fn the_ring_is_drained_while_a_starved_probe_stops() {
    if !require_root_btf("the_ring_is_drained_while_a_starved_probe_stops") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let child = rt10_run(cpu);
    // Once the probe is measuring; on until well after the run's end.
    thread::sleep(Duration::from_millis(700));
    let stop = Arc::new(AtomicBool::new(false));
    let storm = storm(cpu, stop.clone(), Some(50), Duration::from_millis(2500));
    let out = child.wait_with_output().unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for h in storm {
        h.join().unwrap();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let drops = v["cpus"][0]["ringbuf_drops"].as_u64().unwrap();
    let lag_ms = v["overhead"]["lag_max_ns"].as_f64().unwrap_or(0.0) / 1e6;
    eprintln!("{drops} drops at {} events/s, consumer lag up to {lag_ms:.1} ms", v["events_per_sec"]);
    assert_eq!(drops, 0, "events dropped while the starved probe stopped (lag {lag_ms:.1} ms): {err}");
}

/// `2>/dev/full`: every diagnostic fails to write. The run, its summary and
/// its CSV complete anyway (it used to panic, exit 101, with an empty CSV).
#[test]
fn an_unwritable_stderr_costs_nothing() {
    if !require_root_btf("an_unwritable_stderr_costs_nothing") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let full = std::fs::File::options().write(true).open("/dev/full").unwrap();
    let out = std::process::Command::new(bin())
        .args(["--cpus", &cpu.to_string(), "--no-tui", "--json", "--duration", "1s", "--csv"])
        .arg(&csv)
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON summary");
    let raw = std::fs::read(&csv).unwrap();
    assert!(raw.starts_with(b"time_ns,") && raw.ends_with(b"\n"), "CSV incomplete: {} bytes", raw.len());
    // Rows, not a header alone: every tick (HZ >= 100) passes the default
    // threshold (1 µs; a tick takes ~14 µs here).
    let rows = read_csv(&csv);
    assert!(rows.len() >= 50, "{} rows in 1 s: the CSV was not written", rows.len());
}

/// SIGQUIT stops the run like SIGTERM: no core, the CSV ends on a whole row.
#[test]
fn sigquit_stops_like_sigterm() {
    if !require_root_btf("sigquit_stops_like_sigterm") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--duration", "30s"], &[]);
    thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(t.elapsed() < Duration::from_secs(3), "took {:?} to stop", t.elapsed());
    assert!(String::from_utf8_lossy(&out.stdout).contains("hiccups"), "no summary");
    assert!(std::fs::read(&csv).unwrap().ends_with(b"\n"));
    // Whole rows, not a header alone: every tick (HZ >= 100) passes the
    // default threshold (1 µs; a tick takes ~14 µs here).
    let rows = read_csv(&csv);
    assert!(rows.len() >= 50, "{} rows in 1.5 s at the default threshold", rows.len());
}

/// A SIGHUP ignored when jitterwatch started (nohup) stays ignored: the
/// run goes on to its --duration. One not ignored stops it at once.
#[test]
fn an_ignored_sighup_stays_ignored() {
    if !require_root_btf("an_ignored_sighup_stays_ignored") {
        return;
    }
    let _g = lock();
    let c = last_cpu().to_string();
    for ignored in [true, false] {
        let trap = if ignored { "trap '' HUP; " } else { "" };
        let script = format!("{trap}exec \"$0\" --cpus {c} --no-tui --duration 3s");
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script, bin()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let err = started(&mut child);
        let t = Instant::now();
        // SAFETY: signalling our own child (sh exec'd into jitterwatch).
        unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
        let out = child.wait_with_output().unwrap();
        let took = t.elapsed();
        let err = err.join().unwrap();
        assert_eq!(out.status.code(), Some(0), "{:?}: {err}", out.status);
        if ignored {
            assert!(took > Duration::from_millis(2500), "nohup'd, a SIGHUP ended the run after {took:?}");
        } else {
            assert!(took < Duration::from_millis(2000), "a SIGHUP took {took:?} to end the run");
        }
    }
}

/// A symlink planted where the CSV or the trace directory goes (as
/// `nobody` could in /tmp) is refused with the same one line, and what it
/// points to is untouched.
#[test]
fn a_planted_symlink_for_the_csv_or_the_trace_dir_is_refused() {
    if !require_root_btf("a_planted_symlink_for_the_csv_or_the_trace_dir_is_refused") {
        return;
    }
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious");
    std::fs::write(&precious, "root's file\n").unwrap();
    let roots_dir = dir.path().join("roots-dir");
    std::fs::create_dir(&roots_dir).unwrap();
    let cpu = last_cpu().to_string();
    for (flag, target) in [("--csv", &precious), ("--trace-dir", &roots_dir)] {
        let link = dir.path().join(format!("planted{flag}"));
        std::os::unix::fs::symlink(target, &link).unwrap();
        let (status, _, err) =
            run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "1s", flag, link.to_str().unwrap()], Duration::from_secs(20));
        assert!(!status.success(), "a symlinked {flag} was accepted: {err}");
        assert!(err.contains("is a symbolic link (refused: write to the real path)"), "{flag}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "root's file\n");
    assert_eq!(std::fs::read_dir(&roots_dir).unwrap().count(), 0, "something was written through the link");
}

/// Two outputs naming one file (however spelled) are refused in one line
/// before anything is written: the file the user had is left whole.
#[test]
fn two_outputs_naming_one_file_are_refused_before_anything_is_written() {
    if !require_root_btf("two_outputs_naming_one_file_are_refused_before_anything_is_written") {
        return;
    }
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("ok.csv");
    let dotted = dir.path().join(".").join("ok.csv");
    let cpu = last_cpu().to_string();
    for (a, b) in [("--csv", "--summary-json"), ("--csv", "--record")] {
        std::fs::write(&ok, "the user's rows\n").unwrap();
        let (status, _, err) = run_bin(
            &["--cpus", &cpu, "--no-tui", "--duration", "1s", a, ok.to_str().unwrap(), b, dotted.to_str().unwrap()],
            Duration::from_secs(20),
        );
        assert!(!status.success(), "{a} and {b} on one file were accepted: {err}");
        assert!(err.contains(&format!("{a} and {b} both write ")), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
        assert_eq!(std::fs::read_to_string(&ok).unwrap(), "the user's rows\n", "{a} and {b}: the file was touched");
    }
}

/// What `--on-stall` commands start never outlives the run nor holds its
/// pipes: a command that ignores SIGTERM (2 s runs took 15.5 s, and `sh`
/// and `sleep` survived, reparented to init), and one whose leader exits
/// at once leaving children behind (13.7 s, never signalled). Each run's
/// stdout and stderr are pipes read to their end, as a CI step reads them.
#[test]
fn on_stall_commands_never_outlive_the_run() {
    if !require_root_btf("on_stall_commands_never_outlive_the_run") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let alive = |marker: &str| {
        let out = std::process::Command::new("pgrep").args(["-f", marker]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    for (cmd, marker, said) in [
        ("trap '' TERM; sleep 15.2468", "sleep 15.2468", "ended (SIGTERM, then SIGKILL 1 s later)"),
        ("for i in 1 2 3; do sleep 12.1357 & done; echo started-three", "sleep 12.1357", "ended (SIGTERM)"),
    ] {
        let started = Instant::now();
        let (status, _, err) = run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "2s", "--on-stall", cmd], Duration::from_secs(30));
        let took = started.elapsed();
        assert!(status.success(), "{cmd}: {err}");
        // 2 s of run, 2 s for the commands, 1 s of grace, 1 s to die.
        assert!(took < Duration::from_secs(8), "{cmd}: the run took {took:?}: {err}");
        assert!(err.contains(&format!("still ran 2 s after the run ended: {said}")), "{cmd}: {err}");
        assert_eq!(alive(marker), "", "{cmd}: outlived the run");
        if cmd.contains("echo") {
            assert!(err.contains("started-three"), "the command's output reaches our stderr: {err}");
        }
    }
}

/// Any user can name a thread `jw-probe-N`: that blocks nothing. Two
/// instances on one CPU, started together: exactly one runs, the other is
/// refused with one line naming the holder.
#[test]
fn one_owner_per_cpu_by_lock_not_by_name() {
    if !require_root_btf("one_owner_per_cpu_by_lock_not_by_name") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let spoof_stop = Arc::new(AtomicBool::new(false));
    let spoof = {
        let stop = spoof_stop.clone();
        let name = format!("jw-probe-{cpu}");
        thread::spawn(move || {
            set_thread_name(&name);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let (status, _, err) = run_bin(&["--cpus", &cpu.to_string(), "--no-tui", "--duration", "1s"], Duration::from_secs(20));
    spoof_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spoof.join().unwrap();
    assert!(status.success(), "a thread named jw-probe-{cpu} blocked the run: {err}");

    let spawn = || {
        std::process::Command::new(bin())
            .args(["--cpus", &cpu.to_string(), "--no-tui", "--duration", "2s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
    let refused: Vec<String> =
        [&a, &b].iter().filter(|o| !o.status.success()).map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).collect();
    assert_eq!(ok, 1, "both or neither ran: {refused:?}");
    assert!(refused[0].contains(&format!("CPU {cpu} is already watched by another jitterwatch")), "{}", refused[0]);
    assert_eq!(refused[0].trim().lines().count(), 1, "{}", refused[0]);
}

/// A threshold under twice the loop floor would report the loop itself
/// (`--threshold 0` made 3.26 M rows and 55 M queue overflows in 3 s):
/// refused with one line once the floor is measured.
#[test]
fn a_threshold_under_the_loop_floor_is_refused() {
    if !require_root_btf("a_threshold_under_the_loop_floor_is_refused") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let (status, _, err) = run_bin(&["--cpus", &cpu, "--no-tui", "--threshold", "1ns", "--duration", "2s"], Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("--threshold 1ns is under 2 × CPU") && err.contains("loop floor"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A gate under the threshold could never close (a run with
/// `--threshold 50ms --fail-above 2us` passed while the CPU had ~500
/// stalls a second over 1 µs): a given threshold above it is refused in
/// one line before anything runs; a default one is lowered to it, said on
/// the start line, so `--stop-above` under the default stops the run.
#[test]
fn a_gate_never_sits_under_the_threshold() {
    if !require_root_btf("a_gate_never_sits_under_the_threshold") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    for gate in ["--fail-above", "--stop-above"] {
        let started = std::time::Instant::now();
        let (status, _, err) =
            run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "2s", "--threshold", "50ms", gate, "2us"], Duration::from_secs(20));
        assert_eq!(status.code(), Some(1), "{gate}: {err}");
        assert!(err.contains(&format!("{gate} 2.0µs is under --threshold 50.0ms")), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(started.elapsed() < Duration::from_secs(1), "{gate}: refused after {:?}, not before the run", started.elapsed());
    }
    // Under the default (1 µs here): lowered, and the stall it gates is seen.
    let (status, out, err) =
        run_bin(&["--cpus", &cpu, "--no-tui", "--json", "--duration", "5s", "--stop-above", "900ns"], Duration::from_secs(20));
    assert_eq!(status.code(), Some(3), "--stop-above under the default threshold never stopped: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    assert_eq!(v["cpus"][0]["threshold_ns"].as_u64(), Some(900), "{err}");
    assert!(err.contains("lowered to --stop-above 900ns"), "{err}");
    // Passive mode's default (1 µs) too.
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let (stop, cpu) = (stop.clone(), last_cpu());
        thread::spawn(move || {
            pin_self(cpu);
            tx.send(jitterwatch::sys::gettid()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                burn(1_000_000);
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let tid = rx.recv().unwrap().to_string();
    let (status, out, err) =
        run_bin(&["--tid", &tid, "--no-tui", "--json", "--duration", "1s", "--fail-above", "500ns"], Duration::from_secs(20));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    worker.join().unwrap();
    assert!(matches!(status.code(), Some(0 | 3)), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    assert_eq!(v["cpus"][0]["threshold_ns"].as_u64(), Some(500), "{err}");
    assert!(err.contains("passive: threshold 500ns, lowered to --fail-above 500ns (the rule gives 1.0µs)"), "{err}");
}

/// The threshold's rule is said at start in words and followed: by
/// default max(1 µs, 8 × the loop floor), with `--threshold auto` 8 × the
/// floor. The floor is the loop's period (a low percentile of its
/// iteration time), not the smallest delta of two clock reads (1 ns with
/// the TSC, whose reads the CPU reorders): never above the period between
/// hiccups, and with `auto` not a small fraction of it either.
#[test]
fn the_threshold_rule_is_said_and_followed() {
    if !require_root_btf("the_threshold_rule_is_said_and_followed") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    for auto in [false, true] {
        let mut args = vec!["--cpus", &cpu, "--no-tui", "--json", "--duration", "1s"];
        if auto {
            args.extend(["--threshold", "auto"]);
        }
        let (status, out, err) = run_bin(&args, Duration::from_secs(20));
        assert!(status.success(), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
        let c = &v["cpus"][0];
        let (floor, thr, quiet) =
            (c["loop_floor_ns"].as_u64().unwrap(), c["threshold_ns"].as_u64().unwrap(), c["loop_quiet_mean_ns"].as_f64().unwrap());
        let line = err.lines().find(|l| l.contains(&format!("watching CPU {cpu}: threshold"))).unwrap_or_else(|| panic!("{err}"));
        // The floor is the loop's period, of the quiet period's order (not
        // the 1 ns of two reordered TSC reads): read while calibrating, it
        // came out 11-13 ns against 9.5 between hiccups on this host in
        // some runs, so not "at most": a timing, not a rule.
        assert!(floor >= 1 && floor as f64 <= 2.0 * quiet, "auto {auto}: floor {floor} ns, {quiet} ns between hiccups");
        if auto {
            assert_eq!(thr, 8 * floor, "{line}");
            assert!(line.contains(&format!("(--threshold auto: 8 × the loop floor of {floor}ns)")), "{line}");
            // Under 8 × the floor by construction, the period between
            // hiccups was 9.5 ns against a 1 ns "floor" before.
            assert!((4 * floor) as f64 >= quiet, "floor {floor} ns, {quiet} ns between hiccups");
        } else {
            assert_eq!(thr, (8 * floor).max(1_000), "{line}");
            assert!(line.contains(&format!("(the default: max(1µs, 8 × the loop floor of {floor}ns)")), "{line}");
        }
    }
}

/// Brings a CPU back online when dropped, whatever the test did.
struct Online(usize);

impl Drop for Online {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/sys/devices/system/cpu/cpu{}/online", self.0), "1");
    }
}

/// The watched CPU goes offline mid-run: the kernel moves the probe to
/// another CPU. Nothing measured there may be reported as the watched CPU
/// (it used to be, with exit 0): the run ends with one line saying so, the
/// summary notes it, and the exit is non-zero.
#[test]
fn a_watched_cpu_going_offline_ends_the_run_cleanly() {
    if !require_root_btf("a_watched_cpu_going_offline_ends_the_run_cleanly") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let online = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    assert!(std::path::Path::new(&online).exists(), "CPU {cpu} cannot be taken offline here ({online} missing)");
    let c = cpu.to_string();
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--json", "--duration", "20s"], &[]);
    let back = Online(cpu);
    thread::sleep(Duration::from_millis(1500));
    let off_at = jitterwatch::clock::now_ns();
    std::fs::write(&online, "0").expect("taking the CPU offline");
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    drop(back);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?} to end after the CPU went offline", t.elapsed());
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("CPU {cpu} went offline during the run")), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert!(v["notes"].to_string().contains("went offline"), "{v}");
    // No row from after the CPU left (the gap spanning the move included).
    let rows = read_csv(&csv);
    // Rows from before it left (every tick passes the default threshold:
    // thousands here), or nothing was checked.
    let before = rows.iter().filter(|r| r.time_ns < off_at).count();
    assert!(before >= 50, "{before} rows from the 1.5 s before the CPU went offline: nothing was checked");
    let late: Vec<_> = rows.iter().filter(|r| r.time_ns + r.gap_ns > off_at + 1_000_000_000).collect();
    assert!(late.is_empty(), "{} rows end well after the CPU went offline", late.len());
}

/// A task named with a bidi override (U+202E), a byte that is not UTF-8
/// and the literal text `\x1b`: every output writes it escaped, apart from
/// a real escape, and never raw.
#[test]
fn hostile_names_are_escaped_in_every_output() {
    if !require_root_btf("hostile_names_are_escaped_in_every_output") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    // j w U+202E \ x 1 b 0xff: 10 bytes.
    let raw: &[u8] = b"jw\xe2\x80\xae\\x1b\xff";
    let escaped = "jw\\u{202e}\\\\x1b\\xff";
    let stop = Arc::new(AtomicBool::new(false));
    let hog = {
        let stop = stop.clone();
        thread::spawn(move || {
            pin_self(cpu);
            let c = std::ffi::CString::new(raw).unwrap();
            // SAFETY: PR_SET_NAME with a NUL-terminated string.
            unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                burn(2_000_000);
                thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let c = cpu.to_string();
    let (status, json, err) =
        run_bin(&["--cpus", &c, "--no-tui", "--json", "--duration", "2s", "--csv", csv.to_str().unwrap()], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    let (status, text, err) = run_bin(&["--cpus", &c, "--no-tui", "--duration", "1s"], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    let (status, events, err) = run_bin(&["events", "--cpus", &c, "--duration", "1s"], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    hog.join().unwrap();
    let csv_text = String::from_utf8(std::fs::read(&csv).unwrap()).expect("the CSV is UTF-8");
    for (what, out) in [("CSV", &csv_text), ("JSON", &json), ("summary", &text), ("events", &events)] {
        assert!(!out.contains('\u{202e}') && !out.contains('\u{fffd}') && !out.contains('\x1b'), "{what} has a raw character");
        let want = if what == "JSON" { escaped.replace('\\', "\\\\") } else { escaped.to_string() };
        assert!(out.contains(&want), "{what} lacks {want}:\n{}", &out[..out.len().min(3000)]);
    }
}

/// A stall longer than the timeline's window, made by more distinct tasks
/// than the spill keeps apart (300 SCHED_FIFO threads taking turns): it is
/// charged to those tasks, folded by program where needed, never called
/// unexplained (8 s of a 15 s stall were, before).
#[test]
fn a_long_stall_by_many_tasks_keeps_them_by_program() {
    if !require_root_btf("a_long_stall_by_many_tasks_keeps_them_by_program") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let (child, _dir, csv) = watch_csv(&["--cpus", &c, "--no-tui", "--json", "--duration", "4s"], &[]);
    thread::sleep(Duration::from_millis(800));
    const TASKS: usize = 300;
    let go = Arc::new(std::sync::Barrier::new(TASKS));
    let threads: Vec<_> = (0..TASKS)
        .map(|_| {
            let go = go.clone();
            thread::spawn(move || {
                pin_self(cpu);
                set_thread_name("jwmany");
                set_fifo(1);
                go.wait();
                // Round robin among equals: every yield is a switch.
                let end = Instant::now() + Duration::from_millis(1500);
                while Instant::now() < end {
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert!(v["overhead"]["evicted_segments"].as_u64().unwrap() > 0, "the window never overflowed: nothing was tested");
    let rows = read_csv(&csv);
    let worst = rows.iter().max_by_key(|r| r.gap_ns).expect("hiccups");
    let many: u64 = worst.causes.iter().filter(|c| c.0 == "task" && c.1.starts_with("jwmany[")).map(|c| c.2).sum();
    let names = worst.causes.iter().filter(|c| c.1.starts_with("jwmany[")).count();
    eprintln!("worst stall {} ns: {many} ns to jwmany in {names} entries; unexplained {} ns", worst.gap_ns, worst.unexplained_ns);
    assert!(names > 1, "the tasks were not named: {:?}", &worst.causes[..worst.causes.len().min(8)]);
    assert!(worst.gap_ns >= 100_000_000, "no long stall: {} ns", worst.gap_ns);
    // A yield storm can outrun the ring buffer: those stretches are `lost`
    // (not known), which is honest; calling them unexplained is not. Our
    // own switch program on each of its switches is `self`, named too: its
    // own time and the dispatch priced at start (the cold price on every
    // switch read 110 ms of a 950 ms stall on CI against the tasks' 836
    // ms; the warm one for back-to-back switches, 68 ms against 882 here;
    // docs/how-it-works.md).
    let lost: u64 = worst.causes.iter().filter(|c| c.0 == "lost").map(|c| c.2).sum();
    let own: u64 = worst.causes.iter().filter(|c| c.0 == "self").map(|c| c.2).sum();
    assert!(
        (many + lost + own) * 10 >= worst.gap_ns * 9 && many * 2 >= worst.gap_ns,
        "{many} ns to the tasks, {lost} ns lost, {own} ns self, of {} ns: {:?}",
        worst.gap_ns,
        &worst.causes[..worst.causes.len().min(8)]
    );
    assert!(worst.unexplained_ns * 100 < worst.gap_ns, "{} ns unexplained", worst.unexplained_ns);
}
