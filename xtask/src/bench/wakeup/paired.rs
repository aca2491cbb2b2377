//! Figure 8b within one run: cyclictest's measurement in a loop of our own
//! (assets/wakes.rs) that turns jitterwatch's watching of its CPU off and
//! on every TOGGLE_MS, as figure 3b's loop does, so what our programs' work
//! adds to a wake-up is read 50 ms apart, free of the host's drift from run
//! to run (which moves cyclictest's avg by ±30% here, where the target is
//! 2%). In the windows not watched every program is attached and returns
//! at its first test: the hooks' dispatch is in both. jitterwatch attaches
//! none of its programs (JITTERWATCH_BPF_UNATTACHED): the loop holds their
//! only links and closes them for a third window, so what the hooks add
//! against no hook at all is read within the run too (a second link, as
//! before, turned each tracepoint's direct call into an iterator's and left
//! out turning it on). Runs of the same loop with nothing attached,
//! alternated, give the same across runs, with the host's drift.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::bench::attached::{links_left, watched_byte, UNATTACHED};
use crate::bench::interruption::{quantile, Window};
use crate::bench::measure::Ctx;
use crate::bench::spread::Spread;
use crate::bench::util;

/// The loop's period, µs (cyclictest's -i 1000), and its priority (-p 80).
const INTERVAL_US: u64 = 1000;
const PRIO: u32 = 80;
/// How long each window lasts, ms: fifty wake-ups.
const TOGGLE_MS: u64 = 50;

/// Wake-ups left out at the start of each window: opening or closing the
/// links (on the loop's CPU, between two wake-ups) leaves work there that
/// makes the next wake-up tens of µs late (52 µs at p50 after the opening,
/// 23 after the closing, against 18 µs, on our VM).
pub const SKIP: usize = 2;
/// The same for the window with no hook: what the kernel frees after the
/// closed links runs on the CPU for ms after (figure 3b's SETTLE).
pub const SKIP_UNATTACHED: usize = (crate::bench::interruption::SETTLE_UNATTACHED_NS / 1_000 / INTERVAL_US) as usize;

/// What one wake-up class read: mean, p50, p99 (ns).
pub const STATS: [&str; 3] = ["avg", "p50", "p99"];

/// The loop's code for a wake-up of a run without toggling (its windows'
/// codes are [`Window`]'s, as figure 3b's loop prints them).
const UNTOGGLED: u64 = 2;

/// A run's wake-up latenesses (ns): by window (indexed by [`Window`]), and
/// those of a run without toggling.
#[derive(Debug, Default, PartialEq)]
pub struct Wakes {
    pub windows: [Vec<u64>; crate::bench::interruption::WINDOWS],
    pub untoggled: Vec<u64>,
}

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
    /// Per paired run: not watched with a second set of the hooks less not
    /// watched, ns, and that in % (not measured where the kernel refused
    /// the second links).
    pub hooks: [Spread; 3],
    pub hooks_pct: [Spread; 3],
    /// Programs the second set linked again, per run.
    pub programs: Spread,
}

/// The loop's output: each wake-up's lateness (ns) by its window, the
/// first [`SKIP`] of each window left out.
pub fn parse(out: &str) -> Wakes {
    let mut by = Wakes::default();
    for l in out.lines() {
        let mut w = l.split(' ');
        let mut num = || w.next().and_then(|x| x.parse::<u64>().ok());
        if l.starts_with("L ") {
            num();
            if let (Some(late), Some(code), Some(pos)) = (num(), num(), num()) {
                let skip = if Window::from_code(code) == Some(Window::Unattached) { SKIP_UNATTACHED } else { SKIP };
                if pos < skip as u64 {
                    continue;
                }
                match Window::from_code(code) {
                    Some(win) => by.windows[win as usize].push(late),
                    None if code == UNTOGGLED => by.untoggled.push(late),
                    None => {}
                }
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

/// `toggle`: jitterwatch's .bss map, `watched`'s offset in it, and the
/// programs the loop links (jitterwatch attached none).
fn wakes(cx: &Ctx, secs: f64, toggle: Option<(u64, u64, &[String])>) -> Result<Wakes> {
    let mut args = vec![cx.watched.to_string(), secs.to_string(), INTERVAL_US.to_string(), PRIO.to_string()];
    if let Some((map, offset, progs)) = toggle {
        args.extend([map.to_string(), (offset + cx.watched as u64).to_string(), TOGGLE_MS.to_string()]);
        args.extend(progs.iter().cloned());
    }
    Ok(parse(&util::output(Command::new(&cx.wakes).args(&args))?))
}

pub fn measure(cx: &Ctx) -> Result<InRun> {
    let reps = cx.reps(5);
    // Three windows: each class has a third of the run.
    let secs = if cx.quick { 3.0 } else { 9.0 };
    let (mut off, mut none, mut add, mut pct, mut hooks, mut hooks_pct) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut samples, mut seen, mut linked) = (vec![], vec![], vec![]);
    for _ in 0..reps {
        let mut alone = wakes(cx, secs / 3.0, None)?;
        none.push(stats(&mut alone.untoggled));
        let cpu = cx.watched.to_string();
        let d = format!("{}s", secs + 30.0);
        let links = std::env::temp_dir().join(format!("jw-bench-8b-{}.links", std::process::id()));
        let _ = std::fs::remove_file(&links);
        let args = ["--comm", "jwwakes", "--cpus", &cpu, "--no-tui", "--json", "--duration", &d];
        let mut j = util::Jw::spawn_env(&cx.bin, &args, &[(UNATTACHED, &links.to_string_lossy())], None)?;
        j.wait_ready(Duration::from_secs(20))?;
        let by = watched_byte().context("finding jitterwatch's watched[] to turn it off and on").and_then(|(map, offset)| {
            let progs = links_left(&links)?;
            linked.push(progs.len() as f64);
            wakes(cx, secs, Some((map, offset, &progs)))
        });
        let _ = std::fs::remove_file(&links);
        j.interrupt();
        let run = j.finish()?;
        let [mut watched, mut not, mut bare] = by?.windows;
        samples.push(watched.len() as f64);
        let not_watched = stats(&mut not);
        off.push(not_watched);
        let (a, p) = added(stats(&mut watched), not_watched);
        add.push(a);
        pct.push(p);
        let (a, p) = added(not_watched, stats(&mut bare));
        hooks.push(a);
        hooks_pct.push(p);
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
        hooks: std::array::from_fn(|i| col(&hooks, i)),
        hooks_pct: std::array::from_fn(|i| col(&hooks_pct, i)),
        programs: Spread::of(&linked),
    };
    println!(
        "bench:   a wake-up watched, within one run: avg +{:.0} ns ({:+.1}%), p50 +{:.0} ns, p99 +{:.0} ns; the hooks against no hook: p50 +{:.0} ns",
        r.added[0].median, r.added_pct[0].median, r.added[1].median, r.added[2].median, r.hooks[1].median
    );
    Ok(r)
}

/// 8b's paragraph and table for the paired loop, watched CPU `w`.
pub fn markdown(r: &InRun, w: usize) -> String {
    let mut o = format!(
        "\nWithin one run, the host's drift taken out: a loop of our own with cyclictest's measurement (one thread on CPU {w}, \
         SCHED_FIFO {PRIO}, memory locked, /dev/cpu_dma_latency held at 0, clock_nanosleep to absolute deadlines \
         {INTERVAL_US} µs apart, each wake-up's lateness read at once) watched by `jitterwatch --comm jwwakes --cpus {w} \
         --json`, the loop cycling through three windows of {TOGGLE_MS} ms between two wake-ups, from user space on CPU {w} \
         (as in figure 3b), so each wake-up is in one window whole: jitterwatch's `watched[{w}]` on; off; and no hook at all: \
         jitterwatch attaches none of its programs (`JITTERWATCH_BPF_UNATTACHED`), the loop holds their only links ({} \
         programs; `BPF_RAW_TRACEPOINT_OPEN` by program id) and closes them for the third window. Not watched, every \
         program returns at its first test. The first {SKIP} wake-ups of each window are left out (opening and closing \
         the links leaves work on the CPU that makes the next wake-up tens of µs late), the first {SKIP_UNATTACHED} of the \
         third (what the kernel frees after the closed links runs on the CPU for ms). {} runs of {} s ({} wake-ups watched per run; jitterwatch counted {} of the loop's \
         wake-ups per run), each beside a run of a third as long with nothing attached. Watched less not watched is what \
         our programs' work adds to one wake-up; not watched less no hook is what the hooks add, returning at once \
         (up to v2 a second link of each program stood for them: that turned each tracepoint's direct call into an \
         iterator's and left out turning it on); not watched less nothing attached is the same across runs, \
         with the host's drift in it. Median [min–max] over the runs.\n\n",
        r.programs.show(0),
        r.runs,
        r.secs,
        r.samples.show(0),
        r.seen.show(0)
    );
    o += "| wake-up lateness | nothing attached (ns) | not watched, hooks attached (ns) | watched less not watched (ns) | in % | \
          not watched less no hook (ns) | in % |\n|---|---|---|---|---|---|---|\n";
    let pct = |s: &Spread| if s.n == 0 { "n/a".to_string() } else { format!("{:+.1}% [{:+.1}–{:+.1}]", s.median, s.min, s.max) };
    for (i, stat) in STATS.into_iter().enumerate() {
        o += &format!(
            "| {stat} | {} | {} | {} | {} | {} | {} |\n",
            r.none[i].show(0),
            r.off[i].show(0),
            r.added[i].show(0),
            pct(&r.added_pct[i]),
            r.hooks[i].show(0),
            pct(&r.hooks_pct[i])
        );
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
        hooks: [s(450.0), s(400.0), s(700.0)],
        hooks_pct: [s(2.25), s(2.2), s(1.75)],
        programs: s(31.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wake_up_goes_to_its_window_less_the_first_of_each() {
        // The window with no hook (4) settles longer; 3 is no window.
        let out = "L 20000 1 2\nL 21000 1 7\nL 19000 0 2\nL 18000 0 3\nL 17000 2 9\nL 16000 4 30\nL 52000 4 10\nL 23000 1 1\n\
                   L 9000 3 40\nL x 1 5\nL 5 9 5\nL 6 1\nG 1 2 3\n";
        let by = parse(out);
        assert_eq!(SKIP_UNATTACHED, 25);
        let windows = [vec![20_000, 21_000], vec![19_000, 18_000], vec![16_000]];
        assert_eq!(by, Wakes { windows, untoggled: vec![17_000] });
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
        assert!(
            md.contains("| avg | 19800 [19800–19800] | 20000 [20000–20000] | 600 [600–600] | +3.0% [+3.0–+3.0] | 450 [450–450] | +2.2"),
            "{md}"
        );
        assert!(md.contains("| p99 | 39000 [39000–39000] | 40000 [40000–40000] | 900 [900–900] | +2.2"), "{md}");
        assert!(md.contains("5 runs of 6 s (3000 [3000–3000] wake-ups watched per run"), "{md}");
        assert!(md.contains("(31 [31–31] programs;"), "{md}");
        let refused =
            InRun { hooks: Default::default(), hooks_pct: std::array::from_fn(|_| Spread::of(&[])), ..example(&|x| Spread::of(&[x])) };
        assert!(markdown(&refused, 1)
            .contains("| p50 | 17900 [17900–17900] | 18000 [18000–18000] | 550 [550–550] | +3.0% [+3.0–+3.0] | n/a | n/a |"));
    }
}
