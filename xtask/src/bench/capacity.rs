//! Figures 4 and 5: the event rate the consumer drains without drops, and
//! the peak RSS over a long run at a high rate.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;

use super::measure::Ctx;
use super::util::{self, num, Bg, Jw, Mem};

/// A context-switch load on the watched CPU.
#[derive(Clone, Copy, PartialEq)]
pub enum Load {
    Idle,
    PerfPipe,
    PingPong {
        pairs: u32,
        policy: Policy,
    },
    /// A ping-pong on the watched CPU and, from the housekeeping CPU at
    /// nice 19 (the consumer runs there too and goes first), an IPI storm
    /// at it: two producers of different events.
    PingPongIpis {
        pairs: u32,
        policy: Policy,
    },
}

/// How a storm's threads are scheduled against the probe (nice 0).
#[derive(Clone, Copy, PartialEq)]
pub enum Policy {
    /// SCHED_OTHER at nice 0: they share the CPU with the probe.
    Other,
    /// SCHED_FIFO 1: the probe keeps RT throttling's share of the CPU.
    Fifo,
    /// Nice -20, where RT throttling is off and a FIFO storm would starve
    /// the probe until it ends: the probe keeps ~1% of the CPU.
    Nice,
}

impl Policy {
    /// The strongest storm that still lets the probe run.
    pub fn strong() -> Self {
        let rt = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or_default();
        if rt.trim() == "-1" {
            Policy::Nice
        } else {
            Policy::Fifo
        }
    }

    /// pingpong's PRIO argument.
    fn arg(self) -> &'static str {
        match self {
            Policy::Other => "0",
            Policy::Fifo => "1",
            Policy::Nice => "-20",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Policy::Other => "SCHED_OTHER",
            Policy::Fifo => "SCHED_FIFO 1",
            Policy::Nice => "nice -20",
        }
    }
}

/// The storm the starved-consumer runs and figure 5 use.
pub fn storm() -> Load {
    Load::PingPong { pairs: 4, policy: Policy::strong() }
}

impl Load {
    pub fn describe(self) -> String {
        match self {
            Load::Idle => "idle (probe only)".into(),
            Load::PerfPipe => "perf bench sched pipe -T".into(),
            Load::PingPong { pairs, policy } => format!("futex ping-pong × {pairs} pairs, {}", policy.describe()),
            Load::PingPongIpis { pairs, policy } => {
                format!("futex ping-pong × {pairs} pairs, {}, + IPIs from the housekeeping CPU", policy.describe())
            }
        }
    }

    /// Starts the load; the ping-pong and the IPI storm end by themselves
    /// after `max_s` at most.
    pub fn start(self, cx: &Ctx, max_s: u64) -> Result<Vec<Bg>> {
        let on = |cpu: usize| {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", &cpu.to_string()]).stdout(Stdio::null()).stderr(Stdio::null());
            cmd
        };
        let mut cmd = on(cx.watched);
        let mut extra = None;
        match self {
            Load::Idle => return Ok(Vec::new()),
            Load::PerfPipe => cmd.args(["perf", "bench", "sched", "pipe", "-T", "-l", "1000000000"]),
            Load::PingPong { pairs, policy } => cmd.arg(&cx.pingpong).args([&pairs.to_string(), &max_s.to_string(), policy.arg()]),
            Load::PingPongIpis { pairs, policy } => {
                let mut ipis = on(cx.house);
                ipis.args(["nice", "-n", "19"]).arg(&cx.ipistorm).args([&cx.watched.to_string(), &max_s.to_string()]);
                extra = Some(ipis);
                cmd.arg(&cx.pingpong).args([&pairs.to_string(), &max_s.to_string(), policy.arg()])
            }
        };
        let mut bgs = vec![Bg::spawn(&mut cmd)?];
        if let Some(mut e) = extra {
            bgs.push(Bg::spawn(&mut e)?);
        }
        // Let it reach its rate before jitterwatch starts counting.
        std::thread::sleep(Duration::from_millis(300));
        Ok(bgs)
    }
}

/// One jitterwatch run under a load.
pub struct RateRun {
    pub load: Load,
    /// The housekeeping CPU was taken from the consumer for this long (ms).
    pub stall_ms: u64,
    pub events_per_sec: f64,
    pub events: f64,
    pub drops: f64,
    pub lag_max_ms: f64,
    /// The collector thread's CPU time per event drained, and over the run.
    pub consumer_ns_per_event: f64,
    pub consumer_cpu_pct: f64,
}

fn rate_run(cx: &Ctx, load: Load, secs: f64, stall_ms: u64) -> Result<RateRun> {
    let _load = load.start(cx, secs as u64 + 10)?;
    let run = if stall_ms == 0 {
        util::jw_run(&cx.bin, cx.watched, secs, &[], None)?
    } else {
        let (c, d) = (cx.watched.to_string(), format!("{}ms", (secs * 1000.0) as u64));
        let mut j = Jw::spawn(&cx.bin, &["--cpus", &c, "--no-tui", "--json", "--duration", &d], None)?;
        j.wait_ready(Duration::from_secs(20))?;
        std::thread::sleep(Duration::from_millis(500));
        util::output(Command::new("taskset").args(["-c", &cx.house.to_string()]).arg(&cx.hog).arg(stall_ms.to_string()))?;
        j.finish()?
    };
    let v = &run.json;
    Ok(RateRun {
        load,
        stall_ms,
        events_per_sec: num(v, "/events_per_sec"),
        events: num(v, "/events"),
        drops: num(v, "/overhead/ringbuf_drops"),
        lag_max_ms: num(v, "/overhead/lag_max_ns") / 1e6,
        consumer_ns_per_event: num(v, "/overhead/consumer_ns_per_event"),
        consumer_cpu_pct: 100.0 * num(v, "/overhead/consumer_cpu_ns") / num(v, "/duration_ns").max(1.0),
    })
}

pub struct Capacity {
    pub secs: f64,
    pub runs: Vec<RateRun>,
    /// Highest events/s of a run without drops (stall runs excluded).
    pub max_clean: f64,
    /// Highest events/s reached at all (stall runs excluded).
    pub max_rate: f64,
    /// Lowest events/s of a run that dropped events (stall runs excluded):
    /// where drops begin. None when none dropped.
    pub first_drops: Option<f64>,
    pub lag_max_ms: f64,
}

/// 4: steps of load on the watched CPU, up then down; then the largest
/// load with the consumer starved by a SCHED_FIFO hog on its CPU.
pub fn capacity(cx: &Ctx) -> Result<Capacity> {
    let secs = if cx.quick { 1.5 } else { 3.0 };
    // SCHED_OTHER storms share the CPU with the probe (nice 0), which caps
    // them near 450k events/s here; the strong ones leave the probe only a
    // sliver, so the watched CPU, not the probe's share of it, sets the rate.
    let strong = |pairs| Load::PingPong { pairs, policy: Policy::strong() };
    let steps = [
        Load::Idle,
        Load::PerfPipe,
        Load::PingPong { pairs: 16, policy: Policy::Other },
        strong(1),
        strong(2),
        strong(4),
        strong(8),
        strong(16),
        // Past what one CPU's context switches give: IPIs on top.
        Load::PingPongIpis { pairs: 16, policy: Policy::Other },
        Load::PingPongIpis { pairs: 4, policy: Policy::strong() },
    ];
    let mut order: Vec<Load> = steps.to_vec();
    if !cx.quick {
        order.extend(steps.iter().rev());
    }
    let mut runs = vec![];
    for load in order {
        let r = rate_run(cx, load, secs, 0)?;
        println!(
            "bench:   {:<44} {:>9.0} events/s, {} drops, lag ≤ {:.1} ms, consumer {:.0} ns/event",
            load.describe(),
            r.events_per_sec,
            r.drops,
            r.lag_max_ms,
            r.consumer_ns_per_event
        );
        runs.push(r);
    }
    let clean = |r: &&RateRun| r.stall_ms == 0;
    let max_clean = runs.iter().filter(clean).filter(|r| r.drops == 0.0).map(|r| r.events_per_sec).fold(0.0, f64::max);
    let max_rate = runs.iter().filter(clean).map(|r| r.events_per_sec).fold(0.0, f64::max);
    let first_drops = runs.iter().filter(clean).filter(|r| r.drops > 0.0).map(|r| r.events_per_sec).reduce(f64::min);
    let lag_max_ms = runs.iter().map(|r| r.lag_max_ms).fold(0.0, f64::max);
    for stall_ms in [100, 400] {
        let r = rate_run(cx, storm(), secs, stall_ms)?;
        println!(
            "bench:   consumer starved {stall_ms} ms: {:.0} events/s, {} drops, lag ≤ {:.1} ms",
            r.events_per_sec, r.drops, r.lag_max_ms
        );
        runs.push(r);
    }
    Ok(Capacity { secs, runs, max_clean, max_rate, first_drops, lag_max_ms })
}

pub struct Memory {
    pub secs: f64,
    pub load: Load,
    pub mem: Mem,
    pub events_per_sec: f64,
    pub drops: f64,
    pub lag_max_ms: f64,
    /// From the spawn to the exit, s (the run asked for `secs`).
    pub wall_s: f64,
    /// From the spawn until wait() returned, s (see util::JwRun::reaped_ns).
    pub reaped_s: f64,
    /// VmRSS (kB) a quarter into the run and at its end.
    pub rss_early_kb: u64,
    pub rss_end_kb: u64,
    /// CPU used on the housekeeping CPUs (all threads but the probes), %.
    pub house_cpu_pct: f64,
}

/// 5: a long run at a high event rate, VmRSS sampled every 100 ms.
pub fn memory(cx: &Ctx) -> Result<Memory> {
    let secs = if cx.quick { 5.0 } else { 30.0 };
    let load = storm();
    // A bounded storm: reaping jitterwatch has been seen to take until the
    // storm ends (a kernel /proc dcache spin, see util::JwRun); this keeps
    // the bench bounded and shows it.
    let _load = load.start(cx, secs as u64 + 10)?;
    let run = util::jw_run(&cx.bin, cx.watched, secs, &[], Some(Duration::from_millis(100)))?;
    let mem = run.mem.unwrap_or_default();
    let v = &run.json;
    let t_early = run.t0_ns + (secs * 0.25 * 1e9) as u64;
    let rss_early_kb = mem.rss_trace.iter().find(|s| s.0 >= t_early).map_or(0, |s| s.1);
    let rss_end_kb = mem.rss_trace.last().map_or(0, |s| s.1);
    let dur = num(v, "/duration_ns") / 1e9;
    Ok(Memory {
        secs,
        load,
        events_per_sec: num(v, "/events_per_sec"),
        drops: num(v, "/overhead/ringbuf_drops"),
        lag_max_ms: num(v, "/overhead/lag_max_ns") / 1e6,
        wall_s: (run.exit_ns - run.t0_ns) as f64 / 1e9,
        reaped_s: (run.reaped_ns - run.t0_ns) as f64 / 1e9,
        rss_early_kb,
        rss_end_kb,
        house_cpu_pct: 100.0 * mem.ns_other as f64 / 1e9 / dur,
        mem,
    })
}
