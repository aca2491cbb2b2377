//! What a watch run measures, decided once from the command line: the
//! spin probe, the wake-up probe, or passive mode (no probe: the watched
//! threads' own time). Every later choice asks the `Mode`.

use std::path::Path;

use anyhow::{bail, Result};

use clap::ValueEnum as _;

use crate::cli::{LoopClockArg, ProbeArg, WatchArgs};
use crate::cpulist;
use crate::interval::Method;
use crate::probe::threshold::Gate;
use crate::probe::{ProbeConfig, ProbeKind, Threshold};
use crate::say::say;
use crate::source::Source;
use crate::sources::passive::PassiveSource;
use crate::sources::probes::ProbeSource;

/// The wake-up probe's period unless --period says otherwise (cyclictest's -i 1000).
const DEFAULT_PERIOD_NS: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// A spin probe on each CPU: every gap in its clock loop.
    Spin,
    /// A wake-up probe on each CPU, sleeping to a deadline every `period_ns`.
    Wakeup { period_ns: u64 },
    /// No probe: the time taken from the threads the filter finds.
    Passive(crate::passive::Filter),
}

impl Mode {
    pub fn of(args: &WatchArgs) -> Result<Mode> {
        if args.probe != ProbeArg::Wakeup && (args.period.is_some() || args.timer_slack.is_some()) {
            bail!("--period and --timer-slack are the wake-up probe's: add --probe wakeup");
        }
        if let Some(refused) = Gate::of(args.fail_above, args.stop_above).and_then(|g| g.refuses(args.threshold)) {
            bail!("{refused}");
        }
        Ok(match (args.passive_filter(), args.probe) {
            (Some(filter), _) => Mode::Passive(filter),
            (None, ProbeArg::Wakeup) => Mode::Wakeup { period_ns: args.period.unwrap_or(DEFAULT_PERIOD_NS) },
            (None, ProbeArg::Spin) => Mode::Spin,
        })
    }

    /// What it measures, as every output asks it.
    pub fn method(&self) -> Method {
        match self {
            Mode::Spin => Method::Spin,
            Mode::Wakeup { .. } => Method::Wakeup,
            Mode::Passive(_) => Method::Passive,
        }
    }

    /// The CPUs it watches and whether it spins on them, before anything
    /// is loaded: passive mode finds its threads (and their CPUs) in
    /// `root`'s /proc now.
    pub fn plan(&self, root: &Path, args: &WatchArgs) -> Result<Planned> {
        Ok(match self {
            Mode::Passive(filter) => {
                let target = crate::passive::target(root, filter.clone(), args.cpus.as_deref())?;
                Planned { cpus_arg: Some(cpulist::Display(&target.cpus).to_string()), build: Build::Passive(target) }
            }
            Mode::Spin => Planned { cpus_arg: args.cpus.clone(), build: Build::Probe(ProbeKind::Spin) },
            &Mode::Wakeup { period_ns } => Planned { cpus_arg: args.cpus.clone(), build: Build::Probe(ProbeKind::Wakeup { period_ns }) },
        })
    }
}

/// A mode's source, planned: its CPUs, then built once they are checked.
pub struct Planned {
    /// `--cpus`, or the CPUs passive mode's threads may run on.
    pub cpus_arg: Option<String>,
    build: Build,
}

enum Build {
    Probe(ProbeKind),
    Passive(crate::passive::Target),
}

impl Planned {
    /// A probe spins on each CPU: it takes their locks (passive mode
    /// watches the application's own threads there).
    pub fn spins(&self) -> bool {
        matches!(self.build, Build::Probe(_))
    }

    /// The source on `cpus` (probes spawned and set up, not measuring).
    pub fn source(self, root: &Path, args: &WatchArgs, cpus: &[usize]) -> Result<Box<dyn Source>> {
        Ok(match self.build {
            Build::Probe(kind) => {
                let rule = args.threshold.unwrap_or(Threshold::Default);
                let counter = if kind == ProbeKind::Spin { counter_loop(root, args.clock, std::env::consts::ARCH) } else { None };
                let gate = Gate::of(args.fail_above, args.stop_above);
                let cfg = ProbeConfig { kind, timer_slack_ns: args.timer_slack, threshold: rule, gate, rt_prio: args.rt, counter };
                Box::new(ProbeSource::spawn(cpus, cfg)?)
            }
            Build::Passive(target) => {
                // Passive mode and the wake-up probe keep their own defaults (auto too).
                let rule = args.threshold.and_then(|t| t.given()).unwrap_or(crate::passive::DEFAULT_THRESHOLD_NS);
                let gate = Gate::of(args.fail_above, args.stop_above);
                let threshold = Gate::cap(gate, rule);
                if threshold < rule {
                    say!("passive: threshold {}{}", crate::units::ns(threshold), Gate::lowered(gate, rule));
                }
                Box::new(PassiveSource::new(root, target, cpus, threshold, crate::sys::preempt_rt()))
            }
        })
    }
}

/// The spin probe reads the CPU's counter (the wake-up probe reads
/// clock_gettime once per wake-up): where it is usable on `arch` and not
/// refused by `--clock`. Some(its name) when it is.
fn counter_loop(root: &Path, clock: LoopClockArg, arch: &str) -> Option<&'static str> {
    // A counter's --clock value is its name (loop_clock's table).
    let asked = match clock {
        LoopClockArg::Vdso => return None,
        LoopClockArg::Auto => None,
        LoopClockArg::Tsc | LoopClockArg::Cntvct => clock.to_possible_value().map(|v| v.get_name().to_string()),
    };
    let usable = match (asked.as_deref(), crate::loop_clock::counter_name(arch)) {
        (Some(a), Some(here)) if a != here => Err(format!("this machine is {arch}: its counter is --clock {here}")),
        _ => crate::loop_clock::counter_usable(root, arch),
    };
    match usable {
        Ok(name) => Some(name),
        Err(why) => {
            match asked {
                Some(a) => say!("--clock {a}: {why}; the probe reads clock_gettime instead"),
                None => say!("the CPU's counter (the default clock): {why}; the probe reads clock_gettime instead"),
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn mode(args: &[&str]) -> Result<Mode> {
        let cli = crate::cli::Cli::try_parse_from([&["jitterwatch"], args].concat()).unwrap();
        Mode::of(&cli.watch)
    }

    #[test]
    fn the_mode_is_decided_from_the_command_line() {
        assert_eq!(mode(&[]).unwrap(), Mode::Spin);
        assert_eq!(mode(&["--probe", "wakeup"]).unwrap(), Mode::Wakeup { period_ns: 1_000_000 });
        assert_eq!(mode(&["--probe", "wakeup", "--period", "250us"]).unwrap(), Mode::Wakeup { period_ns: 250_000 });
        assert!(matches!(mode(&["--pid", "7"]).unwrap(), Mode::Passive(f) if f.tgids == [7]));
        assert_eq!(
            [&[][..], &["--probe", "wakeup"], &["--tid", "3"]].map(|a| mode(a).unwrap().method().label()),
            ["probe", "wakeup", "passive"]
        );
        let e = mode(&["--period", "1ms"]).unwrap_err().to_string();
        assert_eq!(e, "--period and --timer-slack are the wake-up probe's: add --probe wakeup");
    }

    #[test]
    fn the_loop_reads_the_counter_of_its_own_architecture() {
        let d = tempfile::tempdir().unwrap();
        let cs = d.path().join("sys/devices/system/clocksource/clocksource0");
        std::fs::create_dir_all(&cs).unwrap();
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::write(d.path().join("proc/cpuinfo"), "Features\t: fp asimd\n").unwrap();
        std::fs::write(cs.join("current_clocksource"), "arch_sys_counter\n").unwrap();
        let arm = |c| counter_loop(d.path(), c, "aarch64");
        assert_eq!([LoopClockArg::Auto, LoopClockArg::Cntvct].map(arm), [Some("cntvct"); 2]);
        // Another architecture's counter, or none asked for: clock_gettime.
        assert_eq!([LoopClockArg::Tsc, LoopClockArg::Vdso].map(arm), [None; 2]);
        assert_eq!(counter_loop(d.path(), LoopClockArg::Cntvct, "x86_64"), None);
        // The x86 checks still apply (no invariant-TSC flags here).
        assert_eq!(counter_loop(d.path(), LoopClockArg::Auto, "x86_64"), None);
    }

    /// A counter's --clock value is its name in loop_clock's table: the
    /// one place that says which architecture has which counter.
    #[test]
    fn each_counter_clock_value_names_a_counter() {
        for c in [LoopClockArg::Tsc, LoopClockArg::Cntvct] {
            let v = c.to_possible_value().unwrap();
            assert!(crate::loop_clock::is_counter(v.get_name()), "{}", v.get_name());
        }
        for c in [LoopClockArg::Auto, LoopClockArg::Vdso] {
            assert!(!crate::loop_clock::is_counter(c.to_possible_value().unwrap().get_name()));
        }
    }
}
