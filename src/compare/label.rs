//! A run's label as every view shows it: escaped as names are, and at most
//! `MAX` characters. The table's columns are as wide as their labels (a
//! width past 65535 panicked in the formatter) and the chart's legend and
//! axis hold a few words, not a page.

use crate::sanitize::visible;

/// Characters a label shows at most: a host, a time and what was tuned
/// fit (`db-17 2025-11-26T03:15 isolcpus+nohz_full`), and four runs side
/// by side stay under 300 columns.
pub const MAX: usize = 64;

/// `raw` escaped, and cut to `MAX` characters with `…` last where longer;
/// never inside an escape (a half `\x1` would read as something else).
pub fn clamp(raw: &str) -> String {
    let shown = visible(raw);
    if shown.chars().count() <= MAX {
        return shown.into_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    let mut one = [0u8; 4];
    for c in raw.chars() {
        let e = visible(c.encode_utf8(&mut one));
        let n = e.chars().count();
        if used + n > MAX - 1 {
            break;
        }
        out.push_str(&e);
        used += n;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels_are_escaped_long_ones_cut_between_escapes() {
        assert_eq!(clamp("tuned"), "tuned");
        assert_eq!(clamp("a\x1bb"), "a\\x1bb");
        let long = "W".repeat(70_000);
        let c = clamp(&long);
        assert_eq!(c.chars().count(), MAX);
        assert!(c.ends_with("W…"));
        // 61 characters, then an escape that does not fit whole.
        let c = clamp(&format!("{}\x1b{}", "a".repeat(61), "b".repeat(10)));
        assert_eq!(c, format!("{}…", "a".repeat(61)));
        assert_eq!(clamp(&"é".repeat(64)), "é".repeat(64), "characters, not bytes");
    }
}
