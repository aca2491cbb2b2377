//! `explain`'s answer as text for a terminal and as JSON. Names are as
//! the runs' CSVs wrote them (escaped there: `\x1b` as four characters)
//! and guarded again for each: `guard` for the terminal (a raw control
//! character a hand-edited CSV holds is written visibly, the CSV's own
//! escapes left as they are), serde's string escaping for JSON.

use std::io::{self, Write};

use serde::{Serialize, Serializer};

use std::collections::{BTreeSet, HashMap};

use super::model::{InOp, SlowOp, Tally};
use super::Report;
use crate::sanitize::guard;
use crate::units::ns;

/// A cause's key as read: `kind` alone where the name is empty
/// (`unexplained`).
pub fn label(key: &str) -> &str {
    key.strip_suffix(':').unwrap_or(key)
}

/// The row for time no stall covers, in both tables.
pub const UNCOVERED: &str = "not on the watched threads";

/// The text's table of causes lists this many, then the rest as one row.
const CAUSE_ROWS: usize = 15;

/// The CPUs each thread's stalls in the slow operations were on.
fn thread_cpus(r: &Report) -> HashMap<u32, BTreeSet<u32>> {
    let mut m: HashMap<u32, BTreeSet<u32>> = HashMap::new();
    for p in &r.found.parts {
        let s = &r.stalls.stalls[p.stall as usize];
        m.entry(s.thread).or_default().insert(s.cpu);
    }
    m
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The runs' first start: the origin of the `+S s` times in the text.
fn origin(r: &Report) -> u64 {
    r.stalls.windows.iter().map(|w| w.start_ns).min().unwrap_or(0)
}

pub fn text(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let f = &r.found;
    let (runs, threads) = (r.stalls.windows.len(), r.stalls.threads.len());
    writeln!(
        out,
        "{} ({}, {}): {} operations, {} inside {} run{} ({} watched thread{} or CPU{})",
        r.ops_file,
        r.format,
        r.clock,
        r.operations,
        f.in_runs,
        runs,
        if runs == 1 { "" } else { "s" },
        threads,
        if threads == 1 { "" } else { "s" },
        if threads == 1 { "" } else { "s" },
    )?;
    writeln!(out, "slow: {} operations, {}; {} in all", f.slow.len(), r.chosen, ns(f.slow_ns))?;
    if !f.slow.is_empty() {
        let uncovered = f.slow_ns - f.explained_ns;
        let none = Tally { ns: uncovered, operations: f.uncovered_ops, half: f.uncovered_half };
        let row = |out: &mut dyn Write, t: &Tally, name: &str| {
            writeln!(out, "{:>6.1}% {:>10} {:>7} {:>7}  {name}", pct(t.ns, f.slow_ns), ns(t.ns), t.operations, t.half)
        };
        writeln!(
            out,
            "\nTheir time by what explains it (ops: the slow operations it is in; half: those it holds for half their latency or more):"
        )?;
        writeln!(out, "{:>7} {:>10} {:>7} {:>7}  cause", "share", "time", "ops", "half")?;
        for (k, t) in f.by_cause.iter().take(CAUSE_ROWS) {
            row(out, t, &guard(label(r.stalls.key(*k))))?;
        }
        if f.by_cause.len() > CAUSE_ROWS {
            let rest: u64 = f.by_cause[CAUSE_ROWS..].iter().map(|c| c.1.ns).sum();
            let n = f.by_cause.len() - CAUSE_ROWS;
            writeln!(out, "{:>6.1}% {:>10} {:>7} {:>7}  ({n} more causes: --json lists them)", pct(rest, f.slow_ns), ns(rest), "", "")?;
        }
        row(out, &none, &format!("({UNCOVERED})"))?;
        writeln!(out, "\nBy thread:")?;
        writeln!(out, "{:>7} {:>10} {:>7} {:>7}  thread", "share", "time", "ops", "half")?;
        let cpus = thread_cpus(r);
        for (t, n) in &f.by_thread {
            let on = cpus.get(t).map(|c| c.iter().map(u32::to_string).collect::<Vec<_>>().join(",")).unwrap_or_default();
            row(out, n, &format!("{} on CPU {on}", guard(&r.stalls.threads[*t as usize])))?;
        }
        row(out, &none, &format!("({UNCOVERED})"))?;
        let shown = f.slow.len().min(r.top);
        writeln!(out, "\nThe {shown} slowest (row of the log, time into the run, latency; --top N for more, --json for all):")?;
        for op in &f.slow[..shown] {
            op_text(r, op, out)?;
        }
    }
    if f.reaching_out > 0 {
        writeln!(out, "note: {} slow operations reach outside the runs: that part is counted as {UNCOVERED}", f.reaching_out)?;
    }
    for n in &r.notes {
        writeln!(out, "note: {}", guard(n))?;
    }
    Ok(())
}

fn op_text(r: &Report, op: &SlowOp, out: &mut dyn Write) -> io::Result<()> {
    let lat = op.op.latency_ns();
    let into = op.op.start_ns.saturating_sub(origin(r)) as f64 / 1e9;
    let parts = r.found.stalls_of(op);
    let covered = if parts.is_empty() {
        "no stall on the watched threads".to_string()
    } else {
        format!("{:.1}% covered ({})", pct(op.covered_ns, lat), ns(op.covered_ns))
    };
    writeln!(out, "  row {:<8} +{into:.6} s {:>10}  {covered}", op.index + 1, ns(lat))?;
    for s in parts {
        let st = r.stalls.stalls[s.stall as usize];
        let shares = r.found.causes_of(s);
        let causes: Vec<String> = shares.iter().take(3).map(|&(k, n)| format!("{} {}", guard(label(r.stalls.key(k))), ns(n))).collect();
        let more = if shares.len() > 3 { format!(", {} more", shares.len() - 3) } else { String::new() };
        writeln!(
            out,
            "      {} CPU {}: {} of a {} stall: {}{more}",
            guard(&r.stalls.threads[st.thread as usize]),
            st.cpu,
            ns(s.overlap_ns),
            ns(st.end_ns - st.start_ns),
            causes.join(", ")
        )?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Json<'a> {
    ops: &'a str,
    format: &'a str,
    clock: &'a str,
    operations: u64,
    inside_runs: u64,
    chosen: &'a str,
    above_ns: u64,
    slow: usize,
    slow_ns: u64,
    explained_ns: u64,
    uncovered_ns: u64,
    uncovered_operations: u64,
    reaching_outside_runs: u64,
    by_cause: Vec<Share<'a>>,
    by_thread: Vec<Share<'a>>,
    slowest: Slowest<'a>,
    runs: Vec<RunJson<'a>>,
    notes: &'a [String],
}

/// One row of a table: a cause (`kind`, `name`) or a thread (`thread`).
#[derive(Serialize)]
struct Share<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cause: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread: Option<&'a str>,
    /// A thread's: the CPUs its stalls in the slow operations were on.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpus: Option<Vec<u32>>,
    ns: u64,
    share_pct: f64,
    operations: u64,
    /// The slow operations it holds for at least half their latency.
    half_operations: u64,
}

#[derive(Serialize)]
struct RunJson<'a> {
    csv: &'a str,
    start_ns: u64,
    end_ns: u64,
}

/// The slow operations, written one at a time (a million of them are
/// never all built as JSON values).
struct Slowest<'a>(&'a Report);

#[derive(Serialize)]
struct OpJson<'a> {
    row: u64,
    start_ns: u64,
    end_ns: u64,
    latency_ns: u64,
    covered_ns: u64,
    covered_pct: f64,
    stalls: Vec<StallJson<'a>>,
}

#[derive(Serialize)]
struct StallJson<'a> {
    thread: &'a str,
    cpu: u32,
    start_ns: u64,
    gap_ns: u64,
    overlap_ns: u64,
    credit_ns: u64,
    causes: Vec<CauseNs<'a>>,
}

#[derive(Serialize)]
struct CauseNs<'a> {
    cause: &'a str,
    ns: u64,
}

impl Serialize for Slowest<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        s.collect_seq(r.found.slow.iter().map(|op| OpJson {
            row: op.index + 1,
            start_ns: op.op.start_ns,
            end_ns: op.op.end_ns,
            latency_ns: op.op.latency_ns(),
            covered_ns: op.covered_ns,
            covered_pct: pct(op.covered_ns, op.op.latency_ns()),
            stalls: r.found.stalls_of(op).iter().map(|s| stall_json(r, s)).collect(),
        }))
    }
}

fn stall_json<'a>(r: &'a Report, s: &InOp) -> StallJson<'a> {
    let st = r.stalls.stalls[s.stall as usize];
    StallJson {
        thread: &r.stalls.threads[st.thread as usize],
        cpu: st.cpu,
        start_ns: st.start_ns,
        gap_ns: st.end_ns - st.start_ns,
        overlap_ns: s.overlap_ns,
        credit_ns: s.credit_ns,
        causes: r.found.causes_of(s).iter().map(|&(k, ns)| CauseNs { cause: label(r.stalls.key(k)), ns }).collect(),
    }
}

pub fn json(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let f = &r.found;
    let uncovered = f.slow_ns - f.explained_ns;
    let row = |cause: Option<&'static str>, thread: Option<&'static str>| Share {
        cause,
        kind: None,
        name: None,
        thread,
        cpus: None,
        ns: uncovered,
        share_pct: pct(uncovered, f.slow_ns),
        operations: f.uncovered_ops,
        half_operations: f.uncovered_half,
    };
    let mut by_cause: Vec<Share> = f
        .by_cause
        .iter()
        .map(|&(k, t)| {
            let key = r.stalls.key(k);
            let (kind, name) = key.split_once(':').unwrap_or((key, ""));
            Share {
                cause: Some(label(key)),
                kind: Some(kind),
                name: Some(name),
                thread: None,
                cpus: None,
                ns: t.ns,
                share_pct: pct(t.ns, f.slow_ns),
                operations: t.operations,
                half_operations: t.half,
            }
        })
        .collect();
    by_cause.push(row(Some(UNCOVERED), None));
    let cpus = thread_cpus(r);
    let mut by_thread: Vec<Share> = f
        .by_thread
        .iter()
        .map(|&(t, n)| Share {
            cause: None,
            kind: None,
            name: None,
            thread: Some(&r.stalls.threads[t as usize]),
            cpus: Some(cpus.get(&t).map(|c| c.iter().copied().collect()).unwrap_or_default()),
            ns: n.ns,
            share_pct: pct(n.ns, f.slow_ns),
            operations: n.operations,
            half_operations: n.half,
        })
        .collect();
    by_thread.push(row(None, Some(UNCOVERED)));
    let j = Json {
        ops: &r.ops_file,
        format: r.format,
        clock: r.clock,
        operations: r.operations,
        inside_runs: f.in_runs,
        chosen: &r.chosen,
        above_ns: f.above_ns,
        slow: f.slow.len(),
        slow_ns: f.slow_ns,
        explained_ns: f.explained_ns,
        uncovered_ns: uncovered,
        uncovered_operations: f.uncovered_ops,
        reaching_outside_runs: f.reaching_out,
        by_cause,
        by_thread,
        slowest: Slowest(r),
        runs: r.stalls.windows.iter().map(|w| RunJson { csv: &w.csv, start_ns: w.start_ns, end_ns: w.end_ns }).collect(),
        notes: &r.notes,
    };
    serde_json::to_writer_pretty(&mut *out, &j)?;
    writeln!(out)
}
