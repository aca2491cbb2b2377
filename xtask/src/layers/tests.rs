//! The check on tiny made-up trees: it passes a clean one and fails each
//! kind of mistake, for src/ and for xtask/src/ (each with its table's
//! heading, its doc and its paths in the messages); and on this
//! repository's own trees.

use super::*;

const SRC: Tree = TREES[0];
const XTASK: Tree = TREES[1];

fn m(path: &str) -> Module {
    path.split("::").map(str::to_string).collect()
}

fn files_of(t: &Tree, files: &[(&str, &str)]) -> Vec<SourceFile> {
    files
        .iter()
        .map(|(p, text)| SourceFile { module: m(p), path: format!("{}/{}.rs", t.src, p.replace("::", "/")), text: text.to_string() })
        .collect()
}

fn tree(files: &[(&str, &str)]) -> Vec<SourceFile> {
    files_of(&SRC, files)
}

fn layers() -> Vec<Layer> {
    let doc = "# x\n\n## Layers\n\n| layer | name | modules | what |\n|---|---|---|---|\n\
               | 2 | top | `app` | the program |\n| 1 | base | `facts` `util` | what it knows |\n\n## Next\n";
    parse_layers(doc, SRC.heading).unwrap()
}

#[test]
fn the_table_gives_the_layers_bottom_first() {
    let l = layers();
    assert_eq!(l.iter().map(|l| (l.rank, l.name.as_str())).collect::<Vec<_>>(), [(1, "base"), (2, "top")]);
    assert_eq!(l[0].modules, ["facts", "util"]);
}

#[test]
fn a_tree_that_imports_downwards_passes() {
    let files = tree(&[
        ("app", "use crate::facts::{Fact, more::Other};\nuse crate::util;\n"),
        ("facts", "mod more;\nuse crate::util::helper;\n"),
        ("facts::more", "use super::Fact; // the parent: structure\n"),
        ("util", "pub fn helper() {}\n"),
    ]);
    assert_eq!(check(&SRC, &layers(), &files), Vec::<String>::new());
}

#[test]
fn an_import_upwards_fails() {
    let files = tree(&[("app", ""), ("facts", "pub fn f() -> crate::app::Thing { todo() }\n"), ("util", "")]);
    let p = check(&SRC, &layers(), &files);
    assert_eq!(p, ["src/facts.rs imports crate::app::Thing (layer 2 `top`) from layer 1 `base`: an import upwards"]);
}

#[test]
fn a_circle_between_siblings_fails() {
    let files = tree(&[
        ("app", "mod panes;\nmod render;\n"),
        ("app::panes", "use super::render::Theme;\n"),
        ("app::render", "use crate::app::{panes::cpus, Other};\n"),
        ("facts", ""),
        ("util", ""),
    ]);
    let p = check(&SRC, &layers(), &files);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("a circle: app::panes, app::render import each other"), "{p:?}");
    assert!(p[0].contains("(src/app/panes.rs → app::render::Theme; src/app/render.rs → app::panes::cpus)"), "{p:?}");
}

#[test]
fn a_circle_within_a_layer_fails() {
    let files = tree(&[("app", ""), ("facts", "use crate::util::X;\n"), ("util", "fn f() { crate::facts::g() }\n")]);
    let p = check(&SRC, &layers(), &files);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("a circle: facts, util"), "{p:?}");
}

#[test]
fn every_module_is_in_one_layer() {
    let files = tree(&[("app", ""), ("facts", ""), ("extra", "")]);
    let p = check(&SRC, &layers(), &files);
    assert!(p.contains(&"`extra` is in no layer: add it to the table in docs/ARCHITECTURE.md".to_string()), "{p:?}");
    assert!(p.contains(&"layer 1 `base` lists `util`, which src/ does not have".to_string()), "{p:?}");
}

#[test]
fn comments_strings_and_test_modules_name_nothing() {
    let text = "// crate::app is said here\n/* crate::app */\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::app;\n}\n";
    assert_eq!(paths::named(text, &m("facts")), Vec::<Module>::new());
    let text = "use super::super::x::{y, Z};\nfn g() { self::h::k(); }\n";
    assert_eq!(paths::named(text, &m("a::b::c")), [m("a::x::y"), m("a::x::Z"), m("a::b::c::h::k")]);
}

#[test]
fn a_path_the_doc_names_must_exist() {
    let root = proc::root();
    let doc = "See `src/lib.rs` and `src/nowhere.rs`; `cargo xtask layers` is no path.\n```\n`src/fenced.rs`\n```\n";
    assert_eq!(missing_paths(SRC.doc, doc, root), ["docs/ARCHITECTURE.md names `src/nowhere.rs`, which the tree does not have"]);
}

/// A made-up tree on disk is read as the check reads src/.
#[test]
fn the_tree_is_read_from_disk() {
    let root = std::env::temp_dir().join(format!("xtask-layers-{}", std::process::id()));
    let dir = root.join("src");
    std::fs::create_dir_all(dir.join("app")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod app;\nmod facts;\n").unwrap();
    std::fs::write(dir.join("app/mod.rs"), "mod view;\n").unwrap();
    std::fs::write(dir.join("app/view.rs"), "use crate::facts::F;\n").unwrap();
    std::fs::write(dir.join("facts.rs"), "use crate::app::view::V;\n").unwrap();
    std::fs::write(dir.join("util.rs"), "").unwrap();
    // A test may use any module: it is not read.
    std::fs::write(dir.join("app/tests.rs"), "use crate::facts::F;\n").unwrap();
    let files = read_tree(&root, &SRC);
    std::fs::remove_dir_all(&root).unwrap();
    let files = files.unwrap();
    let read: Vec<(String, &str)> = files.iter().map(|f| (f.module.join("::"), f.path.as_str())).collect();
    assert_eq!(
        read,
        [
            ("app".into(), "src/app/mod.rs"),
            ("app::view".into(), "src/app/view.rs"),
            ("facts".into(), "src/facts.rs"),
            ("util".into(), "src/util.rs")
        ]
    );
    let p = check(&SRC, &layers(), &files);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0], "src/facts.rs imports crate::app::view::V (layer 2 `top`) from layer 1 `base`: an import upwards");
    assert!(p[1].starts_with("a circle: app, facts import each other"), "{p:?}");
}

/// A made-up docs/development.md: another `## Layers` table above the
/// xtask one, which the xtask tree must not be read against.
const DEVELOPMENT: &str = "# Development\n\n## Layers\n\n| layer | name | modules | what |\n|---|---|---|---|\n\
                           | 1 | wrong | `app` | not xtask's |\n\n## Layers of xtask\n\nxtask's, see `xtask/src/main.rs`.\n\n\
                           | layer | name | modules | what |\n|---|---|---|---|\n\
                           | 3 | suite | `test_cmd` | runs the others |\n| 2 | commands | `bench` `vmtest` `build` `dist` `lint` | one each |\n\
                           | 1 | host | `proc` | children, paths |\n\n## Next\n";

fn xtask_layers() -> Vec<Layer> {
    parse_layers(DEVELOPMENT, XTASK.heading).unwrap()
}

/// A made-up xtask tree that keeps its layers; `edit` replaces one file's text.
fn xtask_tree(edit: Option<(&str, &str)>) -> Vec<SourceFile> {
    let mut files = vec![
        ("bench", "mod report;\nuse crate::proc;\n"),
        ("bench::report", "pub const RTLA_FILE: &str = \"\";\n"),
        ("build", "use crate::proc;\n"),
        ("dist", "use crate::{build, proc};\n"),
        ("lint", "use crate::proc;\n"),
        ("proc", ""),
        ("test_cmd", "use crate::{dist, vmtest};\n"),
        ("vmtest", "mod check;\nmod report;\nmod rtla;\nuse crate::{bench, dist};\n"),
        ("vmtest::check", "pub struct Check;\n"),
        ("vmtest::report", "use super::check::Check;\nuse super::rtla::Class;\n"),
        ("vmtest::rtla", "use super::check::Check;\n"),
    ];
    if let Some((module, text)) = edit {
        files.iter_mut().find(|f| f.0 == module).expect("a file of the tree").1 = text;
    }
    files_of(&XTASK, &files)
}

#[test]
fn the_xtask_table_is_read_from_its_own_heading() {
    let l = xtask_layers();
    assert_eq!(l.iter().map(|l| (l.rank, l.name.as_str())).collect::<Vec<_>>(), [(1, "host"), (2, "commands"), (3, "suite")]);
    assert_eq!(l[1].modules, ["bench", "vmtest", "build", "dist", "lint"]);
    let e = parse_layers("# Development\n\n## Layers\n\n| 1 | a | `b` | c |\n", XTASK.heading).unwrap_err();
    assert_eq!(e.to_string(), "no `## Layers of xtask` section");
    assert_eq!(check(&XTASK, &l, &xtask_tree(None)), Vec::<String>::new());
}

#[test]
fn an_import_upwards_in_xtask_fails() {
    // lint is below test_cmd and imported by nothing: an import upwards, no circle.
    let p = check(&XTASK, &xtask_layers(), &xtask_tree(Some(("lint", "use crate::{proc, test_cmd::SKIP};\n"))));
    assert_eq!(p, ["xtask/src/lint.rs imports crate::test_cmd::SKIP (layer 3 `suite`) from layer 2 `commands`: an import upwards"]);
    let p = check(&XTASK, &xtask_layers(), &xtask_tree(Some(("proc", "pub fn root() { crate::bench::run() }\n"))));
    assert!(
        p[0].starts_with("xtask/src/proc.rs imports crate::bench::run (layer 2 `commands`) from layer 1 `host`: an import upwards"),
        "{p:?}"
    );
}

#[test]
fn a_circle_in_xtask_fails() {
    // bench ↔ vmtest, as before section 9's file moved into bench.
    let p = check(&XTASK, &xtask_layers(), &xtask_tree(Some(("bench", "use crate::{proc, vmtest::RTLA_FILE};\n"))));
    assert_eq!(p, ["a circle: bench, vmtest import each other (xtask/src/bench.rs → vmtest::RTLA_FILE; xtask/src/vmtest.rs → bench)"]);
    // vmtest/report ↔ vmtest/rtla, as before `Check` had its own module.
    let p = check(&XTASK, &xtask_layers(), &xtask_tree(Some(("vmtest::rtla", "use super::report::Check;\n"))));
    assert_eq!(
        p,
        ["a circle: vmtest::report, vmtest::rtla import each other \
          (xtask/src/vmtest/report.rs → vmtest::rtla::Class; xtask/src/vmtest/rtla.rs → vmtest::report::Check)"]
    );
}

#[test]
fn every_xtask_module_is_in_one_layer_and_every_path_exists() {
    let files =
        files_of(&XTASK, &[("bench", ""), ("dist", ""), ("lint", ""), ("proc", ""), ("screenshots", ""), ("test_cmd", ""), ("vmtest", "")]);
    let p = check(&XTASK, &xtask_layers(), &files);
    assert_eq!(
        p,
        [
            "layer 2 `commands` lists `build`, which xtask/src/ does not have",
            "`screenshots` is in no layer: add it to the table in docs/development.md"
        ]
    );
    let root = proc::root();
    assert_eq!(missing_paths(XTASK.doc, DEVELOPMENT, root), Vec::<String>::new());
    let doc = format!("{DEVELOPMENT}See `xtask/src/nowhere.rs`.\n");
    assert_eq!(missing_paths(XTASK.doc, &doc, root), ["docs/development.md names `xtask/src/nowhere.rs`, which the tree does not have"]);
}

/// A made-up xtask tree on disk is read as the check reads xtask/src/: its
/// main.rs is the crate root, and its paths are named from the repository.
#[test]
fn the_xtask_tree_is_read_from_disk() {
    let root = std::env::temp_dir().join(format!("xtask-layers-xtask-{}", std::process::id()));
    let dir = root.join("xtask/src");
    std::fs::create_dir_all(dir.join("vmtest")).unwrap();
    std::fs::write(dir.join("main.rs"), "mod proc;\nmod vmtest;\nuse crate::vmtest::run;\n").unwrap();
    std::fs::write(dir.join("proc.rs"), "").unwrap();
    std::fs::write(dir.join("vmtest/mod.rs"), "mod report;\nmod rtla;\n").unwrap();
    std::fs::write(dir.join("vmtest/report.rs"), "use super::rtla::Class;\n").unwrap();
    std::fs::write(dir.join("vmtest/rtla.rs"), "use super::report::Check;\n").unwrap();
    let files = read_tree(&root, &XTASK);
    std::fs::remove_dir_all(&root).unwrap();
    let files = files.unwrap();
    let read: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(read, ["xtask/src/proc.rs", "xtask/src/vmtest/mod.rs", "xtask/src/vmtest/report.rs", "xtask/src/vmtest/rtla.rs"]);
    let l =
        parse_layers("# xtask\n\n## Layers of xtask\n\n| 2 | commands | `vmtest` | |\n| 1 | host | `proc` | |\n", XTASK.heading).unwrap();
    let p = check(&XTASK, &l, &files);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("a circle: vmtest::report, vmtest::rtla import each other"), "{p:?}");
}

/// This repository: src/ and xtask/src/ keep their layers as their docs
/// list them, and every path those docs name exists.
#[test]
fn this_repository_keeps_its_layers() {
    let root = proc::root();
    for tree in &TREES {
        let doc = std::fs::read_to_string(root.join(tree.doc)).unwrap();
        let files = read_tree(root, tree).unwrap();
        assert!(files.len() > 10, "{}: {} files", tree.src, files.len());
        assert_eq!(check(tree, &parse_layers(&doc, tree.heading).unwrap(), &files), Vec::<String>::new(), "{}", tree.src);
        assert_eq!(missing_paths(tree.doc, &doc, root), Vec::<String>::new());
    }
}
