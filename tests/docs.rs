//! The README and docs/ stay true to the program: the README stays short
//! enough to read in the first minute, every option they name is one
//! jitterwatch takes, every link between them lands on a file and, with an
//! anchor, on a heading, and the text captures of the live screen are what
//! it draws.

mod common;
use common::bin;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The Markdown files: README.md and everything in docs/.
fn documents() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// `--long` words in a text (not `--` alone, not a dash run in a table).
fn flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--").map(|a| a + i) {
        let start = at + 2;
        let end =
            start + text[start..].find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')).unwrap_or(text.len() - start);
        let before_ok = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'-');
        if before_ok && end > start && b[start].is_ascii_lowercase() {
            out.insert(text[at..end].trim_end_matches('-').to_string());
        }
        i = end.max(at + 2);
    }
    out
}

/// Every long option of jitterwatch and its subcommands, from their --help.
fn known_flags() -> BTreeSet<String> {
    let mut known = BTreeSet::new();
    for sub in [&[][..], &["events"], &["compare"], &["report"], &["explain"], &["serve"], &["doctor"], &["completions"]] {
        let out = Command::new(bin()).args(sub).arg("--help").output().unwrap();
        assert!(out.status.success(), "{sub:?} --help failed");
        known.extend(flags(&String::from_utf8_lossy(&out.stdout)));
    }
    known
}

#[test]
fn readme_is_for_the_first_minute() {
    let n = read(&root().join("README.md")).lines().count();
    assert!(n <= 250, "README.md has {n} lines: keep it to 250, move the rest to docs/");
}

#[test]
fn every_option_the_docs_name_exists() {
    let known = known_flags();
    assert!(known.contains("--cpus") && known.contains("--trace-dir") && known.contains("--label"), "{known:?}");
    // Other tools' options the text names on purpose: systemctl's, perf's,
    // `cargo xtask dist --arch arm64`'s, sockperf's.
    let others = ["--now", "--comms", "--arch", "--no-rdtsc", "--full-log"];
    for doc in [root().join("README.md"), root().join("docs/usage.md")] {
        let text = read(&doc);
        let unknown: Vec<String> = flags(&text).into_iter().filter(|f| !known.contains(f) && !others.contains(&f.as_str())).collect();
        assert!(unknown.is_empty(), "{} names options jitterwatch does not take: {unknown:?}", doc.display());
    }
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, only
/// letters, digits, hyphens and underscores kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// Relative link targets `](target)` in a Markdown text.
fn links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| text[at + 2..].find(')').map(|end| text[at + 2..at + 2 + end].to_string()))
        .filter(|t| !t.contains("://"))
        .collect()
}

#[test]
fn every_link_lands() {
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        for link in links(&text) {
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() { doc.clone() } else { doc.parent().unwrap().join(file) };
            assert!(target.exists(), "{}: link {link:?} to a missing file", doc.display());
            if !anchor.is_empty() {
                let found = anchors(&read(&target));
                assert!(found.contains(anchor), "{}: link {link:?}: no heading with that anchor in {found:?}", doc.display());
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links found: is the parser right?");
}

/// docs/screen.md's captures are the screen drawn now (from the scripted
/// run the README's picture is drawn from), not what it once drew.
#[test]
fn the_screen_captures_are_what_the_screen_draws() {
    let md = read(&root().join("docs/screen.md"));
    let now = jitterwatch::screenshots::with_captures(&md).unwrap_or_else(|e| panic!("docs/screen.md: {e:#}"));
    if let Some((was, is)) = md.lines().zip(now.lines()).find(|(a, b)| a != b) {
        panic!(
            "docs/screen.md's captures are not what the screen draws (cargo xtask screenshots rewrites them):\n  was: {was}\n  now: {is}"
        );
    }
    assert_eq!(md, now, "docs/screen.md's captures are not what the screen draws (cargo xtask screenshots rewrites them)");
}

#[test]
fn the_checks_read_what_they_should() {
    assert_eq!(
        flags("a --cpus 6 --rt, `--threshold auto`; cargo xtask run -- --cpus 1 | --- |"),
        ["--cpus", "--rt", "--threshold"].map(String::from).into()
    );
    assert_eq!(slug("The README's pictures and the man page"), "the-readmes-pictures-and-the-man-page");
    assert_eq!(links("see [a](b.md#c) and [x](https://e.org) ![p](img/p.png)"), ["b.md#c", "img/p.png"]);
}
