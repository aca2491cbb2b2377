//! Without root (#42): the spin probe, passive mode on another user's
//! thread and the wake-up probe run as uid 65534 with exactly the
//! capabilities the unit grants (read from contrib/systemd, so the two
//! cannot drift), and with each one removed stop at one line naming it.
//! The CPU locks work for that user as they do for root: one owner per CPU
//! across users, a planted link not followed.

mod common;
use common::*;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const LOCKS: &str = "/run/jitterwatch";

/// The unit's `AmbientCapabilities=`, as setpriv spells them (`bpf`, ...).
fn unit_caps() -> Vec<String> {
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/systemd/jitterwatch.service")).unwrap();
    let line = unit.lines().find_map(|l| l.strip_prefix("AmbientCapabilities=")).expect("the unit grants capabilities");
    let caps: Vec<String> = line.split_whitespace().map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase()).collect();
    assert_eq!(unit.lines().find_map(|l| l.strip_prefix("CapabilityBoundingSet=")), Some(line), "the bounding set is the ambient set");
    caps
}

/// The lock directory root makes for uid 65534 (as the unit's
/// RuntimeDirectory does for its user), removed after if made here.
struct UserLockDir(Option<PathBuf>);

impl UserLockDir {
    fn make() -> Self {
        std::fs::DirBuilder::new().mode(0o755).recursive(true).create(LOCKS).unwrap();
        let dir = Path::new(LOCKS).join(NOBODY.to_string());
        if dir.exists() {
            return Self(None);
        }
        std::fs::DirBuilder::new().mode(0o755).create(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
        Self(Some(dir))
    }
}

impl Drop for UserLockDir {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A directory uid 65534 can write (its CSVs).
fn nobody_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(d.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    d
}

/// `jitterwatch ARGS` as uid 65534 with exactly `caps` (ambient, inherited
/// and bounding), no groups, no new privileges.
fn as_nobody(caps: &[&str], args: &[&str]) -> Command {
    let set: String = std::iter::once("-all".to_string()).chain(caps.iter().map(|c| format!("+{c}"))).collect::<Vec<_>>().join(",");
    let mut cmd = Command::new("setpriv");
    cmd.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        &format!("--inh-caps={set}"),
        &format!("--ambient-caps={set}"),
        &format!("--bounding-set={set}"),
        "--no-new-privs",
        bin(),
    ])
    .args(args)
    .current_dir("/")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// Runs it to the end, killed past `limit`.
fn run(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd.spawn().expect("setpriv (util-linux)");
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        thread::spawn(move || {
            while Instant::now() < deadline {
                if done.load(Relaxed) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, Relaxed);
    watchdog.join().unwrap();
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A root thread pinned on `cpu`, named `name`, busy 2 ms in every 10
/// until `stop`: another user's thread for passive mode.
fn root_thread(cpu: usize, name: String, stop: Arc<AtomicBool>) -> (u32, thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = thread::spawn(move || {
        pin_self(cpu);
        set_thread_name(&name);
        tx.send(jitterwatch::sys::gettid()).unwrap();
        while !stop.load(Relaxed) {
            burn(2_000_000);
            thread::sleep(Duration::from_millis(8));
        }
    });
    (rx.recv().unwrap(), h)
}

#[test]
fn without_root_each_source_runs_with_the_unit_s_capabilities_and_each_missing_one_is_named() {
    if !require_root_btf("without_root_each_source_runs_with_the_unit_s_capabilities_and_each_missing_one_is_named") {
        return;
    }
    let _g = lock();
    let _dir = UserLockDir::make();
    let caps = unit_caps();
    let caps: Vec<&str> = caps.iter().map(String::as_str).collect();
    assert_eq!(caps, ["bpf", "perfmon", "syslog"], "the set this test was written for");
    let cpu = last_cpu().to_string();
    let out = nobody_dir();
    let csv = out.path().join("spin.csv");
    let csv = csv.to_str().unwrap();
    let limit = Duration::from_secs(30);

    // The spin probe: rows, every kernel function named.
    let spin = run(as_nobody(&caps, &["--cpus", &cpu, "--no-tui", "--duration", "1s", "--csv", csv]), limit);
    assert!(spin.status.success(), "spin probe as uid {NOBODY}: {}", text(&spin.stderr));
    let rows = read_csv(Path::new(csv));
    assert!(!rows.is_empty(), "no hiccup in 1 s");
    let hex = rows.iter().flat_map(|r| &r.causes).filter(|c| (c.0 == "timer" || c.0 == "work") && c.1.starts_with("0x")).count();
    assert_eq!(hex, 0, "a kernel function left as an address: kallsyms unread");
    println!("spin probe as uid {NOBODY} with {caps:?}: {} rows", rows.len());

    // Passive mode on root's thread (kept for the runs below).
    let stop = Arc::new(AtomicBool::new(false));
    let name = random_name("jwroot");
    let (tid, h) = root_thread(last_cpu(), name.clone(), stop.clone());
    let tid_s = tid.to_string();
    let passive = run(as_nobody(&caps, &["--cpus", &cpu, "--no-tui", "--duration", "1s", "--tid", &tid_s]), limit);
    let so = text(&passive.stdout);
    assert!(passive.status.success(), "passive mode on root's thread as uid {NOBODY}: {}", text(&passive.stderr));
    assert!(so.contains(&format!("thread {name}[{tid}]")), "root's thread not watched: {so}");

    // The wake-up probe.
    let wakeup = run(as_nobody(&caps, &["--cpus", &cpu, "--no-tui", "--duration", "1s", "--probe", "wakeup"]), limit);
    assert!(wakeup.status.success(), "wake-up probe as uid {NOBODY}: {}", text(&wakeup.stderr));

    // Each capability removed: one line naming it, a non-zero exit.
    for (i, &missing) in caps.iter().enumerate() {
        let fewer: Vec<&str> = caps.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, c)| *c).collect();
        for (what, args) in
            [("spin", vec!["--no-tui"]), ("passive", vec!["--no-tui", "--tid", &tid_s]), ("wakeup", vec!["--no-tui", "--probe", "wakeup"])]
        {
            let mut all = vec!["--cpus", &cpu, "--duration", "1s"];
            all.extend(args);
            let o = run(as_nobody(&fewer, &all), limit);
            let err = text(&o.stderr);
            let cap = format!("CAP_{}", missing.to_ascii_uppercase());
            assert!(!o.status.success(), "{what} without {cap} ran: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{what} without {cap}: not one line: {err}");
            assert!(err.contains(&cap) && !err.contains("os error"), "{what} without {cap}: {err}");
            println!("{what} without {cap}: {}", err.trim());
        }
    }
    stop.store(true, Relaxed);
    h.join().unwrap();
}

/// The options that add a capability: each runs with it and stops at one
/// line without it.
#[test]
fn without_root_rt_and_dma_latency_take_one_capability_each() {
    if !require_root_btf("without_root_rt_and_dma_latency_take_one_capability_each") {
        return;
    }
    let _g = lock();
    let _dir = UserLockDir::make();
    let caps = unit_caps();
    let caps: Vec<&str> = caps.iter().map(String::as_str).collect();
    let cpu = last_cpu().to_string();
    for (cap, args) in
        [("sys_nice", vec!["--no-tui", "--rt"]), ("dac_override", vec!["--no-tui", "--probe", "wakeup", "--dma-latency", "0"])]
    {
        let mut all = vec!["--cpus", &cpu, "--duration", "1s"];
        all.extend(args.iter().copied());
        let with: Vec<&str> = caps.iter().copied().chain([cap]).collect();
        let o = run(as_nobody(&with, &all), Duration::from_secs(30));
        assert!(o.status.success(), "{args:?} with {with:?}: {}", text(&o.stderr));
        let o = run(as_nobody(&caps, &all), Duration::from_secs(30));
        let err = text(&o.stderr);
        let name = format!("needs CAP_{}", cap.to_ascii_uppercase());
        assert!(!o.status.success() && err.trim().lines().count() == 1 && err.contains(&name), "{args:?} without {cap}: {err}");
    }
}

/// The lock's fault cases as uid 65534: two of its runs on one CPU, one
/// of root's and one of its, a planted link in its directory.
#[test]
fn without_root_the_cpu_lock_has_one_owner_across_users() {
    if !require_root_btf("without_root_the_cpu_lock_has_one_owner_across_users") {
        return;
    }
    let _g = lock();
    let _dir = UserLockDir::make();
    let caps = unit_caps();
    let caps: Vec<&str> = caps.iter().map(String::as_str).collect();
    let cpu = last_cpu().to_string();
    let args = ["--cpus", &cpu, "--no-tui", "--duration", "2s"];
    let refused = |o: &Output| {
        let err = text(&o.stderr);
        !o.status.success() && err.trim().lines().count() == 1 && err.contains(&format!("CPU {cpu} is already watched"))
    };

    // Two of its own, started together: exactly one runs.
    let (a, b) = (as_nobody(&caps, &args).spawn().unwrap(), as_nobody(&caps, &args).spawn().unwrap());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!([&a, &b].iter().filter(|o| o.status.success()).count(), 1, "{} | {}", text(&a.stderr), text(&b.stderr));
    assert!([&a, &b].iter().any(|o| refused(o)), "{} | {}", text(&a.stderr), text(&b.stderr));

    // Root's run and its, either way round.
    for root_first in [true, false] {
        let first = if root_first {
            Command::new(bin()).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        } else {
            as_nobody(&caps, &args).spawn().unwrap()
        };
        // Past its start-up (BPF load: ~0.3 s here), inside its 2 s.
        thread::sleep(Duration::from_millis(1200));
        let second = if root_first {
            run(as_nobody(&caps, &args), Duration::from_secs(20))
        } else {
            let mut c = Command::new(bin());
            c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
            run(c, Duration::from_secs(20))
        };
        let first = first.wait_with_output().unwrap();
        assert!(first.status.success(), "root first: {root_first}: the first failed: {}", text(&first.stderr));
        assert!(refused(&second), "root first: {root_first}: the second ran beside the first: {}", text(&second.stderr));
    }

    // A link planted in its own directory is not followed.
    let dir = Path::new(LOCKS).join(NOBODY.to_string());
    let link = dir.join(format!("cpu{cpu}.lock"));
    let _ = std::fs::remove_file(&link);
    let target = nobody_dir();
    let precious = target.path().join("precious");
    std::fs::write(&precious, "keep\n").unwrap();
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    let o = run(as_nobody(&caps, &args), Duration::from_secs(20));
    let _ = std::fs::remove_file(&link);
    let err = text(&o.stderr);
    assert!(!o.status.success() && err.contains("cannot open the lock") && err.trim().lines().count() == 1, "{err}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep\n");
}
