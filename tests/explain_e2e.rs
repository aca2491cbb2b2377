//! Root, end to end: `jitterwatch explain` on a ping-pong of our own with
//! a known stall injected into one end. sockperf's UDP ping-pong, the
//! server on the last CPU and the client on another, both watched at once
//! in passive mode; its client logs every message (`--full-log`, on
//! CLOCK_MONOTONIC with `--no-rdtsc`). A SCHED_FIFO hog on the server's
//! CPU runs three bursts of 30 ms, each timed by the hog itself: the
//! message in flight during a burst waits for it. `explain` must find each
//! such message slow, name the hog as what holds it, and give the hog the
//! share of it that the burst's overlap says.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each burst, ns.
const BURST_NS: u64 = 30_000_000;
const BURSTS: usize = 3;
/// The hog's share of a message must match the burst's overlap within
/// this many points of the latency, and its ns within 5% and this.
const SHARE_POINTS: f64 = 5.0;
const NS_SLACK: u64 = 500_000;

#[test]
fn explain_names_the_hog_that_held_the_slow_messages_with_its_share() {
    if !require_root_btf("explain_names_the_hog_that_held_the_slow_messages_with_its_share") {
        return;
    }
    let Some(sp) = sockperf("explain_e2e") else { return };
    let _g = lock();
    let cpu = last_cpu();
    let client_cpu = online_cpus().into_iter().find(|&c| c != cpu).expect("a second CPU");
    let dir = tempfile::tempdir().unwrap();
    let (csv, log) = (dir.path().join("run.csv"), dir.path().join("sockperf.log"));
    let port = "11311";
    let _server = Reaped(
        Command::new("taskset")
            .args(["-c", &cpu.to_string(), sp, "server", "-i", "127.0.0.1", "-p", port])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the sockperf server"),
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut jw = spawn_started(
        Command::new(bin()).args(["--comm", "sockperf", "--cpus", &format!("{cpu},{client_cpu}"), "--no-tui", "--csv"]).arg(&csv),
    );
    // sockperf sends dummy messages for 2 s before its test, and logs
    // only the test's last part (from ~1.2 s in): the bursts go in 2 s
    // after it says the test began, of a test of 4 s.
    let mut client = Reaped(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "exec taskset -c {client_cpu} {sp} ping-pong -i 127.0.0.1 -p {port} -t 4 --no-rdtsc --full-log '{}' 2>&1",
                log.display()
            ))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the sockperf client"),
    );
    let said = {
        use std::io::BufRead;
        let out = client.0.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(out).lines();
        let began = lines.by_ref().map_while(Result::ok).any(|l| l.contains("Starting test"));
        // The rest is read (and dropped) so that sockperf never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        began
    };
    assert!(said, "the sockperf client never said its test began");
    let hog = fifo_bursts_at(cpu, "jwhog".to_string(), Duration::from_millis(2_000), BURSTS, BURST_NS, 10);
    let (tid, bursts) = hog.join().unwrap();
    assert!(client.0.wait().unwrap().success(), "the sockperf client failed");
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(jw.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while jw.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = jw.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "jitterwatch: {err}");

    let run = |args: &[&str]| {
        let o = Command::new(bin()).arg("explain").arg(&log).arg(&csv).args(args).output().unwrap();
        assert!(o.status.success(), "explain {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&run(&["--above", "10ms", "--json"])).unwrap();
    let hog = format!("task:jwhog[{tid}]");
    let slowest = v["slowest"].as_array().unwrap();
    eprintln!("{} slow messages; by cause {}", slowest.len(), v["by_cause"]);
    for &(b0, b1, _) in &bursts {
        // The message that overlaps the burst most.
        let overlap = |o: &serde_json::Value| {
            let (s, e) = (o["start_ns"].as_u64().unwrap(), o["end_ns"].as_u64().unwrap());
            e.min(b1).saturating_sub(s.max(b0))
        };
        let op = slowest.iter().max_by_key(|o| overlap(o)).unwrap_or_else(|| panic!("no slow message in the burst {b0}..{b1}: {v}"));
        let (lat, want) = (op["latency_ns"].as_u64().unwrap(), overlap(op));
        assert!(want >= BURST_NS / 2, "the burst {b0}..{b1} held no message for half of it: {op}");
        let got: u64 = op["stalls"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["causes"].as_array().unwrap().iter())
            .filter(|c| c["cause"] == hog.as_str())
            .map(|c| c["ns"].as_u64().unwrap())
            .sum();
        let (got_pct, want_pct) = (got as f64 * 100.0 / lat as f64, want as f64 * 100.0 / lat as f64);
        eprintln!("burst {}: message of {lat} ns, the hog {got} ns ({got_pct:.1}%), its overlap {want} ns ({want_pct:.1}%)", b1 - b0);
        assert!((got_pct - want_pct).abs() <= SHARE_POINTS, "the hog's share {got_pct:.1}% against its overlap's {want_pct:.1}%: {op}");
        assert!(got.abs_diff(want) <= want / 20 + NS_SLACK, "the hog's {got} ns against its overlap's {want} ns: {op}");
        let server = op["stalls"].as_array().unwrap().iter().any(|s| {
            s["cpu"] == cpu as u64
                && s["thread"].as_str().is_some_and(|t| t.starts_with("sockperf["))
                && s["causes"][0]["cause"] == hog.as_str()
        });
        assert!(server, "no stall of the server on CPU {cpu} led by the hog: {op}");
    }
    assert_eq!(v["by_cause"][0]["cause"], hog.as_str(), "the hog is not the slow messages' largest cause: {}", v["by_cause"]);
    let covered: u64 = slowest.iter().map(|o| o["covered_ns"].as_u64().unwrap()).sum();
    assert_eq!(covered, v["explained_ns"].as_u64().unwrap());
    // The text says the same, and the default (the slowest 1%) finds the bursts.
    let text = run(&[]);
    assert!(text.contains(&hog) && text.contains("the slowest 1%"), "{text}");

    // The same log on the wall clock, by the summary's clocks: the same answer.
    let side: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("run.summary.json")).unwrap()).unwrap();
    let at = |k: &str, c: &str| side["clocks"][k][c].as_u64().unwrap_or_else(|| panic!("no clocks.{k}.{c} in the summary: {side}"));
    let off = at("start", "realtime_ns") - at("start", "monotonic_ns");
    assert!((at("end", "realtime_ns") - at("end", "monotonic_ns")).abs_diff(off) < 1_000_000, "the wall clock moved: {side}");
    let wall = dir.path().join("wall.csv");
    // The log in the order the messages were sent (`slowest` is slowest first).
    let mut sent: Vec<(u64, u64)> = slowest.iter().map(|o| (o["start_ns"].as_u64().unwrap(), o["end_ns"].as_u64().unwrap())).collect();
    sent.sort_unstable();
    let mut rows = String::from("sent,received\n");
    for (s, e) in sent {
        rows += &format!("{},{}\n", s + off, e + off);
    }
    std::fs::write(&wall, rows).unwrap();
    let o = Command::new(bin())
        .arg("explain")
        .arg(&wall)
        .arg(&csv)
        .args(["--start", "sent", "--end", "received", "--clock", "realtime", "--above", "10ms", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "explain --clock realtime: {}", String::from_utf8_lossy(&o.stderr));
    let w: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((&w["slow"], &w["by_cause"][0]["cause"]), (&v["slow"], &v["by_cause"][0]["cause"]), "{w}");
    let (a, b) = (w["explained_ns"].as_u64().unwrap(), v["explained_ns"].as_u64().unwrap());
    assert!(a.abs_diff(b) <= 1_000 * slowest.len() as u64, "on the wall clock {a} ns explained, on the monotonic {b}");
}
