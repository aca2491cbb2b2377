//! Bad input gets one clear line on stderr and a non-zero exit.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

fn one_line_error(args: &[&str]) -> String {
    let (status, _, err) = run_bin(args, Duration::from_secs(20));
    assert!(!status.success(), "{args:?} succeeded");
    let lines: Vec<_> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: expected one line, got {err:?}");
    lines[0].to_string()
}

#[test]
fn malformed_cpulist() {
    let e = one_line_error(&["--cpus", "1-x", "--no-tui"]);
    assert!(e.contains("malformed CPU list") && e.contains("1-x"), "{e}");
    let e = one_line_error(&["events", "--cpus", "3-1"]);
    assert!(e.contains("reversed"), "{e}");
}

#[test]
fn cpu_past_the_last_one() {
    let past = (last_cpu() + 1).to_string();
    let e = one_line_error(&["--cpus", &past, "--no-tui"]);
    assert!(e.contains(&format!("CPU {past} does not exist")), "{e}");
}

#[test]
fn malformed_durations() {
    let e = one_line_error(&["--cpus", "0", "--threshold", "fast"]);
    assert!(e.contains("malformed duration"), "{e}");
}

/// Lengths that make no sense: zero (every loop a hiccup, or a run that
/// ends before it starts) and past what fits in 64 bits of ns.
#[test]
fn zero_and_overflowing_lengths() {
    let e = one_line_error(&["--cpus", "0", "--threshold", "0ns"]);
    assert!(e.contains("\"0ns\" is zero"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--duration", "0s"]);
    assert!(e.contains("\"0s\" is zero"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--duration", "99999999999999h"]);
    assert!(e.contains("too long"), "{e}");
    let e = one_line_error(&["events", "--duration", "0.0s"]);
    assert!(e.contains("is zero"), "{e}");
}

#[test]
fn non_root_is_told_to_use_sudo() {
    // setpriv drops to nobody; as a normal user the binary is already unprivileged.
    // SAFETY: geteuid cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    let cpu = last_cpu().to_string();
    let out = if as_root {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin(), "--cpus", &cpu, "--no-tui"])
            .output()
            .expect("setpriv (util-linux)")
    } else {
        Command::new(bin()).args(["--cpus", &cpu, "--no-tui"]).output().unwrap()
    };
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("must run as root") && err.contains("sudo"), "{err}");
}

/// compare and report on files that are not runs: one line, non-zero exit.
#[test]
fn compare_refuses_what_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.csv");
    let e = one_line_error(&["compare", missing.to_str().unwrap(), missing.to_str().unwrap()]);
    assert!(e.contains("cannot read ") && e.contains("missing.csv: No such file"), "{e}");
    let foreign = dir.path().join("foreign.csv");
    std::fs::write(&foreign, "a,b,c\n1,2,3\n").unwrap();
    std::fs::write(dir.path().join("foreign.summary.json"), r#"{"mode":"probe","duration_ns":1,"cpus":[{"cpu":1,"threshold_ns":1000,"hiccups":0,"stolen_pct":0.0,"explained_pct":0.0,"max_ns":0,"pct99_ns":0,"pct999_ns":0,"top_causes":[]}]}"#).unwrap();
    let e = one_line_error(&["report", foreign.to_str().unwrap()]);
    assert!(e.contains("foreign.csv is not a jitterwatch CSV: its header begins `a,b,c`"), "{e}");
    let e = one_line_error(&["compare", foreign.to_str().unwrap()]);
    assert!(e.contains("required"), "{e}");
}

/// The wake-up probe's options: one line each.
#[test]
fn wakeup_probe_options_are_checked() {
    let e = one_line_error(&["--cpus", "0", "--probe", "wakeup", "--period", "0"]);
    assert!(e.contains("--period") && e.contains("malformed duration \"0\""), "{e}");
    let e = one_line_error(&["--cpus", "0", "--probe", "wakeup", "--period", "0ms"]);
    assert!(e.contains("is zero"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--probe", "wakeup", "--period", "5us"]);
    assert!(e.contains("under 10us"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--probe", "wakeup", "--period", "11s"]);
    assert!(e.contains("over 10s"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--probe", "banana"]);
    assert!(e.contains("banana") && e.contains("spin") && e.contains("wakeup"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--period", "1ms", "--no-tui"]);
    assert!(e.contains("add --probe wakeup"), "{e}");
    let e = one_line_error(&["--probe", "wakeup", "--pid", "1"]);
    assert!(e.contains("cannot be used with"), "{e}");
}

/// `--prometheus` on a malformed address, or on a port already in use:
/// one line, at once, before anything is set up or spins.
#[test]
fn prometheus_address_is_checked_first() {
    let start = std::time::Instant::now();
    let e = one_line_error(&["--cpus", &last_cpu().to_string(), "--no-tui", "--prometheus", "localhost:http"]);
    assert!(e.contains("not an address") && e.contains("127.0.0.1:9464"), "{e}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let e = one_line_error(&["--cpus", &last_cpu().to_string(), "--no-tui", "--prometheus", &addr]);
    assert!(e.contains("in use") && e.contains(&addr), "{e}");
    let e = one_line_error(&["serve", "--cpus", &last_cpu().to_string(), "--prometheus", &addr]);
    assert!(e.contains("in use"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    let e = one_line_error(&["--cpus", "0", "--prometheus-top", "5"]);
    assert!(e.contains("--prometheus"), "{e}");
}

/// `--prometheus` takes localhost (the run goes on to its next check) and
/// says in one line that other host names are not looked up;
/// bound beyond loopback it warns, in one line, that /metrics shows
/// process and thread names to whoever reaches the port.
#[test]
fn prometheus_takes_a_host_name_and_warns_beyond_loopback() {
    let past = (last_cpu() + 1).to_string();
    let next_check = format!("CPU {past} does not exist");
    for quiet in ["localhost:0", "127.0.0.1:0"] {
        let e = one_line_error(&["--cpus", &past, "--no-tui", "--prometheus", quiet]);
        assert!(e.contains(&next_check), "{quiet}: {e}");
    }
    let e = one_line_error(&["--cpus", &past, "--no-tui", "--prometheus", "no-such-host.invalid:9464"]);
    assert!(e.contains("no-such-host.invalid is not looked up") && e.contains("127.0.0.1:9464"), "{e}");
    // [::] only where this machine has IPv6.
    let v6 = std::net::TcpListener::bind("[::]:0").is_ok();
    for open in ["0.0.0.0:0", "[::]:0"].into_iter().filter(|a| v6 || !a.starts_with('[')) {
        let (status, _, err) = run_bin(&["--cpus", &past, "--no-tui", "--prometheus", open], Duration::from_secs(20));
        assert!(!status.success(), "{open}");
        let lines: Vec<_> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{open}: {err}");
        assert!(lines[0].contains("/metrics carries process and thread names to anyone who can reach this port"), "{err}");
        assert!(lines[1].contains(&next_check), "{err}");
    }
}

/// `--dma-latency` past what the kernel holds (an s32, and under 2·10⁹
/// µs to limit anything) used to be said as held: refused with the range,
/// before anything is opened.
#[test]
fn dma_latency_past_the_kernels_range_is_refused() {
    let past = (last_cpu() + 1).to_string();
    for us in ["2147483648", "2000000000"] {
        let e = one_line_error(&["--cpus", &past, "--no-tui", "--dma-latency", us]);
        assert!(e.contains("0 to 1999999999 µs"), "{e}");
    }
}

/// The man page and the completions come from the same clap definitions
/// as the parser: every option is in them.
#[test]
fn man_page_and_completions_know_every_option() {
    let (st, man, _) = run_bin(&["manpage"], Duration::from_secs(10));
    assert!(st.success());
    assert!(man.contains(".TH jitterwatch 1"), "{man}");
    for opt in ["prometheus", "cpus", "threshold", "timer\\-slack"] {
        assert!(man.contains(&format!("\\-\\-{opt}")), "{opt} not in the man page");
    }
    for shell in ["bash", "zsh", "fish"] {
        let (st, script, _) = run_bin(&["completions", shell], Duration::from_secs(10));
        assert!(st.success(), "{shell}");
        assert!(script.contains("prometheus-linger") && script.contains("serve"), "{shell}: {script}");
    }
    let e = one_line_error(&["completions", "cmd.exe"]);
    assert!(e.contains("bash"), "{e}");
}

/// The trace options: each says what it needs, before anything spins.
#[test]
fn trace_options_say_what_they_need() {
    let e = one_line_error(&["--cpus", "0", "--trace-keep", "10ms"]);
    assert!(e.contains("--trace-dir"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--stop-above", "fast"]);
    assert!(e.contains("malformed duration"), "{e}");
    // A run shorter than its own start could not be kept (1ns ran 79 ms).
    let e = one_line_error(&["--cpus", "0", "--duration", "1ns"]);
    assert!(e.contains("\"1ns\" is under 100ms"), "{e}");
    let e = one_line_error(&["events", "--format", "perfetto"]);
    assert!(e.contains("give its path"), "{e}");
    let e = one_line_error(&["events", "--format", "text", "out.trace"]);
    assert!(e.contains("text goes to stdout"), "{e}");
    let e = one_line_error(&["--cpus", "0", "--trace-format", "svg"]);
    assert!(e.contains("perfetto") && e.contains("json"), "{e}");
}

#[test]
fn wake_origins_need_origins() {
    let e = one_line_error(&["--cpus", "0", "--no-origins", "--wake-origins"]);
    assert!(e.contains("--wake-origins") && e.contains("--no-origins"), "{e}");
}
