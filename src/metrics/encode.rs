//! A view in the OpenMetrics text format, through prometheus-client's
//! encoder. Names are untrusted: already escaped for a terminal (control
//! and format characters shown visibly), they are escaped again for the
//! format's quoted label values (`\`, `"`, newline) by the crate's
//! encoder (since prometheus-client 0.25.2).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::{CauseSeries, View, BUCKETS};

/// A series' labels: the encoder escapes the values.
type Labels<'a> = Vec<(&'static str, &'a str)>;

#[derive(Debug)]
struct ViewCollector(Arc<View>);

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// One family: `name`, with each of `series` as (labels, value).
fn family<'v, M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    ty: MetricType,
    series: impl IntoIterator<Item = (Labels<'v>, M)>,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, unit, ty)?;
    for (labels, v) in series {
        v.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn cause_labels<'v>(cpu: &'v str, c: &'v CauseSeries) -> Labels<'v> {
    vec![("cpu", cpu), ("kind", c.kind), ("name", &c.name)]
}

/// A sender's series: `sender` is its program, or `(kind:name)` of the
/// CPU's own interrupt-level code.
fn sender_labels<'v>(cpu: &'v str, c: &'v CauseSeries) -> Labels<'v> {
    vec![("cpu", cpu), ("kind", c.kind), ("sender", &c.name)]
}

fn counters(xs: Vec<(Labels<'_>, u64)>) -> impl Iterator<Item = (Labels<'_>, ConstCounter<u64>)> {
    xs.into_iter().map(|(l, x)| (l, ConstCounter::new(x)))
}

fn seconds(xs: Vec<(Labels<'_>, u64)>) -> impl Iterator<Item = (Labels<'_>, ConstCounter<f64>)> {
    xs.into_iter().map(|(l, x)| (l, ConstCounter::new(secs(x))))
}

fn gauge_secs(xs: Vec<(Labels<'_>, u64)>) -> impl Iterator<Item = (Labels<'_>, ConstGauge<f64>)> {
    xs.into_iter().map(|(l, x)| (l, ConstGauge::new(secs(x))))
}

impl Collector for ViewCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let v = &*self.0;
        let cpus: Vec<String> = v.cpus.iter().map(|c| c.cpu.to_string()).collect();
        build_info(v, &mut enc)?;
        stalls(v, &cpus, &mut enc)?;
        causes(v, &cpus, &mut enc)?;
        origins(v, &cpus, &mut enc)?;
        probes(v, &cpus, &mut enc)?;
        threads(v, &mut enc)?;
        own_cost(v, &mut enc)
    }
}

/// One value per watched CPU, labelled by it.
fn per_cpu<'v>(v: &View, cpus: &'v [String], f: &dyn Fn(&super::CpuView) -> u64) -> Vec<(Labels<'v>, u64)> {
    v.cpus.iter().zip(cpus).map(|(c, n)| (vec![("cpu", n.as_str())], f(c))).collect()
}

/// The version and the mode.
fn build_info(v: &View, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let info = [(vec![("version", env!("CARGO_PKG_VERSION")), ("mode", v.mode)], ConstGauge::new(1i64))];
    family(enc, "jitterwatch_build_info", "jitterwatch's version and mode (probe, wakeup, passive)", None, MetricType::Gauge, info)?;
    Ok(())
}

/// Each CPU's stalls: how many, their time, their lengths.
fn stalls(v: &View, cpus: &[String], enc: &mut DescriptorEncoder) -> std::fmt::Result {
    family(enc, "jitterwatch_hiccups", "Stalls over the threshold", None, MetricType::Counter, counters(per_cpu(v, cpus, &|c| c.hiccups)))?;
    family(
        enc,
        "jitterwatch_stolen",
        "Time taken from the probe (or watched threads)",
        Some(&Unit::Seconds),
        MetricType::Counter,
        seconds(per_cpu(v, cpus, &|c| c.stolen_ns)),
    )?;
    {
        let mut m = enc.encode_descriptor("jitterwatch_gap", "Stall lengths", Some(&Unit::Seconds), MetricType::Histogram)?;
        for (c, n) in v.cpus.iter().zip(cpus) {
            let labels: Labels = vec![("cpu", n.as_str())];
            let mut buckets: Vec<(f64, u64)> = BUCKETS.iter().copied().zip(c.counts).collect();
            // The encoder writes `+Inf` for an infinite bound.
            buckets.push((f64::INFINITY, c.counts[BUCKETS.len()]));
            m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(secs(c.stolen_ns), c.hiccups, &buckets, None)?;
        }
    }
    Ok(())
}

/// The time and stalls charged to each CPU's causes.
fn causes(v: &View, cpus: &[String], enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let causes = v.cpus.iter().zip(cpus).flat_map(|(c, n)| c.causes.iter().map(move |s| (n, s)));
    family(
        enc,
        "jitterwatch_cause_stolen",
        "Time charged to a cause (top causes per CPU by recent time; the rest as (others) of their kind)",
        Some(&Unit::Seconds),
        MetricType::Counter,
        causes.clone().map(|(n, s)| (cause_labels(n, s), ConstCounter::new(secs(s.ns)))),
    )?;
    family(
        enc,
        "jitterwatch_cause_hiccups",
        "Stalls a cause took part in",
        None,
        MetricType::Counter,
        causes.map(|(n, s)| (cause_labels(n, s), ConstCounter::new(s.hiccups))),
    )?;
    Ok(())
}

/// The time and stalls of causes by who sent them.
fn origins(v: &View, cpus: &[String], enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let senders = v.cpus.iter().zip(cpus).flat_map(|(c, n)| c.senders.iter().map(move |s| (n, s)));
    family(
        enc,
        "jitterwatch_origin_stolen",
        "Time charged to causes by who sent them: an IPI's sender, a work item's queuer, a task's waker (bounded as causes are)",
        Some(&Unit::Seconds),
        MetricType::Counter,
        senders.clone().map(|(n, s)| (sender_labels(n, s), ConstCounter::new(secs(s.ns)))),
    )?;
    family(
        enc,
        "jitterwatch_origin_hiccups",
        "Stalls with a cause sent by this sender",
        None,
        MetricType::Counter,
        senders.map(|(n, s)| (sender_labels(n, s), ConstCounter::new(s.hiccups))),
    )?;
    Ok(())
}

/// Each CPU's probe: its floor and threshold, what it lost.
fn probes(v: &View, cpus: &[String], enc: &mut DescriptorEncoder) -> std::fmt::Result {
    family(
        enc,
        "jitterwatch_probe_floor",
        "The probe loop's smallest period",
        Some(&Unit::Seconds),
        MetricType::Gauge,
        gauge_secs(per_cpu(v, cpus, &|c| c.counters.own.floor_ns())),
    )?;
    family(
        enc,
        "jitterwatch_threshold",
        "The stall threshold",
        Some(&Unit::Seconds),
        MetricType::Gauge,
        gauge_secs(per_cpu(v, cpus, &|c| c.counters.threshold_ns)),
    )?;
    family(
        enc,
        "jitterwatch_ringbuf_drops",
        "Kernel events dropped, ring buffer full",
        None,
        MetricType::Counter,
        counters(per_cpu(v, cpus, &|c| c.counters.drops)),
    )?;
    family(
        enc,
        "jitterwatch_probe_queue_overflows",
        "Stalls lost, probe queue full",
        None,
        MetricType::Counter,
        counters(per_cpu(v, cpus, &|c| c.counters.overflow)),
    )?;
    Ok(())
}

/// Passive mode's watched threads, and the softirqs their own calls ran.
fn threads(v: &View, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    if !v.threads.is_empty() {
        let threads = || v.threads.iter().map(|s| (vec![("thread", s.name.as_str())], s));
        family(
            enc,
            "jitterwatch_thread_stolen",
            "Time taken from a watched thread",
            Some(&Unit::Seconds),
            MetricType::Counter,
            threads().map(|(l, s)| (l, ConstCounter::new(secs(s.ns)))),
        )?;
        family(
            enc,
            "jitterwatch_thread_hiccups",
            "Stalls of a watched thread",
            None,
            MetricType::Counter,
            threads().map(|(l, s)| (l, ConstCounter::new(s.hiccups))),
        )?;
    }
    if !v.in_syscall.is_empty() {
        let sys = || v.in_syscall.iter().map(|s| (vec![("thread", s.name.as_str()), ("softirq", s.kind)], s));
        family(
            enc,
            "jitterwatch_thread_in_syscall",
            "Softirqs a watched thread's own system calls ran (its own work, not taken from it)",
            Some(&Unit::Seconds),
            MetricType::Counter,
            sys().map(|(l, s)| (l, ConstCounter::new(secs(s.ns)))),
        )?;
        family(
            enc,
            "jitterwatch_thread_in_syscall_softirqs",
            "Softirqs a watched thread's own system calls ran",
            None,
            MetricType::Counter,
            sys().map(|(l, s)| (l, ConstCounter::new(s.hiccups))),
        )?;
    }
    Ok(())
}

/// jitterwatch's own: events read, the consumer's CPU time.
fn own_cost(v: &View, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    // Without labels: the counter straight on its descriptor.
    ConstCounter::new(v.events).encode(enc.encode_descriptor("jitterwatch_events", "Kernel events read", None, MetricType::Counter)?)?;
    ConstCounter::new(secs(v.consumer_cpu_ns)).encode(enc.encode_descriptor(
        "jitterwatch_consumer_cpu",
        "CPU time of jitterwatch's event consumer",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?)?;
    Ok(())
}

/// The same exposition in Prometheus's classic text format (0.0.4), for
/// clients that do not ask for OpenMetrics (curl, promtool, older
/// scrapers): a counter family is named with its `_total` suffix there,
/// and there are no `# UNIT` lines and no `# EOF`.
pub fn classic_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let name = if ty == "counter" { format!("{name}_total") } else { name.to_string() };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {ty}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `view` as an OpenMetrics text exposition (ends with `# EOF`).
pub fn encode(view: Arc<View>) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(ViewCollector(view)));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}
