//! Names from the kernel are untrusted: any process can name itself with
//! terminal escape sequences. Everything that reaches a terminal or a file
//! goes through `visible`, which writes control characters as `\xNN`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for characters that must never be written raw.
fn is_hostile(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The string with control (and bidi-override) characters written visibly.
/// Borrowed when there is nothing to escape, which is the common case.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_hostile) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_hostile(c) {
            let n = c as u32;
            if n <= 0xff {
                let _ = write!(out, "\\x{n:02x}");
            } else {
                let _ = write!(out, "\\u{{{n:x}}}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A NUL-terminated C char array from the kernel, as text (invalid UTF-8
/// bytes become U+FFFD), not yet escaped.
pub fn c_str(raw: &[u8]) -> Cow<'_, str> {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_borrowed() {
        assert!(matches!(visible("kworker/1:0"), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_are_written_visibly() {
        assert_eq!(visible("a\x1b[31mb\n\x7f"), "a\\x1b[31mb\\x0a\\x7f");
        assert_eq!(visible("x\u{202e}y"), "x\\u{202e}y");
    }

    #[test]
    fn c_str_stops_at_nul_and_survives_bad_utf8() {
        assert_eq!(c_str(b"bash\0junk"), "bash");
        assert_eq!(c_str(b"\xffab"), "\u{fffd}ab");
        assert_eq!(c_str(b"full"), "full");
    }
}
