//! rtla, the kernel's own noise and latency tools, for the VMs whose kernel
//! has the osnoise and timerlat tracers (Debian builds them into its
//! PREEMPT_RT kernels only): the `rtla` package of the kernel's suite and
//! what it depends on (its libc too: trixie's rtla needs glibc 2.38, newer
//! than a Debian 12 host's), fetched with the suite's private apt root and
//! unpacked into target/vmtest-cache/rtla/SUITE. The guest carries that tree
//! at its root: the dist binary is static, so the suite's libc is the only
//! one there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::apt::{self, AptRoot};
use super::check::Check;
use super::kernels::{self, Kernel};

/// How far apart the counts of one class may be: 2% of rtla's, and at
/// least two events. Both sides count over the same window (the osnoise
/// thread's life, sampled as one period: guest.sh), so what is left lies at
/// the thread's two ends, which jitterwatch counts and osnoise does not: its
/// first run (in kthread(), before it sleeps until rtla turns tracing on)
/// and its exit after its last sample (an irq_work was seen there on
/// 6.12-rt). An event at each end, whatever the run's length: 0 to 2 a
/// class in the runs here, where 2% of a tuned CPU's count (0 to 30 in
/// the run) is less than one.
pub const TOLERANCE: f64 = 0.02;
pub const AT_LEAST: u64 = 2;

/// The heading of the comparison, BENCHMARKS.md's section 9 (its file is
/// bench::RTLA_FILE).
pub const HEADING: &str = "## 9. Beside rtla on PREEMPT_RT (cargo xtask vmtest)";

/// One class of one tool's run: rtla's count and jitterwatch's (None:
/// that side printed no number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// osnoise or timerlat.
    pub tool: String,
    /// nmi, irq, softirq, thread (osnoise); wakeups (timerlat).
    pub class: String,
    pub rtla: Option<u64>,
    pub jw: Option<u64>,
}

impl Class {
    /// Whether the two counts agree (both present, within the tolerance).
    pub fn agrees(&self) -> bool {
        let (Some(r), Some(j)) = (self.rtla, self.jw) else { return false };
        r.abs_diff(j) <= allowed(r)
    }

    /// jitterwatch's count against rtla's, %, when rtla counted any.
    pub fn off_pct(&self) -> Option<f64> {
        let (r, j) = (self.rtla?, self.jw?);
        (r > 0).then(|| (j as f64 - r as f64) / r as f64 * 100.0)
    }
}

/// How far from rtla's count `r` jitterwatch's may be.
pub fn allowed(r: u64) -> u64 {
    ((r as f64 * TOLERANCE).ceil() as u64).max(AT_LEAST)
}

/// osnoise's gaps beside jitterwatch's, over the same window, at the same
/// 1 µs threshold (shown, not judged: see [`gaps_note`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gaps {
    /// osnoise's sample_threshold events with interference (an IRQ, softirq,
    /// thread or NMI inside), and without (HW noise).
    pub osnoise: Option<u64>,
    pub hw: Option<u64>,
    /// Events the trace buffer overwrote (then the counts are short).
    pub overrun: Option<u64>,
    /// jitterwatch's hiccups of the thread, and of them interruptions and
    /// preemptions (an interruption that led to the preemption is one).
    pub jw: Option<u64>,
    pub interrupted: Option<u64>,
    pub preempted: Option<u64>,
}

/// The `rtla` check of a VM whose kernel has the tracers: every class of
/// both tools present and agreeing.
pub fn check(classes: &[Class]) -> Check {
    let tools = ["osnoise", "timerlat"];
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !classes.iter().any(|c| c.tool == *t)).collect();
    let off: Vec<String> = classes
        .iter()
        .filter(|c| !c.agrees())
        .map(|c| {
            let n = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
            format!("{} {}: rtla {} vs {}", c.tool, c.class, n(c.rtla), n(c.jw))
        })
        .collect();
    let pass = missing.is_empty() && off.is_empty();
    let detail = if pass {
        classes
            .iter()
            .map(|c| format!("{} {} {}={}", c.tool, c.class, c.rtla.unwrap_or(0), c.jw.unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(", ")
    } else if !missing.is_empty() {
        format!("no comparison from {} (see the serial log's rtla-run lines)", missing.join(" and "))
    } else {
        off.join("; ")
    };
    Check { name: "rtla".to_string(), pass, detail }
}

/// The tracers the comparison runs.
const TRACERS: [&str; 2] = ["CONFIG_OSNOISE_TRACER", "CONFIG_TIMERLAT_TRACER"];

/// Whether the kernel can run rtla's osnoise and timerlat.
pub fn wanted(config: &str) -> bool {
    TRACERS.iter().all(|t| kernels::config_has(config, t))
}

/// The unpacked rtla tree for the kernel's suite (fetched once), or None
/// when the kernel lacks the tracers.
pub fn root(kernel: &Kernel, cache: &Path) -> Result<Option<PathBuf>> {
    if !wanted(&std::fs::read_to_string(&kernel.config)?) {
        return Ok(None);
    }
    let suite = kernel.spec.suite;
    let dir = cache.join("rtla").join(suite);
    if dir.join("usr/bin/rtla").is_file() {
        return Ok(Some(dir));
    }
    let apt = AptRoot::new(&cache.join("apt").join(suite), suite, kernel.spec.arch)?;
    let pkgs = closure(&apt, "rtla")?;
    apt.unpack(&pkgs, &cache.join("debs").join(format!("rtla-{suite}")), &dir, &format!("{suite}, for rtla"))?;
    Ok(Some(dir))
}

/// `pkg` and everything it depends on, first alternatives only.
fn closure(apt: &AptRoot, pkg: &str) -> Result<Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![pkg.to_string()];
    while let Some(p) = todo.pop() {
        if !seen.insert(p.clone()) {
            continue;
        }
        let show = apt.show(&p).with_context(|| format!("{p}, needed by rtla"))?;
        todo.extend(apt::depends(&show).into_iter().filter(|d| !seen.contains(d)));
    }
    Ok(seen.into_iter().collect())
}

/// One VM's comparison, for the section.
pub struct Run<'a> {
    pub kernel: &'a str,
    pub release: &'a str,
    pub mode: &'a str,
    pub classes: &'a [Class],
    pub gaps: Option<&'a Gaps>,
}

/// BENCHMARKS.md's section 9: how the comparison is made, then one row per
/// VM, tool and class.
pub fn markdown(runs: &[Run<'_>], date: &str, commit: &str) -> String {
    let mut o = format!(
        "{HEADING}\n\nWritten by `cargo xtask vmtest` on {date} (commit `{commit}`), in qemu under TCG: \
         counts only, timings under TCG mean nothing. In each VM whose kernel has the osnoise and timerlat tracers \
         (Debian builds them into its PREEMPT_RT kernels), that suite's rtla runs on the watched CPU, itself pinned to \
         the others: `rtla osnoise top -p 10000000 -r 10000000 -T 1` and `rtla timerlat top -d 10s` (its user-space \
         thread where rtla has one). jitterwatch watches the tracer's thread in passive mode (`--comm osnoise/N`, \
         `--comm timerlatu/N`), attached before rtla starts and stopped after it ends, so it counts over the thread's \
         whole life what reached the thread as rtla counts it (the summary's per-thread `classes`): IRQs (handlers and \
         APIC vectors), softirqs at interrupt level, other threads switched in while it was runnable, NMIs; and its \
         wake-ups against timerlat's activations.\n\n\
         **How the window is cut.** osnoise counts only inside its periods: between two it writes its sample and, at \
         a new maximum, raises an irq_work to notify it (on PREEMPT_RT the irq_work and rcuc threads then run), and \
         once rtla turns tracing off at its end the thread samples on, unrecorded, until rtla's teardown stops it; \
         jitterwatch saw all of that (before: +21 to +46 IRQs and +8 to +17 threads whatever the run's length). So \
         osnoise's thread samples its whole life as one period (10 s, runtime = period), its instance's \
         `tracing_max_latency` is set out of reach (no notification), and the guest stops the thread 6 s after it \
         began to run (created, it sleeps until rtla turns tracing on), \
         inside that period and while rtla still records, by emptying osnoise's CPU list (tracefs `osnoise/cpus`: \
         the kernel stops the thread, which records its partial period as it ends); rtla is then stopped with SIGINT \
         and prints. Both tools then count from the thread's first run to its exit. timerlat runs its 10 s uncut: \
         its thread sleeps between activations, so it has no noise classes to compare, only its wake-ups against \
         rtla's count of the timer's IRQs; the two are not quite the same measure (an activation that finds the \
         thread still on its CPU, late by a period under TCG where its latency reaches tens of ms, most likely wakes \
         nothing jitterwatch counts: not verified), and jitterwatch's count has run from 1% under rtla's to 0.1% \
         over in the runs here.\n\n\
         Agreeing means within {:.0}% of rtla's count and at least {AT_LEAST} events: what is left between the two \
         lies at the thread's two ends, outside osnoise's sample, an event at each whatever the run's length: its \
         first run (in kthread(), before it sleeps until tracing starts) and its exit (an irq_work was seen there \
         on 6.12-rt); 0 to 2 a class in the runs here (xtask/src/vmtest/rtla.rs). rtla's HW noise (gaps with no \
         kernel event) has no counterpart: passive mode cannot see it.\n\n",
        TOLERANCE * 100.0
    );
    o += "| kernel | mode | tool | class | rtla | jitterwatch | jitterwatch − rtla | agrees |\n|---|---|---|---|---|---|---|---|\n";
    for r in runs {
        for c in r.classes {
            let n = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
            let diff = match (c.rtla, c.jw) {
                (Some(a), Some(b)) => {
                    let d = b as i64 - a as i64;
                    c.off_pct().map_or(format!("{d:+}"), |p| format!("{d:+} ({p:+.1}%)"))
                }
                _ => "-".to_string(),
            };
            o += &format!(
                "| {} ({}) | {} | {} | {} | {} | {} | {diff} | {} |\n",
                r.kernel,
                r.release,
                r.mode,
                c.tool,
                c.class,
                n(c.rtla),
                n(c.jw),
                if c.agrees() { "yes" } else { "**no**" }
            );
        }
    }
    let gaps: Vec<(&Run<'_>, &Gaps)> = runs.iter().filter_map(|r| Some((r, r.gaps?))).collect();
    if !gaps.is_empty() {
        o += &format!("\n{}\n\n", gaps_note());
        o += "| kernel | mode | osnoise gaps with interference | osnoise HW-noise gaps | jitterwatch gaps (interrupted + preempted) | jitterwatch − osnoise |\n|---|---|---|---|---|---|\n";
        for (r, g) in gaps {
            let n = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
            let diff = match (g.osnoise, g.jw) {
                (Some(a), Some(b)) if a > 0 => format!("{:+} ({:+.0}%)", b as i64 - a as i64, (b as f64 - a as f64) / a as f64 * 100.0),
                _ => "-".to_string(),
            };
            let lost = match g.overrun {
                Some(0) => String::new(),
                Some(n) => format!(" ({n} overwritten)"),
                None => " (overrun unknown)".to_string(),
            };
            o += &format!(
                "| {} ({}) | {} | {}{lost} | {} | {} ({} + {}) | {diff} |\n",
                r.kernel,
                r.release,
                r.mode,
                n(g.osnoise),
                n(g.hw),
                n(g.jw),
                n(g.interrupted),
                n(g.preempted)
            );
        }
    }
    o
}

/// Why the gap counts are shown and not judged.
pub fn gaps_note() -> &'static str {
    "**One gap per interruption and preemption, beside osnoise's gaps** (shown, not judged). osnoise's gaps are \
     its `sample_threshold` events over the same window (the top-level trace buffer, 1 µs threshold like \
     jitterwatch's `--threshold 1us` here); those with interference hold an IRQ, softirq, thread or NMI, and an \
     IRQ with the preemption it causes is one. jitterwatch joins an interruption with the preemption it caused \
     (within 100 µs) and interrupt-level activity within 2 µs (src/passive/tracker.rs). Where interruptions come \
     apart (untuned: the tick and what it wakes) the two counts are the same measure. Under TCG they part where \
     two IPIs are sent back to back: on the tuned CPU each tick comes with a reschedule IPI and a \
     call_function_single that qemu delivers 20–30 µs apart, with no return to the thread between them (osnoise's \
     loop reads no clock there: one gap), beyond jitterwatch's 2 µs (two gaps); on hardware the second follows \
     within that. osnoise's HW-noise gaps (its loop stalled with no kernel event: qemu) have no counterpart."
}

/// Where a tree unpacked from merged-/usr packages needs the classic paths
/// (the loader's /lib64/ld-linux-x86-64.so.2, /lib/x86_64-linux-gnu) as
/// links into /usr: (link, target) for each that the tree lacks.
pub fn usr_links(paths: &[String]) -> Vec<(String, String)> {
    ["lib", "lib64"]
        .iter()
        .filter(|top| {
            let has_top = paths.iter().any(|p| p.split('/').next() == Some(**top));
            let has_usr = paths.iter().any(|p| p.starts_with(&format!("usr/{top}/")));
            has_usr && !has_top
        })
        .map(|top| (top.to_string(), format!("usr/{top}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(tool: &str, class: &str, rtla: Option<u64>, jw: Option<u64>) -> Class {
        Class { tool: tool.into(), class: class.into(), rtla, jw }
    }

    #[test]
    fn counts_agree_within_two_percent_and_at_least_two_events() {
        assert_eq!(allowed(2503), 51);
        assert_eq!(allowed(20), 2);
        assert!(class("osnoise", "irq", Some(2503), Some(2554)).agrees());
        assert!(!class("osnoise", "irq", Some(2503), Some(2555)).agrees());
        assert!(class("osnoise", "irq", Some(2548), Some(2562)).agrees());
        // No allowance for the edge any more: the runs of before fail.
        assert!(!class("osnoise", "irq", Some(28), Some(33)).agrees());
        assert!(!class("osnoise", "thread", Some(10), Some(14)).agrees());
        assert!(!class("osnoise", "thread", Some(266), Some(280)).agrees());
        assert!(class("osnoise", "thread", Some(105), Some(107)).agrees(), "an event at each end");
        assert!(class("osnoise", "irq", Some(18), Some(20)).agrees());
        assert!(class("osnoise", "irq", Some(18), Some(16)).agrees());
        assert!(!class("osnoise", "irq", Some(18), Some(21)).agrees());
        assert!(!class("osnoise", "thread", Some(50), Some(10)).agrees(), "fewer is off as much as more");
        assert!(class("osnoise", "nmi", Some(0), Some(0)).agrees());
        assert!(class("osnoise", "nmi", Some(0), Some(2)).agrees());
        assert!(!class("osnoise", "nmi", Some(0), Some(3)).agrees());
        assert!(!class("timerlat", "wakeups", Some(9182), None).agrees());
        assert_eq!(class("osnoise", "thread", Some(200), Some(210)).off_pct(), Some(5.0));
    }

    #[test]
    fn the_section_has_a_row_per_class_and_the_gaps() {
        let cs = [
            class("osnoise", "irq", Some(200), Some(204)),
            class("osnoise", "thread", Some(200), Some(210)),
            class("timerlat", "wakeups", Some(9), None),
        ];
        let g = Gaps { osnoise: Some(14), hw: Some(5663), overrun: Some(0), jw: Some(24), interrupted: Some(16), preempted: Some(7) };
        let md = markdown(
            &[Run { kernel: "debian13-rt", release: "6.12.117", mode: "tuned", classes: &cs, gaps: Some(&g) }],
            "today",
            "abc1234",
        );
        assert!(md.starts_with(HEADING));
        assert!(md.contains("How the window is cut"), "{md}");
        assert!(md.contains("| debian13-rt (6.12.117) | tuned | osnoise | irq | 200 | 204 | +4 (+2.0%) | yes |\n"), "{md}");
        assert!(md.contains("| debian13-rt (6.12.117) | tuned | osnoise | thread | 200 | 210 | +10 (+5.0%) | **no** |\n"), "{md}");
        assert!(md.contains("| timerlat | wakeups | 9 | none | - | **no** |\n"), "{md}");
        assert!(md.contains("| debian13-rt (6.12.117) | tuned | 14 | 5663 | 24 (16 + 7) | +10 (+71%) |\n"), "{md}");
        let none = markdown(&[Run { kernel: "x", release: "y", mode: "tuned", classes: &cs, gaps: None }], "today", "abc1234");
        assert!(!none.contains(gaps_note()), "no gaps, no note");
    }

    #[test]
    fn the_check_wants_both_tools_and_every_class_agreeing() {
        let good = [class("osnoise", "irq", Some(100), Some(101)), class("timerlat", "wakeups", Some(900), Some(900))];
        let c = check(&good);
        assert!(c.pass, "{c:?}");
        assert_eq!(c.detail, "osnoise irq 100=101, timerlat wakeups 900=900");
        let c = check(&good[..1]);
        assert!(!c.pass && c.detail.contains("no comparison from timerlat"), "{c:?}");
        let bad = [class("osnoise", "thread", Some(213), Some(255)), class("timerlat", "wakeups", Some(9343), None)];
        let c = check(&bad);
        assert!(!c.pass);
        assert_eq!(c.detail, "osnoise thread: rtla 213 vs 255; timerlat wakeups: rtla 9343 vs none");
    }

    #[test]
    fn only_kernels_with_both_tracers_get_rtla() {
        assert!(wanted("CONFIG_OSNOISE_TRACER=y\nCONFIG_TIMERLAT_TRACER=y\n"));
        assert!(!wanted("CONFIG_OSNOISE_TRACER=y\n# CONFIG_TIMERLAT_TRACER is not set\n"));
        assert!(!wanted(""));
    }

    #[test]
    fn merged_usr_trees_get_the_classic_links() {
        let trixie = ["usr/bin/rtla", "usr/lib/x86_64-linux-gnu/libc.so.6", "usr/lib64/ld-linux-x86-64.so.2"].map(String::from);
        assert_eq!(usr_links(&trixie), [("lib".to_string(), "usr/lib".to_string()), ("lib64".to_string(), "usr/lib64".to_string())]);
        let bookworm =
            ["usr/bin/rtla", "lib/x86_64-linux-gnu/libc.so.6", "lib64/ld-linux-x86-64.so.2", "usr/lib/x86_64-linux-gnu/libtracefs.so.1"]
                .map(String::from);
        assert!(usr_links(&bookworm).is_empty());
    }
}
