//! The live screen in a real terminal: the real binary runs in a detached
//! tmux session while a pinned busy process with a distinctive name
//! disturbs the watched CPU; the screen must name it, and `q` must give
//! the shell back intact. Needs root and BTF (CI has both).

mod common;

use std::path::Path;
use std::process::{Child, Command, Output};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{last_cpu, lock as jitterwatch_test_lock, random_name, require_root_btf};

const TEST: &str = "live_screen_names_a_pinned_hog_and_quits_cleanly";

/// Root, BTF (else a loud failure on CI, a note elsewhere) and the tools.
fn can_run() -> bool {
    if !require_root_btf(TEST) {
        return false;
    }
    let missing = ["tmux", "taskset", "python3"]
        .into_iter()
        .find(|t| Command::new("sh").args(["-c", &format!("command -v {t}")]).output().map_or(true, |o| !o.status.success()));
    match missing {
        None => true,
        Some(t) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{TEST}: cannot run in CI: {t} is not installed (cargo xtask deps)")
        }
        Some(t) => {
            eprintln!("SKIPPED {TEST}: {t} is not installed (cargo xtask deps)");
            false
        }
    }
}

/// tmux on a server of the session's own (`-L`): tests starting sessions
/// at once on the default server race to start it ("server exited
/// unexpectedly").
fn tmux(socket: &str, args: &[&str]) -> Output {
    let o = Command::new("tmux").args(["-L", socket]).args(args).output().expect("running tmux");
    assert!(o.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

/// The session and the disturbance go away however the test ends.
struct Session {
    name: String,
    hog: Option<Child>,
}

impl Session {
    fn capture(&self) -> String {
        String::from_utf8_lossy(&tmux(&self.name, &["capture-pane", "-p", "-t", &self.name]).stdout).into_owned()
    }

    fn display(&self, format: &str) -> String {
        String::from_utf8_lossy(&tmux(&self.name, &["display-message", "-p", "-t", &self.name, format]).stdout).trim().to_string()
    }

    fn keys(&self, keys: &[&str]) {
        tmux(&self.name, &[&["send-keys", "-t", &self.name][..], keys].concat());
    }

    /// Waits until the screen satisfies `ok`; the last screen either way.
    fn wait_for(&self, limit: Duration, ok: impl Fn(&str) -> bool) -> (bool, String) {
        let end = Instant::now() + limit;
        loop {
            let s = self.capture();
            if ok(&s) || Instant::now() >= end {
                return (ok(&s), s);
            }
            sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(mut h) = self.hog.take() {
            let _ = h.kill();
            let _ = h.wait();
        }
        let _ = Command::new("tmux").args(["-L", &self.name, "kill-server"]).output();
    }
}

/// Pid of the pane shell's child running `exe`, if any.
fn child_running(parent: u32, exe: &Path) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let ppid: u32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent && std::fs::read_link(e.path().join("exe")).ok()? == exe).then_some(pid)
    })
}

/// Running and not a zombie (whose parent may be gone, and nobody reaps it).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// Starts the binary watching `cpu` (with `extra` arguments) in a fresh
/// 160×48 session; returns the session, the pane shell's pid and
/// jitterwatch's pid once its screen is up.
fn start(tag: &str, cpu: usize, exe: &Path, extra: &str) -> (Session, u32, u32) {
    let s = Session { name: format!("{tag}-{}", std::process::id()), hog: None };
    tmux(&s.name, &["new-session", "-d", "-s", &s.name, "-x", "160", "-y", "48", "sh"]);
    s.keys(&["-l", "PS1='jwprompt> '"]);
    s.keys(&["Enter"]);
    s.keys(&["-l", &format!("{} --cpus {cpu} {extra}; echo EXIT=$?", exe.display())]);
    s.keys(&["Enter"]);
    let (up, screen) = s.wait_for(Duration::from_secs(10), |t| t.contains("Culprits") && t.contains("elapsed"));
    assert!(up, "the live screen did not come up:\n{screen}");
    let shell: u32 = s.display("#{pane_pid}").parse().expect("pane pid");
    let jw = child_running(shell, exe).expect("jitterwatch runs in the pane");
    (s, shell, jw)
}

#[test]
fn live_screen_names_a_pinned_hog_and_quits_cleanly() {
    if !can_run() {
        return;
    }
    let _g = jitterwatch_test_lock();
    let cpu = last_cpu();
    let tag = random_name("jwtui");
    let exe = Path::new(env!("CARGO_BIN_EXE_jitterwatch")).canonicalize().unwrap();
    let (mut s, _, jw) = start(&tag, cpu, &exe, "");

    // 5 ms of spinning every 25 ms for 3 s, on the watched CPU, under a name
    // nobody else has (prctl 15 = PR_SET_NAME).
    let script = format!(
        "import ctypes,time\nctypes.CDLL(None).prctl(15, b'{tag}', 0, 0, 0)\nend = time.time() + 3\n\
         while time.time() < end:\n    t = time.time() + 0.005\n    while time.time() < t: pass\n    time.sleep(0.02)\n"
    );
    s.hog = Some(Command::new("taskset").args(["-c", &cpu.to_string(), "python3", "-c", &script]).spawn().expect("spawning the hog"));
    let (named, screen) = s.wait_for(Duration::from_secs(6), |t| t.lines().any(|l| l.contains(&tag) && l.contains("task")));
    assert!(named, "{tag} never showed among the culprits:\n{screen}");
    println!("{screen}");
    // The header says how the CPU is isolated in words; the hog's name is whole.
    let head = screen.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(head.contains(&format!("CPU {cpu} isolated: ")) && head.contains(" · nohz_full: ") && head.contains(" · tick: "), "{head}");
    assert!(screen.lines().any(|l| l.contains(&format!(" {tag}[")) && l.contains("task")), "{tag} not whole:\n{screen}");

    s.keys(&["q"]);
    let (done, screen) = s.wait_for(Duration::from_secs(5), |t| t.contains("EXIT=") && t.trim_end().ends_with("jwprompt>"));
    assert!(done, "jitterwatch did not quit on q:\n{screen}");
    assert!(screen.contains("EXIT=0"), "non-zero exit:\n{screen}");
    assert!(!alive(jw), "jitterwatch is still running");
    // The terminal is back: main screen, cursor shown, cooked mode (Enter runs a line).
    assert_eq!(s.display("#{alternate_on}/#{cursor_flag}"), "0/1", "alternate screen or hidden cursor left behind");
    s.keys(&["-l", "echo restored$((40+2))"]);
    s.keys(&["Enter"]);
    let (cooked, screen) = s.wait_for(Duration::from_secs(3), |t| t.contains("restored42"));
    assert!(cooked, "the shell did not get a cooked terminal back:\n{screen}");
}

/// The terminal vanishing (ssh dropped, tmux killed) ends the run: no UI
/// left spinning on a dead tty, no probe left spinning on the watched CPU.
#[test]
fn a_vanished_terminal_ends_the_run() {
    if !can_run() {
        return;
    }
    let _g = jitterwatch_test_lock();
    let exe = Path::new(env!("CARGO_BIN_EXE_jitterwatch")).canonicalize().unwrap();
    let (s, _, jw) = start(&random_name("jwhup"), last_cpu(), &exe, "");
    drop(s);
    let end = Instant::now() + Duration::from_secs(5);
    while alive(jw) && Instant::now() < end {
        sleep(Duration::from_millis(100));
    }
    if alive(jw) {
        // SAFETY: signalling the process this test started.
        unsafe { libc::kill(jw as i32, libc::SIGKILL) };
        panic!("jitterwatch outlived its terminal by 5 s");
    }
}

/// `--stacks-above 1ms` on the live screen: a SCHED_FIFO hog's 10 ms
/// bursts (started first: its interpreter's start-up is no stall) are the
/// largest stalls, and Enter shows the one at the top of the recent-stalls
/// pane with the hog's kernel stack; Esc closes it.
#[test]
fn enter_shows_a_hogs_kernel_stack_on_the_live_screen() {
    if !can_run() {
        return;
    }
    let _g = jitterwatch_test_lock();
    let cpu = last_cpu();
    let tag = random_name("jwstk");
    let exe = Path::new(env!("CARGO_BIN_EXE_jitterwatch")).canonicalize().unwrap();
    let script = format!(
        "import ctypes,os,time\nctypes.CDLL(None).prctl(15, b'{tag}', 0, 0, 0)\n\
         os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))\nend = time.time() + 8\n\
         while time.time() < end:\n    t = time.time() + 0.01\n    while time.time() < t: pass\n    time.sleep(0.03)\n"
    );
    let hog = Command::new("taskset").args(["-c", &cpu.to_string(), "python3", "-c", &script]).spawn().expect("spawning the hog");
    sleep(Duration::from_secs(1));
    let (mut s, _, _) = start(&tag, cpu, &exe, "--stacks-above 1ms");
    s.hog = Some(hog);
    let (named, screen) = s.wait_for(Duration::from_secs(6), |t| t.lines().any(|l| l.contains(&tag) && l.contains("task")));
    assert!(named, "{tag} never showed among the culprits:\n{screen}");
    s.keys(&["Enter"]);
    let (shown, screen) = s.wait_for(Duration::from_secs(3), |t| t.contains("Kernel stack of task:") && t.contains("schedule"));
    println!("{screen}");
    assert!(shown, "no kernel stack on Enter:\n{screen}");
    assert!(screen.lines().any(|l| l.contains("Kernel stack of task:") && l.contains(&tag)), "not the hog's stack:\n{screen}");
    s.keys(&["Escape"]);
    let (closed, screen) = s.wait_for(Duration::from_secs(3), |t| !t.contains("Kernel stack of"));
    assert!(closed, "Esc did not close the stall:\n{screen}");
    s.keys(&["q"]);
    let (done, screen) = s.wait_for(Duration::from_secs(5), |t| t.contains("EXIT=0"));
    assert!(done, "jitterwatch did not quit cleanly on q:\n{screen}");
}
