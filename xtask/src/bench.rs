//! `cargo xtask bench [--quick]`: measures jitterwatch's own cost, appends
//! the run's figures to bench-history.jsonl and writes BENCHMARKS.md at the
//! repository root. `--report-only` redraws BENCHMARKS.md from the history
//! without measuring (its sections 1–8 are kept: they need a run).
//!
//! Eight figures, most as ratios within one run with alternation and
//! repetitions (this VM's host pauses vCPUs; medians and ranges matter):
//! 1. the probe's loop floor against a bare C clock_gettime loop (+ the
//!    auto-threshold); 6. start-up, from the same runs;
//! 2. perf bench sched pipe on the housekeeping CPU alone / while
//!    jitterwatch watches the last CPU / while bpftrace traces it;
//! 3. each BPF program's ns per run (--bpf-stats) under a switch storm;
//! 4. the event rate drained without ring-buffer drops;
//! 5. peak RSS over a long run at a high rate;
//! 7. events/s per consumer core and memory per CPU for 1 to 256 CPUs, by
//!    replaying synthetic streams (this machine has two CPUs);
//!    4d. jitterwatch's CPU with its live screen against headless;
//!    7b. `jitterwatch explain` of 10⁶ operations against 10⁶ stalls;
//! 8. the wake-up probe's latencies beside cyclictest's.
//!
//! `--figure 3b` (or 4d, 7b, 8b) measures that one figure and prints its section, writing
//! nothing (the figures that stand alone: 3b, 4c, 4d, 7b, 8b).
//!
//! Needs root (BPF): a non-root user builds, then the bench re-runs itself
//! through sudo.

mod assets;
mod attached;
mod capacity;
mod details;
mod explain_scale;
mod figures;
mod history;
mod ids;
mod interruption;
mod machine;
mod measure;
mod nic;
mod passive;
mod quiet;
mod recorder;
mod replay;
mod report;
mod results;
mod screen;
mod spread;
mod summary;
mod targets;
mod util;
mod verdicts;
mod wakeup;
mod yardstick;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::{deps, proc};
pub use report::{ARM64_CLOCK_FILE, ARM64_CLOCK_HEADING, RTLA_FILE};

/// Internal: the sudo'd re-run, after the user's build.
const BUILT: &str = "--built";

pub fn run(quick: bool, built: bool, report_only: bool, figure: Option<&str>) -> Result<()> {
    if report_only {
        return redraw();
    }
    let started = Instant::now();
    if !proc::is_root() {
        // Build as the user (target/ stays theirs), measure as root.
        let mut sudo = proc::sudo()?;
        deps::ensure(false)?;
        build()?;
        let exe = std::env::current_exe().context("locating the xtask binary")?;
        sudo.arg("-E").arg(exe).args(["bench", BUILT]);
        if quick {
            sudo.arg("--quick");
        }
        if let Some(f) = figure {
            sudo.args(["--figure", f]);
        }
        println!("bench: BPF needs root; running the measurements through sudo");
        let st = proc::status(&mut sudo)?;
        return if st.success() { Ok(()) } else { Err(proc::ChildExit(proc::exit_code(st)).into()) };
    }
    if !built {
        deps::ensure(false)?;
        build()?;
    }
    // A bench stopped while figure 3b had the NIC's interrupts on the
    // watched CPU left them there: back first, before anything measures.
    nic::restore_left();
    let bin = proc::target_dir().join("release/jitterwatch");
    if !bin.is_file() {
        bail!("{} is missing after the build", bin.display());
    }
    let cpus = online_cpus()?;
    if cpus.len() < 2 {
        bail!("the bench needs at least 2 online CPUs (one watched, one housekeeping); this machine has {}", cpus.len());
    }
    let (house, watched) = (cpus[0], cpus[cpus.len() - 1]);
    // xtask and everything it spawns stay off the watched CPU unless pinned there.
    util::pin_self(house)?;
    let _tracefs = TraceFs::ensure()?;

    let tmp = std::env::temp_dir().join(format!("jw-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let _cleanup = RmDir(tmp.clone());
    let (script, bt_probes) = assets::bpftrace_script(watched);
    let bt_script = tmp.join("same-tracepoints.bt");
    std::fs::write(&bt_script, script)?;
    let cx = measure::Ctx {
        bin,
        watched,
        house,
        quick,
        cloop: assets::compile(&tmp, "cloop", assets::CLOOP)?,
        pingpong: assets::compile(&tmp, "pingpong", assets::PINGPONG)?,
        ipistorm: assets::compile(&tmp, "ipistorm", assets::IPISTORM)?,
        tcppp: assets::compile(&tmp, "tcppp", assets::TCPPP)?,
        hog: assets::compile(&tmp, "hog", assets::HOG)?,
        hookcost: assets::compile(&tmp, "hookcost", assets::HOOKCOST)?,
        interrupts: assets::compile(&tmp, "interrupts", assets::INTERRUPTS)?,
        wakes: assets::compile(&tmp, "wakes", assets::WAKES)?,
        bt_script,
    };
    let yard = assets::compile(&tmp, "yardstick", assets::YARDSTICK)?;
    let speed = |at: &str| -> Result<yardstick::Speed> {
        let s = yardstick::measure(&yard, house)?;
        println!("bench: host speed at the {at}: pointer chase {:.1} ns a load, multiply-add {:.2} ns a step", s.chase_ns, s.alu_ns);
        Ok(s)
    };

    println!("bench: watched CPU {watched}, housekeeping CPU {house}{}", if quick { " (quick mode)" } else { "" });
    // One figure alone is a check while working on it: with the host's
    // speed, an A/B across hours can be read for the host's drift.
    if let Some(f) = figure {
        speed("start")?;
        let section = match f {
            "3b" => {
                let mut o = String::new();
                details::per_interruption::section(&mut o, Some(&interruption::measure(&cx, &cx.interrupts)?), watched, house);
                o
            }
            "4c" => passive::markdown(&passive::passive_mix(&cx)?, watched),
            "4d" => screen::markdown(Some(&screen::screen(&cx)?), watched, house),
            "7b" => explain_scale::markdown(Some(&explain_scale::scale(&cx)?)),
            "8b" => wakeup::markdown(&[], Some(&wakeup::observer(&cx)?), watched, quick),
            _ => bail!("--figure {f}: not a figure that stands alone (3b, 4c, 4d, 7b, 8b)"),
        };
        println!("{section}");
        return Ok(());
    }
    let quiet = quiet::quiet_check();
    let speed_start = speed("start")?;
    // Other tracers or builds started meanwhile skew the figures: note them.
    let mut seen: Vec<String> = vec![];
    let mut lap = Instant::now();
    let mut check = |phase: &str| {
        println!("bench:   ({phase} took {:.0} s)", lap.elapsed().as_secs_f64());
        lap = Instant::now();
        for p in quiet::intruders() {
            println!("bench: WARNING: {p} was running after {phase}");
            seen.push(format!("{p} (after {phase})"));
        }
    };
    println!("bench: 1+6/8 probe floor vs a C clock_gettime loop, and start-up");
    let floor = measure::floor(&cx)?;
    check("figure 1");
    println!("bench: 2/8 perf bench sched pipe on CPU {house}: alone / jitterwatch / bpftrace / spin loop / alone");
    let machine = machine::machine_cost(&cx)?;
    check("figure 2");
    println!("bench: 3/8 BPF ns per run under a context-switch load");
    let bpf = measure::bpf_cost(&cx)?;
    check("figure 3");
    println!("bench: 3b/8 a tick, IPIs, a device IRQ and a work item on CPU {watched}, seen by a spin loop: alone / the hooks alone / jitterwatch");
    let per_interruption = Some(interruption::measure(&cx, &cx.interrupts)?);
    check("figure 3b");
    println!("bench: 4/8 ring-buffer capacity under context-switch storms on CPU {watched}");
    let cap = capacity::capacity(&cx)?;
    check("figure 4");
    println!("bench: 4b/8 the flight recorder's cost to the consumer, on and off");
    let rec = recorder::recorder(&cx)?;
    check("figure 4b");
    let mix = passive::passive_mix(&cx)?;
    check("figure 4c");
    println!("bench: 4d the live screen's cost on a passive sockperf ping-pong, server on CPU {watched}");
    let screen = Some(screen::screen(&cx)?);
    check("figure 4d");
    println!("bench: 5/8 memory over a long run at a high event rate");
    let mem = capacity::memory(&cx)?;
    check("figure 5");
    println!("bench: 7/8 many CPUs, by replay through the consumer on CPU {house}");
    let replay = replay::replay(&cx)?;
    check("figure 7");
    println!("bench: 7b explain of 10^6 operations against 10^6 stalls on CPU {house}");
    let explain = Some(explain_scale::scale(&cx)?);
    check("figure 7b");
    println!("bench: 8/8 the wake-up probe beside cyclictest on CPU {watched}");
    let wakeup = wakeup::wakeup(&cx)?;
    let observer = Some(wakeup::observer(&cx)?);
    check("figure 8");
    let host_speed = yardstick::HostSpeed { start: speed_start, end: speed("end")? };

    let results = results::Results {
        floor,
        machine,
        bpf,
        cap,
        mem,
        replay,
        wakeup,
        observer,
        recorder: rec,
        mix: Some(mix),
        explain,
        screen,
        per_interruption,
        bt_probes,
    };
    let mut mc = machine_info(watched, house, started.elapsed().as_secs_f64(), quick);
    mc.speed = Some(host_speed);
    mc.quiet = if seen.is_empty() { quiet } else { format!("{quiet}; **seen during the bench**: {}", seen.join(", ")) };
    let figures = figures::from_results(&results, quick);
    let entry = history::Entry { commit: commit(), date: utc_now(), source: None, machine: mc, figures };
    // The history first: a failure writing the report loses no run.
    let hist = proc::root().join(history::FILE);
    history::append(&hist, &entry)?;
    give_back(&hist);
    let all = history::load(&hist)?;
    let details = details::markdown(&entry.machine, &results, &entry.figures);
    let out = proc::root().join("BENCHMARKS.md");
    std::fs::write(&out, report::markdown(&entry, &details, &all, &from_vmtest())).with_context(|| format!("writing {}", out.display()))?;
    give_back(&out);
    summary::print(&entry.figures);
    println!("bench: appended to {} and wrote {} in {:.0} s", hist.display(), out.display(), started.elapsed().as_secs_f64());
    Ok(())
}

/// What `cargo xtask vmtest` last wrote for the report ("" where it never
/// has): section 9, and figure 1's arm64 part.
fn from_vmtest() -> report::FromVmtest {
    let read = |f: &str| std::fs::read_to_string(proc::root().join(f)).unwrap_or_default();
    report::FromVmtest { rtla: read(RTLA_FILE), arm64_clock: read(ARM64_CLOCK_FILE) }
}

/// `--report-only`: BENCHMARKS.md redrawn from the history, its sections
/// 1–8 (a run's details, which the history does not hold) kept as they are.
pub fn redraw() -> Result<()> {
    let hist = proc::root().join(history::FILE);
    let all = history::load(&hist)?;
    let Some(latest) = all.last() else { bail!("{} holds no run: run `cargo xtask bench` first", hist.display()) };
    let out = proc::root().join("BENCHMARKS.md");
    let old = std::fs::read_to_string(&out).unwrap_or_default();
    let details = report::kept_details(&old);
    if details.is_empty() {
        println!("bench: {} has no sections 1–8 to keep; the next `cargo xtask bench` writes them", out.display());
    }
    std::fs::write(&out, report::markdown(latest, details, &all, &from_vmtest())).with_context(|| format!("writing {}", out.display()))?;
    summary::print(&latest.figures);
    println!(
        "bench: redrew {} from the {} run(s) in {} (latest {} `{}`)",
        out.display(),
        all.len(),
        hist.display(),
        latest.date,
        latest.commit
    );
    Ok(())
}

fn build() -> Result<()> {
    proc::check(proc::cargo().args(["build", "--release", "--bin", "jitterwatch"]))
}

/// The online CPUs, from the kernel's cpulist ("0-1", "0,2-3").
fn online_cpus() -> Result<Vec<usize>> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").context("reading the online CPUs")?;
    let mut v = vec![];
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse()?, b.parse()?);
        v.extend(a..=b);
    }
    Ok(v)
}

/// bpftrace's `tracepoint:` probes need tracefs; mount it for the bench
/// when it is not, and unmount it after.
struct TraceFs(bool);

impl TraceFs {
    fn ensure() -> Result<TraceFs> {
        if Path::new(assets::TRACEFS).join("events").exists() {
            return Ok(TraceFs(false));
        }
        println!("bench: mounting tracefs on {} for bpftrace (unmounted after)", assets::TRACEFS);
        proc::check(Command::new("mount").args(["-t", "tracefs", "nodev", assets::TRACEFS]))?;
        Ok(TraceFs(true))
    }
}

impl Drop for TraceFs {
    fn drop(&mut self) {
        if self.0 {
            let _ = Command::new("umount").arg(assets::TRACEFS).status();
        }
    }
}

struct RmDir(PathBuf);

impl Drop for RmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Under sudo, hand the report back to the user who asked for it.
fn give_back(path: &Path) {
    let id = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    if let (Some(uid), Some(gid)) = (id("SUDO_UID"), id("SUDO_GID")) {
        let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
    }
}

fn first_line(cmd: &mut Command) -> String {
    cmd.output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(if o.stdout.is_empty() { &o.stderr } else { &o.stdout }).lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

/// git's stdout for `args` in the repository, trimmed (None on failure).
fn git(args: &[&str]) -> Option<String> {
    // As root under sudo the tree is someone else's: git would refuse it.
    let o = Command::new("git").arg("-c").arg("safe.directory=*").arg("-C").arg(proc::root()).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// HEAD's short hash, "-dirty" when the tree has changes beyond the files
/// the bench itself writes.
pub fn commit() -> String {
    let short = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let bench_writes = [":!BENCHMARKS.md".to_string(), format!(":!{}", history::FILE)];
    let mut args = vec!["status", "--porcelain", "--", "."];
    args.extend(bench_writes.iter().map(String::as_str));
    let dirty = git(&args).is_some_and(|s| !s.is_empty());
    history::commit_label(&short, dirty)
}

pub fn utc_now() -> String {
    first_line(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]))
}

fn machine_info(watched: usize, house: usize, runtime_s: f64, quick: bool) -> results::Machine {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let virt = match proc::which("systemd-detect-virt").map(|p| first_line(Command::new(p).arg("--vm"))) {
        Some(v) if !v.is_empty() && v != "none" => format!("guest ({v})"),
        _ if cpuinfo.contains(" hypervisor") => "guest (hypervisor CPU flag)".into(),
        _ => "none detected".into(),
    };
    let tools = format!(
        "{}; {}; gcc {}",
        first_line(Command::new("perf").arg("--version")),
        first_line(Command::new("bpftrace").arg("--version")),
        first_line(Command::new("gcc").arg("-dumpfullversion"))
    );
    results::Machine {
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model,
        nproc: online_cpus().map(|v| v.len()).unwrap_or(0),
        clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        virt,
        tools,
        watched,
        house,
        runtime_s,
        quick,
        quiet: String::new(),
        speed: None,
    }
}
