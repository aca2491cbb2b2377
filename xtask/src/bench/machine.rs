//! Figure 2: what jitterwatch costs the CPUs it does not watch, against
//! bpftrace on the same tracepoints. `perf bench sched pipe` on the
//! housekeeping CPU, in five conditions rotated within each repetition.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::measure::Ctx;
use super::util::{self, num, Bg, Jw, Spread};

/// The conditions, in the order of the first repetition.
pub const CONDITIONS: [&str; 5] = ["alone", "jitterwatch", "bpftrace", "bare spin loop", "alone again"];
const ALONE: usize = 0;
const JW: usize = 1;
const BT: usize = 2;
const SPIN: usize = 3;
const ALONE2: usize = 4;

pub struct MachineCost {
    pub reps: usize,
    pub loops: u64,
    /// ops/s per condition.
    pub ops: [Spread; 5],
    /// Per repetition: ops(condition) / mean of that repetition's two alone runs.
    pub ratio: [Spread; 5],
    /// Half-width of the 95% interval of jitterwatch's end-to-end cost, %
    /// (Student's t over the repetitions' paired costs).
    pub jw_ci95_pct: f64,
    /// Best run of a condition over the best alone run.
    pub best_ratio: [f64; 5],
    /// The null control: alone again / alone, per repetition.
    pub null: Spread,
    /// Events each tracer saw on the watched CPU meanwhile (sanity).
    pub jw_events: Spread,
    pub bt_events: Spread,
    /// CPU used by jitterwatch's own non-probe threads during its perf runs,
    /// % of one CPU (they run on the housekeeping CPUs).
    pub jw_threads_pct: Spread,
    /// The per-CPU switch event on the watched CPU: ops/s lost on this CPU,
    /// % (paired batches), and the same harness opening nothing (null).
    pub hook_pct: Spread,
    pub hook_null_pct: Spread,
    /// The same harness with a sched_switch program returning early on
    /// every CPU instead of the event (the fallback's cost, for the choice).
    pub hook_tp_pct: Spread,
    /// The other hooks the harness knows, for the choice: a sched_switch
    /// tracepoint perf event on the watched CPU writing samples to a ring,
    /// the same with a BPF program on it, and a dummy event's switch records.
    pub hook_tpevent_pct: Spread,
    pub hook_tpevent_bpf_pct: Spread,
    pub hook_switchrec_pct: Spread,
    /// What the sched_switch perf event costs the watched CPU itself, ns a
    /// switch: the same harness pinned there, its ping-pong on that CPU
    /// (the cost the cheapest hook for the other CPUs moves onto it).
    pub tpevent_watched_ns: Spread,
    /// The two hooks jitterwatch can take switches from, on the watched CPU
    /// itself, their programs returning at once, ns a switch: its software
    /// event (`perf-bpf`) and the sched_switch program (`tp`).
    pub perf_bpf_watched_ns: Spread,
    pub tp_watched_ns: Spread,
    /// bpftrace's BPF programs' run time on this CPU during a perf run, % of
    /// the CPU (kernel BPF stats; its perf tracepoint records not counted).
    pub bt_bpf_pct: Spread,
}

impl MachineCost {
    /// Throughput lost under jitterwatch, % (median of the paired ratios).
    pub fn jw_cost_pct(&self) -> f64 {
        100.0 * (1.0 - self.ratio[JW].median)
    }

    /// What a bare spinning vCPU (the C loop, no tracing) costs its
    /// sibling end to end, %: a property of any spin probe.
    pub fn spin_cost_pct(&self) -> f64 {
        100.0 * (1.0 - self.ratio[SPIN].median)
    }

    pub fn bt_cost_pct(&self) -> f64 {
        100.0 * (1.0 - self.ratio[BT].median)
    }

    /// The switch hook that cost the unwatched CPU least by the paired
    /// batches, among those measured; None if none was.
    pub fn cheapest_hook(&self) -> Option<&'static str> {
        cheapest(&[
            ("the software switch event", &self.hook_pct),
            ("the sched_switch program", &self.hook_tp_pct),
            ("the sched_switch perf event", &self.hook_tpevent_pct),
            ("the sched_switch perf event with a BPF program", &self.hook_tpevent_bpf_pct),
            ("the switch records", &self.hook_switchrec_pct),
        ])
    }
}

/// The name of the lowest median among the spreads with samples.
fn cheapest(hooks: &[(&'static str, &Spread)]) -> Option<&'static str> {
    hooks.iter().filter(|(_, s)| s.n > 0 && s.median.is_finite()).min_by(|a, b| a.1.median.total_cmp(&b.1.median)).map(|(name, _)| *name)
}

/// bpftrace on the watched CPU, attached.
fn bpftrace(cx: &Ctx) -> Result<(Bg, Receiver<String>)> {
    let mut bg = Bg::spawn(Command::new("bpftrace").arg(&cx.bt_script).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()))?;
    let out = bg.0.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    // "Attaching N probes..." comes before the attach; give it a moment after.
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(l) if l.starts_with("Attaching") => break,
            Ok(_) => {}
            Err(_) => bail!("bpftrace did not start (run `bpftrace {}` to see why)", cx.bt_script.display()),
        }
    }
    std::thread::sleep(Duration::from_millis(700));
    if let Ok(Some(st)) = bg.0.try_wait() {
        bail!("bpftrace exited while attaching ({st})");
    }
    Ok((bg, rx))
}

/// Stops bpftrace and sums the counts it prints. bpftrace has been seen to
/// miss the SIGINT that ends it (the bench then waited for ever): it is
/// sent again each second, and after 10 s the run is an error.
fn bpftrace_stop(mut bg: Bg, rx: Receiver<String>) -> Result<f64> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let st = loop {
        util::signal(&bg.0, libc::SIGINT);
        let until = std::time::Instant::now() + Duration::from_secs(1);
        let mut got = None;
        while got.is_none() && std::time::Instant::now() < until {
            got = bg.0.try_wait().context("waiting for bpftrace")?;
            std::thread::sleep(Duration::from_millis(20));
        }
        match got {
            Some(st) => break st,
            None if std::time::Instant::now() >= deadline => bail!("bpftrace did not stop within 10 s of SIGINT"),
            None => {}
        }
    };
    if !st.success() {
        bail!("bpftrace failed ({st})");
    }
    Ok(rx.try_iter().filter_map(|l| l.rsplit_once("]: ").and_then(|(_, n)| n.trim().parse::<f64>().ok())).sum())
}

/// One perf run under condition `c`; tracer event counts go to `events`.
fn one(cx: &Ctx, c: usize, loops: u64, events: &mut [Vec<f64>; 2], house: &mut Vec<f64>) -> Result<f64> {
    match c {
        JW => {
            let wcpu = cx.watched.to_string();
            let mut j = Jw::spawn(&cx.bin, &["--cpus", &wcpu, "--no-tui", "--json", "--duration", "10m"], None)?;
            j.wait_ready(Duration::from_secs(20))?;
            std::thread::sleep(Duration::from_millis(200));
            let (cpu0, t0) = (util::thread_ns(j.pid()).map_or(0, |t| t.0), util::mono_ns());
            let ops = util::perf_pipe(cx.house, loops)?;
            let (cpu1, t1) = (util::thread_ns(j.pid()).map_or(0, |t| t.0), util::mono_ns());
            house.push(100.0 * cpu1.saturating_sub(cpu0) as f64 / (t1 - t0) as f64);
            j.interrupt();
            events[0].push(num(&j.finish()?.json, "/events"));
            Ok(ops)
        }
        BT => {
            let (b, rx) = bpftrace(cx)?;
            let ops = util::perf_pipe(cx.house, loops)?;
            events[1].push(bpftrace_stop(b, rx)?);
            Ok(ops)
        }
        SPIN => {
            let _spin =
                Bg::spawn(Command::new("taskset").args(["-c", &cx.watched.to_string()]).arg(&cx.cloop).arg("600").stdout(Stdio::null()))?;
            std::thread::sleep(Duration::from_millis(200));
            util::perf_pipe(cx.house, loops)
        }
        _ => util::perf_pipe(cx.house, loops),
    }
}

/// perf bench sched pipe on the housekeeping CPU: alone, while jitterwatch
/// watches the other CPU, while bpftrace traces it, while a bare loop spins
/// there, and alone again (the null control).
pub fn machine_cost(cx: &Ctx) -> Result<MachineCost> {
    // 11: enough for a 95% interval on the end-to-end cost (issue 33).
    let reps = cx.reps(11);
    // Size a run to ~1.5 s from a warm-up (which also warms caches and perf).
    let warm = util::perf_pipe(cx.house, 100_000)?;
    let secs = if cx.quick { 0.5 } else { 1.5 };
    let loops = ((warm * secs) as u64).max(20_000);
    let mut ops: [Vec<f64>; 5] = Default::default();
    let mut ratio: [Vec<f64>; 5] = Default::default();
    let mut null = vec![];
    let mut events: [Vec<f64>; 2] = Default::default();
    let mut house = vec![];
    for rep in 0..reps {
        let mut got = [f64::NAN; 5];
        // Rotate the order: ABCDE, BCDEA, CDEAB, ...
        for step in 0..5 {
            let c = (rep + step) % 5;
            got[c] = one(cx, c, loops, &mut events, &mut house)?;
        }
        let base = (got[ALONE] + got[ALONE2]) / 2.0;
        for c in 0..5 {
            ops[c].push(got[c]);
            ratio[c].push(got[c] / base);
        }
        null.push(got[ALONE2] / got[ALONE]);
        let d = |c: usize| 100.0 * (got[c] / base - 1.0);
        println!(
            "bench:   rep {}: alone {:.0} ops/s; jitterwatch {:+.1}%, bpftrace {:+.1}%, bare spin {:+.1}%, alone vs alone again {:+.1}%",
            rep + 1,
            base,
            d(JW),
            d(BT),
            d(SPIN),
            100.0 * (got[ALONE2] / got[ALONE] - 1.0)
        );
    }
    let (mut hook, mut hook_null, mut hook_tp, mut bt_bpf) = (vec![], vec![], vec![], vec![]);
    let (mut tpevent, mut tpevent_bpf, mut switchrec) = (vec![], vec![], vec![]);
    let (mut tpevent_watched, mut perf_bpf_watched, mut tp_watched) = (vec![], vec![], vec![]);
    // ~5 ms batches: short enough that the host's drifts cancel in pairs.
    let per = ((warm * 0.005) as u64).max(200).to_string();
    for _ in 0..cx.reps(3) {
        let w = cx.watched as i64;
        for (cpu, mode, out) in [
            (-1i64, "perf", &mut hook_null),
            (w, "perf", &mut hook),
            (w, "tp", &mut hook_tp),
            (w, "tpevent", &mut tpevent),
            (w, "tpevent-bpf", &mut tpevent_bpf),
            (w, "switchrec", &mut switchrec),
        ] {
            let got = util::output(Command::new("taskset").args(["-c", &cx.house.to_string()]).arg(&cx.hookcost).args([
                &cpu.to_string(),
                "601",
                &per,
                mode,
            ]))?;
            // The ratio is a batch's time per op with the hook over its
            // neighbours' without: above 1 is a cost.
            out.push(hook_cost_pct(util::field(&got, "ratio_median")?));
        }
        // What the hooks cost the CPU they are opened on: the harness on the
        // watched CPU, both ends of its ping-pong there.
        for (mode, out) in [("tpevent", &mut tpevent_watched), ("perf-bpf", &mut perf_bpf_watched), ("tp", &mut tp_watched)] {
            let got = util::output(Command::new("taskset").args(["-c", &w.to_string()]).arg(&cx.hookcost).args([
                &w.to_string(),
                "601",
                &per,
                mode,
            ]))?;
            out.push(ns_per_switch(util::field(&got, "ratio_median")?, util::field(&got, "off_ns_per_op")?));
        }
        bt_bpf.push(bpftrace_bpf_pct(cx, loops)?);
    }
    println!(
        "bench:   per-CPU switch event: {:.2}% (null {:.2}%; instead: a sched_switch program {:.2}%, a sched_switch perf event {:.2}%, \
         with a BPF program {:.2}%, switch records {:.2}%; on CPU {} itself, ns a switch: the perf event {:.0}, \
         the switch event with a program returning at once {:.0}, the sched_switch program {:.0}); \
         bpftrace's BPF run time on CPU {}: {:.2}%",
        Spread::of(&hook).median,
        Spread::of(&hook_null).median,
        Spread::of(&hook_tp).median,
        Spread::of(&tpevent).median,
        Spread::of(&tpevent_bpf).median,
        Spread::of(&switchrec).median,
        cx.watched,
        Spread::of(&tpevent_watched).median,
        Spread::of(&perf_bpf_watched).median,
        Spread::of(&tp_watched).median,
        cx.house,
        Spread::of(&bt_bpf).median
    );
    let best = |c: usize| ops[c].iter().copied().fold(f64::NAN, f64::max);
    let best_alone = best(ALONE).max(best(ALONE2));
    Ok(MachineCost {
        reps,
        loops,
        ops: std::array::from_fn(|c| Spread::of(&ops[c])),
        ratio: std::array::from_fn(|c| Spread::of(&ratio[c])),
        jw_ci95_pct: util::ci95_half(&ratio[JW].iter().map(|r| 100.0 * (1.0 - r)).collect::<Vec<_>>()),
        best_ratio: std::array::from_fn(|c| best(c) / best_alone),
        null: Spread::of(&null),
        jw_events: Spread::of(&events[0]),
        bt_events: Spread::of(&events[1]),
        jw_threads_pct: Spread::of(&house),
        hook_pct: Spread::of(&hook),
        hook_null_pct: Spread::of(&hook_null),
        hook_tp_pct: Spread::of(&hook_tp),
        hook_tpevent_pct: Spread::of(&tpevent),
        hook_tpevent_bpf_pct: Spread::of(&tpevent_bpf),
        hook_switchrec_pct: Spread::of(&switchrec),
        tpevent_watched_ns: Spread::of(&tpevent_watched),
        perf_bpf_watched_ns: Spread::of(&perf_bpf_watched),
        tp_watched_ns: Spread::of(&tp_watched),
        bt_bpf_pct: Spread::of(&bt_bpf),
    })
}

/// Sum of run_time_ns over the loaded tracepoint programs (bpftrace's).
fn tracepoint_run_ns() -> Result<u64> {
    let out = util::output(Command::new("bpftool").args(["prog", "show", "-j"]))?;
    let v: serde_json::Value = serde_json::from_str(&out).context("bpftool prog show -j is not JSON")?;
    Ok(v.as_array().map(|a| a.iter().filter(|p| p["type"] == "tracepoint").filter_map(|p| p["run_time_ns"].as_u64()).sum()).unwrap_or(0))
}

/// bpftrace attached, kernel BPF stats on, one perf run: its programs' run
/// time over the run's wall time, %. A lower bound of what it costs.
fn bpftrace_bpf_pct(cx: &Ctx, loops: u64) -> Result<f64> {
    const KNOB: &str = "/proc/sys/kernel/bpf_stats_enabled";
    let old = std::fs::read_to_string(KNOB).with_context(|| format!("reading {KNOB}"))?;
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::write(KNOB, self.0.trim());
        }
    }
    let _restore = Restore(old);
    std::fs::write(KNOB, "1").with_context(|| format!("writing {KNOB}"))?;
    let (b, rx) = bpftrace(cx)?;
    let (ns0, t0) = (tracepoint_run_ns()?, util::mono_ns());
    util::perf_pipe(cx.house, loops)?;
    let (ns1, t1) = (tracepoint_run_ns()?, util::mono_ns());
    bpftrace_stop(b, rx)?;
    Ok(100.0 * ns1.saturating_sub(ns0) as f64 / (t1 - t0) as f64)
}

/// A hook's cost in % from the harness's median ratio (a batch's time per
/// op with the hook over its neighbours' without).
pub fn hook_cost_pct(ratio: f64) -> f64 {
    100.0 * (ratio - 1.0)
}

/// A hook's cost in ns a context switch, from the paired batches' ratio and
/// the batches' time per round trip without it (a round trip through the
/// pipe is two switches).
pub fn ns_per_switch(ratio: f64, off_ns_per_op: f64) -> f64 {
    (ratio - 1.0) * off_ns_per_op / 2.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cheapest_hook_is_the_lowest_median_measured() {
        use super::{cheapest, Spread};
        let (a, b, none) = (Spread::of(&[2.3, 2.4]), Spread::of(&[0.9, 1.0]), Spread::of(&[]));
        assert_eq!(cheapest(&[("a", &a), ("b", &b)]), Some("b"));
        assert_eq!(cheapest(&[("a", &a), ("none", &none)]), Some("a"), "an unmeasured hook is not the cheapest");
        assert_eq!(cheapest(&[("none", &none)]), None);
    }

    #[test]
    fn a_batch_slower_with_the_hook_is_a_cost() {
        assert!((super::hook_cost_pct(1.0305) - 3.05).abs() < 1e-9);
        // 5 µs round trips, 20% longer with the hook: 1 µs, over two switches.
        assert!((super::ns_per_switch(1.2, 5000.0) - 500.0).abs() < 1e-9);
        assert!(super::hook_cost_pct(0.99) < 0.0);
    }
}
