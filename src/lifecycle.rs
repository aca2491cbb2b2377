//! Process-wide stop flags, set by signals, the UI, the duration, or a panic
//! anywhere, and read by every loop. Statics, because a signal handler and a
//! panic hook can reach nothing else.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The user (or a signal, or a panic) asked jitterwatch to stop.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// The probes must leave their loops (set after STOP, and on every error path).
pub static PROBES_STOP: AtomicBool = AtomicBool::new(false);

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGINT, SIGTERM and SIGHUP ask for an orderly stop: the CSV is flushed,
/// the links are dropped and the terminal restored by the normal exit path.
pub fn install_signal_handlers() -> std::io::Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is signal-safe.
        unsafe { signal_hook::low_level::register(sig, || STOP.store(true, Ordering::Relaxed))? };
    }
    Ok(())
}

/// A panic on any thread stops everything (no probe left spinning), then
/// the previous hook (which may restore the terminal) reports it.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PROBES_STOP.store(true, Ordering::Relaxed);
        STOP.store(true, Ordering::Relaxed);
        previous(info);
    }));
}

static MAIN_START: AtomicU64 = AtomicU64::new(0);

/// Notes when main() began (CLOCK_MONOTONIC), for the start-up figures.
pub fn mark_main_start() {
    MAIN_START.store(crate::probe::now_ns(), Ordering::Relaxed);
}

pub fn main_start_ns() -> u64 {
    MAIN_START.load(Ordering::Relaxed)
}
