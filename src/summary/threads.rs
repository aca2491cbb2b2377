//! The summary's per-thread part (passive mode): each watched thread's
//! hiccups by kind, their distribution, the share of its runnable time
//! they took, its top causes and its migrations.

use std::io::{self, Write};

use serde::Serialize;

use crate::cause::{Kind, LOST, UNEXPLAINED};
use crate::interval::Source;
use crate::passive::{Booked, Books, Classes, Found};
use crate::stats::Threads;

/// Causes listed per thread.
const TOP: usize = 5;

#[derive(Serialize, Default)]
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
    /// The same per softirq, with the largest.
    pub in_syscall_softirqs: Vec<InSyscallRow>,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub lost_ns: u64,
    /// Ran or waited to by the clock, over `window`: `clock_ran_ns +
    /// stolen_ns + queued_ns`.
    pub runnable_ns: u64,
    /// On a CPU over `window`, as the kernel books it (schedstat's first
    /// field: the hypervisor's share left out): each run from where the
    /// kernel starts it, which after a wake-up that preempts is the
    /// enqueue, so the wait for the switch is in it (docs/passive.md).
    pub ran_ns: u64,
    /// On a CPU over `window` by the clock, from each switch in to the
    /// switch out (the hypervisor's share left out): `ran_ns` less the
    /// waits the kernel books as run.
    pub clock_ran_ns: u64,
    /// The hypervisor's share of its runs, its waits by the clock and
    /// what the kernel booked of them, over `window` (passive::Booked).
    #[serde(flatten)]
    pub booked: Booked,
    /// The span these figures cover (None: never seen to run or wait).
    pub window: Option<Window>,
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

/// The span a thread's books cover, and how complete they are.
#[derive(Serialize)]
pub struct Window {
    /// CLOCK_MONOTONIC ns: when it was first known to run or wait (found
    /// at attach, at a switch, a wake-up or a rename) ...
    pub from_ns: u64,
    /// ... to its last switch out, or the run's end.
    pub to_ns: u64,
    /// Switches into it no hook saw, placed by the kernel's own run time.
    pub placed: u64,
    /// Switches into it no hook saw and that could not be placed: the
    /// figures miss a stretch each.
    pub unplaced: u64,
    /// Waits whose start no hook saw (the wake-up and the switch in both
    /// unseen): taken from the kernel's run_delay as the thread left.
    pub from_kernel: u64,
}

#[derive(Serialize)]
pub struct InSyscallRow {
    pub softirq: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
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

fn window(b: &Books) -> Option<Window> {
    let from_ns = b.from_ns?;
    Some(Window { from_ns, to_ns: b.to_ns, placed: b.placed, unplaced: b.unplaced, from_kernel: b.from_kernel })
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
                in_syscall_softirqs: t
                    .in_syscall
                    .iter()
                    .map(|s| InSyscallRow {
                        softirq: crate::names::in_syscall_part(usize::from(s.vec)).to_string(),
                        count: s.count,
                        total_ns: s.ns,
                        max_ns: s.max_ns,
                    })
                    .collect(),
                p50_ns: t.pct(0.5),
                p99_ns: t.pct(0.99),
                p999_ns: t.pct(0.999),
                max_ns: t.max_ns,
                lost_ns: t.lost_ns(),
                runnable_ns: info.map_or(0, |i| i.runnable_ns()),
                ran_ns: info.map_or(0, |i| i.books.kernel_on_cpu_ns()),
                clock_ran_ns: info.map_or(0, |i| i.books.on_cpu_ns()),
                booked: info.map_or_else(Booked::default, |i| i.books.booked),
                window: info.and_then(|i| window(&i.books)),
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

/// The thread's books in one line: over which window, what it ran and
/// waited, what the kernel booked, and what is missing.
fn books_words(t: &ThreadRow, w: &Window, start_ns: u64) -> String {
    let ms = |ns: u64| format!("{:.3} ms", ns as f64 / 1e6);
    let at = |ns: u64| format!("{:+.3} s", (ns as i128 - start_ns as i128) as f64 / 1e9);
    let mut s = format!(
        "from {} to {}: on a CPU {} as the kernel books it (schedstat's first field), {} between its switches by the clock{}, waited on a runqueue {} ({} after wake-ups); the kernel's run_delay books {}",
        at(w.from_ns),
        at(w.to_ns),
        ms(t.ran_ns),
        ms(t.clock_ran_ns),
        if t.booked.stolen_ns > 0 { format!(" (and the hypervisor took {} of its time on the CPU)", ms(t.booked.stolen_ns)) } else { String::new() },
        ms(t.booked.queued_ns),
        ms(t.booked.woken_queued_ns),
        ms(t.booked.kernel_queued_ns),
    );
    if t.booked.kernel_stale_ns > 0 {
        s += &format!(
            " ({} of it running by the clock: preemptions the kernel switched on its runqueue clock of the wake-up that decided them)",
            ms(t.booked.kernel_stale_ns)
        );
    }
    if t.booked.kernel_short_ns > 0 {
        s += &format!(
            "; {} of its waits by the clock the kernel booked as the next task's run (each switch came after the kernel read its runqueue clock)",
            ms(t.booked.kernel_short_ns)
        );
    }
    if w.placed > 0 {
        s += &format!("; {} switches into it no hook saw, placed by the kernel's run time", w.placed);
    }
    if w.from_kernel > 0 {
        s += &format!("; {} waits whose wake-up no hook saw, taken from the kernel's run_delay", w.from_kernel);
    }
    if w.unplaced > 0 {
        s += &format!("; {} switches into it no hook saw and not placed: a stretch each is missing", w.unplaced);
    }
    s
}

/// `start_ns`: the run's start, which the windows are said from.
pub fn write_text(rows: &[ThreadRow], start_ns: u64, out: &mut dyn Write) -> io::Result<()> {
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
        if let Some(w) = &t.window {
            writeln!(out, "  {}", books_words(t, w, start_ns))?;
        }
        if t.in_syscall > 0 {
            let each: Vec<String> = t
                .in_syscall_softirqs
                .iter()
                .map(|s| format!("{} {} × {} (largest {})", s.softirq, s.count, crate::units::ns(s.total_ns), crate::units::ns(s.max_ns)))
                .collect();
            writeln!(
                out,
                "  in its own system calls: {} softirqs, {} ns: {} (its own work: not counted as lost)",
                t.in_syscall,
                t.in_syscall_ns,
                each.join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_books_line_says_what_of_the_kernels_wait_the_thread_ran() {
        let t = ThreadRow {
            ran_ns: 1_000_000,
            clock_ran_ns: 900_000,
            booked: Booked { queued_ns: 2_000_000, kernel_queued_ns: 3_000_000, kernel_stale_ns: 1_000_000, ..Default::default() },
            ..Default::default()
        };
        let w = Window { from_ns: 0, to_ns: 5_000_000, placed: 0, unplaced: 0, from_kernel: 0 };
        let s = books_words(&t, &w, 0);
        assert!(s.contains("the kernel's run_delay books 3.000 ms (1.000 ms of it running by the clock"), "{s}");
        let quiet = ThreadRow { booked: Booked { kernel_stale_ns: 0, ..t.booked }, ..t };
        assert!(!books_words(&quiet, &w, 0).contains("running by the clock"));
        assert!(
            s.contains("on a CPU 1.000 ms as the kernel books it (schedstat's first field), 0.900 ms between its switches by the clock"),
            "{s}"
        );
        let short = ThreadRow { booked: Booked { kernel_short_ns: 250_000, ..quiet.booked }, ..quiet };
        let s = books_words(&short, &w, 0);
        assert!(s.contains("; 0.250 ms of its waits by the clock the kernel booked as the next task's run"), "{s}");
    }
}
