//! Root, end to end: jitterwatch itself stopped (SIGSTOP, as Ctrl-Z or a
//! debugger does) is not a stall anything caused: the probe's gap is shown
//! as `stopped`, and it is not counted as stolen.

mod common;
use common::*;
use std::process::Command;
use std::thread;
use std::time::Duration;

#[test]
fn being_stopped_is_not_a_stall_anything_caused() {
    if !require_root_btf("being_stopped_is_not_a_stall_anything_caused") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu().to_string();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("x.csv");
    let child =
        spawn_started(Command::new(bin()).args(["--cpus", &cpu, "--no-tui", "--json", "--duration", "5s", "--csv", csv.to_str().unwrap()]));
    let pid = child.id() as i32;
    thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    thread::sleep(Duration::from_millis(1500));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rows = read_csv(&csv);
    let longest = rows.iter().max_by_key(|r| r.gap_ns).unwrap();
    assert!(longest.gap_ns >= 1_400_000_000, "the stop's gap: {} ns", longest.gap_ns);
    assert_eq!(longest.top_kind, "stopped", "{:?}", longest.causes);
    let stopped: u64 = longest.causes.iter().filter(|c| c.0 == "stopped").map(|c| c.2).sum();
    assert!(stopped * 100 >= longest.gap_ns * 95, "{:?}", longest.causes);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpu0 = &v["cpus"][0];
    // Stolen is what is left: the rest of a 5 s run on an idle CPU.
    assert!(cpu0["stolen_pct"].as_f64().unwrap() < 10.0, "{cpu0}");
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("was stopped for")), "{}", v["notes"]);
}
