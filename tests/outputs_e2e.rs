//! Root, end to end: outputs that cannot be written. A full disk under the
//! CSV ends the run at once, in one line naming the file and why, with the
//! probe and programs stopped and the summary printed and written whole
//! from memory; a FIFO where an output goes is refused without blocking.

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// A 64 KiB tmpfs, unmounted however the test ends.
struct Tiny(tempfile::TempDir);

impl Tiny {
    fn mount() -> Tiny {
        let d = tempfile::tempdir().unwrap();
        let st = Command::new("mount").args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"]).arg(d.path()).status().unwrap();
        assert!(st.success(), "mount a tmpfs");
        Tiny(d)
    }
}

impl Drop for Tiny {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_under_the_csv_ends_the_run_with_its_summary() {
    if !require_root_btf("a_full_disk_under_the_csv_ends_the_run_with_its_summary") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let full = Tiny::mount();
    let csv = full.0.path().join("x.csv");
    let roomy = tempfile::tempdir().unwrap();
    let summary = roomy.path().join("run.summary.json");
    let t0 = Instant::now();
    let (st, out, err) = run_bin(
        &[
            "--cpus",
            &cpu,
            "--no-tui",
            "--json",
            "--duration",
            "20s",
            "--csv",
            csv.to_str().unwrap(),
            "--summary-json",
            summary.to_str().unwrap(),
        ],
        Duration::from_secs(40),
    );
    let took = t0.elapsed();
    // A 64 KiB CSV fills within a second or two at the default threshold.
    assert!(took < Duration::from_secs(10), "the run went on for {took:?} after its CSV failed: {err}");
    assert_eq!(st.code(), Some(1), "{err}");
    let line = format!("writing the CSV: {}: No space left on device", csv.display());
    assert_eq!(err.lines().filter(|l| l.contains(&line) && l.contains("the run ends here")).count(), 1, "{err}");
    // The summary, printed and written whole, says it ended early.
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("no summary on stdout ({e}): {err}"));
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(v["notes"], written["notes"]);
    assert!(
        v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("the run ended early: writing the CSV")),
        "{}",
        v["notes"]
    );
    assert!(v["cpus"][0]["hiccups"].as_u64().unwrap() > 0, "{}", v["cpus"]);
    // The CSV ends on a whole row; nothing half-written is left beside it.
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.ends_with('\n') && text.lines().count() > 10, "{} bytes", text.len());
    assert_eq!(read_csv(&csv).len(), text.lines().count() - 1);
    let left: Vec<_> = std::fs::read_dir(full.0.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("x.csv")]);
    // No probe left spinning: the CPU's lock was released.
    let (st, _, err) = run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "1s"], Duration::from_secs(20));
    assert!(st.success(), "{err}");
}

#[test]
fn a_summary_that_cannot_be_written_leaves_no_empty_file() {
    if !require_root_btf("a_summary_that_cannot_be_written_leaves_no_empty_file") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let full = Tiny::mount();
    // Fill the disk, then ask for the summary there.
    std::fs::write(full.0.path().join("filler"), vec![0u8; 60 * 1024]).unwrap();
    let summary = full.0.path().join("run.summary.json");
    let (st, out, err) =
        run_bin(&["--cpus", &cpu, "--no-tui", "--duration", "1s", "--summary-json", summary.to_str().unwrap()], Duration::from_secs(20));
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot write the run summary {}", summary.display())), "{err}");
    assert!(out.contains("CPU"), "the summary is still printed: {out}");
    assert!(!summary.exists() && !full.0.path().join("run.summary.json.part").exists());
}

#[test]
fn a_fifo_as_an_output_is_refused_without_blocking() {
    if !require_root_btf("a_fifo_as_an_output_is_refused_without_blocking") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("out.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t0 = Instant::now();
    for args in [["--csv", fifo.to_str().unwrap()], ["--summary-json", fifo.to_str().unwrap()]] {
        let (st, _, err) = run_bin(&[&["--cpus", &cpu, "--no-tui", "--duration", "1s"][..], &args].concat(), Duration::from_secs(20));
        assert_eq!(st.code(), Some(1), "{err}");
        assert!(err.contains(&format!("{}: not a regular file", fifo.display())), "{err}");
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "blocked on the FIFO");
}

/// What recurs, on a real run: with the spin probe on a CPU that keeps its
/// tick (not nohz_full, as on CI's VM), the local timer's stalls recur at
/// the tick's period (1/CONFIG_HZ), phase-locked most of them.
#[test]
fn the_tick_is_found_to_recur_at_its_period() {
    if !require_root_btf("the_tick_is_found_to_recur_at_its_period") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let nohz = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    if jitterwatch::cpulist::parse(nohz.trim()).is_ok_and(|l| l.contains(&cpu)) {
        eprintln!("CPU {cpu} is nohz_full: its tick stops, nothing to find");
        return;
    }
    let (status, stdout, err) =
        run_bin(&["--cpus", &cpu.to_string(), "--no-tui", "--duration", "3s", "--json"], std::time::Duration::from_secs(60));
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let periodic = v["cpus"][0]["periodic"].as_array().cloned().unwrap_or_default();
    let tick = periodic.iter().find(|p| p["cause"] == "irq:local_timer").unwrap_or_else(|| panic!("no period for the tick: {periodic:?}"));
    let period = tick["period_ns"].as_u64().unwrap();
    assert!([1_000_000, 3_333_333, 4_000_000, 10_000_000].contains(&period), "{tick}");
    // Nearly all of them on a quiet machine; 71% was seen with VMs
    // running beside (other hrtimers then fire through the local timer).
    assert!(tick["share"].as_f64().unwrap() > 0.5, "{tick}");
}

/// Why the tick runs, on a real run: the wake-up probe sleeps 20 ms at a
/// time, and in those sleeps the kernel stops the CPU's tick (idle, on any
/// CPU with NO_HZ_IDLE as Debian's kernels have): the tally read from the
/// programs says so, with no dependency (this CPU is not nohz_full, so the
/// kernel never checks one). Counted while watching, and read before the
/// programs' memory is cleared at the end.
#[test]
fn the_tick_s_stops_in_idle_reach_the_summary() {
    if !require_root_btf("the_tick_s_stops_in_idle_reach_the_summary") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let nohz = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    let nohz_full = jitterwatch::cpulist::parse(nohz.trim()).is_ok_and(|l| l.contains(&cpu));
    let (status, stdout, err) = run_bin(
        &["--cpus", &cpu.to_string(), "--no-tui", "--duration", "2s", "--probe", "wakeup", "--period", "20ms", "--json"],
        std::time::Duration::from_secs(60),
    );
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let tick = &v["cpus"][0]["tick"];
    assert!(tick["stops"].as_u64().unwrap_or(0) >= 10, "about 100 sleeps of 20 ms: {tick}");
    if !nohz_full {
        assert_eq!(tick["dependencies"], serde_json::json!([]), "{tick}");
        assert_eq!(tick["refusals"], 0, "{tick}");
        // Its stops were at idle: the state is the busy CPU's, and why.
        assert_eq!(tick["state"], "running", "{tick}");
        assert!(tick["reason"].as_str().is_some_and(|r| r.starts_with("not a nohz_full CPU")), "{tick}");
        // A spinning probe off nohz_full: the tick fires every few ms, so
        // its state is never an idle moment's "stopped" from before.
        let (status, stdout, err) =
            run_bin(&["--cpus", &cpu.to_string(), "--no-tui", "--duration", "2s", "--json"], std::time::Duration::from_secs(60));
        assert!(status.success(), "{err}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let c = &v["cpus"][0];
        assert_eq!(c["tick"]["state"], "running", "{}", c["tick"]);
        let ticks = c["top_causes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["kind"] == "irq" && t["name"] == "local_timer")
            .map_or(0, |t| t["count"].as_u64().unwrap());
        assert!(ticks >= 100, "the tick fired {ticks} times in 2 s: {}", c["top_causes"]);
    }
}
