//! Drawing the view model: layout, header, footer and help overlay here,
//! the panes in `panes.rs`. Every string from `Stats` goes through
//! `sanitize::visible`; colour only adds to what the text already says.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::app::{App, Pane};
use super::fmt;
use super::keymap::{FOOTER_KEYS, KEYS};
use super::panes;
use super::senders;
use super::table;
use super::theme::Theme;
use super::threads;

/// Lines a hint may take at the screen's foot.
const HINT_LINES: usize = 3;

/// Wide enough to show every pane at once.
fn large(area: Rect) -> bool {
    area.width >= 120 && area.height >= 36
}

impl App {
    /// The probe's loop gaps, or in passive mode (no probe) the watched
    /// threads, in the same place.
    fn gaps_or_threads(&self, th: Theme, area: Rect, buf: &mut Buffer) {
        if self.watched().is_empty() {
            panes::histogram(self, th, area, buf);
        } else {
            threads::pane(self, th, area, buf);
        }
    }

    /// The culprits by cause, or by who sent them (key o).
    fn culprits_pane(&self, th: Theme, area: Rect, buf: &mut Buffer) {
        if self.by_sender {
            senders::pane(self, th, area, buf);
        } else {
            panes::culprits(self, th, area, buf);
        }
    }
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let th = Theme { color: self.color };
        if area.width < 40 || area.height < 12 {
            Paragraph::new("terminal too small (need 40×12); q quits").wrap(Wrap { trim: true }).render(area, buf);
            return;
        }
        let big = large(area);
        let shown = self.view().cpus.len().clamp(1, if big { 12 } else { 4 });
        let head = header_lines(self, th, area.width);
        // Hints come escaped from the audit (doctor::hints), wrapped so the
        // command in them is whole; past HINT_LINES, cut (the summary and
        // doctor have it whole).
        let hint = self.hint().map(|h| table::wrap_words(&format!("hint: {h}"), area.width.saturating_sub(1) as usize)).unwrap_or_default();
        let [top, cpus, body, hint_area, foot] = Layout::vertical([
            Constraint::Length(head.len() as u16),
            Constraint::Length(shown as u16 + 3),
            Constraint::Fill(1),
            Constraint::Length(hint.len().min(HINT_LINES) as u16),
            Constraint::Length(1),
        ])
        .areas(area);
        let hint_lines: Vec<Line> = hint
            .iter()
            .take(HINT_LINES)
            .enumerate()
            .map(|(i, l)| {
                // The last that fits says the rest is cut.
                let more = if i + 1 == HINT_LINES && hint.len() > HINT_LINES { " …" } else { "" };
                table::cut(Line::styled(format!(" {l}{more}"), th.dim()), area.width as usize)
            })
            .collect();
        Paragraph::new(hint_lines).render(hint_area, buf);
        Paragraph::new(head).render(top, buf);
        panes::cpus(self, th, cpus, buf);
        if big {
            let [upper, stalls] = Layout::vertical([Constraint::Percentage(60), Constraint::Fill(1)]).areas(body);
            // Names first: the histogram beside them takes what they leave,
            // and where that is too little it goes (Tab brings it back).
            let side_w = (upper.width * 2 / 5).min(panes::side_max(self)).min(upper.width.saturating_sub(panes::culprits_width(self)));
            if side_w >= panes::side_min(self) {
                let [culprits, side] = Layout::horizontal([Constraint::Fill(1), Constraint::Length(side_w)]).areas(upper);
                self.culprits_pane(th, culprits, buf);
                self.gaps_or_threads(th, side, buf);
            } else if self.focus == Pane::Histogram {
                self.gaps_or_threads(th, upper, buf);
            } else {
                self.culprits_pane(th, upper, buf);
            }
            panes::stalls(self, th, stalls, buf);
        } else if self.focus == Pane::Histogram {
            self.gaps_or_threads(th, body, buf);
        } else {
            let [culprits, stalls] = Layout::vertical([Constraint::Percentage(55), Constraint::Fill(1)]).areas(body);
            self.culprits_pane(th, culprits, buf);
            panes::stalls(self, th, stalls, buf);
        }
        footer(self, th, foot, buf);
        if self.detail {
            super::detail::render(self, th, area, buf);
        }
        if self.help {
            help(self, th, area, buf);
        }
    }
}

fn sep(th: Theme) -> Span<'static> {
    Span::styled(" · ", th.dim())
}

/// Thresholds of the watched CPUs: one figure, or a range.
fn thresholds(app: &App) -> String {
    let t: Vec<u64> = app.view().cpus.iter().map(|c| c.counters.threshold_ns).filter(|&t| t > 0).collect();
    match (t.iter().min(), t.iter().max()) {
        (Some(&lo), Some(&hi)) if lo == hi => fmt::dur(lo),
        (Some(&lo), Some(&hi)) => format!("{}–{}", fmt::dur(lo), fmt::dur(hi)),
        _ => "calibrating".into(),
    }
}

/// jitterwatch's own cost: (drops, overflows, BPF ns per event if known).
pub fn cost(app: &App) -> (u64, u64, Option<u64>) {
    let n = &app.view().counters;
    let (drops, overflow) = (n.drops(), n.overflows());
    let (ns, cnt) = n.prog_stats.iter().fold((0u64, 0u64), |a, p| (a.0 + p.run_time_ns, a.1 + p.run_cnt));
    (drops, overflow, (cnt > 0).then(|| ns / cnt))
}

/// The header's lines: who and where, how each watched CPU is isolated
/// (in words), what is watched, and how it goes (with jitterwatch's own
/// cost); each fact whole, as many on a line as fit.
fn header_lines(app: &App, th: Theme, width: u16) -> Vec<Line<'static>> {
    let v = &app.view();
    let mut facts: Vec<Vec<Span<'static>>> = vec![
        vec![Span::styled("jitterwatch ", th.head()), Span::raw(app.info.host.clone())],
        vec![Span::raw(format!("kernel {}", app.info.kernel))],
    ];
    facts.extend(app.info.cpus_in_words().into_iter().map(|w| vec![Span::raw(w)]));
    // What the kernel said at its last attempt to stop each CPU's tick
    // (nohz_full CPUs only): `tick now CPU 7: on (SCHED)`, a tick kept on
    // flagged as a warning.
    for c in &v.cpus {
        if let Some(w) = c.counters.tick.as_ref().and_then(crate::tick::words) {
            let style = if w == "off" { Style::new() } else { th.warn() };
            facts.push(vec![Span::styled(format!("tick now CPU {}: {w}", c.cpu), style)]);
        }
    }
    // A sibling open to other work slows the watched CPU: flagged.
    facts.push(vec![Span::styled(app.info.topology.clone(), if app.info.sibling_open { th.warn() } else { Style::new() })]);
    facts.push(vec![Span::raw(format!("threshold {}", thresholds(app)))]);
    let (drops, overflow, bpf) = cost(app);
    let flag = |n: u64| if n > 0 { th.warn() } else { Style::new() };
    facts.extend([
        vec![
            Span::raw(format!("elapsed {}", fmt::clock(v.elapsed_ns()))),
            Span::styled(if app.reset_active() { " (reset)" } else { "" }, th.dim()),
        ],
        vec![Span::raw(format!("{} ev/s", fmt::rate(app.events_per_sec())))],
        vec![Span::styled(format!("drops {}", fmt::count(drops)), flag(drops))],
        vec![Span::styled(format!("overflow {}", fmt::count(overflow)), flag(overflow))],
        vec![Span::raw(format!("lag {}", fmt::dur(v.counters.lag_ns)))],
    ]);
    if let Some(ns) = bpf {
        facts.push(vec![Span::raw(format!("bpf {ns}ns/ev"))]);
    }
    if !v.counters.missing_tracepoints.is_empty() {
        facts.push(vec![Span::styled(format!("{} tracepoints missing (?)", v.counters.missing_tracepoints.len()), th.fg(Color::Yellow))]);
    }
    let mut lines: Vec<Line<'static>> = Vec::new();
    for fact in facts {
        let fact = Line::from(fact);
        match lines.last_mut() {
            Some(l) if l.width() + 3 + fact.width() <= width as usize => {
                l.push_span(sep(th));
                l.spans.extend(fact.spans);
            }
            _ => lines.push(fact),
        }
    }
    lines
}

fn footer(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let mut spans = Vec::new();
    for (k, what) in &KEYS[..FOOTER_KEYS] {
        spans.push(Span::styled(format!(" {k} "), th.key()));
        spans.push(Span::raw(format!(" {what}  ")));
    }
    Paragraph::new(Line::from(spans)).render(area, buf);
    let mut state = Vec::new();
    if app.stale && !app.paused {
        state.push(Span::styled(" NO DATA ", th.warn()));
    }
    if app.paused {
        state.push(Span::styled(" PAUSED ", th.warn()));
    }
    Paragraph::new(Line::from(state).right_aligned()).render(area, buf);
}

fn help(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let mut lines = vec![Line::styled("Keys", th.head())];
    let bold = Style::new().add_modifier(Modifier::BOLD);
    for pair in KEYS.chunks(2) {
        let mut l = Vec::new();
        for (k, what) in pair {
            l.extend([Span::styled(format!("  {k:<13}"), bold), Span::raw(format!("{what:<20}"))]);
        }
        lines.push(Line::from(l));
    }
    lines.push(Line::styled("Cost of jitterwatch", th.head()));
    let v = &app.view();
    let n = &v.counters;
    for c in &v.cpus {
        lines.push(Line::raw(format!(
            "  cpu {:<4} ring-buffer drops {:>6}  probe-queue overflows {:>6}",
            c.cpu, c.counters.drops, c.counters.overflow
        )));
    }
    lines.push(Line::raw(format!(
        "  consumer lag {} (worst {})   events traced {}",
        fmt::dur(n.lag_ns),
        fmt::dur(n.lag_max_ns.max(n.lag_ns)),
        fmt::count(n.events)
    )));
    if n.consumer_cpu_ns > 0 && v.elapsed_ns() > 0 {
        lines.push(Line::raw(format!(
            "  consumer thread {:.1}% of one CPU, {} per event",
            100.0 * n.consumer_cpu_ns as f64 / v.elapsed_ns() as f64,
            fmt::dur(n.consumer_cpu_ns / n.events.max(1))
        )));
    }
    if !n.switch_hook.is_empty() {
        lines.push(Line::raw(format!("  context switches: {}", n.switch_hook)));
    }
    if n.prog_stats.is_empty() {
        lines.push(Line::styled("  BPF run time per program: run with --bpf-stats", th.dim()));
    }
    for p in &n.prog_stats {
        let per = p.run_time_ns.checked_div(p.run_cnt).unwrap_or(0);
        let name = crate::sanitize::visible(&p.name);
        lines.push(Line::raw(format!("  {name:<28} {per:>6} ns/event {:>10} runs", fmt::count(p.run_cnt))));
    }
    if !n.missing_tracepoints.is_empty() {
        lines.push(Line::styled(format!("  not traced (kernel lacks): {}", n.missing_tracepoints.join(", ")), th.fg(Color::Yellow)));
    }
    lines.push(Line::styled("Reading", th.head()));
    for l in [
        "  stolen: hiccup time, % of wall time; floor: the probe's fastest loop",
        "  passive mode's delayed: the watched threads' hiccup time, % of wall time",
        "  share: % of the CPU's stolen (delayed) time; passive mode's lost: % of",
        "    the thread's runnable time (running, or waiting to run after a preemption or a wake-up)",
        "  sparkline: worst gap of each second (log scale), newest right",
        "  histogram: every probe loop gap, log2 buckets; ▓ at/over threshold",
        "  unexplained: time no kernel event covers (hypervisor, SMI, hardware)",
    ] {
        lines.push(Line::raw(l));
    }
    super::overlay::render(app, th, area, buf, lines, 76, "Help (? or Esc closes)");
}
