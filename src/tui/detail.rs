//! The stall overlay (Enter): the recent-stalls pane's selected stall in
//! full, its causes one a line, their origins, and with `--stacks-above`
//! the kernel stack of its largest cause, where that task was as it left
//! the CPU.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::app::App;
use super::fmt;
use super::theme::Theme;
use crate::sanitize::visible;

/// Causes and origins listed at most: the stack below them must fit.
const CAUSES: usize = 8;
const ORIGINS: usize = 3;

/// Draws the overlay over `area`, or nothing when no stall is selected.
pub fn render(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let Some(h) = app.selected_stall() else { return };
    let now = app.view().now_ns;
    let mut lines = vec![Line::styled(
        format!("{} on cpu {}, {} ago ({})", fmt::dur(h.gap), h.cpu, fmt::age(now.saturating_sub(h.t0)), h.source.as_str()),
        th.head(),
    )];
    if let Some(v) = &h.victim {
        lines.push(Line::raw(format!("  taken from {}", v.name())));
    }
    for (cause, ns) in h.all_causes().take(CAUSES) {
        lines.push(Line::from(vec![
            Span::raw(format!("  {:>8}  ", fmt::dur(ns))),
            // Names are escaped already, as every view shows them
            // (`unexplained`, which has none, without its colon).
            Span::styled(cause.label().trim_end_matches(':').to_string(), th.kind(cause.kind())),
        ]));
    }
    let rest: Vec<u64> = h.all_causes().skip(CAUSES).map(|(_, ns)| ns).collect();
    if !rest.is_empty() {
        lines.push(Line::styled(format!("  {:>8}  and {} more causes", fmt::dur(rest.iter().sum()), rest.len()), th.dim()));
    }
    for (cause, o) in h.origins.iter().take(ORIGINS) {
        let mut s = String::new();
        crate::export::push_origin(o, &mut s);
        lines.push(Line::styled(format!("  {} from {s}", cause.label()), th.dim()));
    }
    match &h.stack {
        Some(st) => {
            let what = match st.cause.kind() {
                crate::cause::Kind::Irq => format!("Functions of {} (handler, threaded handler)", st.cause.label()),
                _ => format!("Kernel stack of {} as it left the CPU", st.cause.label()),
            };
            lines.push(Line::styled(what, th.head()));
            for f in st.frames.iter() {
                lines.push(Line::raw(format!("  {}", visible(f))));
            }
        }
        None => {
            lines.push(Line::styled("No kernel stack.", th.dim()));
            lines.push(Line::styled(
                "  --stacks-above DUR takes one when the largest cause is a task that ran DUR in one go, or an IRQ.",
                th.dim(),
            ));
        }
    }
    super::overlay::render(app, th, area, buf, lines, 100, "Stall (Enter or Esc closes)");
}
