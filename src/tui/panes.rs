//! Three of the panes: CPU rows, culprits, recent worst stalls (the
//! fourth, the histogram, is side.rs). Figures are right-aligned; names
//! are escaped.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Widget};

use crate::cause::{CauseId, Kind, LOST, UNEXPLAINED, UNEXPLAINED_SHORT};
use crate::interval::{Hiccup, Method};
use crate::snapshot::Culprit;
use crate::stats::CpuFigures;

use super::app::{App, Pane, Sort};
use super::fmt;
pub use super::side::{histogram, side_max, side_min};
use super::table::{cut, fixed, right, right_styled, table_inner, window};
use super::theme::Theme;

/// Fixed CPU-row columns, before the sparkline.
const CPU_COLS: [u16; 8] = [4, 7, 6, 7, 7, 7, 7, 6];

/// The CPU pane's title in `width` columns: what its percentage is of,
/// and in passive mode how many threads are watched (every one, also those
/// not seen running yet) with as many of their names as fit.
fn cpus_title(app: &App, width: usize) -> String {
    let taken = app.view().method.taken();
    if app.view().method.has_probe() {
        return format!(" CPUs · {taken}: % of wall time ");
    }
    let watched = app.watched();
    let n = watched.len();
    let head = format!(" CPUs · {taken}: % of wall time ");
    let watching = format!("{head}· passive, watching {n} thread{}", if n == 1 { "" } else { "s" });
    let title = |shown: usize| {
        let names = watched.iter().take(shown).map(|w| w.1).collect::<Vec<_>>().join(", ");
        let more = if shown < n { format!(" +{} more", n - shown) } else { String::new() };
        format!("{watching}: {names}{more} ")
    };
    // The count always; names where they fit (the threads' pane lists them all).
    (1..=n.min(3)).rev().map(title).find(|t| t.chars().count() + 2 <= width).unwrap_or(watching + " ")
}

pub fn cpus(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let block = th.block(cpus_title(app, area.width as usize), app.focus == Pane::Cpus, area.width);
    let inner = block.inner(area);
    block.render(area, buf);
    let passive = app.view().method == Method::Passive;
    // Passive mode names a thread where the probe's floor goes.
    let mut cols = CPU_COLS;
    if passive {
        let widest = app.view().cpus.iter().map(|c| last_on(app, c.cpu, usize::MAX).width()).max().unwrap_or(0);
        cols[7] = (widest as u16).clamp(6, 28);
    }
    let fixed: u16 = cols.iter().sum::<u16>() + cols.len() as u16;
    let spark_w = inner.width.saturating_sub(fixed) as usize;
    // The wake-up probe's smallest latency stands where the spin probe's floor goes.
    let wake = app.view().method == Method::Wakeup;
    let heads = [
        "CPU",
        "hiccups",
        "/s",
        "p99",
        "p99.9",
        "max",
        app.view().method.taken(),
        if passive {
            "thread"
        } else if wake {
            "min"
        } else {
            "floor"
        },
    ];
    // Names are left-aligned: so is the thread column's head.
    let mut header: Vec<Cell> =
        heads.iter().enumerate().map(|(i, h)| if passive && i == 7 { Cell::from(h.to_string()) } else { right(h.to_string()) }).collect();
    let spark_head = if spark_w >= 36 { "worst gap of each second (log scale)" } else { "worst gap/s (log)" };
    header.push(Cell::from(spark_head.chars().take(spark_w).collect::<String>()));
    let now_sec = app.spark_now();
    let v = &app.view();
    let rows = v.cpus.iter().enumerate().map(|(i, c)| {
        let some = |ns: u64| if c.hiccups == 0 { "-".to_string() } else { fmt::dur(ns) };
        let chosen = app.cpu_filter == Some(c.cpu);
        let max_style = th.fg(match c.max_ns {
            0..=99_999 => Color::Reset,
            100_000..=999_999 => Color::Yellow,
            _ => Color::Red,
        });
        Row::new(vec![
            right(format!("{}{}", if chosen { "▶" } else { "" }, c.cpu)),
            right(fmt::count(c.hiccups)),
            right(fmt::rate(app.hiccups_per_sec(i))),
            right(some(c.p99_ns)),
            right(some(c.p999_ns)),
            right_styled(some(c.max_ns), max_style),
            right(fmt::pct(v.stolen_pct(c))),
            // Passive mode: the watched thread last on this CPU, not a floor.
            if passive {
                Cell::from(last_on(app, c.cpu, cols[7] as usize))
            } else {
                right(match c.counters.own.floor_ns() {
                    0 => "-".into(),
                    ns => fmt::dur(ns),
                })
            },
            Cell::from(Span::styled(sparkline(c, now_sec, spark_w), th.fg(Color::Yellow))),
        ])
        .style(if chosen { Style::new().add_modifier(Modifier::BOLD) } else { Style::new() })
    });
    let mut widths: Vec<Constraint> = cols.iter().map(|&w| Constraint::Length(w)).collect();
    widths.push(Constraint::Fill(1));
    Table::new(rows, widths).header(Row::new(header).style(th.head())).column_spacing(1).render(inner, buf);
}

/// Passive mode: the watched thread that last ran on `cpu` (the one that
/// lost the most), `+n` for the others, in `w` columns.
fn last_on(app: &App, cpu: u32, w: usize) -> Line<'static> {
    let mut on = app.view().threads.iter().filter(|t| t.last_cpu == Some(cpu));
    let Some(first) = on.next() else { return Line::raw("-") };
    let more = match on.count() {
        0 => String::new(),
        n => format!(" +{n}"),
    };
    let mut l = cut(Line::raw(first.name.clone()), w.saturating_sub(more.chars().count()));
    l.push_span(Span::raw(more));
    l
}

/// The worst gap of each of the last `width` seconds, newest at the right,
/// on a log scale from the threshold to the largest in view.
pub fn sparkline(c: &CpuFigures, now_sec: u64, width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let first = (now_sec + 1).saturating_sub(width as u64);
    let mut vals = vec![0u64; width];
    for &(s, w) in &c.worst_per_sec {
        if s >= first && s <= now_sec {
            vals[(s - first) as usize + width - (now_sec + 1 - first) as usize] = w;
        }
    }
    let base = c.counters.threshold_ns.max(1) as f64 / 2.0;
    let level = |w: u64| (w as f64 / base).log2().max(0.5);
    let top = vals.iter().copied().filter(|&w| w > 0).map(level).fold(1.0, f64::max);
    vals.iter().map(|&w| if w == 0 { ' ' } else { BARS[((level(w) / top * 8.0).ceil() as usize).clamp(1, 8) - 1] }).collect()
}

/// The Culprits table's columns other than the name (CPU, kind, count,
/// total, max, share, last), with the spaces between all eight columns
/// and the pane's two borders: what the pane takes besides the names.
const CULPRIT_COLS: [u16; 7] = [4, 11, 6, 8, 8, 7, 6];
const CULPRIT_FIXED: u16 = fixed(&CULPRIT_COLS);

/// The widest a culprit's name gets its whole room for: the loop-gap
/// histogram beside the pane gives way before a name up to this is cut.
pub const NAME_MAX: u16 = 40;

/// A culprit's name cell in `w` columns: the cause (unexplained time in
/// the long wording when `long`), and in passive mode whose time it took,
/// cut first where the room is short. With one thread watched, whose it
/// was says nothing (the CPUs pane names it): `whose` is false and no row
/// carries it (some rows did and others not, as their names left room).
fn culprit_name(s: &Culprit, th: Theme, long: bool, w: usize, whose: bool) -> Line<'static> {
    let name = match s.key.cause.kind() {
        Kind::Unexplained => Span::styled(if long { UNEXPLAINED } else { UNEXPLAINED_SHORT }, th.dim()),
        Kind::Lost => Span::styled(LOST, th.dim()),
        _ => Span::raw(s.key.cause.name()),
    };
    // What recurs says its period, where the name leaves the room.
    let every = s.period_ns.map(|p| format!(" every {}", fmt::dur(p))).filter(|e| name.width() + e.chars().count() <= w);
    let name = match every {
        Some(e) => Line::from(vec![name, Span::styled(e, th.fg(Color::Cyan))]),
        None => Line::from(name),
    };
    let victim = match s.victim.as_ref().filter(|_| whose) {
        Some((v, 0)) => format!(" → {v}"),
        Some((v, n)) => format!(" → {v} +{n}"),
        None => String::new(),
    };
    let left = w.saturating_sub(name.width());
    if victim.is_empty() || left < 5 {
        return cut(name, w);
    }
    let mut l = cut(Line::styled(victim, th.dim()), left);
    for (i, span) in name.spans.into_iter().enumerate() {
        l.spans.insert(i, span);
    }
    l
}

/// How wide the Culprits pane (or by sender, the Senders pane) wants to
/// be for every name in its list to show whole, up to [`NAME_MAX`].
pub fn culprits_width(app: &App) -> u16 {
    let (fixed, widest) = if app.by_sender {
        (super::senders::FIXED, app.senders().iter().map(|s| crate::sanitize::guard(&s.sender).chars().count()).max())
    } else {
        let th = Theme { color: false };
        // The cause's name: in passive mode whose time it took may be cut.
        let name = |c: &Culprit| Culprit { victim: None, ..c.clone() };
        (CULPRIT_FIXED, app.culprits().iter().map(|c| culprit_name(&name(c), th, false, usize::MAX, false).width()).max())
    };
    fixed + (widest.unwrap_or(0) as u16).min(NAME_MAX)
}

pub fn culprits(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let list = app.culprits();
    let rows_fit = area.height.saturating_sub(3) as usize;
    let first = app.scroll(Pane::Culprits).min(list.len().saturating_sub(1));
    let shown = rows_fit.min(list.len() - first.min(list.len()));
    let cpu = app.cpu_filter.map_or("all".into(), |c| c.to_string());
    let title = format!(" Culprits · sort {} (s) · cpu {cpu} (c) · by sender (o) {}", app.sort.label(), window(first, shown, list.len()));
    let block = th.block(title, app.focus == Pane::Culprits, area.width);
    let v = &app.view();
    let mark = |s: Sort, h: &str| if app.sort == s { format!("{h}▼") } else { h.to_string() };
    let header = Row::new(vec![
        right("CPU".into()),
        Cell::from("kind"),
        Cell::from(if app.sort == Sort::Name { "name▲" } else { "name" }),
        right(mark(Sort::Count, "count")),
        right(mark(Sort::Total, "total")),
        right(mark(Sort::Max, "max")),
        right("share".into()),
        right(mark(Sort::Recent, "last")),
    ])
    .style(th.head());
    // Unexplained time says what it is where its name column has the room.
    let name_w = area.width.saturating_sub(CULPRIT_FIXED) as usize;
    let long = name_w >= UNEXPLAINED.chars().count();
    let whose = app.watched().len() > 1;
    let rows = list.iter().skip(first).take(shown).map(|s| {
        let (cpu, kind) = (s.key.cpu, s.key.cause.kind());
        let stolen = v.cpus.iter().find(|c| c.cpu == cpu).map_or(0, |c| c.stolen_ns);
        let share = if stolen == 0 { 0.0 } else { 100.0 * s.total_ns as f64 / stolen as f64 };
        Row::new(vec![
            right(cpu.to_string()),
            Cell::from(Span::styled(kind.as_str(), th.kind(kind))),
            Cell::from(culprit_name(s, th, long, name_w, whose)),
            right(fmt::count(s.count)),
            right(fmt::dur(s.total_ns)),
            right(fmt::dur(s.max_ns)),
            right(fmt::pct(share)),
            right(fmt::age(v.now_ns.saturating_sub(s.last_seen_ns))),
        ])
    });
    let [c, k, rest @ ..] = CULPRIT_COLS.map(Constraint::Length);
    let mut widths = vec![c, k, Constraint::Fill(1)];
    widths.extend(rest);
    let table = Table::new(rows, widths).header(header).column_spacing(1).block(block);
    if list.is_empty() {
        let inner = table_inner(area);
        Widget::render(table, area, buf);
        Paragraph::new(Line::styled("no hiccup yet", th.dim()).centered()).render(Rect { y: inner.y + 1, height: 1, ..inner }, buf);
    } else {
        Widget::render(table, area, buf);
    }
}

/// A cause as the breakdown names it: tasks, work items and timers by
/// name alone, the rest with their kind.
fn cause_label(cause: CauseId) -> String {
    match cause.kind() {
        Kind::Unexplained => "unexplained".into(),
        Kind::Lost => "lost".into(),
        Kind::Task | Kind::Work | Kind::Timer => cause.name(),
        _ => cause.label(),
    }
}

/// `kworker/6:1[412] 2µs + vmstat_update 42µs + irq:local_timer 3µs + unexplained 1µs`,
/// the top cause followed by its origin where one was seen
/// (`ipi:flush_tlb_func 40µs ← java[4242] on cpu 0 via flush_tlb_mm_range + …`):
/// the culprit behind the culprit, only for the top one to keep the line short.
pub fn breakdown(h: &Hiccup, th: Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    for (i, (cause, ns)) in h.all_causes().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" + ", th.dim()));
        }
        spans.push(Span::styled(cause_label(cause), th.kind(cause.kind())));
        spans.push(Span::raw(format!(" {}", fmt::dur(ns))));
        if let (0, Some((_, o))) = (i, h.origins.iter().find(|(c, _)| *c == cause)) {
            // Written as the CSV's origins column writes it: escaped.
            let mut from = String::from(" ← ");
            crate::export::push_origin(o, &mut from);
            spans.push(Span::styled(from, th.fg(Color::Yellow)));
        }
    }
    spans
}

pub fn stalls(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let n = app.stalls().count();
    let fit = area.height.saturating_sub(2) as usize;
    let first = app.scroll(Pane::Stalls).min(n.saturating_sub(1));
    let shown = fit.min(n - first.min(n));
    let title = format!(
        " Recent worst stalls (last 60 s) · cpu {} {}",
        app.cpu_filter.map_or("all".into(), |c| c.to_string()),
        window(first, shown, n)
    );
    let now = app.view().now_ns;
    let mut lines: Vec<Line> = app
        .stalls()
        .skip(first)
        .take(shown)
        .map(|h| {
            let mut spans = vec![
                Span::styled(format!("{:>8}", fmt::dur(h.gap)), Style::new().add_modifier(Modifier::BOLD)),
                Span::raw(format!(" cpu {:<3}", h.cpu)),
                Span::styled(format!("{:>6} ago  ", fmt::age(now.saturating_sub(h.t0))), th.dim()),
            ];
            // Passive mode: whose time, and how it was lost.
            if let Some(v) = &h.victim {
                spans.push(Span::styled(format!("{} {}: ", h.source.as_str(), v.name()), th.head()));
            }
            // The wake-up probe: how the latency splits, then its causes.
            if let Some(p) = &h.parts {
                spans.push(Span::styled(
                    format!("timer {} · sched {} · user {}: ", fmt::dur(p.timer_ns), fmt::dur(p.sched_ns), fmt::dur(p.user_ns)),
                    th.head(),
                ));
            }
            spans.extend(breakdown(h, th));
            if let Some((from, to)) = h.freq {
                let mhz = |k: u32| format!("{} MHz", k / 1000);
                spans.push(Span::styled(format!("  freq {} → {}", from.map_or("?".into(), mhz), mhz(to)), th.fg(Color::Yellow)));
            }
            // A stall's line cut short says so.
            cut(Line::from(spans), area.width.saturating_sub(2) as usize)
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::styled("no stall yet", th.dim()).centered());
    }
    Paragraph::new(lines).block(th.block(title, app.focus == Pane::Stalls, area.width)).render(area, buf);
}
