//! The application's own log of its operations, as `explain` reads it: a
//! start and an end per operation on one clock. Two shapes: sockperf's
//! `--full-log` (found by its header line; seconds with nine decimals),
//! or any CSV with a header whose columns the user names (`--start`,
//! `--end`, `--latency`) in a unit they name. The file is untrusted
//! input: a field that does not parse is an error naming its line, and
//! rows out of order are refused, never silently reordered.

use std::io::{BufRead, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::sanitize::visible;

/// One operation, ns on the log's clock, `start_ns <= end_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Op {
    pub fn latency_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// The unit of a CSV's times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Unit {
    S,
    Ms,
    Us,
    Ns,
}

impl Unit {
    /// Decimal digits below the unit that still name whole ns.
    fn digits(self) -> u32 {
        match self {
            Unit::S => 9,
            Unit::Ms => 6,
            Unit::Us => 3,
            Unit::Ns => 0,
        }
    }
}

/// Which columns of a CSV say when each operation began and ended: a
/// header name, or a 1-based number.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    pub start: Option<String>,
    pub end: Option<String>,
    pub latency: Option<String>,
    pub unit: Option<Unit>,
}

impl Columns {
    fn named(&self) -> bool {
        self.start.is_some() || self.end.is_some() || self.latency.is_some() || self.unit.is_some()
    }
}

/// The operations of one log, in the order they began, and what the
/// reader must know of them.
#[derive(Debug, Default)]
pub struct Log {
    pub ops: Vec<Op>,
    /// `sockperf --full-log` or `CSV`.
    pub format: &'static str,
    pub notes: Vec<String>,
}

/// The header line of sockperf's full log (3.7: `packet, txTime(sec),
/// rxTime(sec), latency(usec)` or `rtt(usec)`; before 3.6: `txTime,
/// rxTime`), and where tx and rx are in its rows.
fn sockperf_header(line: &str) -> Option<(usize, usize)> {
    let cols: Vec<&str> = line.split(',').map(str::trim).collect();
    match cols.as_slice() {
        ["packet", "txTime(sec)", "rxTime(sec)", ..] => Some((1, 2)),
        ["txTime", "rxTime"] => Some((0, 1)),
        _ => None,
    }
}

pub fn read(path: &Path, cols: &Columns) -> Result<Log> {
    let shown = visible(&path.display().to_string()).into_owned();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read the operations log {shown}"))?;
    let mut r = std::io::BufReader::new(file);
    // Which shape: sockperf's header within its report's first lines,
    // else a CSV whose columns the user named.
    let mut head = Vec::new();
    let mut line = String::new();
    let mut sockperf = None;
    while head.len() < 200 && r.read_line(&mut line).with_context(|| format!("cannot read {shown}"))? > 0 {
        if let Some(at) = sockperf_header(line.trim_end()) {
            sockperf = Some(at);
            break;
        }
        head.push(std::mem::take(&mut line));
    }
    match (sockperf, cols.named()) {
        (Some(_), true) => bail!(
            "{shown} is sockperf's --full-log, whose columns and unit are known: --start, --end, --latency and --unit are for a CSV"
        ),
        (Some(at), false) => sockperf_rows(r, at, head.len() + 1, &shown),
        (None, false) => bail!(
            "{shown} is not sockperf's --full-log (no `packet, txTime(sec), rxTime(sec)` line): name its columns with --start and --end (or --latency) and their --unit"
        ),
        (None, true) => {
            let rest = std::io::Cursor::new(head.concat()).chain(r);
            csv_rows(rest, cols, &shown)
        }
    }
}

/// sockperf's rows after its header: `N, TX, RX, LATENCY` until a line of
/// dashes; a client of several servers writes one block each (merged by
/// start). A row whose reply never came (rx 0, or before tx) is left out
/// and counted.
fn sockperf_rows(r: impl BufRead, (tx, rx): (usize, usize), first: usize, shown: &str) -> Result<Log> {
    let mut blocks: Vec<Vec<Op>> = vec![Vec::new()];
    let mut in_block = true;
    let mut unanswered = 0u64;
    for (i, line) in r.lines().enumerate() {
        let n = first + i + 1;
        let line = line.with_context(|| format!("cannot read {shown}"))?;
        let t = line.trim();
        if t.starts_with("---") {
            in_block = false;
            continue;
        }
        if sockperf_header(t).is_some() {
            blocks.push(Vec::new());
            in_block = true;
            continue;
        }
        if !in_block || t.is_empty() {
            continue;
        }
        let f: Vec<&str> = t.split(',').map(str::trim).collect();
        let field = |k: usize| -> Result<u64> {
            let v = f.get(k).with_context(|| format!("{shown} line {n}: {} fields, not sockperf's row", f.len()))?;
            decimal_ns(v, Unit::S).with_context(|| format!("{shown} line {n}: `{}` is not a time in seconds", visible(v)))
        };
        let (s, e) = (field(tx)?, field(rx)?);
        if e == 0 || e < s {
            unanswered += 1;
            continue;
        }
        blocks.last_mut().expect("one at least").push(Op { start_ns: s, end_ns: e });
    }
    let mut notes = Vec::new();
    for (b, ops) in blocks.iter().enumerate() {
        if let Some(w) = ops.windows(2).position(|w| w[1].start_ns < w[0].start_ns) {
            bail!(
                "{shown}: operation {} of block {} starts before the one above it: sockperf writes them in order, so the log is damaged",
                w + 1,
                b + 1
            );
        }
    }
    if unanswered > 0 {
        notes.push(format!("{unanswered} messages without a reply left out"));
    }
    let many = blocks.iter().filter(|b| !b.is_empty()).count() > 1;
    let mut ops: Vec<Op> = blocks.into_iter().flatten().collect();
    if many {
        ops.sort_by_key(|o| o.start_ns);
    }
    if ops.is_empty() {
        bail!("{shown}: sockperf's --full-log lists no message");
    }
    Ok(Log { ops, format: "sockperf --full-log", notes })
}

/// A CSV with a header: its named columns, each row one operation.
fn csv_rows(r: impl std::io::Read, cols: &Columns, shown: &str) -> Result<Log> {
    let unit = cols.unit.unwrap_or(Unit::Ns);
    let mut rd = csv::ReaderBuilder::new().has_headers(true).flexible(true).trim(csv::Trim::All).from_reader(r);
    let header = rd.headers().with_context(|| format!("{shown}: unreadable header"))?.clone();
    let find = |name: &Option<String>, opt: &str| -> Result<Option<usize>> {
        let Some(name) = name else { return Ok(None) };
        if let Some(i) = header.iter().position(|h| h == name) {
            return Ok(Some(i));
        }
        match name.parse::<usize>() {
            Ok(k) if k >= 1 && k <= header.len() => Ok(Some(k - 1)),
            _ => bail!(
                "{opt} {}: {shown} has no such column (its header: {})",
                visible(name),
                visible(&header.iter().collect::<Vec<_>>().join(","))
            ),
        }
    };
    let (s, e, l) = (find(&cols.start, "--start")?, find(&cols.end, "--end")?, find(&cols.latency, "--latency")?);
    let shape = match (s, e, l) {
        (Some(s), Some(e), None) => (s, e, false, false),
        (Some(s), None, Some(l)) => (s, l, true, false),
        (None, Some(e), Some(l)) => (e, l, true, true),
        _ => bail!("name when each operation began and ended: --start and --end, --start and --latency, or --end and --latency"),
    };
    let mut ops = Vec::new();
    let mut rec = csv::StringRecord::new();
    let mut line = 1u64;
    while rd.read_record(&mut rec).with_context(|| format!("{shown}: unreadable after line {line}"))? {
        line = rec.position().map_or(line + 1, |p| p.line());
        if rec.iter().all(str::is_empty) {
            continue;
        }
        let num = |k: usize, what: &str| -> Result<u64> {
            let v = rec.get(k).unwrap_or("");
            decimal_ns(v, unit).with_context(|| format!("{shown} line {line}: {what} `{}` is not a number of {unit:?}", visible(v)))
        };
        let (a, b) = (num(shape.0, "the time")?, num(shape.1, if shape.2 { "the latency" } else { "the end" })?);
        let op = match shape {
            (_, _, false, _) if b < a => bail!("{shown} line {line}: it ends before it starts"),
            (_, _, false, _) => Op { start_ns: a, end_ns: b },
            (_, _, true, false) => Op { start_ns: a, end_ns: a.checked_add(b).context("a time past the year 2554")? },
            (_, _, true, true) => {
                Op { start_ns: a.checked_sub(b).with_context(|| format!("{shown} line {line}: a latency longer than its end"))?, end_ns: a }
            }
        };
        if ops.last().is_some_and(|p: &Op| op.start_ns < p.start_ns) {
            bail!("{shown} line {line}: starts before the row above it: sort the log by when each operation began");
        }
        ops.push(op);
    }
    if ops.is_empty() {
        bail!("{shown}: no operation under its header");
    }
    Ok(Log { ops, format: "CSV", notes: Vec::new() })
}

/// `v` in `unit` as whole ns, exactly: digits, at most one `.`; digits
/// past a ns are rounded half up. No sign, no exponent.
pub fn decimal_ns(v: &str, unit: Unit) -> Option<u64> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if int.is_empty() && frac.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let d = unit.digits() as usize;
    let scale = 10u64.pow(d as u32);
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let kept = &frac[..frac.len().min(d)];
    let mut part: u64 = if kept.is_empty() { 0 } else { kept.parse::<u64>().ok()? * 10u64.pow((d - kept.len()) as u32) };
    if frac.as_bytes().get(d).is_some_and(|&b| b >= b'5') {
        part += 1;
    }
    whole.checked_mul(scale)?.checked_add(part)
}
