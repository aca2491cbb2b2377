//! What a watch run measures, decided once from the command line: the
//! spin probe, the wake-up probe, or passive mode (no probe: the watched
//! threads' own time). Every later choice asks the `Mode`.

use anyhow::{bail, Result};

use crate::cli::{ProbeArg, WatchArgs};

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
        Ok(match (args.passive_filter(), args.probe) {
            (Some(filter), _) => Mode::Passive(filter),
            (None, ProbeArg::Wakeup) => Mode::Wakeup { period_ns: args.period.unwrap_or(DEFAULT_PERIOD_NS) },
            (None, ProbeArg::Spin) => Mode::Spin,
        })
    }

    /// As the summary and the metrics' `mode` label write it.
    pub fn label(&self) -> &'static str {
        match self {
            Mode::Spin => "probe",
            Mode::Wakeup { .. } => "wakeup",
            Mode::Passive(_) => "passive",
        }
    }

    pub fn is_passive(&self) -> bool {
        matches!(self, Mode::Passive(_))
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
        assert_eq!([&[][..], &["--probe", "wakeup"], &["--tid", "3"]].map(|a| mode(a).unwrap().label()), ["probe", "wakeup", "passive"]);
        let e = mode(&["--period", "1ms"]).unwrap_err().to_string();
        assert_eq!(e, "--period and --timer-slack are the wake-up probe's: add --probe wakeup");
    }
}
