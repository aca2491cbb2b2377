//! Root, end to end: passive mode on a thread that was already busy on its
//! CPU before jitterwatch attached. On an isolated CPU such a thread never
//! switches, so no event names it: /proc does, once tracing is on.

mod common;
use common::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

#[test]
fn a_thread_busy_before_the_attach_is_watched_from_the_start() {
    if !require_root_btf("a_thread_busy_before_the_attach_is_watched_from_the_start") {
        return;
    }
    let _g = lock();
    let cpu = last_cpu();
    let name = random_name("jwbusy");
    let (stop, tid) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU32::new(0)));
    let busy = {
        let (stop, tid, name) = (stop.clone(), tid.clone(), name.clone());
        thread::spawn(move || {
            pin_self(cpu);
            set_thread_name(&name);
            // SAFETY: gettid cannot fail.
            tid.store(unsafe { libc::gettid() } as u32, Relaxed);
            while !stop.load(Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    thread::sleep(Duration::from_millis(300));
    let t = tid.load(Relaxed).to_string();
    let (status, out, err) = run_bin(&["--tid", &t, "--no-tui", "--json", "--duration", "2s"], Duration::from_secs(30));
    stop.store(true, Relaxed);
    busy.join().unwrap();
    assert!(status.success(), "{err}");
    let line = format!("passive: {name}[{t}] is running on CPU {cpu} (read from /proc at attach)");
    assert!(err.contains(&line), "the start lines do not say it was found running: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    let threads = v["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "{}", v["threads"]);
    assert_eq!(threads[0]["found"], "running_at_attach", "{}", threads[0]);
    // Watched from the start: its runnable time covers most of the run.
    let runnable = threads[0]["runnable_ns"].as_u64().unwrap();
    assert!(runnable >= 1_500_000_000, "runnable {runnable} ns of a 2 s run: {}", threads[0]);
}
