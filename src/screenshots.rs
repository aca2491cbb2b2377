//! The README's pictures, drawn by `cargo xtask screenshots` (through the
//! `screenshots` example) into docs/img: the live screen of a scripted run
//! rendered by ratatui's TestBackend and painted cell by cell, and the
//! `compare` chart of two scripted runs' CSVs through compare's own code;
//! and docs/screen.md's text captures of that live screen (captures.rs).
//! Nothing reads the machine, so the same commit draws the same bytes.

mod captures;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use anyhow::{Context, Result};
use image::{Rgb, RgbImage};
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

use crate::tui::screenshot;

pub use captures::{with_captures, write_captures};

/// The live screen's size in cells: the mid size, wide enough for
/// every pane.
pub const SCREEN: (u16, u16) = (120, 40);
/// One cell in pixels; DejaVu Sans Mono at FONT_PX (its ascent to its
/// descent) advances 9.8 px.
pub const CELL: (u32, u32) = (10, 20);
const FONT_PX: f32 = 19.0;
/// The screen image's size in pixels.
pub const SCREEN_PX: (u32, u32) = (SCREEN.0 as u32 * CELL.0, SCREEN.1 as u32 * CELL.1);

/// The files written, in `dir`: the live screen, then the compare chart.
pub const FILES: [&str; 2] = ["live-screen.png", "compare.png"];

const BG: [u8; 3] = [0x1d, 0x1f, 0x21];
const FG: [u8; 3] = [0xd0, 0xd0, 0xd0];

/// Writes every picture into `dir` (made if missing); returns their paths.
pub fn write(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let live = dir.join(FILES[0]);
    let png = paint(&screenshot::demo(SCREEN.0, SCREEN.1))?;
    std::fs::write(&live, png).with_context(|| format!("cannot write {}", live.display()))?;
    let chart = dir.join(FILES[1]);
    compare_chart(&chart)?;
    Ok(vec![live, chart])
}

/// Two scripted 60 s runs of CPU 3, before and after tuning, written as
/// jitterwatch writes them (the CSV sink, and the summary's fields compare
/// reads), then compared into `out`.
fn compare_chart(out: &Path) -> Result<()> {
    const S: u64 = 1_000_000_000;
    const SECS: u64 = 60;
    let scratch = std::env::temp_dir().join(format!("jitterwatch-screenshots-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("cannot make {}", scratch.display()))?;
    let result = (|| {
        let mut inputs = Vec::new();
        for (name, tuned) in [("untuned", false), ("tuned", true)] {
            let rows = screenshot::stalls(3, 1_000 * S, SECS, tuned, if tuned { 7 } else { 3 });
            let csv = scratch.join(format!("{name}.csv"));
            let mut sink = crate::export::CsvSink::create(&csv)?;
            for h in &rows {
                sink.write(h)?;
            }
            sink.flush()?;
            let meta = serde_json::json!({
                "mode": "probe",
                "duration_ns": SECS * S,
                "cpus": [{"cpu": 3, "threshold_ns": 1_000, "hiccups": rows.len()}],
                "csv": csv,
            });
            std::fs::write(crate::summary::sidecar(&csv), meta.to_string())?;
            inputs.push(csv);
        }
        let o = crate::compare::Options {
            inputs,
            labels: vec!["untuned".into(), "tuned".into()],
            cpu: None,
            svg: None,
            png: Some(out.to_path_buf()),
            json: false,
        };
        crate::compare::run(o, &mut std::io::sink()).map(|_| ())
    })();
    // Best effort: a scratch directory left in /tmp harms nothing.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// DejaVu Sans Mono, regular and bold, parsed once.
fn fonts() -> &'static (FontRef<'static>, FontRef<'static>) {
    static FONTS: OnceLock<(FontRef<'static>, FontRef<'static>)> = OnceLock::new();
    FONTS.get_or_init(|| {
        // The bytes are DejaVu's own, built in: they parse, or the build is
        // broken.
        let f = |b: &'static [u8]| FontRef::try_from_slice(b).expect("DejaVu Sans Mono parses");
        (f(dejavu::sans_mono::regular()), f(dejavu::sans_mono::bold()))
    })
}

/// A terminal's palette for the 16 named colours (xterm's), on a dark
/// background: what most readers' terminals show.
fn rgb(c: Color, default: [u8; 3]) -> [u8; 3] {
    match c {
        Color::Reset => default,
        Color::Black => [0, 0, 0],
        Color::Red => [205, 0, 0],
        Color::Green => [0, 205, 0],
        Color::Yellow => [205, 205, 0],
        Color::Blue => [59, 120, 255],
        Color::Magenta => [205, 0, 205],
        Color::Cyan => [0, 205, 205],
        Color::Gray => [229, 229, 229],
        Color::DarkGray => [127, 127, 127],
        Color::LightRed => [255, 85, 85],
        Color::LightGreen => [85, 255, 85],
        Color::LightYellow => [255, 255, 85],
        Color::LightBlue => [92, 92, 255],
        Color::LightMagenta => [255, 85, 255],
        Color::LightCyan => [85, 255, 255],
        Color::White => [255, 255, 255],
        Color::Rgb(r, g, b) => [r, g, b],
        Color::Indexed(i) => indexed(i),
    }
}

/// xterm's 256-colour cube and greys (the first 16 as the names above).
fn indexed(i: u8) -> [u8; 3] {
    const NAMED: [Color; 16] = [
        Color::Black,
        Color::Red,
        Color::Green,
        Color::Yellow,
        Color::Blue,
        Color::Magenta,
        Color::Cyan,
        Color::Gray,
        Color::DarkGray,
        Color::LightRed,
        Color::LightGreen,
        Color::LightYellow,
        Color::LightBlue,
        Color::LightMagenta,
        Color::LightCyan,
        Color::White,
    ];
    match i {
        0..=15 => rgb(NAMED[i as usize], FG),
        16..=231 => {
            let v = |n: u8| if n == 0 { 0 } else { 55 + 40 * n };
            let n = i - 16;
            [v(n / 36), v(n / 6 % 6), v(n % 6)]
        }
        _ => {
            let g = 8 + 10 * (i - 232);
            [g, g, g]
        }
    }
}

/// a blended toward b by t (0: a, 1: b).
fn mix(a: [u8; 3], b: [u8; 3], t: f64) -> [u8; 3] {
    let m = |x: u8, y: u8| (x as f64 * (1.0 - t) + y as f64 * t).round() as u8;
    [m(a[0], b[0]), m(a[1], b[1]), m(a[2], b[2])]
}

/// Box-drawing lines the screen uses, as the arms they reach from the
/// cell's centre (left, right, up, down) and whether heavy: drawn as
/// rectangles that meet their neighbours', where a font's glyphs would
/// leave gaps between cells.
fn box_arms(ch: char) -> Option<([bool; 4], bool)> {
    let (arms, heavy) = match ch {
        '─' => ([true, true, false, false], false),
        '│' => ([false, false, true, true], false),
        '┌' => ([false, true, false, true], false),
        '┐' => ([true, false, false, true], false),
        '└' => ([false, true, true, false], false),
        '┘' => ([true, false, true, false], false),
        '├' => ([false, true, true, true], false),
        '┤' => ([true, false, true, true], false),
        '┬' => ([true, true, false, true], false),
        '┴' => ([true, true, true, false], false),
        '┼' => ([true, true, true, true], false),
        '━' => ([true, true, false, false], true),
        '┃' => ([false, false, true, true], true),
        '┏' => ([false, true, false, true], true),
        '┓' => ([true, false, false, true], true),
        '┗' => ([false, true, true, false], true),
        '┛' => ([true, false, true, false], true),
        _ => return None,
    };
    Some((arms, heavy))
}

/// Block elements as rectangles: (eighths of the cell's height filled from
/// the bottom, shade: the share of the foreground).
fn block(ch: char) -> Option<(u32, f64)> {
    Some(match ch {
        '▁'..='█' => (ch as u32 - '▁' as u32 + 1, 1.0),
        '░' => (8, 0.25),
        '▒' => (8, 0.5),
        '▓' => (8, 0.75),
        _ => return None,
    })
}

/// The buffer as a PNG: each cell's background, then its symbol in its
/// foreground (bold, dim and reversed honoured), CELL pixels a cell.
pub fn paint(buf: &Buffer) -> Result<Vec<u8>> {
    let width = buf.area.width as u32;
    let (w, h) = (width * CELL.0, buf.area.height as u32 * CELL.1);
    let mut img = RgbImage::from_pixel(w, h, Rgb(BG));
    for (i, cell) in buf.content.iter().enumerate() {
        let (x, y) = (i as u32 % width * CELL.0, i as u32 / width * CELL.1);
        let (mut fg, mut bg) = (rgb(cell.fg, FG), rgb(cell.bg, BG));
        if cell.modifier.contains(Modifier::REVERSED) {
            std::mem::swap(&mut fg, &mut bg);
        }
        if cell.modifier.contains(Modifier::DIM) {
            fg = mix(fg, bg, 0.4);
        }
        fill(&mut img, x, y, CELL.0, CELL.1, bg);
        let sym = cell.symbol();
        let mut chars = sym.chars();
        match (chars.next(), chars.next()) {
            // The second half of a wide character, or a blank.
            (None, _) | (Some(' '), None) => {}
            (Some(ch), None) if box_arms(ch).is_some() => {
                let (arms, heavy) = box_arms(ch).expect("matched");
                let t = if heavy { 3 } else { 1 };
                let (mx, my) = (x + (CELL.0 - t) / 2, y + (CELL.1 - t) / 2);
                if arms[0] {
                    fill(&mut img, x, my, mx + t - x, t, fg);
                }
                if arms[1] {
                    fill(&mut img, mx, my, x + CELL.0 - mx, t, fg);
                }
                if arms[2] {
                    fill(&mut img, mx, y, t, my + t - y, fg);
                }
                if arms[3] {
                    fill(&mut img, mx, my, t, y + CELL.1 - my, fg);
                }
            }
            (Some(ch), None) if block(ch).is_some() => {
                let (eighths, shade) = block(ch).expect("matched");
                let hh = CELL.1 * eighths / 8;
                fill(&mut img, x, y + CELL.1 - hh, CELL.0, hh, mix(bg, fg, shade));
            }
            _ => {
                let font = if cell.modifier.contains(Modifier::BOLD) { &fonts().1 } else { &fonts().0 };
                for ch in sym.chars() {
                    glyph(&mut img, font, ch, x, y, fg);
                }
            }
        }
    }
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).context("cannot encode the screen as PNG")?;
    Ok(png)
}

/// Fills w×h pixels from (x, y), clipped to the image.
fn fill(img: &mut RgbImage, x: u32, y: u32, w: u32, h: u32, c: [u8; 3]) {
    for py in y..(y + h).min(img.height()) {
        for px in x..(x + w).min(img.width()) {
            img.put_pixel(px, py, Rgb(c));
        }
    }
}

/// One character in the cell at (x, y): centred on its advance, on a
/// baseline at the font's ascent, blended into what is there by its
/// coverage; what spills past the cell is clipped to the image only, as a
/// terminal lets a glyph overhang.
fn glyph(img: &mut RgbImage, font: &FontRef<'static>, ch: char, x: u32, y: u32, fg: [u8; 3]) {
    let scaled = font.as_scaled(PxScale::from(FONT_PX));
    let id = scaled.glyph_id(ch);
    let left = (CELL.0 as f32 - scaled.h_advance(id)) / 2.0;
    let baseline = y as f32 + (CELL.1 as f32 - scaled.height()) / 2.0 + scaled.ascent();
    let Some(outline) = scaled.outline_glyph(id.with_scale_and_position(PxScale::from(FONT_PX), point(x as f32 + left, baseline))) else {
        return;
    };
    let b = outline.px_bounds();
    outline.draw(|gx, gy, cov| {
        let (px, py) = (b.min.x as i64 + gx as i64, b.min.y as i64 + gy as i64);
        if px < 0 || py < 0 || px >= img.width() as i64 || py >= img.height() as i64 {
            return;
        }
        let p = img.get_pixel_mut(px as u32, py as u32);
        p.0 = mix(p.0, fg, cov.clamp(0.0, 1.0) as f64);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Width and height from a PNG's IHDR, which follows the signature.
    fn png_size(b: &[u8]) -> (u32, u32) {
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        assert_eq!(&b[12..16], b"IHDR");
        let be = |r: std::ops::Range<usize>| u32::from_be_bytes(b[r].try_into().unwrap());
        (be(16..20), be(20..24))
    }

    #[test]
    fn writes_both_pictures_the_same_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let paths = write(dir.path()).unwrap();
        assert_eq!(paths.len(), FILES.len());
        let live = std::fs::read(&paths[0]).unwrap();
        assert_eq!(png_size(&live), SCREEN_PX);
        let chart = std::fs::read(&paths[1]).unwrap();
        assert_eq!(png_size(&chart), crate::compare::chart::SIZE);
        let again = tempfile::tempdir().unwrap();
        write(again.path()).unwrap();
        for f in FILES {
            assert!(
                std::fs::read(dir.path().join(f)).unwrap() == std::fs::read(again.path().join(f)).unwrap(),
                "{f} differs between two runs"
            );
        }
    }

    #[test]
    fn paints_text_and_colour() {
        let png = paint(&screenshot::demo(SCREEN.0, SCREEN.1)).unwrap();
        let img = image::load_from_memory(&png).unwrap().to_rgb8();
        let colours: std::collections::HashSet<[u8; 3]> = img.pixels().map(|p| p.0).collect();
        // Background, text, and the theme's colours: not a blank image.
        assert!(colours.len() > 20, "{} colours", colours.len());
        let bg = img.pixels().filter(|p| p.0 == BG).count() as f64 / (img.width() * img.height()) as f64;
        assert!((0.4..0.98).contains(&bg), "background covers {bg}");
    }
}
