//! Figure 3b: what jitterwatch adds to one interruption of the watched CPU,
//! end to end, without relying on the kernel's BPF statistics. A plain C
//! loop spins on the watched CPU reading CLOCK_MONOTONIC and keeps every gap;
//! a second thread of the same process, on the housekeeping CPU, sends it a
//! interruption of another kind every 1 ms, in turn: a function-call IPI
//! (membarrier: one cross-CPU call), a UDP datagram whose send-completion
//! interrupt is routed to the watched CPU (nic.rs), a signal (a reschedule
//! IPI), a stat_refresh write (a workqueue item), and two function-call
//! IPIs 20 µs apart (the second with warm caches: how much of the cost is
//! cold lines); and keeps when. The
//! tick's gaps are those at its instants, which the kernel's books give
//! (tick.rs; else the comb of 1/HZ with a gap in nearly every slot), the
//! others' as the gaps that begin soon after their send (the C program:
//! assets/interrupts.rs). Three runs, alternated:
//! nothing attached; jitterwatch in passive mode with every program
//! returning at once (JITTERWATCH_BPF_FLOOR=1: the kernel's hooks alone);
//! and the paired run, jitterwatch watching while the loop turns its
//! watching off and on every TOGGLE_MS, so what our programs' work adds is
//! read within one run, and closes the programs' only links for a third
//! window (jitterwatch attached none: JITTERWATCH_BPF_UNATTACHED), so what
//! the hooks alone add is read within the run too; then the same paired run twice more with our
//! programs stopped at a stage (JITTERWATCH_BPF_FLOOR=clock: after their
//! clock read; =append: once their item joins the batch, never written),
//! which splits that work into the clock read, the append and the record's
//! write. The host adds noise of its own, so each kind is read at its 25th
//! percentile and median, per run. Beside them, two runs with the kernel's
//! BPF statistics on (our programs whole, then returning at once) give the
//! same work as the kernel's books count it (stats.rs).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result};

mod gaps;
mod stats;
mod tick;
pub use gaps::{classify, classify_paired, parse, ByKind, Gaps, Kind, Window, SETTLE_NS, SETTLE_UNATTACHED_NS, WINDOWS};
pub use stats::per_kind;

use super::attached::{links_left, watched_byte, UNATTACHED};
use super::measure::{prog_costs, Ctx, ProgCost};
use super::spread::Spread;
use super::util::{self, Bg};
use crate::proc;

/// The stages the extra paired runs stop our programs at (their
/// JITTERWATCH_BPF_FLOOR values), in the order of the work they do.
pub const STAGES: [&str; 2] = ["clock", "append"];

/// The sender's slot, µs: it makes one interruption of each kind but the
/// tick every five slots, each slot a different kind.
const SLOT_US: u64 = 1_000;
/// How long each of the paired run's windows lasts, ms: long beside one
/// interruption, short beside the host's drift, so neighbouring windows
/// (one watched, one not) see the same host.
const TOGGLE_MS: u64 = 50;

/// The `q` quantile of `v` (sorted in place); None if empty.
pub fn quantile(v: &mut [u64], q: f64) -> Option<f64> {
    v.sort_unstable();
    (!v.is_empty()).then(|| v[((v.len() - 1) as f64 * q).round() as usize] as f64)
}

/// The two quantiles each kind is read at: 25th percentile, median.
const QS: [f64; 2] = [0.25, 0.5];

/// What one condition read: per run, each kind's 25th percentile and median.
#[derive(Default)]
pub struct Condition {
    /// Per kind, [p25 of each run, p50 of each run].
    pub q: ByKind<[Vec<f64>; 2]>,
    /// Gaps of each kind seen per run.
    pub seen: ByKind<Vec<f64>>,
}

impl Condition {
    fn add(&mut self, g: &Gaps) {
        self.add_lengths(classify(g));
    }

    fn add_lengths(&mut self, by: ByKind<Vec<u64>>) {
        for (k, mut v) in by.into_iter().enumerate() {
            self.seen[k].push(v.len() as f64);
            for (i, q) in QS.into_iter().enumerate() {
                self.q[k][i].extend(quantile(&mut v, q));
            }
        }
    }
}

/// Per paired run, each kind's quantiles in one window less another (ns):
/// per kind, [p25 differences, p50 differences].
#[derive(Default)]
pub struct Paired(pub ByKind<[Vec<f64>; 2]>);

impl Paired {
    /// One run's gaps of each kind, by window: window `a` less window `b`.
    fn add(&mut self, by: &ByKind<[Vec<u64>; WINDOWS]>, a: Window, b: Window) {
        for (k, v) in by.iter().enumerate() {
            for (i, q) in QS.into_iter().enumerate() {
                let (mut x, mut y) = (v[a as usize].clone(), v[b as usize].clone());
                self.0[k][i].extend(quantile(&mut x, q).zip(quantile(&mut y, q)).map(|(a, b)| a - b));
            }
        }
    }
}

pub struct PerInterruption {
    pub reps: usize,
    pub secs: f64,
    /// Nothing attached, the hooks alone (separate runs).
    pub none: Condition,
    pub floor: Condition,
    /// The paired runs' windows: jitterwatch watching, and its programs
    /// attached but returning at their first test (the CPU not watched).
    pub watched: Condition,
    pub off: Condition,
    /// The paired runs' third window: no hook at all (the loop's links to
    /// our programs closed).
    pub bare: Condition,
    /// Each paired run's watched less not-watched quantiles.
    pub paired: Paired,
    /// Each paired run's not-watched less no-hook quantiles: what the
    /// hooks add, returning at once, within the run.
    pub hooks: Paired,
    /// Programs the loop linked, per paired run.
    pub programs: Vec<f64>,
    /// The same, with our programs stopped at each of STAGES.
    pub stages: [Paired; 2],
    /// jitterwatch's own time per interruption of each kind, by its `self`
    /// cause (ns; from the watched runs' CSVs).
    pub own: ByKind<Spread>,
    /// The NIC's receive IRQs routed to the watched CPU, or why the device
    /// interrupt was not measured.
    pub routed: std::result::Result<Vec<u32>, String>,
    /// The kernel's BPF statistics per program over the loop's runs: our
    /// programs whole, and returning at once (JITTERWATCH_BPF_FLOOR=1).
    pub stats: [Vec<ProgCost>; 2],
    /// Of the runs whose gaps were classified, how many had the tick's
    /// grid from the kernel's books (the others looked for its comb).
    pub tick_books: [usize; 2],
    /// A hook firing's dispatch as jitterwatch priced it at start, per
    /// statistics run (its summary's `overhead.dispatch.ns`): what `self`
    /// holds before each of our records, beside the hooks alone a firing.
    pub dispatch: Vec<f64>,
}

/// 3b: the three runs, alternated, `reps` times each.
pub fn measure(cx: &Ctx, exe: &Path) -> Result<PerInterruption> {
    let reps = cx.reps(8);
    let secs = if cx.quick { 1.5 } else { 3.0 };
    let (mut none, mut floor, mut watched, mut off, mut bare) =
        (Condition::default(), Condition::default(), Condition::default(), Condition::default(), Condition::default());
    let (mut paired, mut hooks, mut programs) = (Paired::default(), Paired::default(), vec![]);
    let mut stages = [Paired::default(), Paired::default()];
    let mut own: ByKind<Vec<f64>> = Default::default();
    let mut stats: [Vec<serde_json::Value>; 2] = Default::default();
    let mut dispatch = Vec::new();
    // Routed for the whole figure, and put back however it ends.
    let nic = super::nic::route_to(cx.watched);
    let gateway = nic.as_ref().map_or("-".to_string(), |r| r.gateway.to_string());
    let dir = tempfile_dir()?;
    let mut tick_books = [0, 0];
    // Every run, counting those whose tick the kernel's books placed.
    let mut run = |cx: &Ctx, exe: &Path, secs: f64, gateway: &str, jw: Option<(Watch, &Path)>| {
        let (g, linked) = self::run(cx, exe, secs, gateway, jw)?;
        if let Some((Watch::Paired(None), _)) = jw {
            programs.push(linked as f64);
        }
        tick_books[0] += usize::from(g.tick.is_some());
        tick_books[1] += 1;
        anyhow::Ok(g)
    };
    for _ in 0..reps {
        none.add(&run(cx, exe, secs, &gateway, None)?);
        floor.add(&run(cx, exe, secs, &gateway, Some((Watch::Floor, &dir.join("floor.csv"))))?);
        let csv = dir.join("watched.csv");
        // Three times as long: a third of it is watched.
        let g = run(cx, exe, 3.0 * secs, &gateway, Some((Watch::Paired(None), &csv)))?;
        let by = classify_paired(&g);
        paired.add(&by, Window::Watched, Window::NotWatched);
        hooks.add(&by, Window::NotWatched, Window::Unattached);
        for (c, w) in [(&mut watched, Window::Watched), (&mut off, Window::NotWatched), (&mut bare, Window::Unattached)] {
            c.add_lengths(by.clone().map(|v| v[w as usize].clone()));
        }
        let warm = &g.sends[Kind::IpiWarm as usize];
        for (k, v) in own_per_interruption(&std::fs::read_to_string(&csv).unwrap_or_default(), warm).into_iter().enumerate() {
            own[k].extend(v);
        }
        for (stage, p) in STAGES.into_iter().zip(stages.iter_mut()) {
            let by = classify_paired(&run(cx, exe, 2.0 * secs, &gateway, Some((Watch::Paired(Some(stage)), &csv)))?);
            p.add(&by, Window::Watched, Window::NotWatched);
        }
        for (floor, runs) in [false, true].into_iter().zip(stats.iter_mut()) {
            let json = stats_run(cx, exe, secs, &gateway, floor)?;
            dispatch.extend(json["overhead"]["dispatch"]["ns"].as_f64());
            runs.push(json);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(PerInterruption {
        reps,
        secs,
        none,
        floor,
        watched,
        off,
        bare,
        paired,
        hooks,
        programs,
        stages,
        own: own.map(|v| Spread::of(&v)),
        routed: nic.as_ref().map(|r| r.irqs.clone()).map_err(|e| format!("{e:#}")),
        stats: stats.map(|runs| prog_costs(&runs)),
        tick_books,
        dispatch,
    })
}

/// One run of the loop (not toggled) watched with `--bpf-stats`: our
/// programs whole, or returning at once (`floor`); jitterwatch's JSON
/// summary, whose `overhead.bpf_programs` holds each program's ns/run.
fn stats_run(cx: &Ctx, exe: &Path, secs: f64, gateway: &str, floor: bool) -> Result<serde_json::Value> {
    let w = cx.watched.to_string();
    let args = ["--comm", "jwgaps", "--cpus", &w, "--no-tui", "--json", "--bpf-stats", "--duration", "60s"];
    let env: &[(&str, &str)] = if floor { &[("JITTERWATCH_BPF_FLOOR", "1")] } else { &[] };
    let mut jw = util::Jw::spawn_env(&cx.bin, &args, env, None)?;
    jw.wait_ready(Duration::from_secs(20))?;
    std::thread::sleep(Duration::from_millis(500));
    util::output(Command::new(exe).args([w, cx.house.to_string(), format!("{secs}"), SLOT_US.to_string(), gateway.to_string()]))?;
    // Stopped at once: the statistics cover the loop's run, and little else.
    jw.interrupt();
    Ok(jw.finish()?.json)
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("jw-bench-3b-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// How jitterwatch watches a run.
#[derive(Clone, Copy)]
enum Watch {
    /// Its programs return at once (the kernel's hooks alone).
    Floor,
    /// The loop links our programs (jitterwatch attaches none), turns its
    /// watching off and on every TOGGLE_MS and has a third window with the
    /// links closed; its programs stop at this stage of STAGES, or do all
    /// their work.
    Paired(Option<&'static str>),
}

/// One run of the loop; with `jw` = Some((how, csv)), jitterwatch watches
/// it in passive mode. Also how many programs the loop linked.
fn run(cx: &Ctx, exe: &Path, secs: f64, gateway: &str, jw: Option<(Watch, &Path)>) -> Result<(Gaps, usize)> {
    let mut linked = 0;
    let mut args = vec![cx.watched.to_string(), cx.house.to_string(), format!("{secs}"), SLOT_US.to_string(), gateway.to_string()];
    let _jw = match jw {
        Some((how, csv)) => {
            let mut c = Command::new(&cx.bin);
            c.args(["--comm", "jwgaps", "--cpus", &cx.watched.to_string(), "--no-tui", "--csv"]).arg(csv);
            c.args(["--duration", &format!("{}s", secs + 3.0)]).stdout(Stdio::null()).stderr(Stdio::null());
            match how {
                Watch::Floor => c.env("JITTERWATCH_BPF_FLOOR", "1"),
                Watch::Paired(Some(stage)) => c.env("JITTERWATCH_BPF_FLOOR", stage),
                Watch::Paired(None) => c.env_remove("JITTERWATCH_BPF_FLOOR"),
            };
            let links = csv.with_extension("links");
            let _ = std::fs::remove_file(&links);
            if let Watch::Paired(_) = how {
                c.env(UNATTACHED, &links);
            }
            let bg = Bg::spawn(&mut c)?;
            std::thread::sleep(Duration::from_millis(1500));
            if let Watch::Paired(_) = how {
                let (map, offset) = watched_byte().context("finding jitterwatch's watched[] to turn it off and on")?;
                args.extend([map.to_string(), (offset + cx.watched as u64).to_string(), TOGGLE_MS.to_string()]);
                let progs = links_left(&links)?;
                linked = progs.len();
                args.extend(progs);
            }
            Some(bg)
        }
        None => None,
    };
    let (out, tick) = run_reading_tick(cx.watched, secs, Command::new(exe).args(&args))?;
    Ok((Gaps { tick, ..parse(&out) }, linked))
}

/// Runs the loop `cmd` (`secs` long, on CPU `cpu`) for its output, and
/// where its CPU's ticks fell meanwhile (tick.rs; None where the books do
/// not say: no LOC row, no tick timer listed).
fn run_reading_tick(cpu: usize, secs: f64, cmd: &mut Command) -> Result<(String, Option<(u64, u64)>)> {
    let loc = || std::fs::read_to_string("/proc/interrupts").ok().and_then(|t| tick::local_timer_count(&t, cpu));
    let before = loc();
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().with_context(|| format!("cannot run `{}`", proc::show(cmd)))?;
    // Once the loop has run a while (its CPU busy, its tick running).
    std::thread::sleep(Duration::from_secs_f64((secs / 3.0).min(0.5)));
    let expiry = std::fs::read_to_string("/proc/timer_list").ok().and_then(|t| tick::tick_expiry(&t, cpu));
    let out = child.wait_with_output().with_context(|| format!("waiting for `{}`", proc::show(cmd)))?;
    if !out.status.success() {
        anyhow::bail!("`{}` failed ({}): {}", proc::show(cmd), proc::describe(out.status), String::from_utf8_lossy(&out.stderr).trim());
    }
    let grid = before.zip(loc()).zip(expiry).and_then(|(loc, e)| tick::grid(loc, secs, e));
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), grid))
}

/// From a passive run's CSV: the `self:jitterwatch` ns of each row that is
/// one interruption of a kind, per kind: the local timer without an IPI
/// (a tick); a function call without the timer (an IPI); NET_RX without
/// the timer or an IPI (a device interrupt); a reschedule IPI alone; the
/// refresh_vm_stats work item without the timer; an IPI that begins
/// within 60 µs of one of `warm`'s sends (the second of a warm pair) is
/// the warm IPI's.
pub fn own_per_interruption(csv: &str, warm: &[u64]) -> ByKind<Vec<f64>> {
    let mut by: ByKind<Vec<f64>> = Default::default();
    for row in csv.lines().skip(1) {
        let at: u64 = row.split(',').next().and_then(|t| t.parse().ok()).unwrap_or(0);
        // The causes column: `kind:name=ns` joined by `;`.
        let Some(causes) = row.split(',').nth(8) else { continue };
        let causes: Vec<(&str, f64)> =
            causes.split(';').filter_map(|c| c.rsplit_once('=').and_then(|(k, ns)| Some((k, ns.parse().ok()?)))).collect();
        let Some(own) = causes.iter().find(|c| c.0 == "self:jitterwatch").map(|c| c.1) else { continue };
        let has = |name: &str| causes.iter().any(|c| c.0 == name);
        let any = |prefix: &str| causes.iter().any(|c| c.0.starts_with(prefix));
        let timer = has("irq:local_timer");
        let kind = if timer {
            (!any("ipi:")).then_some(Kind::Tick)
        } else if any("ipi:call_function") {
            Some(if gaps::follows(warm, at, Kind::IpiWarm.within()) { Kind::IpiWarm } else { Kind::Ipi })
        } else if has("softirq:NET_RX") && !any("ipi:") {
            Some(Kind::Irq)
        } else if has("ipi:reschedule")
            && causes.iter().all(|c| ["ipi:reschedule", "self:jitterwatch"].contains(&c.0) || c.0.starts_with("unexplained"))
        {
            Some(Kind::Resched)
        } else {
            has("work:refresh_vm_stats").then_some(Kind::Work)
        };
        if let Some(k) = kind {
            by[k as usize].push(own);
        }
    }
    by
}

#[cfg(test)]
mod tests;
