//! Root, end to end: passive mode's books of a real network server against
//! the kernel's own (`/proc/PID/task/TID/schedstat`). sockperf's UDP and TCP
//! ping-pong: the server pinned to the last CPU, the client to another,
//! SCHED_OTHER and SCHED_FIFO, with the server's CPU quiet and with a busy
//! task competing for it. Ten runs; every one must agree. Two more watch
//! both ends at once (`--comm sockperf` on both CPUs: jitterwatch then
//! shares them), and the client's thread is watched beside the server's.
//!
//! The server sleeps in recvfrom() before the client starts and after it
//! ends, so the kernel's figures read at those two moments cover the whole
//! window in which jitterwatch saw it.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long each client runs.
const CLIENT_S: &str = "2";
/// The kernel's own figures, read at each switch: within 0.5% (and 20 µs).
const BOOKS_PCT: f64 = 0.5;
/// jitterwatch's clock, from each wait's start to each switch out: it
/// reads the switch where its tracepoint fires, after the kernel booked
/// the run (docs/passive.md), and a wake-up's enqueue where its reschedule
/// IPI was sent. Within 1.5% under, and over by at most 1.5% plus
/// CLOCK_LATE_NS a wake-up: the switch's path from the kernel's booking to
/// the tracepoint is the host's (0.3-0.8% over at 15k sleeps a second,
/// 0.2-0.5 µs a sleep, on the machine this was first run on; +1.6 to
/// +4.6%, up to 0.6 µs a wake-up past the 1.5%, on the next, with the
/// code before and after 2026-12-06 alike). A lost wait (15-28% short
/// before the enqueue was placed) fails.
const CLOCK_PCT: f64 = 1.5;
const CLOCK_LATE_NS: u64 = 1_000;

#[derive(Debug, Clone, Copy)]
struct Case {
    tcp: bool,
    fifo: bool,
    hog: bool,
    /// Watch the client too (every CPU watched).
    both: bool,
}

/// (time on a CPU, time waiting on a runqueue), ns.
fn schedstat(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/schedstat")).expect("the server's schedstat");
    let mut w = s.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    (w.next().unwrap(), w.next().unwrap())
}

fn within(got: u64, want: u64, pct: f64) -> bool {
    got.abs_diff(want) as f64 <= want as f64 * pct / 100.0 + 20_000.0
}

fn measure(sp: &str, case: Case, cpu: usize, client_cpu: usize, port: u16) -> Result<String, String> {
    let proto: &[&str] = if case.tcp { &["--tcp"] } else { &[] };
    let port_s = port.to_string();
    let server = Reaped(
        Command::new("taskset")
            .args(["-c", &cpu.to_string(), sp, "server", "-i", "127.0.0.1", "-p", &port_s])
            .args(proto)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sockperf server"),
    );
    let pid = server.0.id();
    thread::sleep(Duration::from_millis(300));
    if case.fifo {
        assert!(Command::new("chrt").args(["-f", "-p", "50", &pid.to_string()]).status().unwrap().success());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let hog = case.hog.then(|| {
        let stop = stop.clone();
        thread::spawn(move || {
            pin_self(cpu);
            while !stop.load(Relaxed) {
                std::hint::spin_loop();
            }
        })
    });
    let target = if case.both {
        vec!["--comm".to_string(), "sockperf".to_string(), "--cpus".to_string(), format!("{cpu},{client_cpu}")]
    } else {
        vec!["--pid".to_string(), pid.to_string()]
    };
    let mut jw = Reaped(
        Command::new(bin())
            .args(&target)
            .args(["--no-tui", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn jitterwatch"),
    );
    let mut stdout = jw.0.stdout.take().unwrap();
    let out_reader = thread::spawn(move || {
        use std::io::Read;
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let err = started(&mut jw.0);
    let before = schedstat(pid);
    let client = Command::new("taskset")
        .args(["-c", &client_cpu.to_string(), sp, "ping-pong", "-i", "127.0.0.1", "-p", &port_s, "-t", CLIENT_S])
        .args(proto)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the sockperf client");
    assert!(client.success(), "{case:?}: the client failed");
    thread::sleep(Duration::from_millis(200));
    let after = schedstat(pid);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(jw.0.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while jw.0.try_wait().unwrap().is_none() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Relaxed);
    if let Some(h) = hog {
        h.join().unwrap();
    }
    let out = out_reader.join().unwrap();
    let stderr = err.join().unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| format!("{case:?}: JSON: {e}: {stderr}"))?;
    let row = v["threads"].as_array().and_then(|t| t.iter().find(|t| t["tid"] == pid)).ok_or(format!("{case:?}: no row: {stderr}"))?;
    let n = |k: &str| row[k].as_u64().unwrap_or_else(|| panic!("{case:?}: no {k} in {row}"));
    let (kran, kwait) = (after.0 - before.0, after.1 - before.1);
    let (ran, kq, clock) = (n("ran_ns"), n("kernel_queued_ns"), n("clock_ran_ns") + n("queued_ns"));
    let line = format!(
        "{case:?}: schedstat ran {kran} waited {kwait}; jitterwatch ran_ns {ran} ({:+.3}%), kernel_queued_ns {kq}, by the clock ran + waited {clock} ({:+.3}%), {} wake-ups; stolen_ns {}, stale/short {}/{}, window {}, drops {}, overflows {}",
        (ran as f64 - kran as f64) * 100.0 / kran as f64,
        (clock as f64 - (kran + kwait) as f64) * 100.0 / (kran + kwait) as f64,
        row["wakeup"],
        row["stolen_ns"],
        row["kernel_stale_ns"],
        row["kernel_short_ns"],
        row["window"],
        v["overhead"]["ringbuf_drops"],
        v["overhead"]["queue_overflows"],
    );
    eprintln!("{line}");
    let mut bad = Vec::new();
    if row["wakeup"].as_u64().unwrap_or(0) < 1_000 {
        bad.push("fewer than 1000 wake-ups: the ping-pong did not run");
    }
    // At SCHED_FIFO every wake-up preempts the busy task: its wait is the
    // reschedule IPI's way (the kernel booked none of it), not the task's.
    // Measured: 1,157 of 1,267 ms ipi:reschedule, 96 the busy task.
    if case.fifo && case.hog {
        let cause = |kind: &str, name: &str| {
            row["top_causes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["kind"] == kind && c["name"].as_str().is_some_and(|n| n.starts_with(name)))
                .map(|c| c["total_ns"].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        let (ipi, wakeups) = (cause("ipi", "reschedule"), row["wakeup_ns"].as_u64().unwrap_or(0));
        eprintln!("  wake-ups {wakeups} ns, ipi:reschedule {ipi} ns, self {} ns; top causes {}", cause("self", ""), row["top_causes"]);
        if ipi * 2 < wakeups {
            bad.push("a preempting wake-up's wait is not named for its IPI (ipi:reschedule under half the wake-up time)");
        }
    }
    if case.both {
        let client = v["threads"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["tid"] != pid && t["name"].as_str().is_some_and(|n| n.starts_with("sockperf"))));
        if client.is_none_or(|c| c["wakeup"].as_u64().unwrap_or(0) < 1_000) {
            bad.push("both ends watched, and the client has no row with 1000 wake-ups");
        }
    }
    if !within(ran, kran, BOOKS_PCT) {
        bad.push("ran_ns outside 0.5% of schedstat's time on a CPU");
    }
    if !within(ran + kq, kran + kwait, BOOKS_PCT) {
        bad.push("ran_ns + kernel_queued_ns outside 0.5% of schedstat's ran + run_delay");
    }
    let late = row["wakeup"].as_u64().unwrap_or(0) * CLOCK_LATE_NS;
    let (want, slack) = ((kran + kwait) as f64, (kran + kwait) as f64 * CLOCK_PCT / 100.0 + 20_000.0);
    if (clock as f64) < want - slack || clock as f64 > want + slack + late as f64 {
        bad.push("the clock's ran + waited outside 1.5% under and 1.5% + 1 µs a wake-up over schedstat's ran + run_delay");
    }
    if bad.is_empty() {
        Ok(line)
    } else {
        Err(format!("{line}: {}\n{stderr}", bad.join("; ")))
    }
}

#[test]
fn a_network_servers_books_agree_with_the_kernels_in_every_run() {
    if !require_root_btf("a_network_servers_books_agree_with_the_kernels_in_every_run") {
        return;
    }
    let Some(sp) = sockperf("passive_server_e2e") else { return };
    let _g = lock();
    let cpu = last_cpu();
    let client_cpu = online_cpus().into_iter().find(|&c| c != cpu).expect("a second CPU");
    let case = |tcp, fifo, hog| Case { tcp, fifo, hog, both: false };
    let cases = [
        case(false, false, false),
        case(false, false, true),
        case(false, true, false),
        case(false, true, true),
        case(true, false, false),
        case(true, false, true),
        case(true, true, false),
        case(true, true, true),
        case(false, false, true),
        case(true, true, true),
        Case { tcp: false, fifo: false, hog: false, both: true },
        Case { tcp: true, fifo: true, hog: true, both: true },
    ];
    let mut failures = Vec::new();
    for (i, &c) in cases.iter().enumerate() {
        if let Err(e) = measure(sp, c, cpu, client_cpu, 11_211 + i as u16) {
            failures.push(format!("run {i} {e}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} runs outside the bounds:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
