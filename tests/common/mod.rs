//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_jitterwatch")
}

/// Root with BTF: the BPF tests run for real. Without them, CI fails
/// loudly and a developer's run says what it skipped.
pub fn require_root_btf(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let btf = std::path::Path::new("/sys/kernel/btf/vmlinux").exists();
    if root && btf {
        return true;
    }
    let why = if !root { "not root" } else { "no /sys/kernel/btf/vmlinux" };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: cannot run in CI: {why} (CI must run as root on a kernel with BTF)");
    }
    eprintln!("SKIPPED {test}: {why} (run `cargo xtask test`, which uses sudo)");
    // `cargo xtask test` counts these and prints them last.
    if let Some(path) = std::env::var_os("JITTERWATCH_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = File::options().create(true).append(true).open(path) {
            // One write of the whole line: O_APPEND keeps lines from
            // parallel tests whole.
            let _ = f.write_all(format!("{test}: {why}\n").as_bytes());
        }
    }
    false
}

/// Tests that spin or inject on a CPU take this, so they never overlap,
/// across test binaries too.
pub struct Lock(File);

pub fn lock() -> Lock {
    let f = File::options().create(true).truncate(false).write(true).open("/tmp/jitterwatch-tests.lock").expect("lock file");
    // SAFETY: a valid fd we own.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    Lock(f)
}

pub fn online_cpus() -> Vec<usize> {
    jitterwatch::cpulist::parse(fs::read_to_string("/sys/devices/system/cpu/online").unwrap().trim()).unwrap()
}

/// The CPU the spinning tests own: the last online one.
pub fn last_cpu() -> usize {
    *online_cpus().last().unwrap()
}

/// A distinctive task name (at most 15 bytes, the kernel's limit).
pub fn random_name(prefix: &str) -> String {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() ^ std::process::id();
    format!("{prefix}{:06x}", n & 0xff_ffff)
}

/// Names the calling thread (its comm, as the kernel reports it).
pub fn set_thread_name(name: &str) {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: PR_SET_NAME with a NUL-terminated string.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
}

pub fn pin_self(cpu: usize) {
    jitterwatch::sys::pin_to(&[cpu]).unwrap();
}

/// This thread's CPU time, ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins until this thread has run `ns` more CPU time.
pub fn burn(ns: u64) -> u64 {
    let t0 = thread_cpu_ns();
    loop {
        let d = thread_cpu_ns() - t0;
        if d >= ns {
            return d;
        }
    }
}

/// Runs jitterwatch, returning (status, stdout, stderr), killing it if it
/// overstays `limit`.
pub fn run_bin(args: &[&str], limit: Duration) -> (std::process::ExitStatus, String, String) {
    let child = Command::new(bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn jitterwatch");
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let watchdog = std::thread::spawn(move || {
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            if fs::metadata(format!("/proc/{pid}")).is_err() {
                return;
            }
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    (out.status, String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `echo 1 > /proc/sys/vm/stat_refresh`: a refresh_vm_stats work item on every CPU.
pub fn stat_refresh() {
    fs::write("/proc/sys/vm/stat_refresh", "1").expect("write /proc/sys/vm/stat_refresh");
}

/// One CSV row, with its causes split back out.
#[derive(Debug)]
pub struct Row {
    pub time_ns: u64,
    pub cpu: u32,
    pub gap_ns: u64,
    pub explained_ns: u64,
    pub unexplained_ns: u64,
    pub top_kind: String,
    pub causes: Vec<(String, String, u64)>,
    /// probe, interrupted, preempted or wakeup.
    pub source: String,
    /// Passive mode's watched thread, `comm[tid]`; empty for a probe.
    pub victim: String,
    /// The wake-up probe's split: timer latency, scheduling delay, return to user.
    pub parts: Option<(u64, u64, u64)>,
    /// Who caused some causes: (kind, name, origin), unescaped.
    pub origins: Vec<(String, String, String)>,
}

/// Splits `kind:name=ORIGIN;...` as `causes` is split.
pub fn parse_origins(field: &str) -> Vec<(String, String, String)> {
    split_unescaped(field, ';')
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(|part| {
            let parts = split_unescaped(&part, '=');
            assert_eq!(parts.len(), 2, "{part}");
            let (k, n) = parts[0].split_once(':').expect("origin without kind");
            (k.to_string(), unescape(n), unescape(&parts[1]))
        })
        .collect()
}

/// Splits `kind:name=ns;...`, undoing the `\\` `\;` `\=` escapes.
pub fn parse_causes(field: &str) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for part in split_unescaped(field, ';') {
        if part.is_empty() {
            continue;
        }
        let eq = part.rfind('=').expect("cause without =");
        let (kn, ns) = (&part[..eq], &part[eq + 1..]);
        let (k, n) = kn.split_once(':').expect("cause without kind");
        out.push((k.to_string(), unescape(n), ns.parse().expect("ns")));
    }
    out
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            parts.last_mut().unwrap().push(c);
            parts.last_mut().unwrap().extend(it.next());
        } else if c == sep {
            parts.push(String::new());
        } else {
            parts.last_mut().unwrap().push(c);
        }
    }
    parts
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some(n @ ('\\' | ';' | '=')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `timer=NS;sched=NS;user=NS`, or None for an empty field.
fn parse_parts(field: &str) -> Option<(u64, u64, u64)> {
    if field.is_empty() {
        return None;
    }
    let v: Vec<u64> = field.split(';').map(|p| p.split_once('=').expect("name=ns").1.parse().expect("ns")).collect();
    assert_eq!(v.len(), 3, "{field}");
    Some((v[0], v[1], v[2]))
}

/// Reads a hiccups CSV and checks the contract on every row.
pub fn read_csv(path: &std::path::Path) -> Vec<Row> {
    let raw = fs::read(path).expect("read csv");
    assert!(!raw.iter().any(|&b| b < 0x20 && b != b'\n' && b != b'\r'), "raw control byte in the CSV");
    let mut r = csv::Reader::from_reader(&raw[..]);
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "time_ns",
            "cpu",
            "gap_ns",
            "explained_ns",
            "unexplained_ns",
            "top_kind",
            "top_name",
            "top_ns",
            "causes",
            "source",
            "victim",
            "parts",
            "freq_khz",
            "origins"
        ]
    );
    r.records()
        .map(|rec| {
            let rec = rec.expect("csv record");
            let n = |i: usize| rec[i].parse::<u64>().unwrap_or_else(|_| panic!("field {i} of {rec:?}"));
            let row = Row {
                time_ns: n(0),
                cpu: n(1) as u32,
                gap_ns: n(2),
                explained_ns: n(3),
                unexplained_ns: n(4),
                top_kind: rec[5].to_string(),
                causes: parse_causes(&rec[8]),
                source: rec[9].to_string(),
                victim: rec[10].to_string(),
                parts: parse_parts(&rec[11]),
                origins: parse_origins(&rec[13]),
            };
            // Every origin is for one of the row's causes.
            for (k, n, _) in &row.origins {
                assert!(row.causes.iter().any(|c| &c.0 == k && &c.1 == n), "origin of a cause not in the row: {rec:?}");
            }
            // FROM>TO kHz (FROM `?` when not known), or empty.
            if let Some((from, to)) = rec[12].split_once('>') {
                assert!((from == "?" || from.parse::<u32>().is_ok()) && to.parse::<u32>().is_ok(), "{rec:?}");
            } else {
                assert!(rec[12].is_empty(), "{rec:?}");
            }
            // The wake-up probe's rows, and only they, are split in parts that add up.
            assert_eq!(row.parts.is_some(), row.source == "wakeup-probe", "{rec:?}");
            if let Some((timer, sched, user)) = row.parts {
                assert_eq!(timer + sched + user, row.gap_ns, "{rec:?}");
            }
            assert_eq!(row.explained_ns + row.unexplained_ns, row.gap_ns, "{rec:?}");
            let named: u64 = row.causes.iter().filter(|c| c.0 != "unexplained").map(|c| c.2).sum();
            assert_eq!(named, row.explained_ns, "{rec:?}");
            assert!(row.causes.windows(2).all(|w| w[0].2 >= w[1].2), "not largest first: {rec:?}");
            if let Some(top) = row.causes.first() {
                assert_eq!((top.0.as_str(), top.2), (row.top_kind.as_str(), n(7)), "{rec:?}");
            }
            row
        })
        .collect()
}

pub fn set_fifo(prio: i32) {
    jitterwatch::sys::set_fifo(prio).expect("SCHED_FIFO");
}

pub fn futex(word: &std::sync::atomic::AtomicU32, op: i32, val: u32) {
    // A bounded wait, so a thread whose partner has left sees the end.
    let tmo = libc::timespec { tv_sec: 0, tv_nsec: 10_000_000 };
    // SAFETY: a futex call on a live, aligned u32 with a valid timeout.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op | libc::FUTEX_PRIVATE_FLAG, val, &tmo) };
}

/// Two threads on `cpu` handing a turn back and forth through a futex until
/// `stop` or `max` (SCHED_FIFO at `fifo`, if given): a context switch per
/// hand-off, as fast as the kernel switches.
pub fn storm(
    cpu: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    fifo: Option<i32>,
    max: Duration,
) -> Vec<thread::JoinHandle<()>> {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    let turn = std::sync::Arc::new(AtomicU32::new(0));
    let deadline = std::time::Instant::now() + max;
    (0..2u32)
        .map(|me| {
            let (turn, stop) = (turn.clone(), stop.clone());
            thread::spawn(move || {
                pin_self(cpu);
                set_thread_name(if me == 0 { "jwstorm-ping" } else { "jwstorm-pong" });
                if let Some(p) = fifo {
                    set_fifo(p);
                }
                while !stop.load(SeqCst) && std::time::Instant::now() < deadline {
                    while turn.load(SeqCst) != me {
                        if stop.load(SeqCst) || std::time::Instant::now() >= deadline {
                            turn.store(1 - me, SeqCst);
                            futex(&turn, libc::FUTEX_WAKE, 1);
                            return;
                        }
                        futex(&turn, libc::FUTEX_WAIT, 1 - me);
                    }
                    turn.store(1 - me, SeqCst);
                    futex(&turn, libc::FUTEX_WAKE, 1);
                }
                turn.store(1 - me, SeqCst);
                futex(&turn, libc::FUTEX_WAKE, 1);
            })
        })
        .collect()
}

/// Starts `jitterwatch ARGS` with `env`, piped, writing its CSV to
/// `<tmp>/out.csv`: (the child, the temp dir that holds it, the CSV path).
pub fn watch_csv(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let child = Command::new(bin())
        .envs(env.iter().copied())
        .args(args)
        .arg("--csv")
        .arg(&csv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, dir, csv)
}

/// One hog burst: start, end (CLOCK_MONOTONIC ns), runtime (ns).
pub type Burst = (u64, u64, u64);

/// A SCHED_FIFO 10 hog named `name` on `cpu`, started after `delay`: `n`
/// bursts of `burst_ns`, 20 ms apart. Returns its tid and, per burst, its
/// start and end (CLOCK_MONOTONIC) and its runtime: thread CPU time from
/// the burst to the next, its sleep and wake-up included (the kernel's
/// work for them is the hog's time on the CPU as much as the burst is).
pub fn fifo_bursts(cpu: usize, name: String, delay: Duration, n: usize, burst_ns: u64) -> thread::JoinHandle<(u32, Vec<Burst>)> {
    fifo_bursts_at(cpu, name, delay, n, burst_ns, 10)
}

/// The same at SCHED_FIFO `prio`.
pub fn fifo_bursts_at(
    cpu: usize,
    name: String,
    delay: Duration,
    n: usize,
    burst_ns: u64,
    prio: i32,
) -> thread::JoinHandle<(u32, Vec<Burst>)> {
    thread::spawn(move || {
        thread::sleep(delay);
        pin_self(cpu);
        set_thread_name(&name);
        let tid = jitterwatch::sys::gettid();
        set_fifo(prio);
        let mut bursts = Vec::with_capacity(n);
        for _ in 0..n {
            let (t0, c0) = (jitterwatch::clock::now_ns(), thread_cpu_ns());
            burn(burst_ns);
            let t1 = jitterwatch::clock::now_ns();
            thread::sleep(Duration::from_millis(20));
            bursts.push((t0, t1, thread_cpu_ns() - c0));
        }
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: valid param for this thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
        (tid, bursts)
    })
}

/// How many of `bursts` overlap a row charging time to `me` (among `rows`),
/// the time those rows charge to it, and the bursts' total runtime.
pub fn bursts_named(rows: &[&Row], me: &str, bursts: &[Burst]) -> (usize, u64, u64) {
    let mine: Vec<(u64, u64, u64)> = rows
        .iter()
        .filter_map(|r| r.causes.iter().find(|c| c.0 == "task" && c.1 == me).map(|c| (r.time_ns, r.time_ns + r.gap_ns, c.2)))
        .collect();
    let seen = bursts.iter().filter(|&&(b0, b1, _)| mine.iter().any(|&(t0, t1, _)| t0 < b1 && b0 < t1)).count();
    (seen, mine.iter().map(|m| m.2).sum(), bursts.iter().map(|b| b.2).sum())
}
