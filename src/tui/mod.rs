//! The live screen (`jitterwatch --cpus 6,7`): a view over the aggregates
//! the collector publishes. Runs on the calling thread, which monitor.rs
//! has pinned to the unwatched CPUs; it only ever holds the publish lock
//! for a clone, and the collector only try-locks it, so neither the
//! consumer nor the probes wait on the screen.

mod app;
mod fmt;
mod input;
mod keys;
mod panes;
mod render;
mod sysinfo;
mod terminal;
#[cfg(test)]
mod tests;
mod view;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::lifecycle;
use crate::stats::Stats;

pub use app::{Action, App, Pane, Sort};
pub use sysinfo::SysInfo;

/// About ten frames a second.
const FRAME: Duration = Duration::from_millis(100);
/// No new aggregates for this long: the footer says so.
const STALE: Duration = Duration::from_secs(2);

/// Colour unless NO_COLOR is set to anything non-empty (no-color.org).
pub fn color_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A clone of the published aggregates, unless they are the ones `have_ns`
/// already shows. The lock is held for the clone only.
fn snapshot(publish: &Mutex<Stats>, have_ns: Option<u64>) -> Option<Stats> {
    let g = publish.lock().unwrap_or_else(|e| e.into_inner());
    (Some(g.now_ns) != have_ns).then(|| g.clone())
}

/// Runs the live screen until the user quits (q, Ctrl-C), a signal or a
/// panic asks everything to stop, or `duration` has passed.
pub fn run(publish: &Arc<Mutex<Stats>>, cpus: &[usize], duration: Option<Duration>) -> Result<()> {
    let started = Instant::now();
    let info = SysInfo::read(Path::new("/"), cpus);
    let first = snapshot(publish, None).unwrap_or_else(|| Stats::new(cpus, 0));
    let mut app = App::new(info, first, color_wanted());
    app.audit = Some(crate::doctor::audit(Path::new("/"), cpus));
    let mut keys = keys::Keys::open();
    let mut term = terminal::Guard::enter()?;
    let mut last_change = Instant::now();
    let mut next_frame = Instant::now();
    let mut dirty = true;
    loop {
        if lifecycle::stop_requested() || duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(());
        }
        dirty |= term.resized();
        if dirty {
            term.draw(&app)?;
            dirty = false;
        }
        let wait = next_frame.saturating_duration_since(Instant::now());
        let input = match keys.as_mut() {
            Some(k) => k.wait(wait)?,
            None => {
                std::thread::sleep(wait);
                keys::Input::Timeout
            }
        };
        match input {
            keys::Input::Keys(ks) => {
                for k in ks {
                    let Some(a) = input::action(k, app.help) else { continue };
                    if app.apply(a) {
                        lifecycle::request_stop();
                        return Ok(());
                    }
                    dirty = true;
                }
                continue;
            }
            keys::Input::HangUp => {
                // Nobody left to watch: stop the run as SIGHUP would.
                lifecycle::request_stop();
                return Ok(());
            }
            keys::Input::Timeout if Instant::now() < next_frame => continue,
            keys::Input::Timeout => {}
        }
        next_frame = (next_frame + FRAME).max(Instant::now());
        if app.paused {
            // Frozen on purpose: not a stale view.
            last_change = Instant::now();
            continue;
        }
        if let Some(s) = snapshot(publish, Some(app.snapshot_ns())) {
            app.update(s);
            last_change = Instant::now();
            dirty = true;
        }
        let stale = last_change.elapsed() >= STALE;
        dirty |= stale != app.stale;
        app.stale = stale;
    }
}
