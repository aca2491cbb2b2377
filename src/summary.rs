//! The exit summary: per CPU in hiccups' columns plus stolen_pct, then each
//! CPU's top causes; the same as JSON with --json.

use std::io::{self, Write};

use serde::Serialize;

use crate::cause::Kind;
use crate::sanitize::visible;
use crate::stats::Stats;

/// Causes listed per CPU.
const TOP: usize = 10;

#[derive(Serialize)]
pub struct CpuRow {
    pub cpu: u32,
    pub threshold_ns: u64,
    pub hiccups: u64,
    pub pct99_ns: u64,
    pub pct999_ns: u64,
    pub max_ns: u64,
    pub stolen_pct: f64,
    pub explained_pct: f64,
    pub loop_floor_ns: u64,
    pub loop_mean_ns: f64,
    /// The mean loop period with the hiccups left out: the probe's own
    /// speed, whatever steals the CPU.
    pub loop_quiet_mean_ns: f64,
    pub hiccups_per_sec: f64,
    pub queue_overflows: u64,
    pub ringbuf_drops: u64,
    pub top_causes: Vec<CauseRow>,
}

#[derive(Serialize)]
pub struct CauseRow {
    pub kind: Kind,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub p99_ns: u64,
}

/// jitterwatch's own cost and start-up, for users and `cargo xtask bench`.
#[derive(Serialize)]
pub struct Overhead {
    /// CLOCK_MONOTONIC ns when main() began, the first probe sample, and the
    /// first kernel event drained.
    pub main_start_ns: u64,
    pub first_sample_ns: u64,
    pub first_event_ns: u64,
    pub lag_max_ns: u64,
    /// CPU time of the collector thread (ring-buffer consumer, attribution,
    /// CSV), and that per event drained.
    pub consumer_cpu_ns: u64,
    pub consumer_ns_per_event: f64,
    /// The collector's CPU time before it began draining (BPF load, attach).
    pub setup_cpu_ns: u64,
    pub reordered_events: u64,
    pub evicted_segments: u64,
    pub ringbuf_drops: u64,
    pub queue_overflows: u64,
    /// Per BPF program: runs and ns per run (with --bpf-stats).
    pub bpf_programs: Vec<ProgRow>,
}

#[derive(Serialize)]
pub struct ProgRow {
    pub name: String,
    pub run_cnt: u64,
    pub ns_per_run: f64,
}

#[derive(Serialize)]
pub struct Summary {
    pub duration_ns: u64,
    pub events: u64,
    pub events_per_sec: f64,
    pub overhead: Overhead,
    pub missing_tracepoints: Vec<&'static str>,
    /// How context switches were hooked.
    pub switch_hook: String,
    pub cpus: Vec<CpuRow>,
    /// Fix hints matched to the top culprits (from the isolation audit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
}

impl Summary {
    pub fn from_stats(s: &Stats) -> Self {
        let cpus = s
            .cpus
            .iter()
            .map(|c| CpuRow {
                cpu: c.cpu,
                threshold_ns: c.threshold_ns,
                hiccups: c.hiccups,
                pct99_ns: c.pct(0.99),
                pct999_ns: c.pct(0.999),
                max_ns: c.max_ns,
                stolen_pct: s.stolen_pct(c),
                explained_pct: if c.stolen_ns == 0 { 0.0 } else { 100.0 * c.explained_ns as f64 / c.stolen_ns as f64 },
                loop_floor_ns: c.floor_ns,
                loop_mean_ns: c.loop_mean_ns,
                loop_quiet_mean_ns: c.loop_quiet_mean_ns,
                hiccups_per_sec: s.per_sec(c.hiccups),
                queue_overflows: c.overflow,
                ringbuf_drops: c.drops,
                top_causes: s
                    .top_causes(Some(c.cpu))
                    .into_iter()
                    .take(TOP)
                    .map(|((_, kind, name), st)| CauseRow {
                        kind: *kind,
                        name: name.to_string(),
                        count: st.count,
                        total_ns: st.total_ns,
                        max_ns: st.max_ns,
                        p99_ns: st.p99(),
                    })
                    .collect(),
            })
            .collect();
        Summary {
            duration_ns: s.elapsed_ns(),
            events: s.events,
            events_per_sec: s.per_sec(s.events),
            overhead: Overhead {
                main_start_ns: crate::lifecycle::main_start_ns(),
                first_sample_ns: s.start_ns,
                first_event_ns: s.first_event_ns,
                lag_max_ns: s.lag_max_ns,
                consumer_cpu_ns: s.consumer_cpu_ns,
                consumer_ns_per_event: if s.events == 0 { 0.0 } else { s.consumer_cpu_ns as f64 / s.events as f64 },
                setup_cpu_ns: s.setup_cpu_ns,
                reordered_events: s.reordered_events,
                evicted_segments: s.evicted_segments,
                ringbuf_drops: s.cpus.iter().map(|c| c.drops).sum(),
                queue_overflows: s.cpus.iter().map(|c| c.overflow).sum(),
                bpf_programs: s
                    .prog_stats
                    .iter()
                    .filter(|p| p.run_cnt > 0)
                    .map(|p| ProgRow { name: p.name.clone(), run_cnt: p.run_cnt, ns_per_run: p.run_time_ns as f64 / p.run_cnt as f64 })
                    .collect(),
            },
            missing_tracepoints: s.missing_tracepoints.clone(),
            switch_hook: s.switch_hook.clone(),
            cpus,
            hints: Vec::new(),
        }
    }

    /// Adds the audit's fixes for this run's top culprits (deduplicated).
    pub fn with_hints(mut self, report: &crate::doctor::Report) -> Self {
        const CULPRITS: usize = 5;
        for c in &self.cpus {
            for k in c.top_causes.iter().take(CULPRITS) {
                for h in crate::doctor::hints(report, k.kind.as_str(), &k.name) {
                    if !self.hints.contains(&h) {
                        self.hints.push(h);
                    }
                }
            }
        }
        self
    }

    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{:>4} {:>12} {:>9} {:>10} {:>10} {:>12} {:>10}",
            "cpu", "threshold_ns", "hiccups", "pct99_ns", "pct999_ns", "max_ns", "stolen_pct"
        )?;
        for c in &self.cpus {
            writeln!(
                out,
                "{:>4} {:>12} {:>9} {:>10} {:>10} {:>12} {:>10.4}",
                c.cpu, c.threshold_ns, c.hiccups, c.pct99_ns, c.pct999_ns, c.max_ns, c.stolen_pct
            )?;
        }
        for c in &self.cpus {
            writeln!(
                out,
                "\ncpu {}: {:.1}% of stolen time explained, loop floor {} ns (mean period {:.1} ns, {:.1} ns between hiccups), {:.1} hiccups/s, {} queue overflows, {} ring-buffer drops",
                c.cpu, c.explained_pct, c.loop_floor_ns, c.loop_mean_ns, c.loop_quiet_mean_ns, c.hiccups_per_sec, c.queue_overflows, c.ringbuf_drops
            )?;
            if c.top_causes.is_empty() {
                continue;
            }
            writeln!(out, "  {:<11} {:<40} {:>8} {:>14} {:>12} {:>12}", "kind", "name", "count", "total_ns", "max_ns", "p99_ns")?;
            for k in &c.top_causes {
                let name =
                    if k.kind == Kind::Unexplained { "(no kernel event: hypervisor, SMI, hardware)".into() } else { visible(&k.name) };
                writeln!(
                    out,
                    "  {:<11} {:<40} {:>8} {:>14} {:>12} {:>12}",
                    k.kind.as_str(),
                    name,
                    k.count,
                    k.total_ns,
                    k.max_ns,
                    k.p99_ns
                )?;
            }
        }
        let o = &self.overhead;
        writeln!(
            out,
            "\njitterwatch's own cost: {} events ({:.0}/s), {} ring-buffer drops, {} probe-queue overflows, consumer lag up to {}",
            self.events,
            self.events_per_sec,
            o.ringbuf_drops,
            o.queue_overflows,
            crate::units::ns(o.lag_max_ns)
        )?;
        writeln!(
            out,
            "  consumer thread: {} of CPU, {:.1}% of one CPU, {:.0} ns per event (after {} of set-up: BPF load and attach)",
            crate::units::ns(o.consumer_cpu_ns),
            if self.duration_ns == 0 { 0.0 } else { 100.0 * o.consumer_cpu_ns as f64 / self.duration_ns as f64 },
            o.consumer_ns_per_event,
            crate::units::ns(o.setup_cpu_ns)
        )?;
        if !self.switch_hook.is_empty() {
            writeln!(out, "  context switches: {}", visible(&self.switch_hook))?;
        }
        if o.evicted_segments > 0 {
            // Stalls longer than the window keep their totals per cause, not their order.
            writeln!(out, "  {} timeline segments folded into per-cause totals (window full)", o.evicted_segments)?;
        }
        for p in &o.bpf_programs {
            writeln!(out, "  bpf {:<32} {:>10} runs {:>8.0} ns/run", p.name, p.run_cnt, p.ns_per_run)?;
        }
        if !self.missing_tracepoints.is_empty() {
            writeln!(out, "\nnot traced (this kernel lacks them): {}", self.missing_tracepoints.join(", "))?;
        }
        for h in &self.hints {
            writeln!(out, "hint: {}", visible(h))?;
        }
        Ok(())
    }

    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::Hiccup;
    use std::sync::Arc;

    #[test]
    fn text_and_json_carry_the_same_figures() {
        let mut s = Stats::new(&[1], 0);
        s.cpus[0].threshold_ns = 250;
        s.record(&Hiccup {
            cpu: 1,
            t0: 10,
            gap: 1000,
            causes: vec![(Kind::Task, Arc::from("evil\x1b]0;x\x07[9]"), 900)],
            unexplained: 100,
        });
        s.now_ns = 1_000_000;
        s.events = 400;
        s.consumer_cpu_ns = 20_000;
        s.setup_cpu_ns = 30_000_000;
        let sum = Summary::from_stats(&s);
        let mut text = Vec::new();
        sum.write_text(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.lines().next().unwrap().starts_with(" cpu threshold_ns   hiccups"));
        assert!(text.contains("   1          250         1"), "{text}");
        assert!(text.contains("evil\\x1b]0;x\\x07[9]"));
        assert!(!text.contains('\x1b'));
        assert!(text.contains("consumer thread: 20.0µs of CPU, 2.0% of one CPU, 50 ns per event (after 30.0ms of set-up"), "{text}");
        let mut json = Vec::new();
        sum.write_json(&mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["cpus"][0]["hiccups"], 1);
        assert_eq!(v["cpus"][0]["max_ns"], 1000);
        assert_eq!(v["cpus"][0]["top_causes"][0]["kind"], "task");
        assert_eq!(v["cpus"][0]["stolen_pct"], 0.1);
        assert_eq!(v["overhead"]["consumer_cpu_ns"], 20_000);
        assert_eq!(v["overhead"]["consumer_ns_per_event"], 50.0);
        assert_eq!(v["overhead"]["setup_cpu_ns"], 30_000_000);
    }
}
