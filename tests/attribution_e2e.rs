//! Root, end to end: inject known disturbances on the last CPU and check
//! that jitterwatch's CSV names them, with the right amount of time.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

const BURSTS: usize = 120;
const BURST_NS: u64 = 200_000;

/// Starts `jitterwatch --cpus CPU --no-tui ARGS --csv <tmp>/out.csv`.
fn watch_to_csv(cpu: usize, args: &[&str]) -> (Watched, tempfile::TempDir, std::path::PathBuf) {
    let c = cpu.to_string();
    let mut all = vec!["--cpus", c.as_str(), "--no-tui"];
    all.extend_from_slice(args);
    watch_csv(&all, &[])
}

/// With the default clock: the TSC where usable (this VM's is), its gaps
/// converted to CLOCK_MONOTONIC lining up with BPF's timestamps.
#[test]
fn a_fifo_hog_is_named_with_its_runtime() {
    if !require_root_btf("a_fifo_hog_is_named_with_its_runtime") {
        return;
    }
    fifo_hog_is_named(&["--json"], "tp_btf/sched_switch");
}

/// The same with the probe reading clock_gettime (the vDSO).
#[test]
fn a_fifo_hog_is_named_with_the_vdso_clock() {
    if !require_root_btf("a_fifo_hog_is_named_with_the_vdso_clock") {
        return;
    }
    fifo_hog_is_named(&["--clock", "vdso", "--json"], "tp_btf/sched_switch");
}

/// The same through the per-CPU software switch event (--switch-hook
/// perf-event), which runs no program on the unwatched CPUs.
#[test]
fn the_perf_event_hook_names_a_fifo_hog() {
    if !require_root_btf("the_perf_event_hook_names_a_fifo_hog") {
        return;
    }
    fifo_hog_is_named(&["--switch-hook", "perf-event", "--json"], "per-CPU perf event");
}

fn fifo_hog_is_named(args: &[&str], hook: &str) {
    let _g = lock();
    let cpu = last_cpu();
    let name = random_name("jwhog");
    let mut all = vec!["--duration", "5s"];
    all.extend_from_slice(args);
    let (child, _dir, csv) = watch_to_csv(cpu, &all);

    let hog = fifo_bursts(cpu, name.clone(), Duration::from_millis(1200), BURSTS, BURST_NS);
    let (tid, bursts) = hog.join().unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("stolen_pct"), "no summary: {stdout}");
    if args.contains(&"--json") {
        let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON summary");
        assert_eq!(v["switch_hook"].as_str().map(|h| h.starts_with(hook)), Some(true), "{}", v["switch_hook"]);
        let c = &v["cpus"][0];
        if args.contains(&"vdso") {
            assert_eq!(c["clock"], "vdso", "{c}");
        } else if c["clock"] == "tsc" {
            let drift = c["tsc_drift_ns"].as_i64().expect("drift measured");
            assert!(drift.abs() < 10_000, "the TSC drifted {drift} ns from CLOCK_MONOTONIC");
        }
        dispatch_is_self(&v, &read_csv(&csv));
    } else {
        assert!(stdout.contains(&format!("context switches: {hook}")), "not the {hook} hook: {stdout}");
    }

    let rows = read_csv(&csv);
    let me = format!("{name}[{tid}]");
    let (seen, attributed, measured) = bursts_named(&rows.iter().collect::<Vec<_>>(), &me, &bursts);
    eprintln!("{seen}/{BURSTS} bursts named; attributed {attributed} ns vs measured {measured} ns");
    assert!(seen * 10 >= BURSTS * 9, "only {seen} of {BURSTS} bursts named {me}");
    let ratio = attributed as f64 / measured as f64;
    assert!((0.8..=1.2).contains(&ratio), "attributed/measured = {ratio:.3}");
}

/// A hook's dispatch is priced at start (tens to hundreds of ns a firing
/// on any machine we know: 131-160 here), and that much before each of
/// our records is `self`: a tick's stall holds at least the vector's entry
/// and exit, so its self is at least two dispatches.
fn dispatch_is_self(v: &serde_json::Value, rows: &[Row]) {
    let d = v["overhead"]["dispatch"]["ns"].as_u64().unwrap_or_else(|| panic!("no dispatch priced: {}", v["overhead"]));
    assert!((5..5_000).contains(&d), "a hook's dispatch priced at {d} ns");
    let ticks: Vec<u64> = rows
        .iter()
        .filter(|r| r.causes.iter().any(|c| c.0 == "irq" && c.1 == "local_timer") && r.causes.iter().all(|c| c.0 != "task"))
        .map(|r| r.causes.iter().filter(|c| c.0 == "self").map(|c| c.2).sum())
        .collect();
    let under = ticks.iter().filter(|&&own| own < 2 * d).count();
    eprintln!("dispatch {d} ns; self in the tick's stalls {:?}", &ticks[..ticks.len().min(20)]);
    assert!(!ticks.is_empty(), "no stall topped by the tick");
    assert!(under * 10 <= ticks.len(), "{under} of {} tick stalls hold less self than two dispatches ({d} ns each)", ticks.len());
}

#[test]
fn stat_refresh_work_items_are_named() {
    if !require_root_btf("stat_refresh_work_items_are_named") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let (child, _dir, csv) = watch_to_csv(cpu, &["--duration", "3s"]);
    thread::sleep(Duration::from_millis(1000));
    for _ in 0..10 {
        stat_refresh();
        thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = read_csv(&csv);
    let hits = rows.iter().filter(|r| r.causes.iter().any(|c| c.0 == "work" && c.1 == "refresh_vm_stats")).count();
    assert!(hits > 0, "no row names work:refresh_vm_stats among {} rows", rows.len());
    assert!(rows.iter().all(|r| r.cpu as usize == cpu));
}

#[test]
fn sigterm_leaves_a_complete_csv_and_no_spinner() {
    if !require_root_btf("sigterm_leaves_a_complete_csv_and_no_spinner") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let (child, _dir, csv) = watch_to_csv(cpu, &["--threshold", "300ns"]);
    thread::sleep(Duration::from_millis(2000));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "slow to stop");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("stolen_pct"));
    let rows = read_csv(&csv);
    assert!(!rows.is_empty(), "no rows in 2 s at a 300 ns threshold");
    // The file ends on a whole row.
    assert!(std::fs::read(&csv).unwrap().ends_with(b"\n"));
}

#[test]
fn stops_on_time_under_a_context_switch_storm() {
    if !require_root_btf("stops_on_time_under_a_context_switch_storm") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    // The storm outlives the run: jitterwatch must not wait for it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Several pairs: together they outrun a reader that drains until empty.
    let threads: Vec<_> = (0..4).flat_map(|_| storm(cpu, stop.clone(), None, Duration::from_secs(20))).collect();
    let t = std::time::Instant::now();
    let (status, out, err) = run_bin(&["--cpus", &cpu.to_string(), "--duration", "2s", "--json"], Duration::from_secs(30));
    let took = t.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in threads {
        h.join().unwrap();
    }
    assert!(status.success(), "{err}");
    assert!(took < Duration::from_secs(8), "asked for 2 s, took {took:?}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    eprintln!("storm: {} events/s, took {took:?}", v["events_per_sec"]);
    assert!(v["events"].as_u64().unwrap() > 10_000, "no storm seen: {out}");
    // The probe's own period leaves the stalls out: below the plain mean,
    // which the storm inflates, and of the floor's order. Not at or above
    // the floor: the floor is read while calibrating, as the programs
    // attach, and on a noisy host it came out above the run's quiet period
    // (11-13 ns against 9.6 here, 2 runs in 5): a timing, not a rule.
    let c = &v["cpus"][0];
    let (floor, quiet, mean) =
        (c["loop_floor_ns"].as_f64().unwrap(), c["loop_quiet_mean_ns"].as_f64().unwrap(), c["loop_mean_ns"].as_f64().unwrap());
    assert!(floor > 0.0 && quiet >= floor / 2.0 && quiet < mean, "floor {floor}, between hiccups {quiet}, mean {mean}");
}

/// A SCHED_FIFO storm holds the CPU up to ~950 ms at a time (RT throttling
/// parks it for the rest of each second): far more switches than a CPU's
/// timeline window holds. The stall must still be charged to the storm's
/// threads, not turn "unexplained" as the window overflows.
#[test]
fn a_stall_longer_than_the_window_is_charged_to_the_storm() {
    if !require_root_btf("a_stall_longer_than_the_window_is_charged_to_the_storm") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let (child, _dir, csv) = watch_to_csv(cpu, &["--duration", "3s", "--json"]);
    thread::sleep(Duration::from_millis(800));
    // It ends by itself: without RT throttling it starves the probe until then.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for h in storm(cpu, stop, Some(1), Duration::from_millis(1500)) {
        h.join().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let evicted = v["overhead"]["evicted_segments"].as_u64().unwrap();
    assert!(evicted > 0, "the storm did not overflow the window ({} events/s): nothing was tested", v["events_per_sec"]);
    let rows = read_csv(&csv);
    let worst = rows.iter().max_by_key(|r| r.gap_ns).expect("hiccups");
    let storm_ns: u64 = worst.causes.iter().filter(|c| c.0 == "task" && c.1.starts_with("jwstorm-p")).map(|c| c.2).sum();
    eprintln!("worst stall {} ns, {} ns charged to the storm, {evicted} segments evicted", worst.gap_ns, storm_ns);
    assert!(worst.gap_ns >= 100_000_000, "no long stall: {} ns", worst.gap_ns);
    assert!(
        storm_ns * 10 >= worst.gap_ns * 9,
        "storm {storm_ns} of {} ns: {:?}; {} events/s, overhead {}",
        worst.gap_ns,
        worst.causes,
        v["events_per_sec"],
        v["overhead"]
    );
}

/// RT throttling parks a SCHED_FIFO probe ~50 ms a second; the idle task then
/// runs, and the switch back into the probe is one no hook reports on our
/// VMs' last CPU (see bpf/switch.bpf.h, ran_since_arrival). The parks must be
/// named idle (the idle loop, or its idle state: never the swapper task), and
/// the host pauses after them must not be.
#[test]
fn rt_throttling_parks_are_idle_and_nothing_after_them_is() {
    if !require_root_btf("rt_throttling_parks_are_idle_and_nothing_after_them_is") {
        return;
    }
    let rt_runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or_default();
    if rt_runtime.trim() == "-1" {
        eprintln!("RT throttling is off (sched_rt_runtime_us=-1): nothing parks the probe here");
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let (child, _dir, csv) = watch_to_csv(cpu, &["--rt", "--duration", "3500ms", "--json"]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let hook = v["switch_hook"].as_str().unwrap_or_default().to_string();
    let idle = "idle";
    let rows = read_csv(&csv);
    // The idle task's time (its loop, its idle state and the state's exit).
    let idle_ns = |r: &common::Row| r.causes.iter().filter(|c| c.0 == "idle").map(|c| c.2).sum::<u64>();
    let swapper = rows.iter().filter(|r| r.causes.iter().any(|c| c.0 == "task" && c.1.starts_with("swapper/"))).count();
    assert_eq!(swapper, 0, "the idle task charged as a task in {swapper} rows");
    let parks: Vec<u64> = rows.iter().map(idle_ns).filter(|&ns| ns >= 10_000_000).collect();
    let small = rows.iter().filter(|r| (1..10_000_000).contains(&idle_ns(r))).count();
    eprintln!(
        "hook: {hook}; {} rows, parks (ms): {:?}, rows with a little idle time: {small}",
        rows.len(),
        parks.iter().map(|p| p / 1_000_000).collect::<Vec<_>>()
    );
    // A park is charged to whatever ran meanwhile: the idle task on a quiet
    // CPU, other tasks when the machine is busy. At least one must be idle.
    assert!((1..=5).contains(&parks.len()), "expected throttling parks named {idle}: {parks:?}");
    // Each park is one gap; host pauses afterwards must stay unexplained.
    assert!(small <= 2 * parks.len() + 2, "{small} other gaps charged to {idle}: the probe's return was missed");
    // IPIs caught half-attached at start (entry seen, exit not) must not
    // swallow the host pauses that follow until the first park.
    let ipi = rows.iter().filter(|r| r.top_kind == "ipi").count();
    assert!(ipi * 10 < rows.len(), "{ipi} of {} gaps charged to IPIs: a stale interrupt frame", rows.len());
}

/// Short-lived processes (a build, a shell loop) bring a new pid each: past
/// the per-CPU cap they share one `comm[*]` entry instead of growing the
/// aggregates without end.
#[test]
fn pid_churn_is_folded_per_program() {
    if !require_root_btf("pid_churn_is_folded_per_program") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let loop_ = Command::new("taskset")
        .args(["-c", &cpu.to_string(), "sh", "-c", "end=$(($(date +%s)+4)); while [ $(date +%s) -lt $end ]; do /bin/true; done"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (status, out, err) = run_bin(&["--cpus", &cpu.to_string(), "--duration", "3s", "--json"], Duration::from_secs(30));
    let mut loop_ = loop_;
    let _ = loop_.kill();
    let _ = loop_.wait();
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    let names: Vec<&str> = v["cpus"][0]["top_causes"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    eprintln!("top causes: {names:?}");
    assert!(names.iter().any(|n| n.ends_with("[*]")), "no folded program among {names:?}");
}
