//! Passive mode's watched-threads pane, in the place of the probe's loop
//! gaps: every watched thread, values whole, the least telling columns
//! gone first where the pane is narrow.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Row, Table, Widget};

use super::app::{App, Pane};
use super::fmt;
use super::table::{cut, right};
use super::theme::Theme;

/// The watched threads' columns besides the name: (header, what it says).
/// `in-sys`: softirqs its own system calls ran (its own work, not lost).
/// `ran`, `run_delay`: its time on a CPU and on a runqueue as the kernel
/// books them (schedstat's two fields, read at each switch), beside what
/// it lost.
const THREAD_HEADS: [&str; 9] = ["hiccups", "int/pre/wk", "p99", "max", "lost", "migr", "in-sys", "ran", "run_delay"];
/// Which columns go, in this order, where the pane is too narrow for all:
/// the kernel's books, its own softirqs, migrations, the split by kind,
/// p99, max. The count and the time lost stay.
const THREAD_DROPS: [usize; 7] = [8, 7, 6, 5, 1, 2, 3];
/// The widest a thread's name gets its whole room for before a column
/// goes (a comm holds 15 bytes: `comm[tid]` takes at most 24).
const THREAD_NAME_MAX: usize = 24;

/// The room the watched threads' names get: the widest, up to [`THREAD_NAME_MAX`].
fn thread_name_w(cells: &[(String, [String; 9])]) -> usize {
    cells.iter().map(|c| c.0.chars().count()).max().unwrap_or(0).clamp("thread".len(), THREAD_NAME_MAX)
}

/// Each watched thread's name and figures, as the pane writes them.
fn thread_cells(app: &App) -> Vec<(String, [String; 9])> {
    app.watched()
        .into_iter()
        .map(|(_, name, t)| {
            let dash = || "-".to_string();
            let vals = match t {
                Some(t) => {
                    let [i, p, w] = t.by_kind.map(fmt::count);
                    let some = |ns: u64| if t.hiccups == 0 { dash() } else { fmt::dur(ns) };
                    [
                        fmt::count(t.hiccups),
                        format!("{i}/{p}/{w}"),
                        some(t.p99_ns),
                        some(t.max_ns),
                        t.lost_pct.map_or_else(dash, fmt::pct),
                        fmt::count(t.migrations),
                        fmt::count(t.in_syscall),
                        fmt::dur(t.ran_ns),
                        fmt::dur(t.run_delay_ns),
                    ]
                }
                // Found at start, not seen on a watched CPU since.
                None => ["0".into(), dash(), dash(), dash(), dash(), dash(), dash(), dash(), dash()],
            };
            (name.to_string(), vals)
        })
        .collect()
}

/// The columns that fit in `width` (inside the borders), each as wide as
/// its widest value: every value whole, the least telling columns gone
/// first. (column, width), in order.
fn thread_columns(cells: &[(String, [String; 9])], width: usize) -> Vec<(usize, usize)> {
    let w = |i: usize| cells.iter().map(|c| c.1[i].chars().count()).chain([THREAD_HEADS[i].chars().count()]).max().unwrap_or(0);
    let mut cols: Vec<(usize, usize)> = (0..THREAD_HEADS.len()).map(|i| (i, w(i))).collect();
    let name = thread_name_w(cells);
    let need = |cols: &[(usize, usize)]| name + cols.iter().map(|c| c.1 + 1).sum::<usize>();
    for drop in THREAD_DROPS {
        if need(&cols) <= width {
            break;
        }
        cols.retain(|c| c.0 != drop);
    }
    cols
}

/// The narrowest the watched threads' pane is worth drawing: a name, the
/// count and the time lost, whole.
pub(super) fn min_width(app: &App) -> u16 {
    width(app, 0)
}

/// The widest it is worth: every column.
pub(super) fn max_width(app: &App) -> u16 {
    width(app, usize::MAX)
}

/// The pane's width, borders included, with the columns that fit in `room`.
fn width(app: &App, room: usize) -> u16 {
    let cells = thread_cells(app);
    let name = thread_name_w(&cells);
    (name + thread_columns(&cells, room).iter().map(|c| c.1 + 1).sum::<usize>() + 2) as u16
}

/// Passive mode's per-thread view, in the place of the probe's loop gaps:
/// every watched thread, values whole, the time lost labelled with what it
/// is a share of.
pub fn pane(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let room = area.width.saturating_sub(2) as usize;
    let title =
        [" Watched threads · lost: % of its runnable time ", " Watched threads · lost: % of runnable ", " Threads · lost: % of runnable "]
            .into_iter()
            .find(|t| t.chars().count() <= room)
            .unwrap_or(" Threads ");
    let block = th.block(title.into(), app.focus == Pane::Histogram, area.width);
    let inner = block.inner(area);
    block.render(area, buf);
    let cells = thread_cells(app);
    let cols = thread_columns(&cells, inner.width as usize);
    let name_w = (inner.width as usize).saturating_sub(cols.iter().map(|c| c.1 + 1).sum());
    let rows = cells.into_iter().map(|(name, vals)| {
        let mut row = vec![Cell::from(cut(Line::raw(name), name_w))];
        row.extend(cols.iter().map(|&(i, _)| right(vals[i].clone())));
        Row::new(row)
    });
    let mut widths = vec![Constraint::Fill(1)];
    widths.extend(cols.iter().map(|c| Constraint::Length(c.1 as u16)));
    let mut header: Vec<Cell> = vec![Cell::from("thread")];
    header.extend(cols.iter().map(|&(i, _)| right(THREAD_HEADS[i].to_string())));
    Table::new(rows, widths).header(Row::new(header).style(th.head())).column_spacing(1).render(inner, buf);
}

/// The headers of the watched threads' columns that fit in `width`.
#[cfg(test)]
pub(super) fn thread_columns_for_test(app: &App, width: usize) -> Vec<&'static str> {
    thread_columns(&thread_cells(app), width).into_iter().map(|c| THREAD_HEADS[c.0]).collect()
}
