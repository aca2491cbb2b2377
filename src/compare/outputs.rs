//! The chart's files, checked before anything is written: one that is an
//! input (a run's CSV or summary: `report same.csv --svg same.csv` replaced
//! the CSV with its chart) or is the other chart's file is refused, and so
//! is one that exists and is not a regular file. output::create checks
//! the file again as it opens it, for one put there since.

use std::path::Path;

use anyhow::{bail, Result};

use super::input::Run;
use crate::output::Ident;
use crate::sanitize::visible;

/// Refuses `outputs` (the option that named each, its path) that are an
/// input of `runs`, one another, or an existing non-file.
pub fn check(outputs: &[(&str, &Path)], runs: &[Run]) -> Result<()> {
    let inputs: Vec<(Ident, &str, &str)> = runs
        .iter()
        .flat_map(|r| [(Ident::of(&r.csv), "CSV", r.label.as_str()), (Ident::of(&r.summary), "summary", r.label.as_str())])
        .collect();
    let mut seen: Vec<(Ident, &str)> = Vec::new();
    for &(opt, path) in outputs {
        let shown = visible(&path.display().to_string()).into_owned();
        if let Ok(m) = path.symlink_metadata() {
            // A link is output::create's to refuse, with its own reason.
            if !m.is_file() && !m.file_type().is_symlink() {
                bail!("cannot write the chart {shown}: it is {}, not a regular file", super::file::what(&m.file_type()));
            }
        }
        let id = Ident::of(path);
        if let Some((_, what, label)) = inputs.iter().find(|i| i.0.same(&id)) {
            bail!("cannot write the chart {shown}: it is an input, the {what} of {label} (refused: the chart would replace it)");
        }
        if let Some((_, other)) = seen.iter().find(|s| s.0.same(&id)) {
            bail!("{other} and {opt} name one file, {shown}: give each its own");
        }
        seen.push((id, opt));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_by_any_name() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.csv");
        std::fs::write(&a, "x").unwrap();
        let link = d.path().join("link.svg");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let id = Ident::of(&a);
        assert!(id.same(&Ident::of(&link)), "a link is its target");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(id.same(&Ident::of(&d.path().join("sub/../a.csv"))), "another spelling");
        // Not yet written: their canonical paths.
        let (n1, n2) = (Ident::of(&d.path().join("new.png")), Ident::of(&d.path().join("sub/../new.png")));
        assert!(n1.inode.is_none() && n1.same(&n2));
        assert!(!n1.same(&id));
        // A relative path is the same file as its absolute spelling.
        let here = std::env::current_dir().unwrap();
        assert!(Ident::of(Path::new("Cargo.toml")).same(&Ident::of(&here.join("Cargo.toml"))));
        assert!(Ident::of(Path::new("no-such.svg")).same(&Ident::of(&here.join("no-such.svg"))));
    }
}
