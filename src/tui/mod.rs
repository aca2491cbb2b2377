//! The live screen (`jitterwatch --cpus 6,7`): draws the snapshots the
//! collector sends, and sends it the user's reset. Runs on the calling
//! thread (monitor/mod.rs's run), which startup.rs has pinned to the
//! unwatched CPUs; the collector never waits on it (it drops a frame the
//! screen has not taken).

mod app;
mod detail;
mod fmt;
#[cfg(test)]
mod glance_tests;
#[cfg(test)]
mod hint_tests;
#[cfg(test)]
mod key_tests;
mod keymap;
mod keyreader;
mod overlay;
mod panes;
mod render;
// The README's picture of this screen (cargo xtask screenshots).
pub(crate) mod screenshot;
#[cfg(test)]
mod sender_tests;
mod senders;
mod side;
mod sysinfo;
mod table;
mod terminal;
#[cfg(test)]
mod tests;
mod theme;
mod threads;

use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::collector::Command;
use crate::doctor::Report;
use crate::lifecycle;
use crate::snapshot::Snapshot;

use app::{Action, App};
use sysinfo::SysInfo;

/// About ten frames a second.
const FRAME: Duration = Duration::from_millis(100);
/// No new aggregates for this long: the footer says so.
const STALE: Duration = Duration::from_secs(2);

/// Colour unless NO_COLOR is set to anything non-empty (no-color.org).
pub fn color_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Runs the live screen until the user quits (q, Ctrl-C), a signal or a
/// panic asks everything to stop, or `duration` has passed. `origins`:
/// senders are traced (not `--no-origins`), for the by-sender view to say
/// why it is empty; `found`: the watched threads found at start (passive
/// mode's), as (tid, `comm[tid]`).
pub fn run(
    snapshots: Receiver<Snapshot>,
    commands: Sender<Command>,
    cpus: &[usize],
    duration: Option<Duration>,
    audit: &Report,
    origins: bool,
    found: Vec<(u32, String)>,
) -> Result<()> {
    let started = Instant::now();
    let info = SysInfo::read(Path::new("/"), cpus);
    let mut app = App::new(info, Snapshot::empty(cpus), color_wanted());
    app.audit = Some(audit.clone());
    app.origins = origins;
    app.found = found;
    let mut keys = keyreader::Keys::open();
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
                keyreader::Input::Timeout
            }
        };
        match input {
            keyreader::Input::Keys(ks) => {
                for k in ks {
                    let Some(a) = keymap::action(k, app.overlay_open()) else { continue };
                    match a {
                        Action::Quit => {
                            lifecycle::request_stop();
                            return Ok(());
                        }
                        // Kept where the aggregates are: the next snapshot starts afresh.
                        Action::Reset => {
                            let _ = commands.send(Command::Reset);
                        }
                        _ => {}
                    }
                    app.apply(a);
                    dirty = true;
                }
                continue;
            }
            keyreader::Input::HangUp => {
                // Nobody left to watch: stop the run as SIGHUP would.
                lifecycle::request_stop();
                return Ok(());
            }
            keyreader::Input::Timeout if Instant::now() < next_frame => continue,
            keyreader::Input::Timeout => {}
        }
        next_frame = (next_frame + FRAME).max(Instant::now());
        if app.paused {
            // Frozen on purpose: not a stale view.
            last_change = Instant::now();
            continue;
        }
        // The latest of what arrived since the last frame.
        if let Some(s) = snapshots.try_iter().last() {
            app.update(s);
            last_change = Instant::now();
            dirty = true;
        }
        let stale = last_change.elapsed() >= STALE;
        dirty |= stale != app.stale;
        app.stale = stale;
    }
}
