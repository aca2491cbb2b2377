//! The chart: each slow operation's latency as a bar, in the order the
//! operations began, split by what explains it: a colour for each of the
//! causes with most time, the rest as "other causes", and the time no
//! stall covers drawn plainly at the top. Drawn as compare draws its
//! charts (plotters, the font built in, the file written whole).

use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::write::{label, UNCOVERED};
use super::Report;
use crate::compare::chart::{fit, write_png, write_svg, DrawResult, FONT, OTHER, PALETTE, UNEXPLAINED};
use crate::units::ns;

const SIZE: (u32, u32) = (1200, 700);
/// Bars drawn at most: the slowest, if there are more.
pub const BARS: usize = 300;
/// Time no stall covers: drawn plainly, a pale fill with an outline.
const PLAIN: RGBColor = RGBColor(245, 245, 245);

pub fn svg(r: &Report, path: &Path) -> Result<()> {
    write_svg(path, SIZE, |root| draw(r, root))
}

pub fn png(r: &Report, path: &Path) -> Result<()> {
    write_png(path, SIZE, |root| draw(r, root))
}

fn draw<DB: DrawingBackend>(r: &Report, root: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let f = &r.found;
    // The slowest BARS, then back in the order they began.
    let mut ops: Vec<&super::model::SlowOp> = f.slow.iter().take(BARS).collect();
    ops.sort_by_key(|o| o.index);
    let title = if f.slow.len() > BARS {
        format!("the {BARS} slowest of {} slow operations ({}), by what explains them", f.slow.len(), r.chosen)
    } else {
        format!("{} slow operations ({}), by what explains them", f.slow.len(), r.chosen)
    };
    let root = root.titled(&format!("jitterwatch explain: {}", fit(&title, 110)), (FONT, 20))?;
    let (bars, legend) = root.split_horizontally(SIZE.0 * 70 / 100);
    // A colour each for the causes with most time (unexplained in grey).
    let mut colours: Vec<(u32, RGBColor)> = Vec::new();
    for &(k, _) in &f.by_cause {
        let used = colours.iter().filter(|c| c.1 != UNEXPLAINED).count();
        if label(r.stalls.key(k)) == "unexplained" {
            colours.push((k, UNEXPLAINED));
        } else if used < PALETTE.len() {
            colours.push((k, PALETTE[used]));
        }
    }
    let max = ops.iter().map(|o| o.op.latency_ns()).max().unwrap_or(1).max(1);
    let (unit, div) = if max >= 1_000_000 { ("ms", 1e6) } else { ("µs", 1e3) };
    let n = ops.len().max(1);
    let mut chart = ChartBuilder::on(&bars)
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..max as f64 / div * 1.05)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("slow operations, in the order they began")
        .x_label_formatter(&|_| String::new())
        .y_desc(format!("latency ({unit})"))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()?;
    for (i, op) in ops.iter().enumerate() {
        let (x0, x1) = (i as f64 + 0.1, i as f64 + 0.9);
        let mut y = 0.0;
        let mut rects = Vec::new();
        let mut stack = |v: u64, style: ShapeStyle| {
            let h = v as f64 / div;
            rects.push(Rectangle::new([(x0, y), (x1, y + h)], style));
            y += h;
        };
        let mut other = 0u64;
        let mut by: Vec<u64> = vec![0; colours.len()];
        for s in f.stalls_of(op) {
            for &(k, v) in f.causes_of(s) {
                match colours.iter().position(|c| c.0 == k) {
                    Some(p) => by[p] += v,
                    None => other += v,
                }
            }
        }
        for (p, &v) in by.iter().enumerate() {
            stack(v, colours[p].1.filled());
        }
        stack(other, OTHER.filled());
        stack(op.op.latency_ns() - op.covered_ns, PLAIN.filled());
        chart.draw_series(rects)?;
        // The plain part's outline, so that it reads as time, not as nothing.
        let top = op.op.latency_ns() as f64 / div;
        let covered = op.covered_ns as f64 / div;
        if top > covered {
            chart.draw_series([Rectangle::new([(x0, covered), (x1, top)], BLACK.stroke_width(1))])?;
        }
    }
    let legend = legend.margin(60, 10, 10, 10);
    let names: Vec<(String, ShapeStyle)> = colours
        .iter()
        .map(|&(k, c)| (label(r.stalls.key(k)).to_string(), c.filled()))
        .chain([("(other causes)".to_string(), OTHER.filled()), (format!("({UNCOVERED})"), PLAIN.filled())])
        .collect();
    for (row, (name, style)) in names.iter().enumerate() {
        let y = row as i32 * 26;
        legend.draw(&Rectangle::new([(0, y), (16, y + 16)], *style))?;
        legend.draw(&Rectangle::new([(0, y), (16, y + 16)], BLACK.stroke_width(1)))?;
        legend.draw(&Text::new(fit(name, 40), (24, y), (FONT, 15).into_font()))?;
    }
    let y = names.len() as i32 * 26 + 10;
    let total = format!("{} in all, {} explained", ns(f.slow_ns), ns(f.explained_ns));
    legend.draw(&Text::new(total, (0, y), (FONT, 14).into_font()))?;
    Ok(())
}
