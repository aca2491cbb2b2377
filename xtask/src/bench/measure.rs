//! Figures 1, 3 and 6: the probe's floor against a bare C loop (its runs
//! also give the start-up times), and each BPF program's run time.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;

use super::util::{self, num, Bg, Spread};

/// What every measurement needs.
pub struct Ctx {
    pub bin: PathBuf,
    pub watched: usize,
    pub house: usize,
    pub quick: bool,
    pub cloop: PathBuf,
    pub pingpong: PathBuf,
    pub ipistorm: PathBuf,
    pub tcppp: PathBuf,
    pub hog: PathBuf,
    pub hookcost: PathBuf,
    /// Figure 3b's spin loop and IPI sender.
    pub interrupts: PathBuf,
    /// Figure 8b's paired wake-up loop.
    pub wakes: PathBuf,
    pub bt_script: PathBuf,
}

impl Ctx {
    pub fn reps(&self, full: usize) -> usize {
        if self.quick {
            2.min(full)
        } else {
            full
        }
    }
}

pub struct Floor {
    pub reps: usize,
    pub secs: f64,
    pub c_floor: Spread,
    pub c_mean: Spread,
    pub jw_floor: Spread,
    pub jw_mean: Spread,
    pub threshold: Spread,
    pub ratio_floor: Spread,
    pub ratio_mean: Spread,
    /// Mean periods with the hiccups (deltas ≥ 8 × floor) left out.
    pub c_quiet: Spread,
    pub jw_quiet: Spread,
    pub ratio_quiet: Spread,
    /// The same with `--clock tsc`, when the TSC is usable (else None).
    pub tsc: Option<TscFloor>,
    pub startup: Startup,
}

pub struct TscFloor {
    pub floor: Spread,
    pub quiet: Spread,
    pub threshold: Spread,
    pub ratio_floor: Spread,
    pub ratio_quiet: Spread,
    /// The TSC's distance from CLOCK_MONOTONIC when the probe stopped, ns.
    pub drift: Spread,
}

/// Start-up, ms from the spawn.
pub struct Startup {
    pub to_main: Spread,
    pub to_first_sample: Spread,
    pub to_first_event: Spread,
}

/// 1 and 6: alternating C loop / jitterwatch runs on the watched CPU.
pub fn floor(cx: &Ctx) -> Result<Floor> {
    // 11: the period between hiccups moves ±10% from one second to the next
    // on this host, and its median is judged against 1.1×.
    let reps = cx.reps(11);
    let secs = if cx.quick { 0.5 } else { 1.0 };
    let cpu = cx.watched.to_string();
    let (mut c_floor, mut c_mean, mut jw_floor, mut jw_mean, mut thr) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut r_floor, mut r_mean) = (vec![], vec![]);
    let (mut c_quiet, mut jw_quiet, mut r_quiet) = (vec![], vec![], vec![]);
    let (mut to_main, mut to_sample, mut to_event) = (vec![], vec![], vec![]);
    // A third run per repetition with the TSC clock, if this machine has one
    // jitterwatch accepts (its summary says which clock it used).
    let (mut t_floor, mut t_quiet, mut t_thr, mut t_rf, mut t_rq, mut t_drift) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut tsc_ok = true;
    for rep in 0..reps {
        let mut c = (0.0, 0.0, 0.0);
        let mut j = (f64::NAN, f64::NAN, f64::NAN);
        // Alternate which goes first, so a drift does not favour one.
        for step in 0..2 {
            if (rep + step) % 2 == 0 {
                let out = util::output(Command::new("taskset").args(["-c", &cpu]).arg(&cx.cloop).arg(secs.to_string()))?;
                c = (util::field(&out, "floor_ns")?, util::field(&out, "mean_ns")?, util::field(&out, "quiet_mean_ns")?);
            } else {
                // The vDSO loop against the C loop reading the same clock.
                // `auto`: 8 × the floor, the C loop's rule too (the default
                // would cut at 1 µs and leave fewer gaps out).
                let run = util::jw_run(&cx.bin, cx.watched, secs, &["--clock", "vdso", "--threshold", "auto"], None)?;
                let v = &run.json;
                j = (num(v, "/cpus/0/loop_floor_ns"), num(v, "/cpus/0/loop_mean_ns"), num(v, "/cpus/0/loop_quiet_mean_ns"));
                thr.push(num(v, "/cpus/0/threshold_ns"));
                let ms = |ptr: &str| (num(v, ptr) - run.t0_ns as f64) / 1e6;
                to_main.push(ms("/overhead/main_start_ns"));
                to_sample.push(ms("/overhead/first_sample_ns"));
                to_event.push(ms("/overhead/first_event_ns"));
            }
        }
        if tsc_ok {
            let run = util::jw_run(&cx.bin, cx.watched, secs, &["--clock", "tsc", "--threshold", "auto"], None)?;
            let v = &run.json;
            if v.pointer("/cpus/0/clock").and_then(|c| c.as_str()) == Some("tsc") {
                let (fl, q) = (num(v, "/cpus/0/loop_floor_ns"), num(v, "/cpus/0/loop_quiet_mean_ns"));
                t_floor.push(fl);
                t_quiet.push(q);
                t_thr.push(num(v, "/cpus/0/threshold_ns"));
                t_rf.push(fl / c.0);
                t_rq.push(q / c.2);
                t_drift.push(num(v, "/cpus/0/tsc_drift_ns"));
            } else {
                tsc_ok = false;
            }
        }
        c_floor.push(c.0);
        c_mean.push(c.1);
        jw_floor.push(j.0);
        jw_mean.push(j.1);
        r_floor.push(j.0 / c.0);
        r_mean.push(j.1 / c.1);
        c_quiet.push(c.2);
        jw_quiet.push(j.2);
        r_quiet.push(j.2 / c.2);
    }
    Ok(Floor {
        reps,
        secs,
        c_floor: Spread::of(&c_floor),
        c_mean: Spread::of(&c_mean),
        jw_floor: Spread::of(&jw_floor),
        jw_mean: Spread::of(&jw_mean),
        threshold: Spread::of(&thr),
        ratio_floor: Spread::of(&r_floor),
        ratio_mean: Spread::of(&r_mean),
        c_quiet: Spread::of(&c_quiet),
        jw_quiet: Spread::of(&jw_quiet),
        ratio_quiet: Spread::of(&r_quiet),
        tsc: (tsc_ok && !t_floor.is_empty()).then(|| TscFloor {
            floor: Spread::of(&t_floor),
            quiet: Spread::of(&t_quiet),
            threshold: Spread::of(&t_thr),
            ratio_floor: Spread::of(&t_rf),
            ratio_quiet: Spread::of(&t_rq),
            drift: Spread::of(&t_drift),
        }),
        startup: Startup { to_main: Spread::of(&to_main), to_first_sample: Spread::of(&to_sample), to_first_event: Spread::of(&to_event) },
    })
}

/// The context-switch program, by whichever of its names userspace loaded
/// (the per-CPU perf event's, or a sched_switch tracepoint's: passive mode
/// takes the tracepoint, whose arguments carry the incoming task's wait).
pub const SWITCH_PROGS: [&str; 3] = ["on_switch_out", "on_sched_switch", "on_sched_switch_old"];

/// Whether a program named `name` is the one `wanted` names: itself, or
/// for "switch", any of SWITCH_PROGS.
pub fn is_prog(name: &str, wanted: &str) -> bool {
    name == wanted || (wanted == "switch" && SWITCH_PROGS.contains(&name))
}

pub struct ProgCost {
    pub name: String,
    pub run_cnt: Spread,
    pub ns_per_run: Spread,
}

pub struct BpfCost {
    pub reps: usize,
    pub secs: f64,
    /// Load on the watched CPU: the programs' real work.
    pub watched: Vec<ProgCost>,
    pub watched_events_per_sec: Spread,
    /// Load on the housekeeping CPU: mostly the early return.
    pub unwatched: Vec<ProgCost>,
    /// Load on the watched CPU with `--stacks-above 1ns`: a kernel stack
    /// taken at every switch, what one stack costs the switch program.
    pub stacked: Vec<ProgCost>,
}

impl BpfCost {
    /// The switch program's ns/run: without stacks, and with one at every switch.
    pub fn switch_ns(&self) -> (Option<f64>, Option<f64>) {
        let of = |v: &[ProgCost]| v.iter().find(|p| is_prog(&p.name, "switch")).filter(|p| p.ns_per_run.n > 0).map(|p| p.ns_per_run.median);
        (of(&self.watched), of(&self.stacked))
    }
}

/// The programs each kind of interrupt runs: its entry and exit, and what
/// runs inside it (one hrtimer in a tick; the cross-CPU call in an IPI).
const INSIDE_IRQ: [(&str, &[&str]); 4] = [
    ("a device IRQ (one handler)", &["on_irq_entry", "on_irq_exit"]),
    ("a local-timer tick with one hrtimer", &["on_local_timer_entry", "on_hrtimer_entry", "on_hrtimer_exit", "on_local_timer_exit"]),
    (
        "a function-call IPI with one call",
        &["on_call_function_single_entry", "on_csd_entry", "on_csd_exit", "on_call_function_single_exit"],
    ),
    ("a softirq", &["on_softirq_entry", "on_softirq_exit"]),
];

/// Programs loaded only on request: `--wake-origins`'s, on every wake-up.
const OPT_IN: [&str; 1] = ["on_waking"];

impl BpfCost {
    /// % of a CPU the default programs took with the load on the
    /// housekeeping CPU (the opt-in ones are not loaded by default), the
    /// switch program left out: figure 2 counts it in the hook's part,
    /// whose harness runs a program that returns as early.
    pub fn busy_pct_unwatched(&self) -> f64 {
        self.pct_unwatched(|name| !OPT_IN.contains(&name) && !is_prog(name, "switch"))
    }

    /// Whether the switch program ran on the housekeeping CPU: jitterwatch
    /// took the sched_switch tracepoint, not the per-CPU event.
    pub fn switch_everywhere(&self) -> bool {
        self.unwatched.iter().any(|p| is_prog(&p.name, "switch") && p.run_cnt.n > 0 && p.run_cnt.median > 0.0)
    }

    /// The same for the programs only `--wake-origins` loads.
    pub fn opt_in_pct_unwatched(&self) -> f64 {
        self.pct_unwatched(|name| OPT_IN.contains(&name))
    }

    /// What our programs add inside one interrupt of each kind on the
    /// watched CPU: the median ns/run of the programs it runs, summed
    /// (None where one of them did not run). Each run's figure includes the
    /// two clock reads `bpf_stats_enabled` adds.
    pub fn inside_irq(&self) -> Vec<(&'static str, Option<f64>)> {
        let ns = |name: &str| self.watched.iter().find(|p| p.name == name && p.ns_per_run.n > 0).map(|p| p.ns_per_run.median);
        INSIDE_IRQ.iter().map(|(what, progs)| (*what, progs.iter().map(|p| ns(p)).sum::<Option<f64>>())).collect()
    }

    fn pct_unwatched(&self, which: impl Fn(&str) -> bool) -> f64 {
        let ns: f64 = self.unwatched.iter().filter(|p| which(&p.name)).map(|p| p.run_cnt.median * p.ns_per_run.median).sum();
        100.0 * ns / (self.secs * 1e9)
    }
}

pub(super) fn prog_costs(runs: &[serde_json::Value]) -> Vec<ProgCost> {
    let mut names: Vec<String> = vec![];
    for v in runs {
        for p in v.pointer("/overhead/bpf_programs").and_then(|p| p.as_array()).into_iter().flatten() {
            if let Some(n) = p["name"].as_str() {
                if !names.iter().any(|x| x == n) {
                    names.push(n.to_string());
                }
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let pick = |key: &str| -> Vec<f64> {
                runs.iter()
                    .filter_map(|v| {
                        v.pointer("/overhead/bpf_programs")?.as_array()?.iter().find(|p| p["name"] == name.as_str())?[key].as_f64()
                    })
                    .collect()
            };
            ProgCost { run_cnt: Spread::of(&pick("run_cnt")), ns_per_run: Spread::of(&pick("ns_per_run")), name }
        })
        .collect()
}

/// 3: --bpf-stats while perf bench sched pipe runs on the watched CPU, then
/// on the housekeeping CPU (alternating).
pub fn bpf_cost(cx: &Ctx) -> Result<BpfCost> {
    let reps = cx.reps(3);
    let secs = if cx.quick { 1.0 } else { 3.0 };
    let (mut on_w, mut on_h, mut stacked) = (vec![], vec![], vec![]);
    for _ in 0..reps {
        for (cpu, stacks) in [(cx.watched, false), (cx.house, false), (cx.watched, true)] {
            let _load = Bg::spawn(
                Command::new("taskset")
                    .args(["-c", &cpu.to_string(), "perf", "bench", "sched", "pipe", "-T", "-l", "1000000000"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )?;
            std::thread::sleep(Duration::from_millis(300));
            // With the opt-in programs, so their cost is measured too
            // (figure 2 counts the default ones only).
            // --stacks-above 1ns: every switch out of the watched CPU takes a stack.
            let args: &[&str] =
                if stacks { &["--bpf-stats", "--wake-origins", "--stacks-above", "1ns"] } else { &["--bpf-stats", "--wake-origins"] };
            let run = util::jw_run(&cx.bin, cx.watched, secs, args, None)?;
            match (cpu == cx.watched, stacks) {
                (_, true) => &mut stacked,
                (true, false) => &mut on_w,
                (false, false) => &mut on_h,
            }
            .push(run.json);
        }
    }
    Ok(BpfCost {
        reps,
        secs,
        watched: prog_costs(&on_w),
        watched_events_per_sec: Spread::of(&on_w.iter().map(|v| num(v, "/events_per_sec")).collect::<Vec<_>>()),
        unwatched: prog_costs(&on_h),
        stacked: prog_costs(&stacked),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_costs_the_programs_it_runs() {
        let prog = |name: &str, ns: &[f64]| ProgCost { name: name.into(), run_cnt: Spread::of(&[10.0]), ns_per_run: Spread::of(ns) };
        let watched = vec![
            prog("on_irq_entry", &[500.0, 400.0, 600.0]),
            prog("on_irq_exit", &[250.0]),
            prog("on_softirq_entry", &[]),
            prog("on_softirq_exit", &[200.0]),
        ];
        let b =
            BpfCost { reps: 3, secs: 3.0, watched, watched_events_per_sec: Spread::of(&[1.0]), unwatched: Vec::new(), stacked: Vec::new() };
        let got = b.inside_irq();
        assert_eq!(got[0], ("a device IRQ (one handler)", Some(750.0)));
        assert_eq!(got[1].1, None, "the tick's programs never ran");
        assert_eq!(got[3].1, None, "a program without a figure leaves the sum unmeasured");
    }
}
