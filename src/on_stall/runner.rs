//! The command's side of `--on-stall`: a thread that runs it for each
//! stall handed over, and answers for everything the commands start.
//!
//! A command may leave processes behind (`sleep 300 &`), ignore SIGTERM
//! (`trap "" TERM`), or exit at once while its children run on. None of
//! them may outlive the run or hold its stdout and stderr open (a CI step
//! reading them waits for the last writer). So:
//! - each command leads a process group of its own, and every group is
//!   kept until it is empty, whatever its leader did;
//! - jitterwatch is their child subreaper: what a leader leaves behind is
//!   reparented to it (not to init) and reaped here;
//! - the commands write into a pipe of our own, forwarded to our stderr,
//!   never into our stderr itself;
//! - at the run's end what still runs has [`END_WAIT`], then its groups
//!   get SIGTERM, and SIGKILL [`GRACE`] later; said in one line.
//!
//! A process that leaves its group (setsid, setpgid) escapes this, as it
//! escapes a terminal's Ctrl-C.

use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Fields;
use crate::say::say;

/// At the run's end, what the commands still run is waited for this long.
const END_WAIT: Duration = Duration::from_secs(2);
/// Between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(1);
/// How often a running command, or an ending group, is looked at.
const POLL: Duration = Duration::from_millis(10);
/// Between commands, how often what they left behind is reaped.
const REAP_EVERY: Duration = Duration::from_secs(1);

pub struct Runner {
    tx: Option<SyncSender<Fields>>,
    busy: Arc<AtomicBool>,
    /// Set as the run ends: until when what the commands run may go on.
    ending: Arc<OnceLock<Instant>>,
    thread: Option<JoinHandle<()>>,
    output: Option<Forwarder>,
}

impl Runner {
    /// `quiet`: the screen is up, so the command's output goes nowhere
    /// (it would tear the screen); else to jitterwatch's stderr (stdout
    /// is the summary's, which scripts parse), through a pipe of ours.
    pub fn spawn(cmd: String, quiet: bool) -> std::io::Result<Runner> {
        // SAFETY: a flag of this process; orphans of the commands are
        // reparented here and reaped by the runner's thread. Without it
        // (a kernel that refuses), groups are still signalled.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        let output = if quiet { None } else { Some(Forwarder::spawn()?) };
        let writer = output.as_ref().map(|o| o.writer.try_clone()).transpose()?;
        let (tx, rx) = sync_channel::<Fields>(1);
        let busy = Arc::new(AtomicBool::new(false));
        let ending = Arc::new(OnceLock::new());
        let (b, e) = (busy.clone(), ending.clone());
        let thread = std::thread::Builder::new().name("jw-on-stall".into()).spawn(move || {
            let mut groups = Groups::default();
            let mut failures = 0u64;
            loop {
                match rx.recv_timeout(REAP_EVERY) {
                    Ok(f) => {
                        run_one(&cmd, &f, writer.as_ref(), &e, &mut groups, &mut failures);
                        b.store(false, Ordering::Release);
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        groups.reap();
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            groups.end(e.get().copied().unwrap_or_else(Instant::now));
        })?;
        Ok(Runner { tx: Some(tx), busy, ending, thread: Some(thread), output })
    }

    /// Whether no command runs or waits to.
    pub fn idle(&self) -> bool {
        !self.busy.load(Ordering::Acquire)
    }

    /// Hands `f` over without waiting; false if the runner is busy.
    pub fn hand(&self, f: Fields) -> bool {
        let Some(tx) = &self.tx else { return false };
        self.busy.store(true, Ordering::Release);
        tx.try_send(f).is_ok()
    }

    /// The run is over: no more commands; what they still run is waited
    /// for up to END_WAIT, then ended. Returns once nothing of theirs runs
    /// (within END_WAIT + GRACE and a little more).
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Runner {
    /// Also on an error's way out: nothing the commands started outlives
    /// the run.
    fn drop(&mut self) {
        let _ = self.ending.set(Instant::now() + END_WAIT);
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(o) = self.output.take() {
            o.finish();
        }
    }
}

fn run_one(cmd: &str, f: &Fields, out: Option<&PipeWriter>, ending: &OnceLock<Instant>, groups: &mut Groups, failures: &mut u64) {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(cmd).envs(f.env()).stdin(Stdio::null()).process_group(0);
    match out.map(|w| (w.try_clone(), w.try_clone())) {
        Some((Ok(o), Ok(e))) => c.stdout(o).stderr(e),
        _ => c.stdout(Stdio::null()).stderr(Stdio::null()),
    };
    let mut child = match c.spawn() {
        Ok(c) => c,
        Err(e) => {
            say!("--on-stall: cannot run /bin/sh: {e}");
            return;
        }
    };
    groups.add(child.id() as i32);
    if let Some(status) = wait_until_ending(&mut child, ending) {
        if !status.success() {
            *failures += 1;
            // Said for the first failure and then every 100th: a command
            // that always fails must not flood stderr.
            if *failures == 1 || failures.is_multiple_of(100) {
                say!("--on-stall: the command {status} (failure {failures}; said once per 100)");
            }
        }
    }
    groups.reap();
}

/// The leader's status, or None once the run has ended and END_WAIT
/// passed (its group is then ended with the others).
fn wait_until_ending(child: &mut Child, ending: &OnceLock<Instant>) -> Option<std::process::ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) => {}
            Err(e) => {
                say!("--on-stall: cannot wait for the command: {e}");
                return None;
            }
        }
        if ending.get().is_some_and(|&d| Instant::now() >= d) {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// The commands' process groups that may still have members.
#[derive(Default)]
struct Groups {
    live: Vec<i32>,
}

impl Groups {
    fn add(&mut self, pgid: i32) {
        self.live.push(pgid);
    }

    /// Reaps what the groups' orphans left (ours as subreaper), forgets
    /// the groups now empty; how many were reaped.
    fn reap(&mut self) -> usize {
        let mut reaped = 0;
        self.live.retain(|&g| {
            let mut status = 0;
            // SAFETY: waits only for our children in the group `g`.
            while unsafe { libc::waitpid(-g, &mut status, libc::WNOHANG) } > 0 {
                reaped += 1;
            }
            alive(g)
        });
        reaped
    }

    /// Sends `sig` to every group with members.
    fn signal(&self, sig: i32) {
        for &g in &self.live {
            // SAFETY: a signal to a process group one of our commands leads.
            unsafe { libc::kill(-g, sig) };
        }
    }

    /// Reaps until the groups are empty or `until`.
    fn reap_until(&mut self, until: Instant) -> usize {
        let mut reaped = self.reap();
        while !self.live.is_empty() && Instant::now() < until {
            std::thread::sleep(POLL);
            reaped += self.reap();
        }
        reaped
    }

    /// The run's end: what still runs gets until `deadline` (END_WAIT
    /// after the run), then SIGTERM, then SIGKILL after GRACE; said in one
    /// line when anything was ended.
    fn end(&mut self, deadline: Instant) {
        self.reap_until(deadline);
        if self.live.is_empty() {
            return;
        }
        let groups = self.live.len();
        self.signal(libc::SIGTERM);
        self.reap_until(Instant::now() + GRACE);
        let killed = !self.live.is_empty();
        if killed {
            self.signal(libc::SIGKILL);
            self.reap_until(Instant::now() + GRACE);
        }
        say!(
            "--on-stall: {} still ran {} s after the run ended: ended ({}){}",
            if groups == 1 { "a command's process group".to_string() } else { format!("{groups} commands' process groups") },
            END_WAIT.as_secs(),
            if killed { format!("SIGTERM, then SIGKILL {} s later", GRACE.as_secs()) } else { "SIGTERM".to_string() },
            if self.live.is_empty() { String::new() } else { format!("; {} still not gone", self.live.len()) },
        );
    }
}

/// Whether the process group `g` has a member (a zombie counts).
fn alive(g: i32) -> bool {
    // SAFETY: signal 0 sends nothing, only checks.
    unsafe { libc::kill(-g, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}

/// The commands' output, copied from a pipe of ours to our stderr: the
/// commands never hold our stderr, so what they leave cannot keep a
/// reader of it waiting past the run.
struct Forwarder {
    writer: PipeWriter,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Forwarder {
    fn spawn() -> std::io::Result<Forwarder> {
        let (reader, writer) = std::io::pipe()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new().name("jw-on-stall-out".into()).spawn(move || forward(reader, &s))?;
        Ok(Forwarder { writer, stop, thread })
    }

    /// Once the commands are gone: what they wrote is copied, then the
    /// thread ends (whoever still holds the pipe, a process that left its
    /// group, is no reason to wait).
    fn finish(self) {
        self.stop.store(true, Ordering::Release);
        drop(self.writer);
        let _ = self.thread.join();
    }
}

fn forward(mut reader: PipeReader, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    // Once stopped, a writer that escaped the groups gets this long.
    let mut last_call = None;
    loop {
        if stop.load(Ordering::Acquire) && Instant::now() >= *last_call.get_or_insert_with(|| Instant::now() + Duration::from_millis(200)) {
            return;
        }
        let mut pfd = libc::pollfd { fd: reader.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd of ours, 100 ms.
        let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
        if ready <= 0 {
            if stop.load(Ordering::Acquire) {
                return;
            }
            continue;
        }
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let _ = std::io::stderr().lock().write_all(&buf[..n]);
            }
        }
    }
}
