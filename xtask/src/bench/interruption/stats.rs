//! Figure 3b's kernel-side reading: the kernel's BPF statistics
//! (run_time_ns / run_cnt of each program) over runs of the same loop,
//! our programs doing their work, then returning at once, summed over the
//! programs one interruption of each kind runs. The second sum is what the
//! statistics themselves cost (two clock reads a run) plus the dispatch
//! to a program that only returns: the first less the second is our
//! programs' work as the kernel's books see it, beside the end-to-end one.

use super::{ByKind, Kind};
use crate::bench::measure::{is_prog, ProgCost};

/// One kind's programs, their median ns/run summed (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatsSum {
    /// Our programs doing their work.
    pub whole: f64,
    /// The same programs returning at once (JITTERWATCH_BPF_FLOOR=1).
    pub floor: f64,
}

impl StatsSum {
    /// What the programs' work adds, the statistics' own cost taken out.
    pub fn work(&self) -> f64 {
        self.whole - self.floor
    }
}

/// Per kind, its programs' sums; None for a kind without its own programs
/// (the warm IPI) or where one of them has no figure in either set.
pub fn per_kind(whole: &[ProgCost], floor: &[ProgCost]) -> ByKind<Option<StatsSum>> {
    Kind::ALL.map(|k| {
        let progs = k.programs()?;
        let sum = |set: &[ProgCost]| {
            progs
                .iter()
                .map(|name| set.iter().find(|p| is_prog(&p.name, name) && p.ns_per_run.n > 0).map(|p| p.ns_per_run.median))
                .sum::<Option<f64>>()
        };
        Some(StatsSum { whole: sum(whole)?, floor: sum(floor)? })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::spread::Spread;

    fn prog(name: &str, ns: &[f64]) -> ProgCost {
        ProgCost { name: name.into(), run_cnt: Spread::of(&[100.0]), ns_per_run: Spread::of(ns) }
    }

    #[test]
    fn each_kind_sums_its_own_programs_less_the_floor() {
        let whole = vec![
            prog("on_reschedule_entry", &[300.0, 200.0, 400.0]),
            prog("on_reschedule_exit", &[150.0]),
            prog("on_local_timer_entry", &[250.0]),
        ];
        let floor = vec![prog("on_reschedule_entry", &[60.0]), prog("on_reschedule_exit", &[55.0]), prog("on_local_timer_entry", &[50.0])];
        let got = per_kind(&whole, &floor);
        let resched = got[Kind::Resched as usize].expect("both programs ran");
        assert_eq!(resched, StatsSum { whole: 450.0, floor: 115.0 });
        assert_eq!(resched.work(), 335.0);
        assert_eq!(got[Kind::Tick as usize], None, "the tick's hrtimer programs have no figure");
        assert_eq!(got[Kind::IpiWarm as usize], None, "the warm IPI's programs are the cold one's");
    }

    #[test]
    fn a_program_missing_from_the_floor_leaves_the_kind_unmeasured() {
        let whole = vec![prog("on_reschedule_entry", &[300.0]), prog("on_reschedule_exit", &[150.0])];
        let floor = vec![prog("on_reschedule_entry", &[60.0]), prog("on_reschedule_exit", &[])];
        assert_eq!(per_kind(&whole, &floor)[Kind::Resched as usize], None);
    }

    #[test]
    fn a_switch_counts_twice_by_whichever_name_was_loaded() {
        for switch in ["on_switch_out", "on_sched_switch", "on_sched_switch_old"] {
            let set = |ns: f64| {
                ["on_reschedule_entry", "on_reschedule_exit", switch, "on_work_start", "on_work_end"]
                    .into_iter()
                    .map(|name| prog(name, &[ns]))
                    .collect::<Vec<_>>()
            };
            let work = per_kind(&set(100.0), &set(40.0))[Kind::Work as usize].expect("every program ran");
            // The kworker's switch in and its switch out: six runs.
            assert_eq!((work.whole, work.floor), (600.0, 240.0), "{switch}");
        }
    }
}
