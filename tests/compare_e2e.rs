//! Root, end to end: two real runs on the last CPU, one with a FIFO hog
//! and one quiet, then `jitterwatch compare` on the files they wrote.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn compare_says_the_hog_vanished_and_draws_the_chart() {
    if !require_root_btf("compare_says_the_hog_vanished_and_draws_the_chart") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let name = random_name("jwcmp");
    let (child, hog_dir, hog_csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "3s"], &[]);
    let hog = fifo_bursts(last_cpu(), name.clone(), Duration::from_millis(1000), 50, 200_000);
    let (_, bursts) = hog.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (child, _quiet_dir, quiet_csv) = watch_csv(&["--cpus", &cpu, "--no-tui", "--duration", "2s"], &[]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Each run wrote its summary beside its CSV.
    assert!(hog_dir.path().join("out.summary.json").is_file());
    let png = hog_dir.path().join("cmp.png");
    let (status, stdout, err) = run_bin(
        &[
            "compare",
            hog_csv.to_str().unwrap(),
            quiet_csv.to_str().unwrap(),
            "--label",
            "hog",
            "--label",
            "quiet",
            "--png",
            png.to_str().unwrap(),
            "--json",
        ],
        Duration::from_secs(30),
    );
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let vanished: Vec<&str> = v["changes"][0]["vanished"].as_array().unwrap().iter().map(|c| c["cause"].as_str().unwrap()).collect();
    assert!(vanished.contains(&format!("task:{name}").as_str()), "the hog did not vanish: {vanished:?}\n{stdout}");
    let hog_fig = &v["blocks"][0]["figures"][0];
    assert!(hog_fig["count"].as_u64().unwrap() >= bursts.len() as u64 * 9 / 10, "{hog_fig}");
    assert!(hog_fig["max_ns"].as_u64().unwrap() >= 200_000, "{hog_fig}");
    assert_eq!(v["runs"][1]["label"], "quiet");
    let img = image::open(&png).expect("the PNG decodes").to_rgb8();
    assert!(img.pixels().filter(|p| p.0 != [255, 255, 255]).count() > 10_000, "a blank chart");

    // The text table names both runs and the percentiles.
    let (status, text, err) = run_bin(&["compare", hog_csv.to_str().unwrap(), quiet_csv.to_str().unwrap()], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    assert!(text.contains("99.99%") && text.contains(&format!("vanished: task:{name}")), "{text}");

    // The hog run against a copy with its smaller half of hiccups removed:
    // over the run's time the copy is drawn at or below at every point.
    let half = smaller_half_removed(&hog_csv, hog_dir.path());
    let (status, stdout, err) = run_bin(&["compare", hog_csv.to_str().unwrap(), half.to_str().unwrap(), "--json"], Duration::from_secs(30));
    assert!(status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let points = |i: usize| -> Vec<(f64, u64)> {
        v["curves"][i]["points"].as_array().unwrap().iter().map(|p| (p["nines"].as_f64().unwrap(), p["gap_ns"].as_u64().unwrap())).collect()
    };
    let (orig, copy) = (points(0), points(1));
    assert!(!copy.is_empty() && copy.len() <= orig.len(), "{stdout}");
    for (x, gap) in &copy {
        let (_, o) = orig.iter().find(|p| p.0 == *x).unwrap_or_else(|| panic!("the original has no point at {x} nines: {stdout}"));
        assert!(gap <= o, "the copy drawn above the original at {x} nines: {gap} > {o}");
    }
    let count = |i: usize| v["blocks"][0]["figures"][i]["count"].as_u64().unwrap();
    assert_eq!(count(1), count(0) - count(0) / 2, "{stdout}");
}

/// A copy of the run whose CSV is `csv` (its summary beside it), without
/// the smaller half of its hiccups (by gap; the rows' order kept).
fn smaller_half_removed(csv: &std::path::Path, dir: &std::path::Path) -> std::path::PathBuf {
    let mut r = ::csv::Reader::from_path(csv).unwrap();
    let header = r.headers().unwrap().clone();
    let gap = header.iter().position(|h| h == "gap_ns").unwrap();
    let rows: Vec<::csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| rows[i][gap].parse::<u64>().unwrap());
    let mut keep = vec![false; rows.len()];
    for &i in &order[rows.len() / 2..] {
        keep[i] = true;
    }
    let out = dir.join("half.csv");
    let mut w = ::csv::Writer::from_path(&out).unwrap();
    w.write_record(&header).unwrap();
    for (row, _) in rows.iter().zip(&keep).filter(|(_, &k)| k) {
        w.write_record(row).unwrap();
    }
    w.flush().unwrap();
    let summary = csv.with_extension("summary.json");
    let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    meta["csv"] = serde_json::json!(out);
    std::fs::write(dir.join("half.summary.json"), meta.to_string()).unwrap();
    out
}

/// A run's files written by hand: a CSV of `rows` (each the line after the
/// header) and its summary beside it listing `cpus`.
fn write_run(dir: &std::path::Path, name: &str, cpus: &[u32], rows: &[String]) -> std::path::PathBuf {
    let csv = dir.join(format!("{name}.csv"));
    let mut text =
        "time_ns,cpu,gap_ns,explained_ns,unexplained_ns,top_kind,top_name,top_ns,causes,source,victim,parts,freq_khz,origins\n".to_string();
    for r in rows {
        text += r;
        text += "\n";
    }
    std::fs::write(&csv, text).unwrap();
    let cpus: Vec<serde_json::Value> = cpus.iter().map(|c| serde_json::json!({"cpu": c, "threshold_ns": 1000, "hiccups": 0})).collect();
    let meta = serde_json::json!({"mode": "probe", "duration_ns": 10_000_000_000u64, "cpus": cpus, "csv": csv});
    std::fs::write(dir.join(format!("{name}.summary.json")), meta.to_string()).unwrap();
    csv
}

/// One row on `cpu`: a 5 µs gap, all of it unexplained.
fn row(cpu: u32) -> String {
    format!("1000,{cpu},5000,0,5000,unexplained,,5000,unexplained:=5000,probe,,,,")
}

/// `jitterwatch ARGS`, piped, with the signals a normal program dies of at
/// their default (a test runner may have ignored some: the child would
/// inherit that).
fn spawn(args: &[&std::ffi::OsStr]) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(bin());
    cmd.args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        })
    };
    cmd.spawn().expect("spawn jitterwatch")
}

/// The child's exit within `limit`, or None (it is then killed).
fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `report` is no live run: Ctrl-C, SIGTERM and SIGHUP end it as they end
/// any program, here while it is blocked writing a table nobody reads.
#[test]
fn report_dies_of_ctrl_c_sigterm_and_sighup() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    // A table per CPU: far more than a pipe holds.
    let cpus: Vec<u32> = (0..1000).collect();
    let csv = write_run(dir.path(), "many", &cpus, &[row(0)]);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let mut child = spawn(&["report".as_ref(), csv.as_os_str()]);
        // Its first line: main() has run; the rest fills the pipe.
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut first).unwrap();
        assert!(first.starts_with("many:"), "{first}");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = exit_within(&mut child, Duration::from_secs(10));
        assert_eq!(status.and_then(|s| s.signal()), Some(sig), "signal {sig} did not end report: {status:?}");
    }
}

/// `jitterwatch ARGS` with its address space capped at 2 GiB (a read that
/// never ends fails there rather than taking the machine): (exit status or
/// None if it was still running after `limit`, stderr).
fn run_capped(args: &[&std::ffi::OsStr], limit: Duration) -> (Option<std::process::ExitStatus>, String) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(bin());
    cmd.args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            let cap = libc::rlimit { rlim_cur: 2 << 30, rlim_max: 2 << 30 };
            libc::setrlimit(libc::RLIMIT_AS, &cap);
            Ok(())
        })
    };
    let mut child = cmd.spawn().expect("spawn jitterwatch");
    let status = exit_within(&mut child, limit);
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status, err)
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A FIFO or a device as an input, named or named by a summary: one line
/// and exit status 1 at once, never a wait in open() nor a read that never
/// ends.
#[test]
fn fifos_and_devices_as_inputs_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.csv");
    mkfifo(&fifo);
    let summary = |name: &str, csv: &std::path::Path| {
        let p = dir.path().join(format!("{name}.summary.json"));
        let cpus = [serde_json::json!({"cpu": 1, "threshold_ns": 1000, "hiccups": 0})];
        std::fs::write(&p, serde_json::json!({"mode": "probe", "duration_ns": 1_000_000_000u64, "cpus": cpus, "csv": csv}).to_string())
            .unwrap();
        p
    };
    let to_fifo = summary("to-fifo", &fifo);
    let to_zero = summary("to-zero", std::path::Path::new("/dev/zero"));
    let cases: [(&std::path::Path, &str); 4] = [
        (&fifo, "fifo.csv: it is a FIFO, not a regular file"),
        (&to_fifo, "fifo.csv, the CSV"),
        (std::path::Path::new("/dev/zero"), "/dev/zero: it is a character device, not a regular file"),
        (&to_zero, "/dev/zero, the CSV"),
    ];
    for (input, want) in cases {
        let (status, err) = run_capped(&["report".as_ref(), input.as_os_str()], Duration::from_secs(10));
        assert_eq!(status.and_then(|s| s.code()), Some(1), "report {}: {status:?} {err}", input.display());
        assert!(err.contains(want) && err.contains("not a regular file"), "report {}: {err}", input.display());
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
}

/// A chart written over an input, or into a FIFO: one line, exit status 1,
/// at once, and the input left whole.
#[test]
fn a_chart_over_an_input_or_into_a_fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write_run(dir.path(), "same", &[0], &[row(0)]);
    let summary = dir.path().join("same.summary.json");
    let (csv_bytes, summary_bytes) = (std::fs::read(&csv).unwrap(), std::fs::read(&summary).unwrap());
    let fifo = dir.path().join("chart.svg");
    mkfifo(&fifo);
    let other = dir.path().join("c.png");
    let cases: [(&std::path::Path, &str, &std::path::Path, &str); 5] = [
        (&csv, "--svg", &csv, "same.csv: it is an input, the CSV of same"),
        (&csv, "--png", &summary, "same.summary.json: it is an input, the summary of same"),
        (&summary, "--svg", &csv, "it is an input, the CSV of same"),
        (&csv, "--svg", &fifo, "chart.svg: it is a FIFO, not a regular file"),
        (&csv, "--png", &dir.path().join(".").join("c.png"), "--svg and --png name one file"),
    ];
    for (input, opt, out, want) in cases {
        let mut args = vec!["report".as_ref(), input.as_os_str(), opt.as_ref(), out.as_os_str()];
        if out.ends_with("c.png") {
            args.extend(["--svg".as_ref(), other.as_os_str()]);
        }
        let (status, err) = run_capped(&args, Duration::from_secs(10));
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{args:?}: {status:?} {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
    assert_eq!(std::fs::read(&csv).unwrap(), csv_bytes, "the CSV was overwritten");
    assert_eq!(std::fs::read(&summary).unwrap(), summary_bytes, "the summary was overwritten");
    assert!(!other.exists());
}

/// A chart that does not fit (a full disk: a 16 KiB tmpfs here, root
/// mounts it) is an error and leaves nothing: no empty or cut PNG or SVG
/// where the user looks for one, no part file either.
#[test]
fn a_chart_on_a_full_disk_leaves_no_file() {
    if !require_root_btf("a_chart_on_a_full_disk_leaves_no_file") {
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = write_run(dir.path(), "run", &[0], &[row(0)]);
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    let ok = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=16k", "tmpfs"]).arg(&full).status().unwrap();
    assert!(ok.success(), "mount a tmpfs");
    let _unmount = Unmount(full.clone());
    for opt in ["--png", "--svg"] {
        let chart = full.join(if opt == "--png" { "c.png" } else { "c.svg" });
        let (status, err) = run_capped(&["report".as_ref(), csv.as_os_str(), opt.as_ref(), chart.as_os_str()], Duration::from_secs(20));
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{opt}: {status:?} {err}");
        assert!(err.contains("cannot write the chart"), "{opt}: {err}");
        let left: Vec<_> = std::fs::read_dir(&full).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "{opt} left {left:?}");
    }
}
