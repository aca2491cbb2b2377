//! The host's speed on fixed work (assets/yardstick.rs), beside every run:
//! a figure that moved is read against it before it is read as ours.
//! Measured at the start and at the end of the run (the host drifts
//! within one too), on the housekeeping CPU, where the collector runs.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::util::{output, Spread};

/// Runs of the yardstick at each end of a bench run.
const RUNS: usize = 5;

/// The yardstick's two numbers, medians of a few runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Speed {
    /// A random pointer chase over 32 MiB, ns a load.
    pub chase_ns: f64,
    /// A chain of dependent multiply-adds, ns a step.
    pub alu_ns: f64,
}

/// At the run's start and end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSpeed {
    pub start: Speed,
    pub end: Speed,
}

/// The yardstick `exe` run RUNS times on `cpu`: the medians.
pub fn measure(exe: &Path, cpu: usize) -> Result<Speed> {
    let (mut chase, mut alu) = (vec![], vec![]);
    for _ in 0..RUNS {
        let out = output(Command::new("taskset").arg("-c").arg(cpu.to_string()).arg(exe))?;
        let s = parse(&out).with_context(|| format!("the yardstick printed {out:?}"))?;
        chase.push(s.chase_ns);
        alu.push(s.alu_ns);
    }
    Ok(Speed { chase_ns: Spread::of(&chase).median, alu_ns: Spread::of(&alu).median })
}

/// `chase_ns=… alu_ns=…` as the yardstick prints it.
fn parse(out: &str) -> Option<Speed> {
    let field = |k: &str| -> Option<f64> {
        out.split_whitespace().find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse().ok()).filter(|v: &f64| v.is_finite() && *v > 0.0)
    };
    Some(Speed { chase_ns: field("chase_ns")?, alu_ns: field("alu_ns")? })
}

/// The first run in the history that measured the host: its date, its
/// commit and its speed.
pub struct First<'a> {
    pub date: &'a str,
    pub commit: &'a str,
    pub speed: HostSpeed,
}

/// The Machine table's row: this run's speed, and how it compares with
/// the first run that measured one (a ratio above 1: slower now).
pub fn describe(now: Option<&HostSpeed>, first: Option<First>) -> String {
    let Some(now) = now else {
        return "not measured".into();
    };
    let mut s = format!(
        "fixed work on the housekeeping CPU: a random pointer chase over 32 MiB {:.1} ns a load, \
         a dependent multiply-add {:.2} ns a step (at the run's start; at its end {:.1} and {:.2})",
        now.start.chase_ns, now.start.alu_ns, now.end.chase_ns, now.end.alu_ns
    );
    if let Some(first) = first {
        let then = first.speed;
        if then != *now {
            s += &format!(
                "; against the first run that measured it ({} `{}`): {:.2}× and {:.2}× the time (above 1: slower now)",
                first.date,
                first.commit,
                now.start.chase_ns / then.start.chase_ns,
                now.start.alu_ns / then.start.alu_ns
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(commit: &str, speed: HostSpeed) -> Option<First<'_>> {
        Some(First { date: "2026-11-28 12:00 UTC", commit, speed })
    }

    fn at(chase_ns: f64, alu_ns: f64) -> HostSpeed {
        let s = Speed { chase_ns, alu_ns };
        HostSpeed { start: s, end: s }
    }

    #[test]
    fn reads_what_the_yardstick_prints() {
        assert_eq!(parse("chase_ns=147.971 alu_ns=1.1159 end=0 x=1\n"), Some(Speed { chase_ns: 147.971, alu_ns: 1.1159 }));
        assert_eq!(parse("chase_ns=147.971\n"), None);
        assert_eq!(parse("chase_ns=nan alu_ns=1\n"), None);
        assert_eq!(parse("chase_ns=0 alu_ns=1\n"), None);
    }

    #[test]
    fn a_run_is_compared_with_the_first_that_measured_the_host() {
        let s = describe(Some(&at(180.0, 1.5)), first("a", at(100.0, 1.0)));
        assert!(s.contains("180.0 ns a load"), "{s}");
        assert!(s.contains("`a`): 1.80× and 1.50× the time"), "{s}");
        // The first run to measure it has nothing before it to compare with.
        let s = describe(Some(&at(100.0, 1.0)), first("a", at(100.0, 1.0)));
        assert!(!s.contains("against"), "{s}");
        assert!(!describe(Some(&at(100.0, 1.0)), None).contains("against"));
        assert_eq!(describe(None, first("a", at(100.0, 1.0))), "not measured");
    }
}
