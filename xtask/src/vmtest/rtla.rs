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
use std::process::Command;

use anyhow::{Context, Result};

use super::kernels::{self, AptRoot, Kernel};
use super::report::Check;
use crate::proc;

/// How far apart the counts of one class may be: 2% of rtla's, plus the
/// tracer's start and stop. rtla counts whole periods only, ended when it
/// turns tracing off; jitterwatch counts from the thread's first run to its
/// exit, which comes later, once rtla has printed and torn its instance
/// down. Meanwhile the CPU's ticks (and on PREEMPT_RT the ktimers run each
/// wakes) reach the still-sampling thread: an edge of time, not a rate. In
/// runs of 10 and 20 s with 10 ms, 100 ms and 1 s periods under TCG, the
/// IRQ and thread counts were both 4 to 21 above rtla's whatever the
/// length (at 250 Hz, 20 ticks are 80 ms of teardown).
pub const TOLERANCE: f64 = 0.02;
pub const EDGE: u64 = 30;

/// Where vmtest writes the comparison (BENCHMARKS.md takes it in as its
/// section 9: bench/report.rs).
pub const FILE: &str = "docs/rtla-comparison.md";
/// The section's heading.
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
        r.abs_diff(j) <= EDGE + (r as f64 * TOLERANCE).ceil() as u64
    }

    /// jitterwatch's count against rtla's, %, when rtla counted any.
    pub fn off_pct(&self) -> Option<f64> {
        let (r, j) = (self.rtla?, self.jw?);
        (r > 0).then(|| (j as f64 - r as f64) / r as f64 * 100.0)
    }
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
    let apt = AptRoot::new(&cache.join("apt").join(suite), suite)?;
    let pkgs = closure(&apt, "rtla")?;
    let debs = cache.join("debs").join(format!("rtla-{suite}"));
    std::fs::create_dir_all(&debs)?;
    let tmp = dir.with_extension("part");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    for pkg in &pkgs {
        println!("vmtest: fetching {pkg} ({suite}, for rtla)");
        let deb = apt.download(pkg, &debs)?;
        proc::check(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp))?;
    }
    // Documentation and locales: megabytes the guest never reads.
    let _ = std::fs::remove_dir_all(tmp.join("usr/share"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir)?;
    let _ = std::fs::remove_dir_all(&debs);
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
        todo.extend(kernels::depends(&show).into_iter().filter(|d| !seen.contains(d)));
    }
    Ok(seen.into_iter().collect())
}

/// One VM's comparison, for the section.
pub struct Run<'a> {
    pub kernel: &'a str,
    pub release: &'a str,
    pub mode: &'a str,
    pub classes: &'a [Class],
}

/// BENCHMARKS.md's section 9: how the comparison is made, then one row per
/// VM, tool and class.
pub fn markdown(runs: &[Run<'_>], date: &str, commit: &str) -> String {
    let mut o = format!(
        "{HEADING}\n\nWritten by `cargo xtask vmtest` on {date} (commit `{commit}`), in qemu under TCG: \
         counts only, timings under TCG mean nothing. In each VM whose kernel has the osnoise and timerlat tracers \
         (Debian builds them into its PREEMPT_RT kernels), that suite's rtla runs on the watched CPU, itself pinned to \
         the others, for 10 s: `rtla osnoise top -p 10000 -r 10000 -T 1` (10 ms periods, runtime = period) and \
         `rtla timerlat top` (its user-space thread where rtla has one). jitterwatch watches the tracer's thread in \
         passive mode (`--comm osnoise/N`, `--comm timerlatu/N`), attached before rtla starts and stopped after it ends, \
         and counts what reached the thread as rtla counts it (the summary's per-thread `classes`): IRQs (handlers and \
         APIC vectors), softirqs at interrupt level, other threads switched in while it was runnable, NMIs; and its \
         wake-ups against timerlat's activations. Agreeing means within {:.0}% of rtla's count plus {EDGE} events for the \
         tracer's start and stop, which jitterwatch sees and rtla's whole periods do not (xtask/src/vmtest/rtla.rs). \
         rtla's HW noise (gaps with no kernel event) has no counterpart: passive mode cannot see it.\n\n",
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
    o
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
    fn counts_agree_within_two_percent_and_the_edge() {
        assert!(class("osnoise", "irq", Some(2503), Some(2583)).agrees());
        assert!(!class("osnoise", "irq", Some(2503), Some(2585)).agrees());
        assert!(class("osnoise", "thread", Some(12), Some(43)).agrees());
        assert!(!class("osnoise", "thread", Some(12), Some(44)).agrees());
        assert!(!class("osnoise", "thread", Some(50), Some(10)).agrees(), "fewer is off as much as more");
        assert!(class("osnoise", "nmi", Some(0), Some(0)).agrees());
        assert!(!class("timerlat", "wakeups", Some(9182), None).agrees());
        assert_eq!(class("osnoise", "thread", Some(200), Some(210)).off_pct(), Some(5.0));
    }

    #[test]
    fn the_section_has_a_row_per_class() {
        let cs = [class("osnoise", "irq", Some(200), Some(210)), class("timerlat", "wakeups", Some(9), None)];
        let md = markdown(&[Run { kernel: "debian13-rt", release: "6.12.117", mode: "tuned", classes: &cs }], "today", "abc1234");
        assert!(md.starts_with(HEADING));
        assert!(md.contains("| debian13-rt (6.12.117) | tuned | osnoise | irq | 200 | 210 | +10 (+5.0%) | yes |\n"), "{md}");
        assert!(md.contains("| timerlat | wakeups | 9 | none | - | **no** |\n"), "{md}");
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
