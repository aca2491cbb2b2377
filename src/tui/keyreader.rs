//! Keys read straight from the terminal instead of through crossterm's
//! event reader: once the terminal is gone (ssh dropped, window closed,
//! tmux session killed) crossterm (0.29 as 0.28) spins inside `event::poll`
//! forever, timeout or not (crossterm-rs/crossterm#793, still open), and
//! jitterwatch would never get back to stopping its probes. Here a hang-up
//! ends the run. Resizes are noticed by the loop comparing sizes each frame.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub enum Input {
    Keys(Vec<KeyEvent>),
    Timeout,
    /// The terminal went away.
    HangUp,
}

pub struct Keys {
    fd: RawFd,
    _tty: Option<File>,
}

impl Keys {
    /// Standard input if it is the terminal, else /dev/tty (as crossterm
    /// does, so raw mode applies to what is read); None without either.
    pub fn open() -> Option<Self> {
        // SAFETY: isatty on fd 0 has no preconditions.
        if unsafe { libc::isatty(0) } == 1 {
            return Some(Self { fd: 0, _tty: None });
        }
        let tty = File::open("/dev/tty").ok()?;
        Some(Self { fd: tty.as_raw_fd(), _tty: Some(tty) })
    }

    /// Waits up to `timeout` for keys.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Input> {
        let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(Input::Timeout) } else { Err(e) };
        }
        if rc == 0 {
            return Ok(Input::Timeout);
        }
        if p.revents & libc::POLLIN == 0 {
            // POLLHUP, POLLERR or POLLNVAL with nothing to read.
            return Ok(Input::HangUp);
        }
        let mut buf = [0u8; 256];
        // SAFETY: reading into a buffer of the length given.
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            return Ok(Input::Keys(decode(&buf[..n as usize])));
        }
        let e = io::Error::last_os_error();
        Ok(match e.kind() {
            _ if n == 0 => Input::HangUp,
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Input::Timeout,
            // EIO is what a hung-up terminal says.
            _ => Input::HangUp,
        })
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Bytes typed in raw mode, as keys: printable ASCII, control keys, and
/// the escape sequences of arrows, Home/End, PgUp/PgDn, Shift-Tab and F1.
/// Anything else is skipped.
pub fn decode(bytes: &[u8]) -> Vec<KeyEvent> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            0x1b if i < bytes.len() && matches!(bytes[i], b'[' | b'O') => {
                let ss3 = bytes[i] == b'O';
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && (0x20..=0x3f).contains(&bytes[end]) {
                    end += 1;
                }
                let Some(&fin) = bytes.get(end) else { break };
                i = end + 1;
                let code = match (fin, &bytes[start..end]) {
                    (b'A', _) => KeyCode::Up,
                    (b'B', _) => KeyCode::Down,
                    (b'C', _) => KeyCode::Right,
                    (b'D', _) => KeyCode::Left,
                    (b'H', _) | (b'~', b"1" | b"7") => KeyCode::Home,
                    (b'F', _) | (b'~', b"4" | b"8") => KeyCode::End,
                    (b'~', b"5") => KeyCode::PageUp,
                    (b'~', b"6") => KeyCode::PageDown,
                    (b'Z', _) => KeyCode::BackTab,
                    (b'P', _) if ss3 => KeyCode::F(1),
                    _ => continue,
                };
                out.push(key(code));
            }
            0x1b => out.push(key(KeyCode::Esc)),
            b'\t' => out.push(key(KeyCode::Tab)),
            b'\r' | b'\n' => out.push(key(KeyCode::Enter)),
            0x7f | 0x08 => out.push(key(KeyCode::Backspace)),
            0x01..=0x1a => out.push(KeyEvent::new(KeyCode::Char((b'a' + b - 1) as char), KeyModifiers::CONTROL)),
            0x20..=0x7e => out.push(key(KeyCode::Char(b as char))),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_keys_and_sequences() {
        let codes = |b: &[u8]| decode(b).into_iter().map(|k| (k.code, k.modifiers)).collect::<Vec<_>>();
        let none = KeyModifiers::NONE;
        assert_eq!(
            codes(b"q s\t?"),
            vec![
                (KeyCode::Char('q'), none),
                (KeyCode::Char(' '), none),
                (KeyCode::Char('s'), none),
                (KeyCode::Tab, none),
                (KeyCode::Char('?'), none)
            ]
        );
        assert_eq!(codes(b"\x03"), vec![(KeyCode::Char('c'), KeyModifiers::CONTROL)]);
        assert_eq!(
            codes(b"\x1b[A\x1b[B\x1b[5~\x1b[6~\x1b[H\x1bOH\x1b[1~\x1b[Z\x1bOP"),
            [
                KeyCode::Up,
                KeyCode::Down,
                KeyCode::PageUp,
                KeyCode::PageDown,
                KeyCode::Home,
                KeyCode::Home,
                KeyCode::Home,
                KeyCode::BackTab,
                KeyCode::F(1)
            ]
            .map(|c| (c, none))
        );
        assert_eq!(codes(b"\x1b"), vec![(KeyCode::Esc, none)]);
        // Unknown sequences and non-ASCII are skipped; a cut sequence ends the read.
        assert_eq!(codes(b"\x1b[15;2~r\xc3\xa9"), vec![(KeyCode::Char('r'), none)]);
        assert!(codes(b"\x1b[1").is_empty());
    }
}
