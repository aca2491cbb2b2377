//! The summary's per-thread part (passive mode): each watched thread's
//! hiccups by kind, their distribution, the share of its runnable time
//! they took, its top causes and its migrations.

use std::io::{self, Write};

use serde::Serialize;

use crate::cause::{Kind, LOST, UNEXPLAINED};
use crate::interval::Source;
use crate::passive::{Classes, Found};
use crate::stats::Threads;

/// Causes listed per thread.
const TOP: usize = 5;

#[derive(Serialize)]
pub struct ThreadRow {
    pub tid: u32,
    /// `comm[tid]`, escaped.
    pub name: String,
    pub hiccups: u64,
    pub interrupted: u64,
    pub preempted: u64,
    pub wakeup: u64,
    pub interrupted_ns: u64,
    pub preempted_ns: u64,
    pub wakeup_ns: u64,
    /// Softirqs its own system calls ran (not counted as lost).
    pub in_syscall: u64,
    pub in_syscall_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub lost_ns: u64,
    pub runnable_ns: u64,
    /// Share of its runnable time the hiccups took, % (None: it never ran).
    pub lost_pct: Option<f64>,
    pub top_causes: Vec<ThreadCause>,
    pub migrations: Vec<Migration>,
    /// How passive mode learnt of it (None: no event or /proc read did).
    pub found: Option<Found>,
    /// What reached it, counted as rtla osnoise counts (None: no event or
    /// /proc read found it).
    pub classes: Option<Classes>,
}

#[derive(Serialize)]
pub struct ThreadCause {
    pub kind: Kind,
    pub name: String,
    pub total_ns: u64,
}

#[derive(Serialize)]
pub struct Migration {
    pub from: u32,
    pub to: u32,
    pub count: u64,
}

pub fn rows(threads: &Threads) -> Vec<ThreadRow> {
    threads
        .sorted()
        .into_iter()
        .map(|t| {
            let info = t.info.as_ref();
            ThreadRow {
                tid: t.victim.tid,
                name: t.victim.name(),
                hiccups: t.hiccups(),
                interrupted: t.of(Source::Interrupted).0,
                preempted: t.of(Source::Preempted).0,
                wakeup: t.of(Source::Wakeup).0,
                interrupted_ns: t.of(Source::Interrupted).1,
                preempted_ns: t.of(Source::Preempted).1,
                wakeup_ns: t.of(Source::Wakeup).1,
                in_syscall: t.of(Source::InSyscall).0,
                in_syscall_ns: t.of(Source::InSyscall).1,
                p50_ns: t.pct(0.5),
                p99_ns: t.pct(0.99),
                p999_ns: t.pct(0.999),
                max_ns: t.max_ns,
                lost_ns: t.lost_ns(),
                runnable_ns: info.map_or(0, |i| i.runnable_ns),
                lost_pct: t.lost_pct(),
                top_causes: t
                    .top_causes(TOP)
                    .into_iter()
                    .map(|(c, ns)| ThreadCause { kind: c.kind(), name: c.name(), total_ns: ns })
                    .collect(),
                migrations: info
                    .map_or_else(Vec::new, |i| i.migrations.iter().map(|&(from, to, count)| Migration { from, to, count }).collect()),
                found: info.map(|i| i.found),
                classes: info.map(|i| i.classes),
            }
        })
        .collect()
}

pub fn write_text(rows: &[ThreadRow], out: &mut dyn Write) -> io::Result<()> {
    for t in rows {
        let lost = t.lost_pct.map_or_else(|| "no runnable time seen".to_string(), |p| format!("{p:.3}% of its runnable time lost"));
        writeln!(
            out,
            "thread {}: {} hiccups (interrupted {}, preempted {}, wakeup {}), p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns; {lost}{}",
            t.name,
            t.hiccups,
            t.interrupted,
            t.preempted,
            t.wakeup,
            t.p50_ns,
            t.p99_ns,
            t.p999_ns,
            t.max_ns,
            t.found.map_or(String::new(), |f| format!("; {}", f.words()))
        )?;
        if t.in_syscall > 0 {
            writeln!(
                out,
                "  in its own system calls: {} softirqs, {} ns (its own work: not counted as lost)",
                t.in_syscall, t.in_syscall_ns
            )?;
        }
        if let Some(c) = t.classes {
            writeln!(out, "  {}", c.words())?;
        }
        if !t.migrations.is_empty() {
            let m: Vec<String> = t.migrations.iter().map(|m| format!("{}→{} ×{}", m.from, m.to, m.count)).collect();
            writeln!(out, "  migrations: {}", m.join(", "))?;
        }
        for c in &t.top_causes {
            let name = match c.kind {
                Kind::Unexplained => UNEXPLAINED,
                Kind::Lost => LOST,
                _ => &c.name,
            };
            writeln!(out, "  {:<11} {:<40} {:>14}", c.kind.as_str(), name, c.total_ns)?;
        }
    }
    if !rows.is_empty() {
        writeln!(out)?;
    }
    Ok(())
}
