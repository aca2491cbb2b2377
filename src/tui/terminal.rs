//! The terminal, restored on every way out: the guard's Drop on return and
//! error, a panic hook (ahead of the one lifecycle.rs installed, which
//! stops the probes and prints the message on the restored screen), and
//! SIGTERM/SIGINT, which arrive as the stop flag and end the loop.
//!
//! Restoring is ratatui's own `try_restore` (raw mode off first, then the
//! main screen) plus showing the cursor. Entering is ours, not
//! `ratatui::init`: that one draws straight to a line-buffered stdout (many
//! writes per frame; we write each frame once, see [`FrameWriter`]), and
//! its panic hook stays installed for the life of the process, where ours
//! is taken down when the screen is, and a restore from another thread's
//! panic also stops this thread drawing on the main screen.

use std::io::{self, Write};
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{enable_raw_mode, EnterAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Size;
use ratatui::Terminal;

use super::app::App;

/// The screen is ours (raw mode, alternate screen) until restored.
static ACTIVE: AtomicBool = AtomicBool::new(false);

type Hook = Arc<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Collects a frame and writes it in one go on flush (ratatui flushes at
/// the end of each draw): one write per frame instead of one per KiB. A
/// frame cut short by a panic is dropped, never written after the restore.
#[derive(Default)]
pub struct FrameWriter {
    buf: Vec<u8>,
}

impl Write for FrameWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut out = io::stdout().lock();
        let r = out.write_all(&self.buf).and_then(|()| out.flush());
        self.buf.clear();
        r
    }
}

/// Gives the terminal back; safe to call more than once, from any thread.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = ratatui::try_restore();
        let _ = execute!(io::stdout(), Show);
    }
}

pub struct Guard {
    terminal: Terminal<CrosstermBackend<FrameWriter>>,
    previous_hook: Hook,
    size: Option<Size>,
}

impl Guard {
    pub fn enter() -> Result<Self> {
        let previous_hook: Hook = Arc::from(std::panic::take_hook());
        let chained = previous_hook.clone();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            chained(info);
        }));
        // From here on, whatever was changed is restored.
        ACTIVE.store(true, Ordering::SeqCst);
        let setup = || -> Result<Terminal<CrosstermBackend<FrameWriter>>> {
            enable_raw_mode().context("cannot put the terminal in raw mode")?;
            execute!(io::stdout(), EnterAlternateScreen, Hide).context("cannot switch to the alternate screen")?;
            let mut t = Terminal::new(CrosstermBackend::new(FrameWriter::default())).context("cannot open the terminal")?;
            t.clear()?;
            Ok(t)
        };
        match setup() {
            Ok(terminal) => Ok(Guard { terminal, previous_hook, size: None }),
            Err(e) => {
                restore();
                reinstate(previous_hook);
                Err(e)
            }
        }
    }

    /// The terminal changed size since the last call (drawing adapts by itself).
    pub fn resized(&mut self) -> bool {
        let now = self.terminal.size().ok();
        std::mem::replace(&mut self.size, now) != now
    }

    pub fn draw(&mut self, app: &App) -> Result<()> {
        if !ACTIVE.load(Ordering::SeqCst) {
            // A panic elsewhere restored the screen: draw no more on it.
            return Ok(());
        }
        self.terminal.draw(|f| f.render_widget(app, f.area())).context("drawing the screen")?;
        Ok(())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
        if !std::thread::panicking() {
            reinstate(self.previous_hook.clone());
        }
    }
}

/// Puts back the hook that was there before the screen was taken.
fn reinstate(previous: Hook) {
    std::panic::set_hook(Box::new(move |info| previous(info)));
}
