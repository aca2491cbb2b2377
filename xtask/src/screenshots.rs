//! `cargo xtask screenshots`: redraw the README's pictures in docs/img
//! (the live screen and a `compare` chart) from scripted runs, and
//! docs/screen.md's text captures of that live screen, through the
//! `screenshots` example (src/screenshots.rs). Not hand-made, and the same
//! commit draws the same bytes: rerun it after changing the screen or the
//! chart, and commit what changed.

use anyhow::Result;

use crate::{deps, proc};

/// Where the pictures live, from the workspace root.
pub const DIR: &str = "docs/img";
/// The page whose text captures of the live screen it rewrites.
pub const SCREEN_MD: &str = "docs/screen.md";
/// Each picture and its size in pixels: the screen is 120×40 cells of
/// 10×20 px, the chart compare's SIZE (src/screenshots.rs, src/compare/chart.rs).
pub const PICTURES: [(&str, (u32, u32)); 2] = [("live-screen.png", (1200, 800)), ("compare.png", (1200, 1000))];

pub fn run() -> Result<()> {
    // Building the library needs clang and libelf, as for `run`.
    deps::ensure(false)?;
    let dir = proc::root().join(DIR);
    proc::check(proc::cargo().args(["run", "--quiet", "--example", "screenshots", "--"]).arg(&dir).arg(proc::root().join(SCREEN_MD)))?;
    for (name, size) in PICTURES {
        let got = png_size(&std::fs::read(dir.join(name))?)?;
        anyhow::ensure!(got == size, "{DIR}/{name} is {}×{} px, not {}×{}", got.0, got.1, size.0, size.1);
    }
    println!(
        "screenshots: {} in {DIR}, the captures in {SCREEN_MD}; commit them if they changed (git status {DIR} {SCREEN_MD})",
        PICTURES.map(|p| p.0).join(", ")
    );
    Ok(())
}

/// Width and height from a PNG's header (its IHDR chunk, first after the
/// signature), or why the bytes are not a PNG.
pub fn png_size(b: &[u8]) -> Result<(u32, u32)> {
    anyhow::ensure!(b.len() >= 24 && b.starts_with(b"\x89PNG\r\n\x1a\n") && &b[12..16] == b"IHDR", "not a PNG");
    let be = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    Ok((be(16), be(20)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed pictures are there, whole, and shown by the README.
    #[test]
    fn committed_pictures_are_pngs_of_their_size() {
        for (name, size) in PICTURES {
            let path = proc::root().join(DIR).join(name);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (cargo xtask screenshots draws it)", path.display()));
            assert_eq!(png_size(&bytes).unwrap(), size, "{name}");
            // IEND closes a PNG: a file cut short has none.
            assert!(bytes.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]), "{name} is cut short");
        }
        let readme = std::fs::read_to_string(proc::root().join("README.md")).unwrap();
        for (name, _) in PICTURES {
            assert!(readme.contains(&format!("]({DIR}/{name})")), "README.md does not show {name}");
        }
    }

    #[test]
    fn png_size_refuses_what_is_not_a_png() {
        assert!(png_size(b"GIF89a").is_err());
        let mut head = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        head.extend_from_slice(&[0, 0, 4, 176, 0, 0, 3, 32]);
        assert_eq!(png_size(&head).unwrap(), (1200, 800));
    }
}
