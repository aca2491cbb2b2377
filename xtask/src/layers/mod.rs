//! `cargo xtask layers` (and the first step of `cargo xtask test`): each
//! crate's modules import each other only downwards. Two trees are checked,
//! each against its own table (one list, read by people and by this
//! check): src/ against the `## Layers` of docs/ARCHITECTURE.md, xtask/src/
//! against the `## Layers of xtask` of docs/development.md ([`TREES`]);
//! every top-level module of a tree is in exactly one of its layers. Three
//! rules, each an error:
//! - a module imports no module of a higher layer;
//! - modules import each other in no circle, at any depth (top-level
//!   modules, or the files of one directory);
//! - every path a table's doc names (`src/...`, a layer's module) exists.
//!
//! Imports are read from `crate::`, `super::` and `self::` paths in the
//! text (see paths.rs); a parent's `mod` lines and a child's use of its
//! parent are structure, not imports between siblings.

mod circles;
mod paths;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::proc;

/// A crate's source tree and the table that lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    /// Its root directory, from the repository's root (as messages name it).
    pub src: &'static str,
    /// The doc that holds its table, and the table's heading there
    /// (without the `## `).
    pub doc: &'static str,
    pub heading: &'static str,
}

/// The trees the check reads: jitterwatch, and the developer tasks.
pub const TREES: [Tree; 2] = [
    Tree { src: "src", doc: "docs/ARCHITECTURE.md", heading: "Layers" },
    Tree { src: "xtask/src", doc: "docs/development.md", heading: "Layers of xtask" },
];

/// The imports a circle's message names at most.
const TIES_SHOWN: usize = 6;

/// A module path from the crate root: `["tui", "panes"]`.
type Module = Vec<String>;

/// One file of the tree: its module, its path as people name it, its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceFile {
    pub module: Module,
    pub path: String,
    pub text: String,
}

/// One layer of the table: its number (1 is the bottom), name, modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub rank: u32,
    pub name: String,
    pub modules: Vec<String>,
}

pub fn run() -> Result<()> {
    let root = proc::root();
    let mut problems = Vec::new();
    let mut read = Vec::new();
    for tree in &TREES {
        let doc = std::fs::read_to_string(root.join(tree.doc)).with_context(|| format!("reading {}", tree.doc))?;
        let layers = parse_layers(&doc, tree.heading).with_context(|| format!("the layers of {}/ in {}", tree.src, tree.doc))?;
        let files = read_tree(root, tree)?;
        problems.extend(check(tree, &layers, &files));
        problems.extend(missing_paths(tree.doc, &doc, root));
        read.push(format!("{}/ {} files in {} layers ({})", tree.src, files.len(), layers.len(), tree.doc));
    }
    let docs: Vec<&str> = TREES.iter().map(|t| t.doc).collect();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("layers: {p}");
        }
        bail!("{} problem(s) with the module layers (above); {} say what goes where", problems.len(), docs.join(" and "));
    }
    println!("layers: {}: no import upwards, no circle; every path {} name exists", read.join(", "), docs.join(" and "));
    Ok(())
}

/// The table under `## {heading}`: `| rank | name | `module` `module` ... | what |`.
pub fn parse_layers(doc: &str, heading: &str) -> Result<Vec<Layer>> {
    let section = doc
        .split("\n## ")
        .find(|s| s.lines().next().is_some_and(|l| l.trim_end() == heading))
        .with_context(|| format!("no `## {heading}` section"))?;
    let mut layers = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Some(Ok(rank)) = cells.first().map(|c| c.parse::<u32>()) else { continue };
        let modules = cells.get(2).map(|c| backticked(c).map(str::to_string).collect()).unwrap_or_default();
        layers.push(Layer { rank, name: cells.get(1).unwrap_or(&"").to_string(), modules });
    }
    if layers.is_empty() {
        bail!("the `## {heading}` section has no table rows");
    }
    layers.sort_by_key(|l| l.rank);
    Ok(layers)
}

fn backticked(s: &str) -> impl Iterator<Item = &str> {
    s.split('`').skip(1).step_by(2)
}

/// Every .rs file of `tree` under `root`, but the crate root (lib.rs,
/// main.rs: it declares the modules) and the tests (files named `tests.rs`
/// or `*_tests.rs`, or under a `tests/` directory): a test may use any
/// module to check its own, and is built only for that.
pub fn read_tree(root: &Path, tree: &Tree) -> Result<Vec<SourceFile>> {
    let src = root.join(tree.src);
    let mut out = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&src).expect("under the tree's root").to_path_buf();
                let module = module_of(&rel);
                let test = module.iter().any(|m| m == "tests" || m.ends_with("_tests"));
                if !module.is_empty() && !test {
                    let path = format!("{}/{}", tree.src, rel.display());
                    out.push(SourceFile { module, path, text: std::fs::read_to_string(src.join(&rel))? });
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// src-relative `a/b.rs` → `[a, b]`; `a/mod.rs` → `[a]`; `lib.rs` → `[]`.
fn module_of(rel: &Path) -> Module {
    let mut m: Module = rel.iter().map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if m.last().is_some_and(|l| l == "mod") || (m.len() == 1 && (m[0] == "lib" || m[0] == "main")) {
        m.pop();
    }
    m
}

/// One import between siblings: `from` and `to` share their parent, and
/// `file` (the importing file's module) names `to` through `named`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: Module,
    to: Module,
    file: String,
    named: Module,
}

/// Every import of `files`, lifted to the two siblings it runs between.
fn edges(files: &[SourceFile]) -> Vec<Edge> {
    let modules: BTreeSet<&Module> = files.iter().map(|f| &f.module).collect();
    let mut out = BTreeSet::new();
    for f in files {
        let file = &f.module;
        for named in paths::named(&f.text, file) {
            // The longest prefix that is a module (or a top-level one).
            let Some(to) = (1..=named.len()).rev().map(|n| named[..n].to_vec()).find(|p| modules.contains(p)) else { continue };
            let common = file.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == file.len() || common == to.len() {
                // Into itself, its parent, or its own child: structure.
                continue;
            }
            let (from, to) = (file[..=common].to_vec(), to[..=common].to_vec());
            out.insert(Edge { from, to, file: f.path.clone(), named: named.clone() });
        }
    }
    out.into_iter().collect()
}

/// What is wrong with `files` of `tree` against `layers`, one line each.
pub fn check(tree: &Tree, layers: &[Layer], files: &[SourceFile]) -> Vec<String> {
    let mut problems = Vec::new();
    let top: BTreeSet<&str> = files.iter().map(|f| f.module[0].as_str()).collect();
    let mut rank_of: BTreeMap<&str, &Layer> = BTreeMap::new();
    for l in layers {
        for m in &l.modules {
            if rank_of.insert(m, l).is_some() {
                problems.push(format!("`{m}` is in more than one layer"));
            }
            if !top.contains(m.as_str()) {
                problems.push(format!("layer {} `{}` lists `{m}`, which {}/ does not have", l.rank, l.name, tree.src));
            }
        }
    }
    for m in &top {
        if !rank_of.contains_key(m) {
            problems.push(format!("`{m}` is in no layer: add it to the table in {}", tree.doc));
        }
    }
    let edges = edges(files);
    for e in edges.iter().filter(|e| e.from.len() == 1) {
        if let (Some(a), Some(b)) = (rank_of.get(e.from[0].as_str()), rank_of.get(e.to[0].as_str())) {
            if b.rank > a.rank {
                problems.push(format!(
                    "{} imports crate::{} (layer {} `{}`) from layer {} `{}`: an import upwards",
                    e.file,
                    e.named.join("::"),
                    b.rank,
                    b.name,
                    a.rank,
                    a.name
                ));
            }
        }
    }
    for circle in circles::circles(&edges) {
        let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
        // The imports that close it first: those against the layers.
        let rank = |m: &Module| if m.len() == 1 { rank_of.get(m[0].as_str()).map_or(0, |l| l.rank) } else { 0 };
        let mut ties: Vec<(bool, String)> = edges
            .iter()
            .filter(|e| circle.contains(&e.from) && circle.contains(&e.to))
            .map(|e| (rank(&e.to) <= rank(&e.from), format!("{} → {}", e.file, e.named.join("::"))))
            .collect();
        ties.sort();
        let more = ties.len().saturating_sub(TIES_SHOWN);
        let mut shown: Vec<String> = ties.into_iter().take(TIES_SHOWN).map(|t| t.1).collect();
        if more > 0 {
            shown.push(format!("{more} more"));
        }
        problems.push(format!("a circle: {} import each other ({})", names.join(", "), shown.join("; ")));
    }
    problems
}

/// The paths the doc `name`d, whose text is `doc`, names in backticks
/// (`src/...`, `xtask/...`, `bpf/...`, `docs/...`, `tests/...`) that `root`
/// does not have.
pub fn missing_paths(name: &str, doc: &str, root: &Path) -> Vec<String> {
    // Outside fenced blocks, where backticks pair up.
    let prose: String = doc.split("```").step_by(2).collect();
    backticked(&prose)
        .filter(|p| ["src/", "xtask/", "bpf/", "docs/", "tests/"].iter().any(|d| p.starts_with(d)))
        .filter(|p| !root.join(PathBuf::from(p)).exists())
        .map(|p| format!("{name} names `{p}`, which the tree does not have"))
        .collect::<Vec<_>>()
}
