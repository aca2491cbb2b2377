//! Helpers for the bench: statistics, the clock, children that never
//! outlive us, and running jitterwatch with its JSON summary.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;

pub use super::spread::{ci95_half, Spread};

use crate::proc;

/// Thousands separated by a thin space-free comma: 1234567 -> "1,234,567".
pub fn grouped(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let s = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        out.insert(0, '-');
    }
    out
}

pub struct Grouped(pub Spread);

impl fmt::Display for Grouped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.n == 0 {
            return f.write_str("n/a");
        }
        write!(f, "{} [{}–{}]", grouped(s.median), grouped(s.min), grouped(s.max))
    }
}

/// CLOCK_MONOTONIC in ns: the clock of jitterwatch's timestamps.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pins the calling thread (and what it spawns from now on) to `cpu`.
pub fn pin_self(cpu: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays in bounds
    // for cpu < CPU_SETSIZE, which the caller's CPU numbers are.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("cannot pin the bench to CPU {cpu}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid; at worst ESRCH.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// A background child (a load, a tracer) killed and reaped when dropped,
/// so an error never leaves a storm running on the watched CPU.
pub struct Bg(pub Child);

impl Bg {
    /// In a process group of its own, so that what it forks goes with it
    /// (`perf bench sched pipe` without -T forks a worker that, killed
    /// alone, would wait on its pipe for ever).
    pub fn spawn(cmd: &mut Command) -> Result<Bg> {
        use std::os::unix::process::CommandExt;
        let c = cmd.process_group(0).spawn().with_context(|| format!("cannot run `{}`", proc::show(cmd)))?;
        Ok(Bg(c))
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            // SAFETY: a signal to the group this child leads (set at spawn).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.0.wait();
    }
}

/// Runs `cmd` to completion and returns its stdout; a failure is an error
/// carrying its stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("cannot run `{}`", proc::show(cmd)))?;
    if !out.status.success() {
        bail!("`{}` failed ({}): {}", proc::show(cmd), proc::describe(out.status), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `key=value` out of a line such as "min_ns=20 mean_ns=24.1".
pub fn field(text: &str, key: &str) -> Result<f64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {key}= in {text:?}"))
}

/// ops/sec out of `perf bench sched pipe`'s output.
pub fn perf_ops(text: &str) -> Result<f64> {
    text.lines()
        .find(|l| l.contains("ops/sec"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no ops/sec in perf's output: {text:?}"))
}

/// `taskset -c CPU perf bench sched pipe -l LOOPS`: ops/s.
pub fn perf_pipe(cpu: usize, loops: u64) -> Result<f64> {
    let out = output(
        Command::new("taskset")
            .args(["-c", &cpu.to_string(), "perf", "bench", "sched", "pipe", "-l", &loops.to_string()])
            .stderr(Stdio::piped()),
    )?;
    perf_ops(&out)
}

/// Memory and CPU figures of a running process, sampled from /proc.
#[derive(Clone, Debug, Default)]
pub struct Mem {
    pub samples: u64,
    pub max_rss_kb: u64,
    /// The last VmHWM read before the process went away.
    pub hwm_kb: u64,
    /// RssAnon / RssFile / RssShmem at the largest VmRSS.
    pub at_max: (u64, u64, u64),
    /// VmRSS a quarter into the run and at the end, to see growth.
    pub rss_trace: Vec<(u64, u64)>,
    /// CPU ns of the non-probe threads / the probe threads, last read.
    pub ns_other: u64,
    pub ns_probe: u64,
}

fn status_kb(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|r| r.trim_start_matches(':').split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// CPU time (ns, /proc/PID/task/*/schedstat) of every thread, split into
/// the non-probe threads (on the housekeeping CPUs) and the probes.
pub fn thread_ns(pid: u32) -> Option<(u64, u64)> {
    let (mut other, mut probe) = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let t = t.ok()?.path();
        let comm = std::fs::read_to_string(t.join("comm")).ok()?;
        let ns: u64 = std::fs::read_to_string(t.join("schedstat")).ok()?.split_whitespace().next()?.parse().ok()?;
        if comm.starts_with("jw-probe") {
            probe += ns;
        } else {
            other += ns;
        }
    }
    Some((other, probe))
}

fn sample_mem(pid: u32, every: Duration, stop: &AtomicBool) -> Mem {
    let mut m = Mem::default();
    while !stop.load(Relaxed) {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { break };
        let rss = status_kb(&status, "VmRSS");
        if rss == 0 {
            break; // a zombie: the summary is out, memory gone
        }
        m.samples += 1;
        m.hwm_kb = m.hwm_kb.max(status_kb(&status, "VmHWM"));
        if rss > m.max_rss_kb {
            m.max_rss_kb = rss;
            m.at_max = (status_kb(&status, "RssAnon"), status_kb(&status, "RssFile"), status_kb(&status, "RssShmem"));
        }
        m.rss_trace.push((mono_ns(), rss));
        if let Some((o, p)) = thread_ns(pid) {
            (m.ns_other, m.ns_probe) = (o, p);
        }
        thread::sleep(every);
    }
    m
}

/// A running jitterwatch with its stdout and stderr collected.
pub struct Jw {
    child: Option<Child>,
    /// CLOCK_MONOTONIC just before the spawn.
    pub t0_ns: u64,
    ready: mpsc::Receiver<()>,
    stdout: Option<JoinHandle<(String, u64)>>,
    stderr: Arc<Mutex<String>>,
    sampler: Option<(Arc<AtomicBool>, JoinHandle<Mem>)>,
}

/// A finished run: its JSON summary and, when sampled, its memory.
pub struct JwRun {
    pub t0_ns: u64,
    /// CLOCK_MONOTONIC when its stdout closed: the process had exited.
    pub exit_ns: u64,
    /// CLOCK_MONOTONIC when wait() returned. Later than `exit_ns` when the
    /// kernel is slow to release it: reaping a process whose
    /// /proc/PID/task/* files were read (the memory sampler does) can spin in
    /// proc_invalidate_siblings_dcache while the watched CPU is in a storm.
    pub reaped_ns: u64,
    pub json: Value,
    pub mem: Option<Mem>,
}

impl Jw {
    pub fn spawn(bin: &Path, args: &[&str], sample_every: Option<Duration>) -> Result<Jw> {
        Jw::spawn_env(bin, args, &[], sample_every)
    }

    /// The same with `env` set for it (JITTERWATCH_BPF_FLOOR, say).
    pub fn spawn_env(bin: &Path, args: &[&str], env: &[(&str, &str)], sample_every: Option<Duration>) -> Result<Jw> {
        let mut cmd = Command::new(bin);
        cmd.args(args).envs(env.iter().copied()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let t0_ns = mono_ns();
        let mut child = cmd.spawn().with_context(|| format!("cannot run `{}`", proc::show(&cmd)))?;
        let pid = child.id();
        let mut out = child.stdout.take().expect("piped");
        let stdout = thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            (s, mono_ns())
        });
        let err = child.stderr.take().expect("piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, ready) = mpsc::channel();
        let e2 = stderr.clone();
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                // The probe's start line, or passive mode's (which may be
                // waiting for its thread).
                if line.contains("jitterwatch: watching") || line.starts_with("jitterwatch: passive: ") {
                    let _ = tx.send(());
                }
                let mut s = e2.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let sampler = sample_every.map(|every| {
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            (stop, thread::spawn(move || sample_mem(pid, every, &s2)))
        });
        Ok(Jw { child: Some(child), t0_ns, ready, stdout: Some(stdout), stderr, sampler })
    }

    /// Waits for "jitterwatch: watching ..." (probes calibrated, BPF
    /// attached), or passive mode's first line (attached).
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        if self.ready.recv_timeout(timeout).is_ok() {
            return Ok(());
        }
        let st = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
        bail!(
            "jitterwatch did not start within {timeout:?}{}: {}",
            st.map(|s| format!(" ({})", proc::describe(s))).unwrap_or_default(),
            self.stderr.lock().unwrap().trim()
        )
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Asks for an orderly stop (the summary is still printed).
    pub fn interrupt(&self) {
        if let Some(c) = &self.child {
            signal(c, libc::SIGINT);
        }
    }

    /// Waits for the exit and parses the JSON summary.
    pub fn finish(mut self) -> Result<JwRun> {
        let st = self.child.take().expect("not finished twice").wait().context("waiting for jitterwatch")?;
        let reaped_ns = mono_ns();
        let mem = self.sampler.take().map(|(stop, h)| {
            stop.store(true, Relaxed);
            h.join().unwrap_or_default()
        });
        let (out, exit_ns) = self.stdout.take().expect("once").join().unwrap_or_default();
        let exit_ns = if exit_ns == 0 { reaped_ns } else { exit_ns.min(reaped_ns) };
        let err = self.stderr.lock().unwrap().clone();
        if !st.success() {
            bail!("jitterwatch failed ({}): {}", proc::describe(st), err.trim());
        }
        let json: Value = serde_json::from_str(&out)
            .with_context(|| format!("jitterwatch's --json output is not JSON: {:?}", out.chars().take(200).collect::<String>()))?;
        Ok(JwRun { t0_ns: self.t0_ns, exit_ns, reaped_ns, json, mem })
    }
}

impl Drop for Jw {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some((stop, _)) = &self.sampler {
            stop.store(true, Relaxed);
        }
    }
}

/// A number at a JSON pointer ("/overhead/ringbuf_drops"), NaN if absent.
pub fn num(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Runs jitterwatch for `secs` on `cpu` with extra args, to completion.
pub fn jw_run(bin: &Path, cpu: usize, secs: f64, extra: &[&str], sample: Option<Duration>) -> Result<JwRun> {
    let (c, d) = (cpu.to_string(), format!("{}ms", (secs * 1000.0) as u64));
    let mut args = vec!["--cpus", &c, "--no-tui", "--json", "--duration", &d];
    args.extend_from_slice(extra);
    Jw::spawn(bin, &args, sample)?.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_parsers() {
        let s = Spread::of(&[3.0, 1.0, 2.0, f64::NAN, 10.0]);
        assert_eq!((s.n, s.median, s.min, s.max), (4, 2.5, 1.0, 10.0));
        assert_eq!(grouped(1234567.4), "1,234,567");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(field("min_ns=20 mean_ns=24.5 loops=9", "mean_ns").unwrap(), 24.5);
        let perf = "# Running 'sched/pipe' benchmark:\n\n     Total time: 1.394 [sec]\n\n       6.97 usecs/op\n         215120 ops/sec\n";
        assert_eq!(perf_ops(perf).unwrap(), 215120.0);
        assert_eq!(status_kb("VmHWM:\t   10240 kB\nVmRSS:\t 9000 kB\n", "VmRSS"), 9000);
    }
}
