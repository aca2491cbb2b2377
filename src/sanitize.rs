//! Names from the kernel are untrusted: any process can name itself with
//! terminal escape sequences, bidi overrides or bytes that are not UTF-8.
//! Everything that reaches a terminal or a file goes through `visible`,
//! which writes such characters as escapes; a literal backslash is
//! doubled, so a name spelled `\x1b[2J` never looks like a real escape.

use std::borrow::Cow;
use std::fmt::Write as _;

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Characters that must never be written raw: control characters, and
/// Unicode format characters (category Cf: bidi overrides such as U+202E,
/// zero-width joiners and marks), which reorder or hide text.
fn is_hostile(c: char) -> bool {
    // ASCII has no format characters: its controls are the whole test, and
    // the category table's search (60% of `report`'s time on 10⁶ rows) is
    // left for the rest.
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control() || c.general_category() == GeneralCategory::Format
}

fn needs_escape(c: char) -> bool {
    c == '\\' || is_hostile(c)
}

fn push_escaped(c: char, out: &mut String) {
    match c {
        '\\' => out.push_str("\\\\"),
        c if is_hostile(c) && (c as u32) <= 0xff => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if is_hostile(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// The string with backslashes doubled and control and format characters
/// written visibly. Borrowed when there is nothing to escape, which is
/// the common case.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    s.chars().for_each(|c| push_escaped(c, &mut out));
    Cow::Owned(out)
}

/// A guard for text that was built from escaped parts: hostile characters
/// that slipped in are escaped, but backslashes are left alone, so text
/// already made `visible` comes out unchanged (`visible` twice would show
/// `\\x1b` for a name's `\x1b`).
pub fn guard(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_hostile) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    s.chars().for_each(|c| if is_hostile(c) { push_escaped(c, &mut out) } else { out.push(c) });
    Cow::Owned(out)
}

/// Bytes from the kernel (a comm, an IRQ action name), escaped as
/// `visible` does; bytes that are not UTF-8 are kept as `\xff`, not
/// replaced, so two names that differ only there stay apart. A NUL ends
/// the name (C strings).
pub fn push_visible_bytes(raw: &[u8], out: &mut String) {
    let raw = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
    for chunk in raw.utf8_chunks() {
        chunk.valid().chars().for_each(|c| push_escaped(c, out));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

pub fn visible_bytes(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    push_visible_bytes(raw, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_keeps_escaped_text_and_catches_raw() {
        let once = visible("a\x1b\\b\u{202e}").into_owned();
        assert_eq!(guard(&once), once);
        assert_eq!(guard("ok \\x1b\x1b"), "ok \\x1b\\x1b");
    }

    /// The ASCII shortcut decides as the category table does.
    #[test]
    fn ascii_is_judged_as_the_table_judges_it() {
        for c in (0u8..=0x7f).map(char::from) {
            assert_eq!(is_hostile(c), c.is_control() || c.general_category() == GeneralCategory::Format, "{c:?}");
        }
        assert!(is_hostile('\u{202e}') && is_hostile('\u{85}') && !is_hostile('é'));
    }

    #[test]
    fn plain_names_are_borrowed() {
        assert!(matches!(visible("kworker/1:0"), Cow::Borrowed(_)));
    }

    #[test]
    fn escapes_are_written_visibly() {
        assert_eq!(visible("a\x1b[31mb\n\x7f"), "a\\x1b[31mb\\x0a\\x7f");
        assert_eq!(visible("x\u{202e}y\u{200b}z\u{2066}\u{feff}"), "x\\u{202e}y\\u{200b}z\\u{2066}\\u{feff}");
        // Not Cf: accents and CJK stay as they are.
        assert_eq!(visible("café 日本"), "café 日本");
    }

    #[test]
    fn a_literal_escape_sequence_differs_from_a_real_one() {
        assert_eq!(visible("\\x1b[2J"), "\\\\x1b[2J");
        assert_ne!(visible("\\x1b[2J"), visible("\x1b[2J"));
    }

    #[test]
    fn bytes_keep_what_is_not_utf8() {
        assert_eq!(visible_bytes(b"bash\0junk"), "bash");
        assert_eq!(visible_bytes(b"\xffab\xe2\x80\xaez"), "\\xffab\\u{202e}z");
        assert_eq!(visible_bytes(b"a\\b"), "a\\\\b");
        assert_eq!(visible_bytes(b"full"), "full");
    }
}
