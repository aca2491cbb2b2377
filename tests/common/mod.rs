//! Shared helpers for the integration tests.
#![allow(dead_code)]

mod csv_rows;
mod trace_read;
pub use csv_rows::*;
// Only the trace tests read traces.
#[allow(unused_imports)]
pub use trace_read::*;

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

/// jitterwatch started (see [`started`]): derefs to the child;
/// `wait_with_output` gives its whole stderr as a plain child's does.
pub struct Watched {
    child: std::process::Child,
    err: thread::JoinHandle<String>,
}

impl std::ops::Deref for Watched {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.child
    }
}

impl std::ops::DerefMut for Watched {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.child
    }
}

impl Watched {
    pub fn wait_with_output(self) -> std::io::Result<std::process::Output> {
        let mut out = self.child.wait_with_output()?;
        out.stderr = self.err.join().expect("stderr reader").into_bytes();
        Ok(out)
    }
}

/// `cmd` (jitterwatch) spawned with its output piped, once it says it is
/// watching (see [`started`]).
pub fn spawn_started(cmd: &mut Command) -> Watched {
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let err = started(&mut child);
    Watched { child, err }
}

/// Starts `jitterwatch ARGS` with `env`, piped, writing its CSV to
/// `<tmp>/out.csv`, and returns once it says it is watching: (the child,
/// the temp dir that holds it, the CSV path).
pub fn watch_csv(args: &[&str], env: &[(&str, &str)]) -> (Watched, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let child = spawn_started(Command::new(bin()).envs(env.iter().copied()).args(args).arg("--csv").arg(&csv));
    (child, dir, csv)
}

/// Waits until `child` says on stderr that it is watching (its programs
/// attached, its probe calibrated), so a workload started next falls inside
/// the run: a fixed delay does not hold on a loaded CI machine, where start-up
/// (BPF load, kallsyms, calibration) has taken more than a second. A child
/// that ends first (a refused start) returns at once. Returns the thread
/// gathering the whole stderr: join it once the child has ended.
pub fn started(child: &mut std::process::Child) -> thread::JoinHandle<String> {
    use std::io::BufRead;
    // What each mode says once it runs: the spin probe, the wake-up probe,
    // passive mode with and without a thread to watch yet.
    const READY: [&str; 4] = ["watching CPU", "wake-up probe:", "passive: watching", "passive: no thread matches yet"];
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let gather = thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if READY.iter().any(|r| line.contains(r)) {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(30)) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("jitterwatch never said it was watching in 30 s: {}", gather.join().unwrap_or_default());
    }
    gather
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

/// A child process killed however the test ends (a failed assertion
/// included): no workload or jitterwatch is left running.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// sockperf, which `cargo xtask deps` installs: missing, CI fails loudly
/// and a developer's run says what `test` skipped.
pub fn sockperf(test: &str) -> Option<&'static str> {
    let ok = Command::new("sockperf").arg("--version").stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status();
    if ok.is_ok() {
        return Some("sockperf");
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: sockperf is missing (cargo xtask deps installs it)");
    }
    eprintln!("SKIPPED {test}: no sockperf (cargo xtask deps installs it)");
    None
}
