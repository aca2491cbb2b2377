//! An overlay over the screen (the help, a stall in full): centred, its
//! lines wrapped, scrolled where they do not fit. Pure drawing.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph, Widget, Wrap};

use super::app::App;
use super::table;
use super::theme::Theme;

/// An overlay (help, a stall) of `lines` at most `max_w` wide, centred,
/// each line wrapped at spaces; where its rows do not fit, scrolled by
/// `app.overlay_scroll` (↑↓ PgUp PgDn, stopped at its last row) and its
/// title says which rows show.
pub(super) fn render(app: &App, th: Theme, area: Rect, buf: &mut Buffer, lines: Vec<Line<'static>>, max_w: u16, title: &str) {
    let w = area.width.saturating_sub(4).min(max_w);
    // Each line wrapped at spaces, as Paragraph's wrap does: its rows.
    let inner = w.saturating_sub(2) as usize;
    let rows: usize = lines.iter().map(|l| table::wrap_words(&l.to_string(), inner).len().max(1)).sum();
    let h = (rows as u16 + 2).min(area.height.saturating_sub(2));
    let fit = h.saturating_sub(2) as usize;
    let top = (app.overlay_scroll as usize).min(rows.saturating_sub(fit));
    let title =
        if rows > fit { format!(" {title} · rows {}–{} of {rows}, ↑↓ scroll ", top + 1, top + fit) } else { format!(" {title} ") };
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    Clear.render(r, buf);
    Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((top as u16, 0)).block(th.block(title, true, w)).render(r, buf);
}
