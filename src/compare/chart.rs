//! The chart: above, by percentile of each run's time (x: a log-of-1/(1-p)
//! axis, as HdrHistogram draws percentiles; y: gap, log scale), the gap a
//! moment of the run lies in (over_time.rs), one labelled line per run;
//! below, each run's top causes as stacked bars of time stolen per second
//! of run.
//! Drawn with plotters, as SVG or PNG; the font (DejaVu Sans) is built in,
//! so a machine with no fonts installed draws the same picture.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::Comparison;
use crate::units::ns;

pub const SIZE: (u32, u32) = (1200, 1000);
pub(crate) const FONT: &str = "sans-serif";

/// Tableau's colours but its grey: told apart in print and by most
/// colour-blind readers.
pub(crate) const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
/// Unexplained time, and what the bars do not name, in greys.
pub(crate) const UNEXPLAINED: RGBColor = RGBColor(90, 90, 90);
pub(crate) const OTHER: RGBColor = RGBColor(200, 200, 200);

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are DejaVu Sans, which parses: a failure here is a
        // broken build, and text would then be missing, not wrong.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

pub fn svg(c: &Comparison, path: &Path) -> Result<()> {
    write_svg(path, SIZE, |root| draw(c, root))
}

/// A chart of `size` drawn by `draw`, written to `path` whole as SVG (and
/// below, as PNG): compare's and explain's.
pub(crate) fn write_svg(path: &Path, size: (u32, u32), draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> DrawResult) -> Result<()> {
    register_font();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        draw(&root).map_err(|e| anyhow!("cannot draw the chart: {e}"))?;
        root.present().map_err(|e| anyhow!("cannot draw the chart: {e}"))?;
    }
    write(path, text.as_bytes())
}

pub(crate) fn write_png(path: &Path, size: (u32, u32), draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> DrawResult) -> Result<()> {
    register_font();
    let mut rgb = vec![0u8; (size.0 * size.1 * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        draw(&root).map_err(|e| anyhow!("cannot draw the chart: {e}"))?;
        root.present().map_err(|e| anyhow!("cannot draw the chart: {e}"))?;
    }
    let img = image::RgbImage::from_raw(size.0, size.1, rgb).ok_or_else(|| anyhow!("the chart's buffer has the wrong size"))?;
    let mut bytes = std::io::Cursor::new(Vec::new());
    img.write_to(&mut bytes, image::ImageFormat::Png).map_err(|e| anyhow!("cannot encode the chart: {e}"))?;
    write(path, bytes.get_ref())
}

/// The chart whole or not at all: written beside and renamed, so a full
/// disk leaves no empty or cut PNG/SVG where the user looks for one.
fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::output::refuse_link(path, "the chart")?;
    crate::output::write_whole(path, bytes).with_context(|| format!("cannot write the chart {}", path.display()))
}

pub fn png(c: &Comparison, path: &Path) -> Result<()> {
    write_png(path, SIZE, |root| draw(c, root))
}

pub(crate) type DrawResult<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn draw<DB: DrawingBackend>(c: &Comparison, root: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(&format!("jitterwatch: gaps and their causes, {}", c.causes_scope), (FONT, 26))?;
    let (upper, lower) = root.split_vertically(SIZE.1 * 56 / 100);
    distribution(c, &upper)?;
    causes(c, &lower)?;
    Ok(())
}

/// `x` on the percentile axis: -log10(1 - p).
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    let digits = (x.round() as i64 - 2).clamp(0, 7) as usize;
    format!("{p:.digits$}%")
}

/// Gaps on the log axis are drawn in ns; its ends are powers of ten
/// around the smallest and largest gap drawn.
fn gap_range(c: &Comparison) -> (f64, f64) {
    let drawn = || c.curves.iter().flat_map(|k| k.points.iter().map(|p| p.gap_ns));
    let lo = drawn().min().unwrap_or(1_000).max(1);
    let hi = drawn().max().unwrap_or(10_000).max(lo.saturating_add(1));
    (10f64.powf((lo as f64).log10().floor()), 10f64.powf((hi as f64).log10().ceil()))
}

fn distribution<DB: DrawingBackend>(c: &Comparison, area: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (lo, hi) = gap_range(c);
    let (from, to) = (c.curve_axis.from_nines, c.curve_axis.to_nines);
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .margin_right(48)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .caption("the gap a moment of the run lies in, by percentile of the run's time", (FONT, 20))
        .build_cartesian_2d(from..to, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels((to - from) as usize + 1)
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|y| ns(y.round() as u64))
        .x_desc("percentile of the run's time")
        .y_desc("gap (log scale)")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .draw()?;
    for (i, k) in c.curves.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        if k.points.is_empty() {
            // Listed, so that a run without hiccups is seen to be one.
            chart
                .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
                .label(format!("{} (no hiccups)", k.label))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(1)));
            continue;
        }
        // Exactly the points compare --json lists.
        let points = k.points.iter().map(|p| (p.nines, p.gap_ns as f64));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(3)))?
            .label(format!("{} ({} hiccups)", k.label, k.hiccups))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The bars' unit: the largest that keeps the axis figures above 1.
fn rate_unit(max_ns_per_s: f64) -> (&'static str, f64) {
    if max_ns_per_s >= 1e6 {
        ("ms/s", 1e6)
    } else if max_ns_per_s >= 1e3 {
        ("µs/s", 1e3)
    } else {
        ("ns/s", 1.0)
    }
}

fn causes<DB: DrawingBackend>(c: &Comparison, area: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let (bars, legend) = area.split_horizontally(SIZE.0 * 58 / 100);
    let n = c.runs.len();
    let max = c.total_ns_per_s.iter().copied().fold(0.0, f64::max);
    let (unit, div) = rate_unit(max);
    // One slot per run on a discrete axis (labels may repeat; indices do not).
    let runs: Vec<usize> = (0..n).collect();
    let top = (max / div * 1.1).max(1.0);
    let mut chart = ChartBuilder::on(&bars)
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .caption(format!("time {} per second of run, by cause", c.taken()), (FONT, 20))
        .build_cartesian_2d(runs[..].into_segmented(), 0f64..top)?;
    let labels: Vec<String> = c.runs.iter().map(|r| r.label.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_max_light_lines(1)
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => labels.get(**i).cloned().unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .y_desc(format!("{} ({unit})", c.taken()))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .draw()?;
    // A colour each for the largest causes (unexplained in grey); the rest
    // join "other causes", so that no two entries share a colour.
    let mut shown: Vec<(&super::CauseRow, RGBColor)> = Vec::new();
    for k in &c.causes {
        let used = shown.iter().filter(|(s, _)| s.cause != "unexplained").count();
        if k.cause == "unexplained" {
            shown.push((k, UNEXPLAINED));
        } else if used < PALETTE.len() {
            shown.push((k, PALETTE[used]));
        }
    }
    for run in 0..n {
        let (from, to) = (SegmentValue::Exact(&runs[run]), runs.get(run + 1).map_or(SegmentValue::Last, SegmentValue::Exact));
        let mut y = 0.0;
        let mut stack = |ns_per_s: f64, colour: RGBColor| {
            let h = ns_per_s / div;
            let mut r = Rectangle::new([(from.clone(), y), (to.clone(), y + h)], colour.filled());
            r.set_margin(0, 0, 24, 24);
            y += h;
            r
        };
        let mut rects: Vec<Rectangle<_>> = shown.iter().map(|(k, col)| stack(k.ns_per_s[run].unwrap_or(0.0), *col)).collect();
        let named: f64 = shown.iter().filter_map(|(k, _)| k.ns_per_s[run]).sum();
        rects.push(stack((c.total_ns_per_s[run] - named).max(0.0), OTHER));
        chart.draw_series(rects)?;
    }
    // The legend beside the bars, never over them.
    let legend = legend.margin(60, 10, 10, 10);
    let entries = shown.iter().map(|(k, col)| (k.cause.as_str(), *col)).chain([("(other causes)", OTHER)]);
    for (row, (name, colour)) in entries.enumerate() {
        let y = row as i32 * 26;
        legend.draw(&Rectangle::new([(0, y), (16, y + 16)], colour.filled()))?;
        legend.draw(&Text::new(fit(name, 52), (24, y), (FONT, 15).into_font()))?;
    }
    Ok(())
}

/// A name cut to `n` characters for the legend.
pub(crate) fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_axis_reads_in_nines() {
        let l: Vec<String> = (0..=6).map(|x| percentile_label(x as f64)).collect();
        assert_eq!(l, ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]);
    }
}
