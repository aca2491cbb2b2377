//! One run as `compare` reads it back: its CSV's rows and the summary
//! written beside it (the run's duration, mode and per-CPU threshold,
//! which the rows alone do not say). Both files are untrusted input: a
//! field that does not parse is an error naming the file and line; a last
//! line cut short (a run killed mid-write, a copy interrupted) is left out
//! and said.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::file::{self, Kind};
pub use super::meta::Meta;
use super::meta::{csv_of, meta_from_rows, parse_meta};
use crate::export::{split_causes, HEADER};
use crate::sanitize::{guard, visible};

/// The columns of the contract every jitterwatch CSV starts with.
const CONTRACT: usize = 9;

/// One hiccup: its length, the part named by kernel events (lost time
/// excluded), whose it was (passive mode) and its causes. Its CPU is where
/// `Run::by_cpu` lists it.
#[derive(Debug, Clone)]
pub struct Row {
    pub gap_ns: u64,
    pub named_ns: u64,
    pub victim: Option<u32>,
    /// (index into `Run::keys`, ns)
    pub causes: Vec<(u32, u64)>,
}

#[derive(Debug)]
pub struct Run {
    /// Escaped (`sanitize::visible`), as every name here.
    pub label: String,
    pub csv: PathBuf,
    /// The summary read with it (named, or found beside the CSV).
    pub summary: PathBuf,
    pub meta: Meta,
    pub rows: Vec<Row>,
    /// Causes as `kind:name`, a task without its pid (the same program in
    /// two runs has two pids); names as the CSV shows them.
    pub keys: Vec<String>,
    /// Passive mode's watched threads by name, as the CSV shows it, without
    /// the tid (a program's threads have new tids in each run).
    pub victims: Vec<String>,
    /// Each CPU the summary lists, with its rows: a CPU's table is a
    /// lookup, not a pass over every row (a pass per CPU made 10⁵ CPUs
    /// quadratic).
    pub by_cpu: HashMap<u32, OnCpu>,
    pub notes: Vec<String>,
}

/// One watched CPU of a run: its threshold and its rows (indices into
/// `Run::rows`).
#[derive(Debug, Default)]
pub struct OnCpu {
    pub threshold_ns: u64,
    pub rows: Vec<usize>,
}

impl Run {
    pub fn duration_s(&self) -> f64 {
        self.meta.duration_ns as f64 / 1e9
    }

    pub fn watched(&self) -> Vec<u32> {
        self.meta.cpus.iter().map(|c| c.cpu).collect()
    }
}

/// A run named by its CSV (its summary beside it, `summary::sidecar`) or
/// by its summary (which names its CSV).
pub fn load(path: &Path, label: Option<String>) -> Result<Run> {
    let shown = path.display().to_string();
    let shown = visible(&shown);
    let (kind, bytes) = file::read(path, &shown, None)?;
    // The CSV as errors name it, and whether they may quote it: only a
    // CSV named on the command line is the user's own; one a summary
    // names may be any file (/etc/shadow, read as root).
    let mut rebuilt = None;
    let (csv_path, summary, csv_bytes, mut meta, csv_shown, quote) = if kind == Kind::Summary {
        let meta = parse_meta(&bytes, &shown)?;
        let csv = csv_of(path, &meta).with_context(|| format!("{shown} is a run summary without its CSV"))?;
        let named = format!("{}, the CSV {shown} names,", visible(&csv.display().to_string()));
        let (_, b) = file::read(&csv, named.trim_end_matches(','), Some(Kind::Csv))?;
        (csv, path.to_path_buf(), b, meta, named, false)
    } else {
        let side = crate::summary::sidecar(path);
        let side_shown = side.display().to_string();
        let side_shown = visible(&side_shown);
        let meta = if side.symlink_metadata().is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            // A run killed before its end (SIGKILL, a crash) leaves its CSV
            // whole and no summary: rebuilt from the rows, said as such.
            let (meta, note) = meta_from_rows(&bytes, &shown, &side_shown)?;
            rebuilt = Some(note);
            meta
        } else {
            let (_, m) = file::read(&side, &side_shown, Some(Kind::Summary))?;
            parse_meta(&m, &side_shown)?
        };
        (path.to_path_buf(), side, bytes, meta, shown.clone().into_owned(), true)
    };
    if meta.duration_ns == 0 {
        bail!("{shown}: the run lasted 0 s, nothing to compare");
    }
    // Shown on a terminal and in the chart: escaped and clamped.
    let label = label.unwrap_or_else(|| {
        csv_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| csv_path.display().to_string())
    });
    let label = super::label::clamp(&label);
    // The summary's text, shown on a terminal: escaped and clamped as a
    // label (jitterwatch writes a word: probe, wakeup, passive).
    meta.mode = super::label::clamp(&meta.mode);
    let mut run = Run {
        label,
        csv: csv_path,
        summary,
        meta,
        rows: Vec::new(),
        keys: Vec::new(),
        victims: Vec::new(),
        by_cpu: HashMap::new(),
        notes: Vec::new(),
    };
    run.notes.extend(rebuilt);
    run.by_cpu = run.meta.cpus.iter().map(|c| (c.cpu, OnCpu { threshold_ns: c.threshold_ns, rows: Vec::new() })).collect();
    let on_listed = read_rows(&csv_bytes, &csv_shown, quote, &mut run)?;
    // u128: each count is a u64 read from the file.
    let counted: u128 = run.meta.cpus.iter().map(|c| c.hiccups as u128).sum();
    if on_listed as u128 != counted {
        run.notes.push(format!(
            "{}: the CSV holds {on_listed} rows and the summary counted {counted} hiccups (a reset during the run, or a file cut short)",
            run.label,
        ));
    }
    Ok(run)
}

/// Reads the rows onto `run` and says how many were on a CPU its summary
/// lists (those kept, and those left out as impossible). Every figure is a
/// u64 from the file, added with a check: a sum that would wrap is no
/// figure a run wrote. `name` is the CSV as errors name it; `quote`: they
/// may quote its text (false for a file the user did not name).
fn read_rows(bytes: &[u8], name: &str, quote: bool, run: &mut Run) -> Result<usize> {
    if bytes.is_empty() {
        bail!("{name} is empty: not a jitterwatch CSV (it has no header)");
    }
    // A run stopped mid-write, or a partial copy: compare what is whole.
    let whole = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) if i + 1 < bytes.len() => {
            run.notes
                .push(format!("{name}: its last line is cut short ({} bytes): compared the whole rows before it", bytes.len() - i - 1));
            &bytes[..=i]
        }
        Some(_) => bytes,
        None => bail!("{name} has no complete line: not a jitterwatch CSV"),
    };
    let mut r = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(whole);
    let header = r.headers().with_context(|| format!("{name}: unreadable header"))?.clone();
    if header.len() < CONTRACT || header.iter().take(CONTRACT).ne(HEADER.iter().take(CONTRACT).copied()) {
        let contract = HEADER[..CONTRACT].join(",");
        if quote {
            let shown: Vec<&str> = header.iter().take(CONTRACT).collect();
            bail!("{name} is not a jitterwatch CSV: its header begins `{}`, not `{contract}`", visible(&shown.join(",")));
        }
        bail!("{name} is not a jitterwatch CSV: its header is not `{contract}`");
    }
    let victim_col = header.iter().position(|h| h == "victim");
    let source_col = header.iter().position(|h| h == "source");
    let in_syscall = crate::interval::Source::InSyscall.as_str();
    let mut keys: HashMap<String, u32> = HashMap::new();
    let mut victims: HashMap<String, u32> = HashMap::new();
    // Rows left out, said in a note rather than dropped silently or
    // refused whole: the rest of the run is still worth comparing.
    let mut unlisted = Skipped::default();
    let mut over_gap = Skipped::default();
    let mut own_work = 0u64;
    let mut on_listed = 0;
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.with_context(|| format!("{name}, line {line}"))?;
        if rec.len() != header.len() {
            bail!("{name}, line {line}: {} fields where the header has {}", rec.len(), header.len());
        }
        let num = |col: usize| -> Result<u64> {
            rec[col].parse().map_err(|_| {
                let what = if quote { format!("is `{}`, not a number", visible(&rec[col])) } else { "is not a number".to_string() };
                anyhow::anyhow!("{name}, line {line}: {} {what}", HEADER[col])
            })
        };
        let (cpu, gap) = (num(1)?, num(2)?);
        let cpu = u32::try_from(cpu).with_context(|| format!("{name}, line {line}: cpu {cpu} is out of range"))?;
        // `--csv-in-syscall`'s rows are the watched thread's own work, not
        // hiccups: the summary does not count them, nor does compare.
        if source_col.is_some_and(|c| &rec[c] == in_syscall) {
            own_work += 1;
            continue;
        }
        let mut row = Row { gap_ns: gap, named_ns: 0, victim: None, causes: Vec::new() };
        // None once the causes add up past u64: more than any gap.
        let mut named = Some(0u64);
        for c in split_causes(&rec[8]) {
            let (kind, cname, ns) = c.map_err(|e| match quote {
                true => anyhow::anyhow!("{name}, line {line}: a cause {e}"),
                false => anyhow::anyhow!("{name}, line {line}: a cause is not kind:name=ns"),
            })?;
            if kind != "unexplained" && kind != "lost" {
                named = named.and_then(|n| n.checked_add(ns));
            }
            // Names were escaped when written; `guard` catches a file made
            // by hand with raw control or format characters.
            let key = match without_pid(kind, &cname) {
                "" => guard(kind).into_owned(),
                name => format!("{}:{}", guard(kind), guard(name)),
            };
            let n = keys.len() as u32;
            let id = *keys.entry(key).or_insert(n);
            row.causes.push((id, ns));
        }
        let Some(on_cpu) = run.by_cpu.get_mut(&cpu) else {
            unlisted.add(line, cpu);
            continue;
        };
        on_listed += 1;
        match named.filter(|&n| n <= gap) {
            Some(n) => row.named_ns = n,
            None => {
                over_gap.add(line, cpu);
                continue;
            }
        }
        if let Some(v) = victim_col.map(|c| &rec[c]).filter(|v| !v.is_empty()) {
            let n = victims.len() as u32;
            row.victim = Some(*victims.entry(guard(without_pid("task", v)).into_owned()).or_insert(n));
        }
        on_cpu.rows.push(run.rows.len());
        run.rows.push(row);
    }
    if let Some(first) = over_gap.first {
        run.notes.push(format!(
            "{name}: {} left out, {} causes adding up to more than {} gap (the first on line {first}): the CSV was edited or is damaged",
            rows(over_gap.count),
            if over_gap.count == 1 { "its" } else { "their" },
            if over_gap.count == 1 { "its" } else { "their" },
        ));
    }
    if let Some(first) = unlisted.first {
        run.notes.push(format!(
            "{name}: {} on {} left out (the first on line {first}): its summary does not list {}; is it this run's summary?",
            rows(unlisted.count),
            cpus(&unlisted.cpus),
            if unlisted.cpus.len() == 1 { "that CPU" } else { "those CPUs" },
        ));
    }
    if own_work > 0 {
        run.notes.push(format!(
            "{name}: {} of the watched threads' own system calls (source {in_syscall}, --csv-in-syscall) left out: their work, not hiccups",
            rows(own_work as usize),
        ));
    }
    run.keys = ordered(keys);
    run.victims = ordered(victims);
    Ok(on_listed)
}

/// Rows left out for one reason: how many, the first's line, their CPUs.
#[derive(Default)]
struct Skipped {
    count: usize,
    first: Option<usize>,
    cpus: std::collections::BTreeSet<u32>,
}

impl Skipped {
    fn add(&mut self, line: usize, cpu: u32) {
        self.count += 1;
        self.first.get_or_insert(line);
        self.cpus.insert(cpu);
    }
}

fn rows(n: usize) -> String {
    if n == 1 {
        "1 row".to_string()
    } else {
        format!("{n} rows")
    }
}

/// CPUs as a note names them: a few, then how many more (a hand-made
/// file may name thousands).
fn cpus(set: &std::collections::BTreeSet<u32>) -> String {
    const SHOWN: usize = 8;
    let first: Vec<usize> = set.iter().take(SHOWN).map(|&c| c as usize).collect();
    let list = crate::cpulist::Display(&first).to_string();
    let word = if set.len() == 1 { "CPU" } else { "CPUs" };
    match set.len() - first.len() {
        0 => format!("{word} {list}"),
        more => format!("{word} {list} and {more} more"),
    }
}

fn ordered(m: HashMap<String, u32>) -> Vec<String> {
    let mut v: Vec<(String, u32)> = m.into_iter().collect();
    v.sort_by_key(|e| e.1);
    v.into_iter().map(|e| e.0).collect()
}

/// A task's name without its pid (`stress-ng[4242]` → `stress-ng`,
/// `cc1[*]` → `cc1`), so one program in two runs is one cause.
fn without_pid<'a>(kind: &str, name: &'a str) -> &'a str {
    if kind != "task" || !name.ends_with(']') {
        return name;
    }
    match name.rfind('[') {
        Some(i) if name[i + 1..name.len() - 1].chars().all(|c| c.is_ascii_digit() || c == '*') => &name[..i],
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_its_program() {
        assert_eq!(without_pid("task", "stress-ng[4242]"), "stress-ng");
        assert_eq!(without_pid("task", "cc1[*]"), "cc1");
        assert_eq!(without_pid("task", "a[1][5]"), "a[1]");
        assert_eq!(without_pid("task", "odd[x]"), "odd[x]");
        assert_eq!(without_pid("work", "f[1]"), "f[1]");
    }
}
