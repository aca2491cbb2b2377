//! The exit summary as text: per CPU in hiccups' columns, each CPU's
//! line of figures and top causes (the wake-up probe's latencies and their
//! parts), jitterwatch's own cost, hints and notes.

use std::io::{self, Write};

use super::rows::CpuRow;
use super::{threads, Summary};
use crate::cause::{Kind, LOST, UNEXPLAINED};
use crate::sanitize::visible;
use crate::units::ns;

impl Summary {
    /// The summary as text: the threads (passive mode), the table of
    /// CPUs, each CPU's section, jitterwatch's own cost, what was
    /// written, the hints and notes.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        self.write_table(out)?;
        for c in &self.cpus {
            self.write_cpu_line(c, out)?;
            write_freq(c, out)?;
            write_senders(c, out)?;
            write_tick(c, out)?;
            write_periodic(c, out)?;
            write_steal(c, out)?;
            write_wakeup(c, out)?;
            write_causes(c, out)?;
        }
        self.write_own_cost(out)?;
        self.write_outputs(out)?;
        self.write_notes(out)
    }

    /// The threads' books (passive mode), then one line of figures per CPU.
    fn write_table(&self, out: &mut dyn Write) -> io::Result<()> {
        threads::write_text(&self.threads, self.overhead.first_sample_ns, out)?;
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
        Ok(())
    }

    /// A CPU's headline: how much of its time is explained, its probe.
    fn write_cpu_line(&self, c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "\ncpu {}: {}{}, {}, {:.1} hiccups/s, {} queue overflows, {} ring-buffer drops",
            c.cpu,
            // Nothing to explain is not "0.0% explained".
            match c.hiccups {
                0 => "no hiccup".to_string(),
                // Passive mode: the threads' hiccups, mostly their own
                // wake-ups and waits: delayed, not stolen.
                _ => format!("{:.1}% of {} time explained", c.explained_pct, self.mode.taken()),
            },
            if c.unknown_pct > 0.0 {
                format!(
                    " ({:.1} points of it from hiccups with dropped events; {:.1}% lost while events were dropped)",
                    c.explained_in_lossy_rows_pct, c.unknown_pct
                )
            } else {
                String::new()
            },
            if !self.mode.has_probe() {
                "passive (no probe)".to_string()
            } else if let Some(w) = &c.wakeup {
                format!("wake-up probe every {} (timer slack {})", ns(w.period_ns), ns(w.slack_ns))
            } else {
                let floor = c.loop_floor_ns.unwrap_or(0);
                // The floor is measured as the probe starts (20 ms to 1 s):
                // a CPU busier or slower then than later gives a floor
                // above the run's mean period, said as such.
                let then = if floor as f64 > c.loop_mean_ns.unwrap_or(f64::MAX) {
                    ", measured as the probe started, when the loop ran slower"
                } else {
                    ""
                };
                format!(
                    "loop floor {} ns{then} (mean period {:.1} ns, {:.1} ns between hiccups{})",
                    floor,
                    c.loop_mean_ns.unwrap_or(0.0),
                    c.loop_quiet_mean_ns.unwrap_or(0.0),
                    match (c.clock.unwrap_or("vdso"), c.tsc_drift_ns) {
                        ("vdso", _) => String::new(),
                        (counter, Some(d)) => format!("; {} clock, {d:+} ns from CLOCK_MONOTONIC at the end", counter.to_uppercase()),
                        (counter, None) => format!("; {} clock", counter.to_uppercase()),
                    }
                )
            },
            c.hiccups_per_sec,
            c.queue_overflows,
            c.ringbuf_drops
        )?;
        Ok(())
    }

    /// What jitterwatch cost: events, drops, lag, the consumer's CPU, the
    /// switch hook, the dispatch price, the BPF programs' books.
    fn write_own_cost(&self, out: &mut dyn Write) -> io::Result<()> {
        let o = &self.overhead;
        writeln!(
            out,
            "\njitterwatch's own cost: {} events ({:.0}/s), {} ring-buffer drops, {} probe-queue overflows, consumer lag up to {}",
            self.events,
            self.events_per_sec,
            o.ringbuf_drops,
            o.queue_overflows,
            ns(o.lag_max_ns)
        )?;
        writeln!(
            out,
            "  consumer thread: {} of CPU, {:.1}% of one CPU, {:.0} ns per event (after {} of set-up: BPF load and attach)",
            ns(o.consumer_cpu_ns),
            if self.duration_ns == 0 { 0.0 } else { 100.0 * o.consumer_cpu_ns as f64 / self.duration_ns as f64 },
            o.consumer_ns_per_event,
            ns(o.setup_cpu_ns)
        )?;
        if !self.switch_hook.is_empty() {
            writeln!(out, "  context switches: {}", visible(&self.switch_hook))?;
        }
        if let Some(d) = o.dispatch {
            writeln!(
                out,
                "  a hook's dispatch: {} a firing (± {}, priced at start; {} warm, a switch right after another), counted in self before each of our records",
                ns(d.ns),
                ns(d.spread_ns / 2),
                ns(d.warm_ns)
            )?;
        }
        if o.evicted_segments > 0 {
            // Stalls longer than the window keep their totals per cause, not their order.
            writeln!(out, "  {} timeline segments folded into per-cause totals (window full)", o.evicted_segments)?;
        }
        for p in &o.bpf_programs {
            writeln!(out, "  bpf {:<32} {:>10} runs {:>8.0} ns/run", p.name, p.run_cnt, p.ns_per_run)?;
        }
        Ok(())
    }

    /// What the run wrote besides: traces, a recording.
    fn write_outputs(&self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(t) = &self.traces {
            writeln!(
                out,
                "\ntraces: {} of {} stalls at or above --trace-above written to {}{}; recorder memory at most {} of {} per CPU",
                t.written,
                t.triggered,
                visible(t.dir.as_deref().unwrap_or("")),
                skipped(t),
                crate::units::bytes(t.peak_bytes),
                crate::units::bytes(t.cap_bytes)
            )?;
        }
        if let Some(r) = &self.recorded {
            writeln!(
                out,
                "recorded: {} events, {} stalls into {} ({})",
                r.events,
                r.stalls,
                visible(&r.path),
                crate::units::bytes(r.bytes)
            )?;
        }
        Ok(())
    }

    /// What this kernel could not trace, the hints and the notes.
    fn write_notes(&self, out: &mut dyn Write) -> io::Result<()> {
        if !self.missing_tracepoints.is_empty() {
            writeln!(out, "\nnot traced (this kernel lacks them): {}", self.missing_tracepoints.join(", "))?;
        }
        for h in &self.hints {
            writeln!(out, "hint: {}", visible(h))?;
        }
        for n in &self.notes {
            writeln!(out, "note: {}", visible(n))?;
        }
        Ok(())
    }
}

/// Frequency changes inside stalls.
fn write_freq(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    if c.hiccups_with_freq_change > 0 {
        writeln!(
            out,
            "  {} hiccups saw the CPU's frequency change (a governor at work: performance, or a fixed frequency, removes it)",
            c.hiccups_with_freq_change
        )?;
    }
    Ok(())
}

/// Who sent the IPIs, queued the work, woke the tasks.
fn write_senders(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    if !c.senders.is_empty() {
        let by: Vec<String> = c
            .senders
            .iter()
            .map(|s| {
                let kind = if s.kind == Kind::Task { "wake-ups".into() } else { s.kind.to_string() };
                // "(not sent)", "(sender unknown)": not a sender's name.
                let from = if s.unsent { format!("{kind} {}", s.sender) } else { format!("{kind} from {}", s.sender) };
                format!("{from}: {} stalls, {}", s.count, ns(s.total_ns))
            })
            .collect();
        writeln!(out, "  by sender: {}", by.join("; "))?;
    }
    Ok(())
}

/// Why the tick ran, and the fix.
fn write_tick(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    if let Some(t) = &c.tick {
        let why = match (t.last, t.reason) {
            (Some(d), _) => format!(": {d}, {}", crate::tick::why(d).unwrap_or("")),
            (None, Some(r)) => format!(": {r}"),
            (None, None) => String::new(),
        };
        let also: Vec<&str> = t.dependencies.iter().copied().filter(|d| Some(*d) != t.last).collect();
        let also = if also.is_empty() { String::new() } else { format!("; also kept by {}", also.join(", ")) };
        let beside = match t.dependencies.iter().find(|d| matches!(**d, "SCHED" | "POSIX_TIMER" | "PERF_EVENTS")) {
            Some(&"POSIX_TIMER") => "CPU-clock timers",
            Some(&"PERF_EVENTS") => "perf events",
            _ => "beside the watched task",
        };
        let behind = t.behind.as_ref().map_or(String::new(), |b| format!("; {beside}: {b}"));
        writeln!(out, "  tick: {} at the end ({} stops, {} attempts refused){why}{also}{behind}", t.state, t.stops, t.refusals)?;
        if let Some(f) = t.fix {
            writeln!(out, "    fix: {f}")?;
        }
    }
    Ok(())
}

/// Causes that recur at a period.
fn write_periodic(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    for p in &c.periodic {
        writeln!(
            out,
            "  recurs: {} every {} ({:.0}% of its last {} stalls start in one twentieth of the period, 5% by chance; from {} into it): {}",
            p.cause.trim_end_matches(':'),
            period(p.period_ns),
            100.0 * p.share,
            p.stalls,
            period(p.phase_ns),
            p.likely
        )?;
    }
    Ok(())
}

/// The hypervisor's steal clock against the stalls.
fn write_steal(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    if let Some(st) = &c.steal {
        writeln!(
            out,
            "  host steal clock: {} over the run, {} of it charged to stalls as host ({}), {} outside stalls' unexplained time; {} increments split over several stalls (largest unexplained first)",
            ns(st.seen_ns()),
            ns(st.host_ns),
            crate::cause::HOST,
            ns(st.outside_ns),
            st.shared
        )?;
    }
    Ok(())
}

/// The wake-up probe's latencies and their parts.
fn write_wakeup(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    if let Some(w) = &c.wakeup {
        writeln!(
            out,
            "  wake-up latency over {} wake-ups: min {}, avg {}, max {}; p50 {}, p99 {}, p99.9 {} (1 µs buckets); {} over the threshold",
            w.wakeups,
            ns(w.min_ns),
            ns(w.avg_ns.round() as u64),
            ns(w.max_ns),
            ns(w.p50_ns),
            ns(w.p99_ns),
            ns(w.p999_ns),
            c.hiccups
        )?;
        for p in &c.late_wakeup_parts {
            let top: Vec<String> = p.top_causes.iter().map(|(c, t)| format!("{} {}", c.trim_end_matches(':'), ns(*t))).collect();
            writeln!(
                out,
                "    {:<17} {:>10} in all, max {:>9}{}",
                p.part,
                ns(p.total_ns),
                ns(p.max_ns),
                if top.is_empty() { String::new() } else { format!("; largest: {}", top.join(", ")) }
            )?;
        }
    }
    Ok(())
}

/// The causes by kind, then the largest, with their stacks.
fn write_causes(c: &CpuRow, out: &mut dyn Write) -> io::Result<()> {
    if c.top_causes.is_empty() {
        return Ok(());
    }
    let kinds: Vec<String> = c.by_kind.iter().map(|k| format!("{} {} × {}", k.kind, k.count, ns(k.total_ns))).collect();
    writeln!(out, "  by kind: {}", kinds.join(", "))?;
    // The name last, as perf report puts the symbol: a long one
    // (`unexplained (no kernel event: …)`) pushes no column.
    writeln!(out, "  {:<11} {:>8} {:>14} {:>12} {:>12}  name", "kind", "count", "total_ns", "max_ns", "p99_ns")?;
    for k in &c.top_causes {
        // Names are escaped already (Cause::push_name).
        let name = match k.kind {
            Kind::Unexplained => UNEXPLAINED,
            Kind::Lost => LOST,
            _ => &k.name,
        };
        writeln!(out, "  {:<11} {:>8} {:>14} {:>12} {:>12}  {}", k.kind.as_str(), k.count, k.total_ns, k.max_ns, k.p99_ns, name)?;
        // --stacks-above: where it was, innermost frame first (escaped).
        if let Some(frames) = &k.stack {
            writeln!(out, "  {:<11} stack: {}", "", frames.join(" ← "))?;
        }
    }
    Ok(())
}

/// What the flight recorder left out, and why.
fn skipped(t: &crate::trace::Totals) -> String {
    let mut s = String::new();
    if t.skipped_rate > 0 {
        s += &format!(", {} skipped (--trace-max a minute)", t.skipped_rate);
    }
    if t.skipped_busy > 0 {
        s += &format!(", {} skipped (writer busy)", t.skipped_busy);
    }
    if t.failed > 0 {
        s += &format!(", {} failed to write (first: {})", t.failed, t.first_error.as_deref().unwrap_or("?"));
    }
    if t.cut > 0 {
        s += &format!(", {} cut by the memory cap", t.cut);
    }
    s
}

/// A period to the precision it was found at: 4.000 ms, 250.0 µs.
fn period(v: u64) -> String {
    if v >= 1_000_000 {
        format!("{:.3} ms", v as f64 / 1e6)
    } else {
        format!("{:.1} µs", v as f64 / 1e3)
    }
}
