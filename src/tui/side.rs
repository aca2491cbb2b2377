//! The pane beside the culprits: the loop gaps' (or wake-up latency's)
//! log2 histogram per CPU, or passive mode's watched threads; and how wide
//! it is worth drawing.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::probe::HIST_BUCKETS;
use crate::stats::CpuFigures;

use super::app::{App, Pane};
use super::fmt;
use super::theme::Theme;

/// Lower bound of a log2 bucket: 0, then 2^(k-1).
fn bucket_lo(k: usize) -> u64 {
    if k == 0 {
        0
    } else {
        1u64 << (k - 1)
    }
}

/// Room for the loop gaps' labels and one CPU's column.
const HIST_LABEL: u16 = 9;
const HIST_COL: u16 = 14;

/// The widest the pane beside the culprits is worth: the histogram's
/// 64, the watched threads' every column.
pub fn side_max(app: &App) -> u16 {
    if app.watched().is_empty() {
        64
    } else {
        super::threads::max_width(app)
    }
}

/// The narrowest the pane beside the culprits (the loop-gap histogram, or
/// passive mode's watched threads) is worth drawing.
pub fn side_min(app: &App) -> u16 {
    if app.watched().is_empty() {
        HIST_LABEL + HIST_COL + 2
    } else {
        super::threads::min_width(app)
    }
}

/// A CPU's probe histogram (none in passive mode: all zeros).
fn hist(c: &CpuFigures) -> &[u64; HIST_BUCKETS] {
    c.counters.own.hist().unwrap_or(&[0; HIST_BUCKETS])
}

pub fn histogram(app: &App, th: Theme, area: Rect, buf: &mut Buffer) {
    let wake = app.view().method == crate::interval::Method::Wakeup;
    let title = if wake { " Wake-up latency, log2 buckets (▓ ≥ threshold) " } else { " Loop gaps, log2 buckets (▓ ≥ threshold) " };
    let block = th.block(title.into(), app.focus == Pane::Histogram, area.width);
    let inner = block.inner(area);
    block.render(area, buf);
    const LABEL: u16 = HIST_LABEL;
    let all: Vec<&CpuFigures> = app.view().cpus.iter().filter(|c| app.cpu_filter.is_none_or(|f| c.cpu == f)).collect();
    let cols = (inner.width.saturating_sub(LABEL) / HIST_COL).max(1) as usize;
    let cpus = &all[..all.len().min(cols)];
    let nonzero = |c: &&CpuFigures| (0..HIST_BUCKETS).filter(|&k| hist(c)[k] > 0).collect::<Vec<_>>();
    let used: Vec<usize> = cpus.iter().flat_map(nonzero).collect();
    let (Some(&lo), Some(&hi)) = (used.iter().min(), used.iter().max()) else {
        Paragraph::new(Line::styled("no loop yet", th.dim()).centered()).render(inner, buf);
        return;
    };
    let rows = inner.height.saturating_sub(1) as usize;
    // Too many buckets: the fastest go (the CPU row gives the floor).
    let lo = lo.max((hi + 1).saturating_sub(rows));
    let top = cpus.iter().flat_map(|c| hist(c)[lo..=hi].iter()).copied().max().unwrap_or(1).max(1);
    let col_w = ((inner.width - LABEL) as usize / cpus.len()).max(HIST_COL as usize);
    let bar_w = col_w - 8;
    let mut header = vec![Span::styled(format!("{:>8} ", if wake { "lat ≥" } else { "gap ≥" }), th.head())];
    for c in cpus {
        header.push(Span::styled(format!("{:>6}  {:<w$}", format!("cpu {}", c.cpu), "", w = bar_w), th.head()));
    }
    if all.len() > cpus.len() {
        header.push(Span::styled(format!("+{} (c)", all.len() - cpus.len()), th.dim()));
    }
    let mut lines = vec![Line::from(header)];
    for k in (lo..=hi).rev() {
        let mut l = vec![Span::raw(format!("{:>8} ", fmt::dur(bucket_lo(k))))];
        for c in cpus {
            let n = hist(c)[k];
            let len = if n == 0 { 0 } else { (((n as f64).log10() + 1.0) / ((top as f64).log10() + 1.0) * bar_w as f64).ceil() as usize };
            let over = c.counters.threshold_ns > 0 && bucket_lo(k) >= c.counters.threshold_ns;
            let (ch, st) = if over { ('▓', th.fg(Color::Red)) } else { ('█', th.fg(Color::Green)) };
            l.push(Span::raw(format!("{:>6}  ", if n == 0 { String::new() } else { fmt::count(n) })));
            l.push(Span::styled(format!("{:<w$}", ch.to_string().repeat(len.min(bar_w)), w = bar_w), st));
        }
        lines.push(Line::from(l));
    }
    Paragraph::new(lines).render(inner, buf);
}
