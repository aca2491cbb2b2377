//! The comparison as text: one table per scope with a column per run (the
//! table users publish), the causes side by side, and what changed from
//! the base. Every name in a `Comparison` is escaped already.

use std::io::{self, Write};

use super::figures::{Figures, PERCENTILES};
use super::over_time::TIME_PERCENTILES;
use super::Comparison;
use crate::units::ns;

const FIRST: usize = 34;

pub fn write(c: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    let width: Vec<usize> = c.runs.iter().map(|r| r.label.chars().count().max(11) + 2).collect();
    let line = |out: &mut dyn Write, head: &str, cells: Vec<String>| -> io::Result<()> {
        write!(out, "{head:<FIRST$}")?;
        // A space before each cell whatever its length: a huge value
        // (18446744073.71s) never runs into the one before it.
        for (cell, w) in cells.iter().zip(&width) {
            let w = w - 1;
            write!(out, " {cell:>w$}")?;
        }
        writeln!(out)
    };
    for r in &c.runs {
        let secs = r.duration_ns as f64 / 1e9;
        writeln!(out, "{}: {} ({} mode, CPU {}, {secs:.1} s)", r.label, r.csv, r.mode, super::list(&r.cpus))?;
    }
    writeln!(out, "gaps over each run's threshold; percentiles exact (nearest rank) over the CSV's rows;")?;
    writeln!(out, "time p%: the gap a moment of the run lies in, at that percentile of its time (<thr: in no hiccup)")?;
    for b in &c.blocks {
        writeln!(out)?;
        line(out, &b.scope, c.runs.iter().map(|r| r.label.clone()).collect())?;
        line(out, "threshold", b.thresholds_ns.iter().map(threshold).collect())?;
        let row = |out: &mut dyn Write, head: &str, f: &dyn Fn(&Figures) -> String| {
            line(out, head, b.figures.iter().map(|x| x.as_ref().map_or_else(|| "not watched".to_string(), f)).collect())
        };
        row(out, "count", &|f| f.count.to_string())?;
        row(out, "mean", &|f| f.mean_ns.map_or_else(none, |m| ns(m.round() as u64)))?;
        row(out, "min", &|f| opt(f.min_ns))?;
        for (i, (name, _)) in PERCENTILES.iter().enumerate() {
            row(out, name, &|f| opt(f.percentiles_ns[i]))?;
        }
        row(out, "max", &|f| opt(f.max_ns))?;
        for (i, (name, _)) in TIME_PERCENTILES.iter().enumerate() {
            row(out, name, &|f| f.time_percentiles_ns[i].map_or_else(|| "<thr".to_string(), ns))?;
        }
        row(out, "hiccups/s", &|f| format!("{:.2}", f.hiccups_per_sec))?;
        row(out, &format!("% of time {}", c.taken()), &|f| format!("{:.4}", f.stolen_pct))?;
        row(out, &format!("% of {} time named", c.taken()), &|f| f.explained_pct.map_or_else(none, |p| format!("{p:.1}")))?;
    }
    if !c.causes.is_empty() {
        writeln!(out)?;
        line(out, &format!("top causes, {} (per s of run)", c.causes_scope), c.runs.iter().map(|r| r.label.clone()).collect())?;
        for k in &c.causes {
            line(out, &shorten(&k.cause), k.ns_per_s.iter().map(|v| v.map_or_else(none, rate)).collect())?;
        }
    }
    for v in &c.changes {
        writeln!(out, "\n{} against {}:", v.run, v.base)?;
        let lists = [
            ("appeared", &v.changes.appeared),
            ("vanished", &v.changes.vanished),
            ("grew most", &v.changes.grew),
            ("shrank most", &v.changes.shrank),
        ];
        for (what, list) in lists {
            if list.is_empty() {
                writeln!(out, "  {what}: none")?;
                continue;
            }
            let items: Vec<String> =
                list.iter().map(|x| format!("{} ({} → {})", x.cause, rate(x.base_ns_per_s), rate(x.other_ns_per_s))).collect();
            writeln!(out, "  {what}: {}", items.join(", "))?;
        }
    }
    for n in &c.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}

fn none() -> String {
    "-".to_string()
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(none, ns)
}

/// Time stolen per second of run.
pub fn rate(ns_per_s: f64) -> String {
    if ns_per_s > 0.0 && ns_per_s < 1.0 {
        return "<1ns/s".to_string();
    }
    format!("{}/s", ns(ns_per_s.round() as u64))
}

fn threshold(t: &Option<(u64, u64)>) -> String {
    match t {
        None => "not watched".to_string(),
        Some((a, b)) if a == b => ns(*a),
        Some((a, b)) => format!("{}-{}", ns(*a), ns(*b)),
    }
}

/// A cause name fit for the first column, its end kept (a symbol's
/// distinctive part is often its end, a task's pid-less name its start).
fn shorten(s: &str) -> String {
    let n = s.chars().count();
    if n < FIRST - 1 {
        return s.to_string();
    }
    let keep = FIRST - 3;
    let head: String = s.chars().take(keep / 2).collect();
    let tail: String = s.chars().skip(n - (keep - keep / 2 - 1)).collect();
    format!("{head}…{tail}")
}
