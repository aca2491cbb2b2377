//! The modules a Rust file names: every `crate::`, `super::` and `self::`
//! path, braces expanded, as absolute module paths. Read from the text (no
//! parser): comments are skipped, and a path is what follows the keyword
//! up to the first name that starts with a capital or is not followed by
//! `::`; so `crate::{cause::Kind, stats}` names `cause::Kind` and `stats`.

/// `src` with line and block comments blanked out (strings kept: a path
/// in one is rare, and harmless here).
fn without_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(i) = rest.find('/') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            rest = &rest[end..];
        } else {
            out.push('/');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

fn ident_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len())
}

/// The paths of one use tree at the start of `s` (after `prefix::`): a
/// path goes on through lower-case names followed by `::` and ends at the
/// next name, which it keeps.
fn tree(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let s_trim = s.trim_start();
    let skipped = s.len() - s_trim.len();
    let s = s_trim;
    if let Some(inner) = s.strip_prefix('{') {
        let mut at = 1;
        let mut rest = inner;
        loop {
            let r = rest.trim_start();
            at += rest.len() - r.len();
            rest = r;
            if let Some(r) = rest.strip_prefix('}') {
                let _ = r;
                return skipped + at + 1;
            }
            if rest.is_empty() {
                return skipped + at;
            }
            let n = tree(rest, prefix, out);
            at += n;
            rest = &rest[n..];
            let r = rest.trim_start();
            at += rest.len() - r.len();
            rest = r;
            if let Some(r) = rest.strip_prefix(',') {
                at += 1;
                rest = r;
            } else if !rest.starts_with('}') {
                // Not a use tree after all (an expression): stop here.
                return skipped + at;
            }
        }
    }
    let n = ident_len(s);
    let name = &s[..n];
    let lower = n > 0 && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
    if lower && name != "self" && s[n..].starts_with("::") {
        let mut p = prefix.to_vec();
        p.push(name.to_string());
        return skipped + n + 2 + tree(&s[n + 2..], &p, out);
    }
    // The last name: an item, or a module (`{engine, stats}`); the caller
    // keeps the longest prefix that is a module.
    let mut p = prefix.to_vec();
    if n > 0 && name != "self" {
        p.push(name.to_string());
    }
    if !p.is_empty() {
        out.push(p);
    }
    skipped + n
}

/// Every module path `src` names, absolute (from the crate root), for a
/// file whose own module path is `module` (`["tui", "panes"]` for
/// src/tui/panes.rs, `["tui"]` for src/tui/mod.rs). A path may end in an
/// item's name (`tui::panes::cpus`): the caller keeps the longest prefix
/// that is a module. A file's inline test module (`#[cfg(test)] mod tests
/// {`, last by custom) is left out: its `super` is the file itself.
pub fn named(src: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut text = without_comments(src);
    if let Some(i) = text.find("#[cfg(test)]\nmod tests {") {
        text.truncate(i);
    }
    let mut out = Vec::new();
    for (kw, base) in [("crate::", Some(Vec::new())), ("super::", None), ("self::", Some(module.to_vec()))] {
        let mut from = 0;
        while let Some(i) = text[from..].find(kw) {
            let at = from + i;
            from = at + kw.len();
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut start = match &base {
                Some(b) => b.clone(),
                None => {
                    // `super::super::x` climbs once per `super`.
                    let mut m = module.to_vec();
                    m.pop();
                    while text[from..].starts_with("super::") {
                        from += "super::".len();
                        m.pop();
                    }
                    m
                }
            };
            let mut found = Vec::new();
            tree(&text[from..], &start, &mut found);
            if found.is_empty() {
                found.push(std::mem::take(&mut start));
            }
            out.extend(found);
        }
    }
    out
}
