//! A run's summary as `compare` reads it (the fields it needs, by the
//! summary's names), checked, or rebuilt from the CSV's rows where the
//! summary is missing; and where the run's CSV is, from its summary.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::error::Category;

use crate::interval::Method;
use crate::sanitize::visible;

/// What `compare` needs from the run's summary (summary::Summary, by the
/// same field names).
#[derive(Debug, Clone, Deserialize)]
pub struct Meta {
    /// Absent before version 2.
    #[serde(default)]
    pub schema_version: Option<u64>,
    pub mode: String,
    pub duration_ns: u64,
    pub cpus: Vec<MetaCpu>,
    #[serde(default)]
    pub csv: Option<String>,
}

impl Meta {
    /// What the run measured (None: a mode this version does not know,
    /// whose time is then taken as stolen).
    pub fn method(&self) -> Option<Method> {
        Method::of_label(&self.mode)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct MetaCpu {
    pub cpu: u32,
    pub threshold_ns: u64,
    pub hiccups: u64,
}

/// What compare needs of a run whose summary is missing, from its CSV's
/// rows: the CPUs they are on (the threshold of each unknown: its smallest
/// gap stands for it, an upper bound), the time from the first row's start
/// to the last one's end (a lower bound of the run's), passive mode where
/// rows name a watched thread. With the note that says so.
pub(super) fn meta_from_rows(bytes: &[u8], shown: &str, side_shown: &str) -> Result<(Meta, String)> {
    let mut r = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(bytes);
    let header = r.headers().with_context(|| format!("{shown}: unreadable header"))?.clone();
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(t), Some(c), Some(g)) = (col("time_ns"), col("cpu"), col("gap_ns")) else {
        bail!("no run summary beside {shown} ({side_shown} is missing), and it is not a jitterwatch CSV to rebuild one from");
    };
    let victim = col("victim");
    let (mut first, mut last, mut passive) = (u64::MAX, 0u64, false);
    let mut cpus: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    for rec in r.records().flatten() {
        let num = |i: usize| rec.get(i).and_then(|v| v.parse::<u64>().ok());
        let (Some(time), Some(cpu), Some(gap)) = (num(t), num(c), num(g)) else { continue };
        let Ok(cpu) = u32::try_from(cpu) else { continue };
        first = first.min(time);
        last = last.max(time.saturating_add(gap));
        passive |= victim.and_then(|v| rec.get(v)).is_some_and(|v| !v.is_empty());
        let e = cpus.entry(cpu).or_insert((u64::MAX, 0));
        e.0 = e.0.min(gap);
        e.1 += 1;
    }
    if cpus.is_empty() {
        bail!("no run summary beside {shown} ({side_shown} is missing), and no row to rebuild one from: jitterwatch writes it with --csv; or name the --summary-json file");
    }
    let meta = Meta {
        schema_version: None,
        mode: if passive { Method::Passive } else { Method::Spin }.label().to_string(),
        duration_ns: last.saturating_sub(first).max(1),
        cpus: cpus.iter().map(|(&cpu, &(min, n))| MetaCpu { cpu, threshold_ns: min, hiccups: n }).collect(),
        csv: None,
    };
    let note = format!(
        "{shown}: no summary beside it ({side_shown} is missing: a run killed before its end?): rebuilt from its rows: the run's length from its first stall to its last ({:.1} s, a lower bound), each CPU's threshold unknown (its smallest gap shown)",
        meta.duration_ns as f64 / 1e9
    );
    check_cpus(&meta, shown)?;
    Ok((meta, note))
}

pub(super) fn parse_meta(bytes: &[u8], shown: &str) -> Result<Meta> {
    let meta: Meta = serde_json::from_slice(bytes).map_err(|e| {
        let what = match e.classify() {
            Category::Data => data_fault(&e.to_string()),
            Category::Syntax | Category::Eof => "it is not JSON".to_string(),
            Category::Io => e.to_string(),
        };
        anyhow::anyhow!("{shown} is not a jitterwatch run summary: line {}, column {}: {what}", e.line(), e.column())
    })?;
    if let Some(v) = meta.schema_version.filter(|&v| v > crate::summary::SCHEMA_VERSION as u64) {
        bail!(
            "{shown} is a run summary of layout {v}, newer than this jitterwatch reads (up to {}): compare it with the jitterwatch that wrote it",
            crate::summary::SCHEMA_VERSION
        );
    }
    check_cpus(&meta, shown)?;
    Ok(meta)
}

/// What serde found wrong in a summary's fields, without what it quotes
/// of the file (`invalid type: string "root:*:…", expected u64`): the
/// field it missed or what it expected, both words of `Meta`'s.
pub(super) fn data_fault(msg: &str) -> String {
    let msg = msg.rsplit_once(" at line ").map_or(msg, |m| m.0);
    if let Some(field) = msg.strip_prefix("missing field `").and_then(|f| f.strip_suffix('`')) {
        return format!("it has no `{}`", visible(field));
    }
    match msg.rsplit_once(", expected ") {
        Some((_, expected)) => format!("expected {}", visible(expected)),
        None => "a field holds what a run summary does not".to_string(),
    }
}

/// A summary jitterwatch wrote lists each CPU it watched once, one at
/// least, each below what its BPF side can watch (`MAX_CPUS`). Anything
/// else was made by hand or is no summary of ours: 900,000 repeats of one
/// CPU were taken as they came, and 10⁵ CPUs made 10⁵ tables (68 MB).
pub(super) fn check_cpus(meta: &Meta, shown: &str) -> Result<()> {
    const GIVE: &str = "not a summary jitterwatch wrote; give the one its run wrote beside its CSV";
    let max = crate::record::MAX_CPUS;
    if meta.cpus.is_empty() {
        bail!("{shown} lists no CPU: {GIVE}");
    }
    let mut seen = vec![false; max];
    for c in &meta.cpus {
        let Some(s) = seen.get_mut(c.cpu as usize) else {
            bail!("{shown} lists CPU {}, beyond the {max} jitterwatch watches: {GIVE}", c.cpu);
        };
        if std::mem::replace(s, true) {
            bail!("{shown} lists CPU {} twice: {GIVE}", c.cpu);
        }
    }
    Ok(())
}

/// The summary's CSV: where it was written, else the file of that name
/// beside the summary (the two copied elsewhere together).
pub(super) fn csv_of(summary: &Path, meta: &Meta) -> Result<PathBuf> {
    let Some(csv) = meta.csv.as_deref().map(PathBuf::from) else { bail!("the run wrote no CSV (run it with --csv)") };
    if csv.exists() {
        return Ok(csv);
    }
    match (summary.parent(), csv.file_name()) {
        (Some(dir), Some(name)) if dir.join(name).exists() => Ok(dir.join(name)),
        _ => bail!("neither {} nor a file of its name beside it exists", visible(&csv.display().to_string())),
    }
}
