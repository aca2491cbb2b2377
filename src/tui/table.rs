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

/// The inside of a bordered pane.
pub(super) fn table_inner(area: Rect) -> Rect {
    Rect { x: area.x + 1, y: area.y + 1, width: area.width.saturating_sub(2), height: area.height.saturating_sub(2) }
}
