//! `jitterwatch compare BASE TUNED...` and `jitterwatch report RUN`: the
//! table users publish (one column per run), the causes side by side with
//! what changed from the base, and the chart, from the files runs wrote
//! (the CSV and the summary beside it).

mod causes;
pub(crate) mod chart;
mod figures;
mod file;
mod input;
mod label;
mod meta;
mod outputs;
mod over_time;
mod table;

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::Serialize;

use figures::{Figures, Scope};
use input::Run;

use crate::interval::Method;

/// Causes per run in the side-by-side table and the chart's bars.
const TOP_CAUSES: usize = 8;
/// Entries per list of changes.
const CHANGES: usize = 5;
/// Watched threads given their own table (the most interrupted first).
const THREADS: usize = 8;

pub struct Options {
    pub inputs: Vec<PathBuf>,
    pub labels: Vec<String>,
    pub cpu: Option<u32>,
    pub svg: Option<PathBuf>,
    pub png: Option<PathBuf>,
    pub json: bool,
}

/// Everything the table, the JSON and the chart show.
#[derive(Serialize)]
pub struct Comparison {
    pub runs: Vec<RunInfo>,
    pub blocks: Vec<Block>,
    /// The scope the causes and the chart cover.
    pub causes_scope: String,
    pub causes: Vec<CauseRow>,
    /// Per run: all the time stolen in that scope, ns per second of run.
    pub total_ns_per_s: Vec<f64>,
    pub changes: Vec<Versus>,
    pub notes: Vec<String>,
    /// The chart's x axis, in nines of the run's time (over_time.rs).
    pub curve_axis: over_time::Axis,
    /// Per run, the chart's curve in the causes' scope: the points drawn.
    pub curves: Vec<Curve>,
}

impl Comparison {
    /// What the hiccups' time is to the runs, as the screen says it: a
    /// probe's time is stolen; passive mode's threads were delayed (their
    /// CPU often asleep, their own waits not counted).
    pub fn taken(&self) -> &'static str {
        let passive = self.runs.iter().filter(|r| Method::of_label(&r.mode) == Some(Method::Passive)).count();
        match passive {
            0 => "stolen",
            n if n == self.runs.len() => "delayed",
            _ => "stolen or delayed",
        }
    }
}

/// One run's line on the chart: by percentile of the run's time, the gap a
/// moment lies in (points only where it lies in a hiccup).
#[derive(Serialize)]
pub struct Curve {
    pub label: String,
    pub hiccups: usize,
    pub points: Vec<over_time::Point>,
}

#[derive(Serialize)]
pub struct RunInfo {
    pub label: String,
    pub csv: String,
    pub mode: String,
    pub duration_ns: u64,
    pub cpus: Vec<u32>,
}

#[derive(Serialize)]
pub struct Block {
    pub scope: String,
    /// Per run, in the scope's CPUs (or None where the run did not watch it).
    pub thresholds_ns: Vec<Option<(u64, u64)>>,
    /// Per run; None where the run did not watch the scope.
    pub figures: Vec<Option<Figures>>,
}

#[derive(Serialize)]
pub struct CauseRow {
    pub cause: String,
    /// Per run: ns stolen per second of run (None: not seen).
    pub ns_per_s: Vec<Option<f64>>,
}

#[derive(Serialize)]
pub struct Versus {
    pub run: String,
    pub base: String,
    #[serde(flatten)]
    pub changes: causes::Changes,
}

pub fn run(o: Options, out: &mut dyn Write) -> Result<i32> {
    if o.labels.len() > o.inputs.len() {
        bail!("{} --label for {} runs: give at most one per run", o.labels.len(), o.inputs.len());
    }
    let mut labels = o.labels.into_iter();
    let runs = o.inputs.iter().map(|p| input::load(p, labels.next())).collect::<Result<Vec<_>>>()?;
    let charts: Vec<(&str, &std::path::Path)> =
        [("--svg", &o.svg), ("--png", &o.png)].into_iter().filter_map(|(opt, p)| Some((opt, p.as_deref()?))).collect();
    outputs::check(&charts, &runs)?;
    let cmp = compare(&runs, o.cpu)?;
    if o.json {
        serde_json::to_writer_pretty(&mut *out, &cmp)?;
        writeln!(out)?;
    } else {
        table::write(&cmp, out)?;
    }
    if let Some(p) = &o.svg {
        chart::svg(&cmp, p)?;
    }
    if let Some(p) = &o.png {
        chart::png(&cmp, p)?;
    }
    Ok(0)
}

fn compare(runs: &[Run], cpu: Option<u32>) -> Result<Comparison> {
    let mut notes: Vec<String> = runs.iter().flat_map(|r| r.notes.iter().cloned()).collect();
    let mut all_cpus: Vec<u32> = runs.iter().flat_map(|r| r.watched()).collect();
    all_cpus.sort_unstable();
    all_cpus.dedup();
    if let Some(c) = cpu {
        if let Some(r) = runs.iter().find(|r| !r.watched().contains(&c)) {
            bail!("{} did not watch CPU {c} (it watched {})", r.label, list(&r.watched()));
        }
    } else if runs.iter().any(|r| r.watched() != runs[0].watched()) {
        let each: Vec<String> = runs.iter().map(|r| format!("{} watched {}", r.label, list(&r.watched()))).collect();
        notes.push(format!("the runs watched different CPUs ({}): 'all CPUs' compares different CPUs", each.join("; ")));
    }
    if runs.iter().any(|r| r.meta.mode != runs[0].meta.mode) {
        let each: Vec<String> = runs.iter().map(|r| format!("{} {}", r.label, r.meta.mode)).collect();
        notes.push(format!("the runs measured different things ({}): a probe's gaps and passive mode's interruptions", each.join(", ")));
    }
    let one_cpu = all_cpus.len() == 1;
    let mut scopes: Vec<Scope> = match cpu {
        Some(c) => vec![Scope::Cpu(c)],
        None if one_cpu => vec![Scope::Cpu(all_cpus[0])],
        None => std::iter::once(Scope::All).chain(all_cpus.iter().map(|&c| Scope::Cpu(c))).collect(),
    };
    let main_scope = scopes[0].clone();
    if cpu.is_none() {
        scopes.extend(threads(runs, &mut notes));
    }
    let blocks: Vec<Block> = scopes
        .iter()
        .map(|s| Block {
            scope: s.title(),
            thresholds_ns: runs.iter().map(|r| thresholds(r, s)).collect(),
            figures: runs.iter().map(|r| figures::figures(r, s)).collect(),
        })
        .collect();
    notes.extend(overfull(runs, &scopes, &blocks));
    if blocks.iter().any(|b| b.thresholds_ns.iter().flatten().collect::<Vec<_>>().windows(2).any(|w| w[0] != w[1])) {
        notes.push("the thresholds differ between runs: gaps under the larger one are counted in one run only".to_string());
    }
    let rates: Vec<HashMap<String, f64>> = runs.iter().map(|r| causes::rates(r, &main_scope)).collect();
    let causes = causes::top(&rates, TOP_CAUSES)
        .into_iter()
        .map(|k| CauseRow { ns_per_s: rates.iter().map(|r| r.get(&k).copied()).collect(), cause: k })
        .collect();
    let changes = runs
        .iter()
        .zip(&rates)
        .skip(1)
        .map(|(r, rate)| Versus { run: r.label.clone(), base: runs[0].label.clone(), changes: causes::changes(&rates[0], rate, CHANGES) })
        .collect();
    let gaps: Vec<Vec<u64>> = runs.iter().map(|r| figures::sorted_gaps(r, &main_scope)).collect();
    let dists: Vec<over_time::TimeDist> = runs.iter().zip(&gaps).map(|(r, g)| over_time::TimeDist::new(g, main_scope.span_ns(r))).collect();
    let curve_axis = over_time::axis(&dists);
    let curves = runs
        .iter()
        .zip(&dists)
        .zip(&gaps)
        .map(|((r, d), g)| Curve { label: r.label.clone(), hiccups: g.len(), points: over_time::curve(d, curve_axis) })
        .collect();
    Ok(Comparison {
        runs: runs
            .iter()
            .map(|r| RunInfo {
                label: r.label.clone(),
                csv: crate::sanitize::visible(&r.csv.display().to_string()).into_owned(),
                mode: r.meta.mode.clone(),
                duration_ns: r.meta.duration_ns,
                cpus: r.watched(),
            })
            .collect(),
        blocks,
        causes_scope: main_scope.title(),
        causes,
        total_ns_per_s: runs.iter().map(|r| causes::total_rate(r, &main_scope)).collect(),
        changes,
        notes,
        curve_axis,
        curves,
    })
}

/// Passive mode's watched threads, the most interrupted (in the base, then
/// the others) first. One pass over each run's rows: a pass per name made
/// 10⁵ names in 10⁵ rows take 20 s.
fn threads(runs: &[Run], notes: &mut Vec<String>) -> Vec<Scope> {
    // A name's time in the first run that has it; u128: gaps read from a
    // file may add up past u64.
    let mut first: HashMap<&str, (usize, u128)> = HashMap::new();
    for (i, r) in runs.iter().enumerate() {
        let mut ns = vec![0u128; r.victims.len()];
        for row in &r.rows {
            if let Some(v) = row.victim {
                ns[v as usize] += row.gap_ns as u128;
            }
        }
        for (name, ns) in r.victims.iter().zip(ns) {
            first.entry(name.as_str()).or_insert((i, ns));
        }
    }
    let mut time: Vec<(&str, usize, u128)> = first.into_iter().map(|(name, (i, ns))| (name, i, ns)).collect();
    time.sort_unstable_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)).then_with(|| a.0.cmp(b.0)));
    if time.len() > THREADS {
        notes.push(format!("{} more watched threads are not tabulated (the CSV has them)", time.len() - THREADS));
    }
    time.into_iter().take(THREADS).map(|t| Scope::Thread(t.0.to_string())).collect()
}

/// A note per run whose gaps on a CPU (or on all of them) add up to more
/// than the run lasted: one CPU runs one gap at a time, so more than 100%
/// stolen is no run's, but a CSV and a summary of two runs, or an edited
/// file. Threads are left out: threads of one name on several CPUs are
/// interrupted at once.
fn overfull(runs: &[Run], scopes: &[Scope], blocks: &[Block]) -> Vec<String> {
    const SHOWN: usize = 4;
    let mut notes = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let over: Vec<(&Scope, f64)> = scopes
            .iter()
            .zip(blocks)
            .filter(|(s, _)| !matches!(s, Scope::Thread(_)))
            .filter_map(|(s, b)| Some((s, b.figures[i].as_ref()?.stolen_pct)))
            .filter(|&(_, pct)| pct > 100.0)
            .collect();
        let Some(most) = over.iter().map(|o| o.1).reduce(f64::max) else { continue };
        let mut titles: Vec<String> = over.iter().take(SHOWN).map(|o| o.0.title()).collect();
        if over.len() > SHOWN {
            titles.push(format!("{} more", over.len() - SHOWN));
        }
        notes.push(format!(
            "{}: its gaps add up to more than the run lasted on {} (up to {most:.0}% of the time {}): its CSV and summary are not of one run, or were edited",
            r.label,
            titles.join(", "),
            r.meta.method().map_or(Method::Spin.taken(), Method::taken)
        ));
    }
    notes
}

/// The smallest and largest threshold over the scope's CPUs.
fn thresholds(run: &Run, scope: &Scope) -> Option<(u64, u64)> {
    if let Scope::Cpu(n) = scope {
        let t = run.by_cpu.get(n)?.threshold_ns;
        return Some((t, t));
    }
    let t = run.meta.cpus.iter().map(|c| c.threshold_ns);
    Some((t.clone().min()?, t.max()?))
}

fn list(cpus: &[u32]) -> String {
    crate::cpulist::Display(&cpus.iter().map(|&c| c as usize).collect::<Vec<_>>()).to_string()
}

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;
