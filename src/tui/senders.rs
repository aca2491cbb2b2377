//! The Culprits pane by sender (key o): who sent the IPIs, queued the work
//! and woke the tasks that ran on the watched CPUs ("IPIs to CPU 6 by
//! sender"), from the snapshot's per-CPU sender tables. Sender names come
//! escaped (`SenderKey::name`).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Widget, Wrap};

use crate::cause::Kind;

use super::app::{App, Pane, Sort};
use super::fmt;
use super::table::{cut, fixed, right, table_inner, window};
use super::theme::Theme;

/// The columns other than the sender's name (CPU, kind, count, total,
/// share); with the spaces and borders, what the pane takes besides names.
const COLS: [u16; 5] = [4, 7, 6, 8, 7];
pub const FIXED: u16 = fixed(&COLS);

/// A sender's kind of cause as the pane names it: a task's is a wake-up.
fn kind_label(k: Kind) -> &'static str {
    match k {
        Kind::Task => "wake-up",
        k => k.as_str(),
    }
}

/// Why the table is empty, truthfully: origins off, the kernel lacking
/// their tracepoints, or simply none seen yet.
fn empty_line(app: &App) -> String {
    if !app.origins {
        return "no sender: --no-origins was given (senders are not traced)".into();
    }
    let missing: Vec<&str> =
        app.view().counters.missing_tracepoints.iter().copied().filter(|tp| crate::bpf::is_origin_tracepoint(tp)).collect();
    let cpu = app.cpu_filter.map_or("these CPUs".into(), |c| format!("CPU {c}"));
    if missing.is_empty() {
        return format!("no sender seen yet: no IPI or work on {cpu} traced to its sender (wake-ups: --wake-origins)");
    }
    // The IPI send and csd_queue_cpu tracepoints came with Linux 6.3.
    let ipi = missing.iter().any(|tp| tp.starts_with("ipi_") || tp.starts_with("csd_"));
    format!(
        "no sender seen yet on {cpu}; this kernel lacks {}{}",
        missing.join(", "),
        if ipi { " (IPI senders need Linux ≥ 6.3)" } else { "" }
    )
}

pub fn pane(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let list = app.senders();
    let rows_fit = area.height.saturating_sub(3) as usize;
    let first = app.scroll(Pane::Culprits).min(list.len().saturating_sub(1));
    let shown = rows_fit.min(list.len() - first.min(list.len()));
    let cpu = app.cpu_filter.map_or("all".into(), |c| c.to_string());
    let rest = format!(" · sort {} (s) · cpu {cpu} (c) · by cause (o) {}", app.sort.label(), window(first, shown, list.len()));
    // The long title where it fits: it says which causes have a sender.
    let long = format!(" Culprits by sender (IPIs, work, wake-ups){rest}");
    let title = if long.chars().count() + 3 <= area.width as usize { long } else { format!(" Culprits by sender{rest}") };
    let block = th.block(title, app.focus == Pane::Culprits, area.width);
    let v = app.view();
    let mark = |s: Sort, h: &str| if app.sort == s { format!("{h}▼") } else { h.to_string() };
    let header = Row::new(vec![
        right("CPU".into()),
        Cell::from("kind"),
        Cell::from(if app.sort == Sort::Name { "sender▲" } else { "sender" }),
        right(mark(Sort::Count, "count")),
        right(mark(Sort::Total, "total")),
        right("share".into()),
    ])
    .style(th.head());
    let name_w = area.width.saturating_sub(FIXED) as usize;
    let rows = list.iter().skip(first).take(shown).map(|s| {
        let stolen = v.cpus.iter().find(|c| c.cpu == s.cpu).map_or(0, |c| c.stolen_ns);
        let share = if stolen == 0 { 0.0 } else { 100.0 * s.total_ns as f64 / stolen as f64 };
        Row::new(vec![
            right(s.cpu.to_string()),
            Cell::from(Span::styled(kind_label(s.kind), th.kind(s.kind))),
            // Escaped when the snapshot was made; guarded again, as every
            // name on screen must never carry a raw control character.
            Cell::from(cut(Line::raw(crate::sanitize::guard(&s.sender).into_owned()), name_w)),
            right(fmt::count(s.count)),
            right(fmt::dur(s.total_ns)),
            right(fmt::pct(share)),
        ])
    });
    let [c, k, rest @ ..] = COLS.map(Constraint::Length);
    let mut widths = vec![c, k, Constraint::Fill(1)];
    widths.extend(rest);
    let table = Table::new(rows, widths).header(header).column_spacing(1).block(block);
    let inner = table_inner(area);
    Widget::render(table, area, buf);
    if list.is_empty() && inner.height > 1 {
        // Wrapped: a kernel's list of missing tracepoints can be long.
        Paragraph::new(Line::styled(empty_line(app), th.dim()).centered())
            .wrap(Wrap { trim: true })
            .render(Rect { y: inner.y + 1, height: inner.height - 1, ..inner }, buf);
    }
}
