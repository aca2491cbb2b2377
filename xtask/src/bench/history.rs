//! The bench's history: bench-history.jsonl at the repository root, one
//! JSON line per `cargo xtask bench` run, appended by the run and never
//! edited by hand. BENCHMARKS.md's history table is drawn from it.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::figures::Figures;
use super::ids::Id;
use super::results::Machine;
use super::summary::measured;
use super::verdicts::judge;

/// The file, at the repository root.
pub const FILE: &str = "bench-history.jsonl";

/// How many runs of each figure the table shows.
pub const SHOWN: usize = 5;

/// One run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `git rev-parse --short HEAD`, with "-dirty" when the tree had
    /// changes beyond what the bench writes.
    pub commit: String,
    /// UTC, "YYYY-MM-DD HH:MM UTC".
    pub date: String,
    /// Where the line came from when not from a run (a transcription).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default)]
    pub machine: Machine,
    /// Every figure, its values null where not measured.
    #[serde(default)]
    pub figures: Figures,
}

/// The commit as the history records it.
pub fn commit_label(short: &str, dirty: bool) -> String {
    if dirty {
        format!("{short}-dirty")
    } else {
        short.to_string()
    }
}

/// The runs in `text`, oldest first; a line that does not parse is an
/// error naming it (the file is the record: it must not be skipped over).
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{FILE} line {}", i + 1)))
        .collect()
}

/// The runs in the file at `path` (none when it does not exist yet).
pub fn load(path: &Path) -> Result<Vec<Entry>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// One line for `e`. Non-finite numbers become null.
pub fn line(e: &Entry) -> Result<String> {
    Ok(serde_json::to_string(e)? + "\n")
}

/// Appends `e` to the file at `path`.
pub fn append(path: &Path, e: &Entry) -> Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("opening {}", path.display()))?;
    f.write_all(line(e)?.as_bytes()).with_context(|| format!("appending to {}", path.display()))
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The history section: for each figure, its last `shown` runs, newest
/// first, with what they measured and their verdict against today's
/// target; a run whose method differs from the figure's previous run says
/// so in its row.
pub fn table(entries: &[Entry], shown: usize) -> String {
    let mut o = String::from("## History\n\n");
    o += &format!(
        "Drawn from `{FILE}`: one line per `cargo xtask bench` run, appended by the run, never edited by hand \
         (`cargo xtask bench --report-only` redraws this file from it without measuring). The last {shown} runs of each \
         figure, newest first; verdicts against today's targets. A run whose method differs from the figure's run before \
         it says so: its figure may have moved because the measurement did. The hand-kept \"Before and after\" notes \
         this table replaced (changes and their effect, up to a8ac5ba) stay in git: `git show 4bd7321:BENCHMARKS.md`.\n\n"
    );
    o += "| figure | run | measured | verdict | method |\n|---|---|---|---|---|\n";
    for &id in Id::ALL {
        // (index in the history, this run's method) of the runs that have the figure.
        let runs: Vec<(usize, Option<&str>)> =
            entries.iter().enumerate().map(|(i, e)| (i, e.figures.get(&id).map(|f| f.method.as_str()))).collect();
        let mut first = true;
        for &(i, method) in runs.iter().rev().take(shown) {
            let e = &entries[i];
            let before = runs[..i].iter().rev().find_map(|&(_, m)| m);
            let note = match (method, before) {
                (None, _) => "—".to_string(),
                (Some(m), None) => format!("first recorded: {m}"),
                (Some(m), Some(b)) if m == b => "same".to_string(),
                (Some(m), Some(b)) => format!("**changed**: {m} (was: {b})"),
            };
            let run = match &e.source {
                Some(src) => format!("{} `{}` ({src})", e.date, e.commit),
                None => format!("{} `{}`", e.date, e.commit),
            };
            o += &format!(
                "| {} | {} | {} | {} | {} |\n",
                if first { id.title() } else { "" },
                cell(&run),
                cell(&measured(id, &e.figures)),
                judge(id, &e.figures).as_str(),
                cell(&note)
            );
            first = false;
        }
    }
    if entries.is_empty() {
        o += "\nNo run recorded yet.\n";
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::figures::Figure;

    /// Three runs: figure 5 measured, then not (null), then measured again
    /// by a changed method; figure 1 absent from the first.
    fn fixture() -> Vec<Entry> {
        let run = |commit: &str, date: &str, figs: Vec<(Id, Figure)>| Entry {
            commit: commit.into(),
            date: date.into(),
            source: None,
            machine: Machine::default(),
            figures: figs.into_iter().collect(),
        };
        let rss = |m: &str, v: Option<f64>| Figure::new(m).with("peak_rss_mib", v);
        let probe = |v: f64| Figure::new("v1 probe").with("floor_ratio", Some(v)).with("quiet_ratio", Some(v));
        let mut first = run("a8ac5ba", "2026-11-23 18:09 UTC", vec![(Id::PeakRss, rss("v1 rss", Some(27.2)))]);
        first.source = Some("transcribed from BENCHMARKS.md".into());
        vec![
            first,
            run("b000001", "2026-11-24 10:00 UTC", vec![(Id::PeakRss, rss("v1 rss", None)), (Id::ProbeFloor, probe(1.05))]),
            run("c000002-dirty", "2026-11-25 10:00 UTC", vec![(Id::PeakRss, rss("v2 rss", Some(40.0))), (Id::ProbeFloor, probe(1.2))]),
        ]
    }

    fn rows_of<'a>(t: &'a str, name: &str) -> Vec<&'a str> {
        let lines: Vec<&str> = t.lines().collect();
        let start = lines.iter().position(|l| l.starts_with(&format!("| {name} |"))).expect(name);
        lines[start..].iter().take_while(|l| l.starts_with(&format!("| {name} |")) || l.starts_with("|  |")).copied().collect()
    }

    #[test]
    fn the_table_says_what_changed() {
        let t = table(&fixture(), 5);
        let five = rows_of(&t, "5. Peak RSS");
        assert_eq!(five.len(), 3, "{t}");
        assert!(five[0].contains("`c000002-dirty`") && five[0].contains("40.0 MiB") && five[0].contains("**MISSED**"), "{}", five[0]);
        assert!(five[0].contains("**changed**: v2 rss (was: v1 rss)"), "{}", five[0]);
        assert!(five[1].contains("not measured | not measured | same"), "a null figure: {}", five[1]);
        assert!(
            five[2].contains("(transcribed from BENCHMARKS.md)") && five[2].contains("27.2 MiB | met | first recorded: v1 rss"),
            "{}",
            five[2]
        );
        let one = rows_of(&t, "1. Probe floor");
        assert_eq!(one.len(), 3);
        assert!(one[1].contains("1.05×") && one[1].contains("| met | first recorded"), "{}", one[1]);
        assert!(one[2].contains("| not measured | not measured | — |"), "absent from a run: {}", one[2]);
        let six = rows_of(&t, "6. Start-up");
        assert!(six.iter().all(|r| r.contains("| not measured | not measured | — |")), "{six:?}");
    }

    #[test]
    fn the_table_keeps_the_last_runs() {
        let t = table(&fixture(), 1);
        assert_eq!(rows_of(&t, "5. Peak RSS").len(), 1);
        assert!(rows_of(&t, "5. Peak RSS")[0].contains("**changed**"), "the method compares with the run before, shown or not");
    }

    #[test]
    fn lines_round_trip_with_null_for_nan() {
        let mut e = fixture().remove(2);
        e.figures.insert(Id::Startup, Figure::new("v1").with("first_event_ms", Some(f64::NAN)));
        let l = line(&e).unwrap();
        assert!(l.ends_with('\n') && !l.trim_end().contains('\n'));
        assert!(l.contains("\"first_event_ms\":null"), "{l}");
        let back = parse(&format!("{l}\n{l}")).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].figures[&Id::Startup].get("first_event_ms"), None);
        assert_eq!(back[0].figures[&Id::PeakRss], e.figures[&Id::PeakRss]);
        assert!(parse("{\"commit\":").unwrap_err().to_string().contains("line 1"));
        assert_eq!(commit_label("a8ac5ba", true), "a8ac5ba-dirty");
    }

    /// The committed history, written while figures were keyed by strings,
    /// reads into typed figures with nothing lost, and writes them back
    /// under the same ids; an id no figure has stops the read at its line.
    #[test]
    fn the_committed_history_reads_as_typed_figures() {
        let text = include_str!("../../../bench-history.jsonl");
        let entries = parse(text).unwrap();
        assert_eq!(entries.len(), text.lines().filter(|l| !l.trim().is_empty()).count());
        for (raw, e) in text.lines().zip(&entries) {
            let raw: serde_json::Value = serde_json::from_str(raw).unwrap();
            assert!(!e.figures.is_empty(), "{}", e.commit);
            assert_eq!(serde_json::to_value(&e.figures).unwrap(), raw["figures"], "{}", e.commit);
        }
        let unknown = r#"{"commit":"x","date":"d","figures":{"9":{"method":"m","values":{}}}}"#;
        let err = format!("{:#}", parse(&format!("{}\n{unknown}\n", line(&entries[0]).unwrap().trim_end())).unwrap_err());
        assert!(err.starts_with("bench-history.jsonl line 2: unknown variant `9`"), "{err}");
    }
}
