//! `--on-stall CMD`: a command of the user's run at a stall, as rtla's
//! `--on-threshold` actions are, with the stall's fields in its
//! environment (`JW_CPU`, `JW_GAP_NS`, `JW_CAUSE`, ...). It runs on a
//! thread of its own: the collector hands a stall over without waiting
//! (a full hand-off is a skipped stall, counted), so a slow, hung or
//! failing command never stalls the measuring.
//!
//! Which stalls: those at or over `--fail-above`, else `--stop-above`,
//! else every stall over the threshold. How often: one command at a time,
//! and at most one started per [`MIN_INTERVAL_NS`]; stalls that met the
//! rule meanwhile are counted and the next command sees how many
//! (`JW_SKIPPED`).

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::interval::Hiccup;
use crate::say::say;

/// At most one command started per second: a storm of stalls must not
/// become a storm of processes on the machine being measured.
pub const MIN_INTERVAL_NS: u64 = 1_000_000_000;
/// At the run's end, a command still running is waited for this long,
/// then ended: a command left running would hold the run's pipes open (a
/// CI step reading them would wait for it) and outlive what it reacts to.
const END_WAIT: Duration = Duration::from_secs(2);

/// One stall's fields as the command's environment gets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub cpu: u32,
    pub time_ns: u64,
    pub offset_ns: u64,
    pub gap_ns: u64,
    /// The largest cause, `kind:name` as the CSV writes it (escaped).
    pub cause: String,
    pub cause_ns: u64,
    pub unexplained_ns: u64,
    pub source: &'static str,
    /// Passive mode: the watched thread, `comm[tid]` (escaped).
    pub thread: Option<(u32, String)>,
    pub skipped: u64,
    /// The bound it met (None: the threshold).
    pub bound_ns: Option<u64>,
}

impl Fields {
    pub fn of(h: &Hiccup, start_ns: u64, skipped: u64, bound_ns: Option<u64>) -> Self {
        let top = h.all_causes().next();
        Fields {
            cpu: h.cpu,
            time_ns: h.t0,
            offset_ns: h.t0.saturating_sub(start_ns),
            gap_ns: h.gap,
            cause: crate::export::cause_label(top.map_or(&crate::cause::Cause::Unexplained, |(c, _)| c)),
            cause_ns: top.map_or(0, |(_, ns)| ns),
            unexplained_ns: h.unexplained,
            source: h.source.as_str(),
            thread: h.victim.map(|v| (v.tid, v.name())),
            skipped,
            bound_ns,
        }
    }

    /// The environment the command gets.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut e: Vec<(&'static str, OsString)> = vec![
            ("JW_CPU", self.cpu.to_string().into()),
            ("JW_TIME_NS", self.time_ns.to_string().into()),
            ("JW_OFFSET_NS", self.offset_ns.to_string().into()),
            ("JW_GAP_NS", self.gap_ns.to_string().into()),
            ("JW_CAUSE", self.cause.clone().into()),
            ("JW_CAUSE_NS", self.cause_ns.to_string().into()),
            ("JW_UNEXPLAINED_NS", self.unexplained_ns.to_string().into()),
            ("JW_SOURCE", self.source.into()),
            ("JW_SKIPPED", self.skipped.to_string().into()),
        ];
        if let Some(b) = self.bound_ns {
            e.push(("JW_BOUND_NS", b.to_string().into()));
        }
        if let Some((tid, name)) = &self.thread {
            e.push(("JW_TID", tid.to_string().into()));
            e.push(("JW_THREAD", name.clone().into()));
        }
        e
    }
}

/// Whether a stall is handed to the command: the rule and the rate limit,
/// as pure logic (`now`: the collector's clock when it sees the stall).
#[derive(Debug, Default)]
pub struct Gate {
    pub bound_ns: Option<u64>,
    last_start: Option<u64>,
    skipped: u64,
}

impl Gate {
    pub fn new(bound_ns: Option<u64>) -> Self {
        Gate { bound_ns, last_start: None, skipped: 0 }
    }

    /// Some(stalls skipped before it) when `h` is to be handed over now;
    /// `idle`: no command runs. A stall that meets the rule but is not
    /// handed over is counted for the next.
    pub fn admit(&mut self, gap_ns: u64, now: u64, idle: bool) -> Option<u64> {
        if self.bound_ns.is_some_and(|b| gap_ns < b) {
            return None;
        }
        let soon = self.last_start.is_some_and(|t| now < t.saturating_add(MIN_INTERVAL_NS));
        if !idle || soon {
            self.skipped += 1;
            return None;
        }
        self.last_start = Some(now);
        Some(std::mem::take(&mut self.skipped))
    }

    /// A hand-off that failed after `admit` (the runner was busy after
    /// all): that stall and those before it are still to be told.
    pub fn refused(&mut self, skipped_before: u64) {
        self.skipped += skipped_before + 1;
    }
}

/// The command's side: a thread that runs it for each stall handed over.
pub struct Runner {
    tx: Option<SyncSender<Fields>>,
    busy: Arc<AtomicBool>,
    /// The running command's pid (its process group's), 0: none.
    running: Arc<AtomicI32>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Runner {
    /// `quiet`: the screen is up, so the command's output goes nowhere
    /// (it would tear the screen); else to jitterwatch's stderr (stdout
    /// is the summary's, which scripts parse).
    pub fn spawn(cmd: String, quiet: bool) -> std::io::Result<Runner> {
        let (tx, rx) = sync_channel::<Fields>(1);
        let busy = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = sync_channel(1);
        let running = Arc::new(AtomicI32::new(0));
        let (b, r) = (busy.clone(), running.clone());
        let thread = std::thread::Builder::new().name("jw-on-stall".into()).spawn(move || {
            let mut failures = 0u64;
            for f in rx {
                run_one(&cmd, &f, quiet, &r, &mut failures);
                b.store(false, Ordering::Release);
            }
            let _ = done_tx.send(());
        })?;
        Ok(Runner { tx: Some(tx), busy, running, done, thread: Some(thread) })
    }

    /// Whether no command runs or waits to.
    pub fn idle(&self) -> bool {
        !self.busy.load(Ordering::Acquire)
    }

    /// Hands `f` over without waiting; false if the runner is busy.
    pub fn hand(&self, f: Fields) -> bool {
        let Some(tx) = &self.tx else { return false };
        self.busy.store(true, Ordering::Release);
        match tx.try_send(f) {
            Ok(()) => true,
            Err(_) => false,
        }
    }

    /// The run is over: no more commands; one still running is waited for
    /// up to END_WAIT, then ended (said in one line).
    pub fn finish(mut self) {
        self.tx = None;
        let deadline = Instant::now() + END_WAIT;
        loop {
            match self.done.try_recv() {
                Ok(()) | Err(TryRecvError::Disconnected) => {
                    if let Some(t) = self.thread.take() {
                        let _ = t.join();
                    }
                    return;
                }
                Err(TryRecvError::Empty) if Instant::now() >= deadline => {
                    let pid = self.running.load(Ordering::Acquire);
                    if pid > 0 {
                        // SAFETY: a signal to the process group the command leads.
                        unsafe { libc::kill(-pid, libc::SIGTERM) };
                        say!(
                            "--on-stall: the command still ran {} s after the run ended: ended it (SIGTERM to its process group)",
                            END_WAIT.as_secs()
                        );
                    }
                    return;
                }
                Err(TryRecvError::Empty) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

fn run_one(cmd: &str, f: &Fields, quiet: bool, running: &AtomicI32, failures: &mut u64) {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("/bin/sh");
    // Its own process group, so that what it starts is ended with it at
    // the end (a Ctrl-C at the terminal ends the run, and so the command).
    c.arg("-c").arg(cmd).envs(f.env()).stdin(Stdio::null()).process_group(0);
    if quiet {
        c.stdout(Stdio::null()).stderr(Stdio::null());
    } else {
        use std::os::fd::AsFd;
        // Its stdout to our stderr: our stdout carries the summary.
        match std::io::stderr().as_fd().try_clone_to_owned() {
            Ok(fd) => c.stdout(Stdio::from(fd)),
            Err(_) => c.stdout(Stdio::null()),
        };
    }
    let mut child = match c.spawn() {
        Ok(c) => c,
        Err(e) => {
            say!("--on-stall: cannot run /bin/sh: {e}");
            return;
        }
    };
    running.store(child.id() as i32, Ordering::Release);
    let status = child.wait();
    running.store(0, Ordering::Release);
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            say!("--on-stall: cannot wait for the command: {e}");
            return;
        }
    };
    if !status.success() {
        *failures += 1;
        // Said for the first failure and then every 100th: a command that
        // always fails must not flood stderr.
        if *failures == 1 || failures.is_multiple_of(100) {
            say!("--on-stall: the command {status} (failure {failures}; said once per 100)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Cause;
    use crate::interval::hiccup;

    #[test]
    fn the_gate_keeps_the_rule_and_the_rate() {
        let s = 1_000_000_000;
        let mut g = Gate::new(Some(100));
        assert_eq!(g.admit(99, 0, true), None, "under the bound: not even counted");
        assert_eq!(g.admit(100, 0, true), Some(0));
        assert_eq!(g.admit(150, s / 2, true), None, "within a second of the last start");
        assert_eq!(g.admit(150, s + 1, false), None, "a command still runs");
        assert_eq!(g.admit(99, s + 2, true), None);
        assert_eq!(g.admit(120, s + 3, true), Some(2), "the two skipped are told");
        g.refused(0);
        assert_eq!(g.admit(500, 3 * s, true), Some(1));
        // No bound: every stall over the threshold meets the rule.
        assert_eq!(Gate::new(None).admit(1, 0, true), Some(0));
    }

    #[test]
    fn the_fields_are_the_stalls_escaped() {
        let mut h = hiccup(3, 5_000, vec![(Cause::Softirq(1), 700)], 300);
        h.victim = Some(crate::interval::Victim { tid: 42, comm: *b"ev\x1b[2Jil\0\0\0\0\0\0\0\0" });
        let f = Fields::of(&h, 1_000, 7, Some(900));
        let env: std::collections::HashMap<_, _> = f.env().into_iter().collect();
        let get = |k: &str| env[k].to_str().unwrap().to_string();
        assert_eq!(get("JW_CPU"), "3");
        assert_eq!(get("JW_TIME_NS"), "5000");
        assert_eq!(get("JW_OFFSET_NS"), "4000");
        assert_eq!(get("JW_GAP_NS"), "1000");
        assert_eq!(get("JW_CAUSE"), "softirq:TIMER");
        // Escaped as the CSV's causes are: `;` and `=` too.
        let odd = Cause::Task { comm: *b"a;b=c\0\0\0\0\0\0\0\0\0\0\0", pid: Some(9) };
        let f = Fields::of(&hiccup(3, 5_000, vec![(odd, 700)], 0), 1_000, 0, None);
        assert_eq!(f.cause, "task:a\\;b\\=c[9]");
        assert_eq!(get("JW_CAUSE_NS"), "700");
        assert_eq!(get("JW_UNEXPLAINED_NS"), "300");
        assert_eq!(get("JW_SOURCE"), "probe");
        assert_eq!(get("JW_SKIPPED"), "7");
        assert_eq!(get("JW_BOUND_NS"), "900");
        assert_eq!(get("JW_TID"), "42");
        assert_eq!(get("JW_THREAD"), "ev\\x1b[2Jil[42]");
    }
}
