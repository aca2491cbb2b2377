//! What every table pane shares: right-aligned cells, a list's window in
//! its title, the room a table takes besides its names, names cut short.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Cell;

pub(super) fn right(s: String) -> Cell<'static> {
    Cell::from(Line::from(s).right_aligned())
}

pub(super) fn right_styled(s: String, st: Style) -> Cell<'static> {
    Cell::from(Line::styled(s, st).right_aligned())
}

/// `[first-last of n]` when a list does not fit.
pub(super) fn window(first: usize, shown: usize, n: usize) -> String {
    if shown >= n {
        String::new()
    } else {
        format!(" [{}-{} of {n}] ", first + 1, first + shown)
    }
}

/// What a bordered table with one name column besides `cols` takes
/// without the names: the columns, a space between each two, the borders.
pub(super) const fn fixed(cols: &[u16]) -> u16 {
    let (mut sum, mut i) = (cols.len() as u16 + 2, 0);
    while i < cols.len() {
        sum += cols[i];
        i += 1;
    }
    sum
}

/// `line` cut to `w` columns, marked `…` where cut: a name cut short says so.
pub(super) fn cut(line: Line<'static>, w: usize) -> Line<'static> {
    if line.width() <= w || w == 0 {
        return line;
    }
    let mut left = w - 1;
    let mut spans = Vec::new();
    for sp in line.spans {
        let mut kept = String::new();
        for ch in sp.content.chars() {
            let cw = Span::raw(ch.to_string()).width();
            if cw > left {
                left = 0;
                break;
            }
            left -= cw;
            kept.push(ch);
        }
        let done = left == 0 || kept.len() < sp.content.len();
        spans.push(Span::styled(kept, sp.style));
        if done {
            break;
        }
    }
    spans.push(Span::raw("…"));
    Line::from(spans)
}

/// `text` broken at spaces into lines of at most `w` columns, a word
/// longer than a line broken where the line ends: the commands hints give
/// (`intel_idle.max_cstate=0`) are copied from the screen, so they wrap,
/// never cut.
pub(super) fn wrap_words(text: &str, w: usize) -> Vec<String> {
    let w = w.max(1);
    let width = |s: &str| Span::raw(s).width();
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|x| !x.is_empty()) {
        let mut word = word.to_string();
        while width(&word) > w {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            let mut head = String::new();
            let mut rest = word.chars();
            for ch in rest.by_ref() {
                if width(&head) + Span::raw(ch.to_string()).width() > w {
                    word = std::iter::once(ch).chain(rest).collect();
                    break;
                }
                head.push(ch);
            }
            lines.push(head);
        }
        if !line.is_empty() && width(&line) + 1 + width(&word) > w {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The inside of a bordered pane.
pub(super) fn table_inner(area: Rect) -> Rect {
    Rect { x: area.x + 1, y: area.y + 1, width: area.width.saturating_sub(2), height: area.height.saturating_sub(2) }
}

#[cfg(test)]
mod wrap_tests {
    use super::wrap_words;

    #[test]
    fn words_wrap_whole_and_a_long_one_breaks_at_the_line() {
        assert_eq!(wrap_words("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(wrap_words("intel_idle.max_cstate=0 x", 10), ["intel_idle", ".max_cstat", "e=0 x"]);
        assert_eq!(wrap_words("", 5), [""]);
        assert!(wrap_words("one two three four", 9).iter().all(|l| l.chars().count() <= 9));
    }
}
