//! The one process-wide stop flag, set by signals, the screen, or a panic
//! on any thread, and read by the loops that wait (the screen, the
//! headless wait). A static, because a signal handler and a panic hook can
//! reach nothing else. The probes have their own flags, owned by the run
//! (probe::Probes), which stops them on every way out.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGINT, SIGTERM, SIGHUP and SIGQUIT (no core dump: the run is not
/// broken, the user wants it over) ask for an orderly stop: the CSV is flushed,
/// the links are dropped and the terminal restored by the normal exit path.
/// A SIGHUP ignored when jitterwatch started stays ignored: `nohup` says
/// the run must outlive the terminal (a service started over ssh would
/// otherwise end at logout, reporting success).
pub fn install_signal_handlers() -> std::io::Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP, signal_hook::consts::SIGQUIT] {
        if sig == signal_hook::consts::SIGHUP && ignored(sig) {
            continue;
        }
        // SAFETY: the handler only stores to an atomic, which is signal-safe.
        unsafe { signal_hook::low_level::register(sig, request_stop)? };
    }
    Ok(())
}

/// The signal's disposition is SIG_IGN (inherited across exec).
fn ignored(sig: i32) -> bool {
    // SAFETY: a zeroed sigaction is a valid out-parameter; nothing is changed.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// A panic on any thread asks the run to stop (the main thread then stops
/// the probes and restores the terminal), then the previous hook reports it.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        request_stop();
        previous(info);
    }));
}

static MAIN_START: AtomicU64 = AtomicU64::new(0);
static MAIN_START_REALTIME: AtomicU64 = AtomicU64::new(0);

/// Notes when main() began (CLOCK_MONOTONIC, for the start-up figures,
/// with CLOCK_REALTIME read together, for the summary's clocks).
pub fn mark_main_start() {
    let p = crate::clock::ClockPair::now();
    MAIN_START.store(p.monotonic_ns, Ordering::Relaxed);
    MAIN_START_REALTIME.store(p.realtime_ns, Ordering::Relaxed);
}

pub fn main_start_ns() -> u64 {
    MAIN_START.load(Ordering::Relaxed)
}

/// Both clocks as main() began.
pub fn main_start_clocks() -> crate::clock::ClockPair {
    crate::clock::ClockPair { monotonic_ns: main_start_ns(), realtime_ns: MAIN_START_REALTIME.load(Ordering::Relaxed) }
}
