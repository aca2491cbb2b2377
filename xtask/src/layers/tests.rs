//! The check on tiny made-up trees: it passes a clean one and fails each
//! kind of mistake; and on this repository's own tree.

use super::*;

fn m(path: &str) -> Module {
    path.split("::").map(str::to_string).collect()
}

fn tree(files: &[(&str, &str)]) -> Vec<SourceFile> {
    files.iter().map(|(p, t)| SourceFile { module: m(p), path: format!("src/{}.rs", p.replace("::", "/")), text: t.to_string() }).collect()
}

fn layers() -> Vec<Layer> {
    let doc = "# x\n\n## Layers\n\n| layer | name | modules | what |\n|---|---|---|---|\n\
               | 2 | top | `app` | the program |\n| 1 | base | `facts` `util` | what it knows |\n\n## Next\n";
    parse_layers(doc).unwrap()
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
    assert_eq!(check(&layers(), &files), Vec::<String>::new());
}

#[test]
fn an_import_upwards_fails() {
    let files = tree(&[("app", ""), ("facts", "pub fn f() -> crate::app::Thing { todo() }\n"), ("util", "")]);
    let p = check(&layers(), &files);
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
    let p = check(&layers(), &files);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("a circle: app::panes, app::render import each other"), "{p:?}");
    assert!(p[0].contains("(src/app/panes.rs → app::render::Theme; src/app/render.rs → app::panes::cpus)"), "{p:?}");
}

#[test]
fn a_circle_within_a_layer_fails() {
    let files = tree(&[("app", ""), ("facts", "use crate::util::X;\n"), ("util", "fn f() { crate::facts::g() }\n")]);
    let p = check(&layers(), &files);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("a circle: facts, util"), "{p:?}");
}

#[test]
fn every_module_is_in_one_layer() {
    let files = tree(&[("app", ""), ("facts", ""), ("extra", "")]);
    let p = check(&layers(), &files);
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
    assert_eq!(missing_paths(doc, root), ["docs/ARCHITECTURE.md names `src/nowhere.rs`, which the tree does not have"]);
}

/// A made-up tree on disk is read as the check reads src/.
#[test]
fn the_tree_is_read_from_disk() {
    let dir = std::env::temp_dir().join(format!("xtask-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("app")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod app;\nmod facts;\n").unwrap();
    std::fs::write(dir.join("app/mod.rs"), "mod view;\n").unwrap();
    std::fs::write(dir.join("app/view.rs"), "use crate::facts::F;\n").unwrap();
    std::fs::write(dir.join("facts.rs"), "use crate::app::view::V;\n").unwrap();
    std::fs::write(dir.join("util.rs"), "").unwrap();
    // A test may use any module: it is not read.
    std::fs::write(dir.join("app/tests.rs"), "use crate::facts::F;\n").unwrap();
    let files = read_tree(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
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
    let p = check(&layers(), &files);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0], "src/facts.rs imports crate::app::view::V (layer 2 `top`) from layer 1 `base`: an import upwards");
    assert!(p[1].starts_with("a circle: app, facts import each other"), "{p:?}");
}

/// This repository: its layers as docs/ARCHITECTURE.md lists them.
#[test]
fn this_tree_keeps_its_layers() {
    let root = proc::root();
    let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
    let problems = check(&parse_layers(&doc).unwrap(), &read_tree(&root.join("src")).unwrap());
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(missing_paths(&doc, root), Vec::<String>::new());
}
