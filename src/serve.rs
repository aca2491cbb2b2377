//! `jitterwatch serve`: headless until stopped, with a line per CPU a
//! minute for the journal (stderr, which systemd keeps). The lines come
//! from the collector's snapshots, so writing them never holds it up.

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::lifecycle;
use crate::say::say;
use crate::snapshot::Snapshot;
use crate::units::ns;

/// How often each CPU's line is logged.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// Waits for a stop (or `duration`), logging every [`LOG_EVERY`].
pub fn wait(rx: &Receiver<Snapshot>, started: Instant, duration: Option<Duration>) {
    let mut prev: Option<Snapshot> = None;
    let mut latest: Option<Snapshot> = None;
    let mut next_log = started + LOG_EVERY;
    while !lifecycle::stop_requested() && duration.is_none_or(|d| started.elapsed() < d) {
        while let Ok(s) = rx.try_recv() {
            latest = Some(s);
        }
        if Instant::now() >= next_log {
            next_log += LOG_EVERY;
            if let Some(s) = latest.take() {
                for line in lines(prev.as_ref(), &s) {
                    say!("{line}");
                }
                prev = Some(s);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One line per CPU: what changed since `prev` (the whole run for the
/// first), and the largest cause of the run.
pub fn lines(prev: Option<&Snapshot>, now: &Snapshot) -> Vec<String> {
    let secs = (now.now_ns.saturating_sub(prev.map_or(now.start_ns, |p| p.now_ns)) as f64 * 1e-9).max(1e-9);
    now.cpus
        .iter()
        .map(|c| {
            let before = prev.and_then(|p| p.cpus.iter().find(|x| x.cpu == c.cpu));
            let (n, stolen) = match before {
                Some(b) => (c.hiccups.saturating_sub(b.hiccups), c.stolen_ns.saturating_sub(b.stolen_ns)),
                None => (c.hiccups, c.stolen_ns),
            };
            let top = now.culprits.iter().find(|k| k.key.cpu == c.cpu).map_or_else(
                || "none".to_string(),
                |k| match k.key.cause.name() {
                    name if name.is_empty() => k.key.cause.kind().to_string(),
                    name => format!("{}:{name}", k.key.cause.kind()),
                },
            );
            format!(
                "cpu {}: {n} hiccups in {secs:.0} s ({:.1}/s), {:.3}% stolen; run: p99 {}, p99.9 {}, max {}; largest cause: {top}",
                c.cpu,
                n as f64 / secs,
                100.0 * stolen as f64 * 1e-9 / secs,
                ns(c.p99_ns),
                ns(c.p999_ns),
                ns(c.max_ns),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::CpuCounters;
    use crate::stats::CpuFigures;

    fn snap(now_s: u64, hiccups: u64, stolen_ns: u64) -> Snapshot {
        Snapshot {
            start_ns: 0,
            now_ns: now_s * 1_000_000_000,
            cpus: vec![CpuFigures {
                cpu: 3,
                hiccups,
                stolen_ns,
                max_ns: 2_000_000,
                p99_ns: 40_000,
                p999_ns: 900_000,
                worst_per_sec: Default::default(),
                counters: CpuCounters::new(3),
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_line_per_cpu_for_the_last_minute() {
        let first = snap(60, 600, 60_000_000);
        assert_eq!(
            lines(None, &first),
            vec!["cpu 3: 600 hiccups in 60 s (10.0/s), 0.100% stolen; run: p99 40.0µs, p99.9 900.0µs, max 2.0ms; largest cause: none"]
        );
        let next = snap(120, 720, 66_000_000);
        let l = lines(Some(&first), &next);
        assert!(l[0].starts_with("cpu 3: 120 hiccups in 60 s (2.0/s), 0.010% stolen"), "{l:?}");
    }
}
