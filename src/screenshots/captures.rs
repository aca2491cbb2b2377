//! docs/screen.md's text captures of the live screen: the scripted run
//! the README's picture is drawn from, as text at a small terminal's size
//! and a large one's, each in the fenced block after its marker line.
//! `cargo xtask screenshots` rewrites them; tests/docs.rs fails when they
//! are not what the screen draws.

use std::path::Path;

use anyhow::{Context, Result};

use crate::tui::screenshot;

/// The text captures docs/screen.md shows, by their size in cells: the
/// smallest terminal the screen is made for, and one large enough for the
/// loop-gap histogram beside the culprits.
pub const CAPTURES: [(u16, u16); 2] = [(80, 24), (160, 48)];

/// The live screen of the scripted run as text, `w`×`h` cells, without
/// the blanks that end its rows (what a terminal shows is the same).
pub fn capture(w: u16, h: u16) -> String {
    screenshot::text(&screenshot::demo(w, h)).lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

/// The line before each capture's fenced block in docs/screen.md: an HTML
/// comment, which a Markdown page does not show.
fn marker((w, h): (u16, u16)) -> String {
    format!("<!-- the live screen at {w}×{h}, written by cargo xtask screenshots -->")
}

/// `md` with each of CAPTURES' blocks (the fenced block on the line after
/// its marker) as the screen draws it now; an error when a marker or its
/// block is missing, so a capture is never dropped silently.
pub fn with_captures(md: &str) -> Result<String> {
    let mut lines: Vec<String> = md.lines().map(String::from).collect();
    for size in CAPTURES {
        let m = marker(size);
        let at = lines.iter().position(|l| *l == m).with_context(|| format!("no line {m:?}"))?;
        let open = at + 1;
        anyhow::ensure!(lines.get(open).is_some_and(|l| l.starts_with("```")), "no fenced block after {m:?}");
        let close =
            lines[open + 1..].iter().position(|l| l.starts_with("```")).with_context(|| format!("the block after {m:?} is not closed"))?
                + open
                + 1;
        lines.splice(open + 1..close, capture(size.0, size.1).lines().map(String::from));
    }
    Ok(lines.join("\n") + if md.ends_with('\n') { "\n" } else { "" })
}

/// Rewrites the captures in the Markdown file `md` (docs/screen.md) when
/// the screen draws them differently; true when it did.
pub fn write_captures(md: &Path) -> Result<bool> {
    let old = std::fs::read_to_string(md).with_context(|| format!("cannot read {}", md.display()))?;
    let new = with_captures(&old).with_context(|| format!("{}: its captures of the live screen", md.display()))?;
    if new == old {
        return Ok(false);
    }
    std::fs::write(md, new).with_context(|| format!("cannot write {}", md.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each capture's block is replaced whole, the text around it kept, and
    /// a second pass changes nothing; a missing marker is an error.
    #[test]
    fn captures_replace_their_blocks_only() {
        let mut md = String::from("# Screen\n");
        for size in CAPTURES {
            md += &format!("\nbefore\n{}\n```\nold capture\n```\nafter\n", marker(size));
        }
        let new = with_captures(&md).unwrap();
        assert!(!new.contains("old capture") && new.starts_with("# Screen\n") && new.ends_with("```\nafter\n"), "{new}");
        for (w, h) in CAPTURES {
            assert!(new.contains(&format!("{}\n```\n{}```\n", marker((w, h)), capture(w, h))), "{new}");
            assert_eq!(capture(w, h).lines().count(), h as usize);
        }
        assert_eq!(with_captures(&new).unwrap(), new);
        assert!(with_captures("# Screen\n```\nx\n```\n").is_err());
    }
}
