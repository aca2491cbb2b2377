//! Figure 8b within one run: cyclictest's measurement in a loop of our own
//! (assets/wakes.rs) that turns jitterwatch's watching of its CPU off and
//! on every TOGGLE_MS, as figure 3b's loop does, so what our programs' work
//! adds to a wake-up is read 50 ms apart, free of the host's drift from run
//! to run (which moves cyclictest's avg by ±30% here, where the target is
//! 2%). In the windows not watched every program is attached and returns
//! at its first test: the hooks' dispatch is in both. Runs of the same loop
//! with nothing attached, alternated, give the level without any hook.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::bench::interruption::{quantile, watched_byte};
use crate::bench::measure::Ctx;
use crate::bench::spread::Spread;
use crate::bench::util;

/// The loop's period, µs (cyclictest's -i 1000), and its priority (-p 80).
const INTERVAL_US: u64 = 1000;
const PRIO: u32 = 80;
/// How long each window lasts, ms: fifty wake-ups.
const TOGGLE_MS: u64 = 50;

/// What one wake-up class read: mean, p50, p99 (ns).
pub const STATS: [&str; 3] = ["avg", "p50", "p99"];

#[derive(Debug, Clone)]
pub struct InRun {
    pub runs: usize,
    pub secs: f64,
    /// Wake-ups in the watched windows per run.
    pub samples: Spread,
    /// Wake-ups of the loop's thread jitterwatch counted per paired run.
    pub seen: Spread,
    /// The windows not watched (programs attached, returning at once), ns.
    pub off: [Spread; 3],
    /// Nothing attached (runs of their own), ns.
    pub none: [Spread; 3],
    /// Per paired run: watched less not watched, ns, and that in % of
    /// the not-watched figure.
    pub added: [Spread; 3],
    pub added_pct: [Spread; 3],
}

/// The loop's output: each wake-up's lateness (ns) by its watching
/// ([not watched, watched, no toggling]).
pub fn parse(out: &str) -> [Vec<u64>; 3] {
    let mut by: [Vec<u64>; 3] = Default::default();
    for l in out.lines() {
        let mut w = l.split(' ');
        if let (Some("L"), Some(Ok(late)), Some(Ok(on))) = (w.next(), w.next().map(str::parse::<u64>), w.next().map(str::parse::<usize>)) {
            if on < 3 {
                by[on].push(late);
            }
        }
    }
    by
}

/// Mean, p50, p99 of `v` (sorted in place), ns; NaN when empty.
pub fn stats(v: &mut [u64]) -> [f64; 3] {
    let mean = if v.is_empty() { f64::NAN } else { v.iter().sum::<u64>() as f64 / v.len() as f64 };
    [mean, quantile(v, 0.5).unwrap_or(f64::NAN), quantile(v, 0.99).unwrap_or(f64::NAN)]
}

/// Per statistic, watched less not watched (ns, and in % of not watched).
pub fn added(on: [f64; 3], off: [f64; 3]) -> ([f64; 3], [f64; 3]) {
    (std::array::from_fn(|i| on[i] - off[i]), std::array::from_fn(|i| (on[i] / off[i] - 1.0) * 100.0))
}

fn wakes(cx: &Ctx, secs: f64, toggle: Option<(u64, u64)>) -> Result<[Vec<u64>; 3]> {
    let mut args = vec![cx.watched.to_string(), secs.to_string(), INTERVAL_US.to_string(), PRIO.to_string()];
    if let Some((map, offset)) = toggle {
        args.extend([map.to_string(), (offset + cx.watched as u64).to_string(), TOGGLE_MS.to_string()]);
    }
    Ok(parse(&util::output(Command::new(&cx.wakes).args(&args))?))
}

pub fn measure(cx: &Ctx) -> Result<InRun> {
    let reps = cx.reps(5);
    let secs = if cx.quick { 2.0 } else { 6.0 };
    let (mut off, mut none, mut add, mut pct) = (vec![], vec![], vec![], vec![]);
    let (mut samples, mut seen) = (vec![], vec![]);
    for _ in 0..reps {
        let mut alone = wakes(cx, secs / 2.0, None)?;
        none.push(stats(&mut alone[2]));
        let cpu = cx.watched.to_string();
        let d = format!("{}s", secs + 30.0);
        let mut j = util::Jw::spawn(&cx.bin, &["--comm", "jwwakes", "--cpus", &cpu, "--no-tui", "--json", "--duration", &d], None)?;
        j.wait_ready(Duration::from_secs(20))?;
        let by = watched_byte().context("finding jitterwatch's watched[] to turn it off and on").and_then(|t| wakes(cx, secs, Some(t)));
        j.interrupt();
        let run = j.finish()?;
        let mut by = by?;
        samples.push(by[1].len() as f64);
        let not_watched = stats(&mut by[0]);
        off.push(not_watched);
        let (a, p) = added(stats(&mut by[1]), not_watched);
        add.push(a);
        pct.push(p);
        let threads = run.json["threads"].as_array().cloned().unwrap_or_default();
        seen.push(threads.iter().map(|t| t["classes"]["wakeups"].as_f64().unwrap_or(0.0)).sum());
    }
    let col = |v: &[[f64; 3]], i: usize| Spread::of(&v.iter().map(|x| x[i]).collect::<Vec<_>>());
    let r = InRun {
        runs: reps,
        secs,
        samples: Spread::of(&samples),
        seen: Spread::of(&seen),
        off: std::array::from_fn(|i| col(&off, i)),
        none: std::array::from_fn(|i| col(&none, i)),
        added: std::array::from_fn(|i| col(&add, i)),
        added_pct: std::array::from_fn(|i| col(&pct, i)),
    };
    println!(
        "bench:   a wake-up watched, within one run: avg +{:.0} ns ({:+.1}%), p50 +{:.0} ns, p99 +{:.0} ns",
        r.added[0].median, r.added_pct[0].median, r.added[1].median, r.added[2].median
    );
    Ok(r)
}

/// 8b's paragraph and table for the paired loop, watched CPU `w`.
pub fn markdown(r: &InRun, w: usize) -> String {
    let mut o = format!(
        "\nWithin one run, the host's drift taken out: a loop of our own with cyclictest's measurement (one thread on CPU {w}, \
         SCHED_FIFO {PRIO}, memory locked, /dev/cpu_dma_latency held at 0, clock_nanosleep to absolute deadlines \
         {INTERVAL_US} µs apart, each wake-up's lateness read at once) watched by `jitterwatch --comm jwwakes --cpus {w} \
         --json`, the loop turning jitterwatch's `watched[{w}]` off and on every {TOGGLE_MS} ms between two wake-ups, from \
         user space on CPU {w} (as in figure 3b), so each wake-up is watched whole or not at all; {} runs of {} s ({} \
         wake-ups watched per run; jitterwatch counted {} of the loop's wake-ups per run), each beside a run of half as \
         long with nothing attached. In the windows not watched every program is attached and returns at its first \
         test: the difference is what our programs' work adds to one wake-up; the hooks' dispatch, in both windows, \
         shows only against the runs with nothing attached, across runs and their drift. Median [min–max] over the \
         runs.\n\n",
        r.runs,
        r.secs,
        r.samples.show(0),
        r.seen.show(0)
    );
    o += "| wake-up lateness | nothing attached (ns) | not watched, hooks attached (ns) | watched less not watched (ns) | in % |\n\
          |---|---|---|---|---|\n";
    let pct = |s: &Spread| format!("{:+.1}% [{:+.1}–{:+.1}]", s.median, s.min, s.max);
    for (i, stat) in STATS.into_iter().enumerate() {
        o += &format!("| {stat} | {} | {} | {} | {} |\n", r.none[i].show(0), r.off[i].show(0), r.added[i].show(0), pct(&r.added_pct[i]));
    }
    o
}

/// A run's figures for tests, each figure made by `s` (an empty spread:
/// not measured).
#[cfg(test)]
pub fn example(s: &dyn Fn(f64) -> Spread) -> InRun {
    InRun {
        runs: 5,
        secs: 6.0,
        samples: s(3000.0),
        seen: s(6000.0),
        off: [s(20_000.0), s(18_000.0), s(40_000.0)],
        none: [s(19_800.0), s(17_900.0), s(39_000.0)],
        added: [s(600.0), s(550.0), s(900.0)],
        added_pct: [s(3.0), s(3.05), s(2.25)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wake_up_goes_to_its_window() {
        let out = "L 20000 1\nL 21000 1\nL 19000 0\nL 18000 0\nL 17000 2\nL x 1\nL 5 9\nG 1 2\n";
        let by = parse(out);
        assert_eq!(by, [vec![19_000, 18_000], vec![20_000, 21_000], vec![17_000]]);
    }

    #[test]
    fn what_watching_adds_is_watched_less_not_in_each_statistic() {
        let mut by = [(0..100).map(|i| 20_000 + i).collect::<Vec<u64>>(), (0..100).map(|i| 20_400 + i).collect(), vec![]];
        let (ns, pct) = added(stats(&mut by[1]), stats(&mut by[0]));
        assert_eq!(ns, [400.0, 400.0, 400.0]);
        assert!((pct[0] - 400.0 / 20_049.5 * 100.0).abs() < 1e-9, "{pct:?}");
        assert!(stats(&mut []).iter().all(|x| x.is_nan()), "no wake-ups: no figure, not a zero");
    }

    #[test]
    fn the_table_has_each_statistic_and_its_change() {
        let md = markdown(&example(&|x| Spread::of(&[x])), 1);
        assert!(md.contains("| avg | 19800 [19800–19800] | 20000 [20000–20000] | 600 [600–600] | +3.0% [+3.0–+3.0] |"), "{md}");
        assert!(md.contains("| p99 | 39000 [39000–39000] | 40000 [40000–40000] | 900 [900–900] | +2.2"), "{md}");
        assert!(md.contains("5 runs of 6 s (3000 [3000–3000] wake-ups watched per run"), "{md}");
    }
}
