//! The runs' stalls as `explain` holds them: each row of each CSV as a
//! start, an end, whose it was (the watched thread, or the CPU's probe)
//! and its causes as small ids into one table of names, so that a million
//! rows cost tens of MB, not a string per cause. Names stay as the CSV
//! wrote them (escaped); each writer escapes them again for its format.
//! The summary beside each CSV says the run's window and its clocks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::export::{split_causes, HEADER};
use crate::sanitize::visible;
use crate::summary::Clocks;

/// The contract's columns every jitterwatch CSV starts with.
const CONTRACT: usize = 9;

/// One stall: `[start_ns, end_ns)` on CLOCK_MONOTONIC.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpu: u32,
    /// Index into `Stalls::threads`.
    pub thread: u32,
    /// Its causes: `Stalls::causes[from..to]`, largest first as the CSV
    /// lists them; they add up to the stall's length.
    pub from: u32,
    pub to: u32,
}

/// One run's window, read from its summary (or, without one, from its
/// rows: a lower bound) and its clocks.
#[derive(Debug, Clone)]
pub struct Window {
    pub csv: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub clocks: Option<Clocks>,
}

#[derive(Debug, Default)]
pub struct Stalls {
    pub stalls: Vec<Stall>,
    /// (index into `keys`, ns)
    pub causes: Vec<(u32, u64)>,
    /// `kind:name` as the CSV shows it.
    pub keys: Vec<String>,
    /// A watched thread as the CSV's `victim` shows it, or `CPU N` for a
    /// probe's stalls.
    pub threads: Vec<String>,
    pub windows: Vec<Window>,
    pub notes: Vec<String>,
}

/// The summary's fields `explain` reads (summary::Summary's names).
#[derive(Deserialize)]
struct Side {
    duration_ns: u64,
    overhead: SideOverhead,
    #[serde(default)]
    clocks: Option<Clocks>,
}

#[derive(Deserialize)]
struct SideOverhead {
    first_sample_ns: u64,
}

impl Stalls {
    pub fn key(&self, id: u32) -> &str {
        &self.keys[id as usize]
    }

    pub fn causes_of(&self, s: &Stall) -> &[(u32, u64)] {
        &self.causes[s.from as usize..s.to as usize]
    }
}

/// Every row of every CSV in `paths`.
pub fn read(paths: &[PathBuf]) -> Result<Stalls> {
    let mut out = Stalls::default();
    let mut keys: HashMap<String, u32> = HashMap::new();
    let mut threads: HashMap<String, u32> = HashMap::new();
    for p in paths {
        read_one(p, &mut out, &mut keys, &mut threads)?;
    }
    Ok(out)
}

fn intern(map: &mut HashMap<String, u32>, list: &mut Vec<String>, s: &str) -> u32 {
    if let Some(&i) = map.get(s) {
        return i;
    }
    let i = list.len() as u32;
    list.push(s.to_string());
    map.insert(s.to_string(), i);
    i
}

fn read_one(path: &Path, out: &mut Stalls, keys: &mut HashMap<String, u32>, threads: &mut HashMap<String, u32>) -> Result<()> {
    let shown = visible(&path.display().to_string()).into_owned();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read the run {shown}"))?;
    let mut rd = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(std::io::BufReader::new(file));
    let header = rd.headers().with_context(|| format!("{shown}: unreadable header"))?.clone();
    if header.len() < CONTRACT || header.iter().zip(HEADER).take(CONTRACT).any(|(h, want)| h != want) {
        bail!("{shown} is not a jitterwatch CSV: its header does not begin with {}", HEADER[..CONTRACT].join(","));
    }
    let victim = header.iter().position(|h| h == "victim");
    let first = out.stalls.len();
    let mut rec = csv::StringRecord::new();
    let mut line = 1u64;
    // A row that does not parse is an error unless it is the last: a run
    // killed mid-write leaves its last line cut short, which is left out
    // and said.
    let mut bad: Option<anyhow::Error> = None;
    loop {
        match rd.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => bail!("{shown}: unreadable after line {line}: {e}"),
        }
        if let Some(e) = bad.take() {
            return Err(e);
        }
        line = rec.position().map_or(line + 1, |p| p.line());
        let (stalls, causes) = (out.stalls.len(), out.causes.len());
        if let Err(e) = row(&rec, victim, out, keys, threads) {
            out.stalls.truncate(stalls);
            out.causes.truncate(causes);
            bad = Some(anyhow::anyhow!("{shown} line {line}: {e}"));
        }
    }
    if bad.is_some() {
        out.notes.push(format!("{shown}: its last line, cut short (a run killed mid-write?), left out"));
    }
    let rows = &out.stalls[first..];
    let window = match read_side(path)? {
        Some(side) => Window {
            csv: shown.clone(),
            start_ns: side.overhead.first_sample_ns,
            end_ns: side.overhead.first_sample_ns.saturating_add(side.duration_ns),
            clocks: side.clocks,
        },
        None => {
            out.notes.push(format!(
                "no summary beside {shown}: its window is taken from its rows (the first start to the last end), a lower bound"
            ));
            let start = rows.iter().map(|s| s.start_ns).min().unwrap_or(0);
            Window { csv: shown.clone(), start_ns: start, end_ns: rows.iter().map(|s| s.end_ns).max().unwrap_or(start), clocks: None }
        }
    };
    out.windows.push(window);
    Ok(())
}

/// One row of a run's CSV, added to `out`.
fn row(
    rec: &csv::StringRecord,
    victim: Option<usize>,
    out: &mut Stalls,
    keys: &mut HashMap<String, u32>,
    threads: &mut HashMap<String, u32>,
) -> Result<()> {
    if rec.len() < CONTRACT {
        bail!("{} fields, not the contract's {CONTRACT}", rec.len());
    }
    let num = |i: usize, what: &str| -> Result<u64> {
        let v = rec.get(i).unwrap_or("");
        v.parse::<u64>().with_context(|| format!("{what} `{}` is not a number", visible(v)))
    };
    let (start, cpu, gap) = (num(0, "time_ns")?, num(1, "cpu")?, num(2, "gap_ns")?);
    let cpu = u32::try_from(cpu).with_context(|| format!("cpu {cpu} is not a CPU"))?;
    let whose = match victim.and_then(|v| rec.get(v)).filter(|v| !v.is_empty()) {
        Some(v) => intern(threads, &mut out.threads, v),
        None => intern(threads, &mut out.threads, &format!("CPU {cpu}")),
    };
    let from = out.causes.len() as u32;
    for c in split_causes(rec.get(8).unwrap_or("")) {
        let (kind, name, ns) = c.map_err(|e| anyhow::anyhow!("{e}"))?;
        let k = intern(keys, &mut out.keys, &format!("{kind}:{name}"));
        out.causes.push((k, ns));
    }
    if out.causes.len() as u32 == from {
        // A row without causes: its whole length unexplained.
        let k = intern(keys, &mut out.keys, "unexplained:");
        out.causes.push((k, gap));
    }
    let end = start.checked_add(gap).context("time_ns + gap_ns overflows")?;
    out.stalls.push(Stall { start_ns: start, end_ns: end, cpu, thread: whose, from, to: out.causes.len() as u32 });
    Ok(())
}

/// The summary beside a CSV, if there is one.
fn read_side(csv: &Path) -> Result<Option<Side>> {
    let side = crate::summary::sidecar(csv);
    let shown = visible(&side.display().to_string()).into_owned();
    let bytes = match std::fs::read(&side) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot read the run summary {shown}: {e}"),
    };
    let s: Side = serde_json::from_slice(&bytes).with_context(|| format!("{shown} is not a jitterwatch run summary"))?;
    Ok(Some(s))
}
