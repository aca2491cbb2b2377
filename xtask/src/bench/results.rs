//! What one bench run measured, and the machine it ran on. The bottom of
//! the bench's one-way chain: results → figures → verdicts → report; this
//! module uses none of those.

use serde::{Deserialize, Serialize};

use super::capacity::{Capacity, Memory};
use super::machine::MachineCost;
use super::measure::{BpfCost, Floor};

/// The machine a run measured on, as the history records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Machine {
    pub kernel: String,
    pub cpu_model: String,
    pub nproc: usize,
    pub clocksource: String,
    pub virt: String,
    pub tools: String,
    pub watched: usize,
    pub house: usize,
    pub runtime_s: f64,
    pub quick: bool,
    /// How idle the machine was before the bench (other load skews it).
    pub quiet: String,
    /// The host's speed on fixed work (runs before it was measured: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<super::yardstick::HostSpeed>,
}

pub struct Results {
    pub floor: Floor,
    pub machine: MachineCost,
    pub bpf: BpfCost,
    pub cap: Capacity,
    pub mem: Memory,
    pub replay: Vec<super::replay::Row>,
    pub wakeup: Vec<super::wakeup::Row>,
    /// 4c: None when it did not run.
    pub mix: Option<super::passive::PassiveMix>,
    /// 8b: None when it did not run.
    pub observer: Option<super::wakeup::Observer>,
    /// 4d: None when it did not run.
    pub screen: Option<super::screen::Screen>,
    /// 7b: None when it did not run.
    pub explain: Option<super::explain_scale::Scale>,
    /// 3b: None when it did not run.
    pub per_interruption: Option<super::interruption::PerInterruption>,
    pub recorder: Vec<super::recorder::Run>,
    /// How many tracepoints the bpftrace script attached.
    pub bt_probes: usize,
}

/// Why the switch hook's part of figure 2 has no value.
#[derive(Debug, Clone, PartialEq)]
pub enum NoPart {
    /// No finite reading of the hook, its null or the null's spread.
    NotMeasured,
    /// It reads further below its null than the null's spread: a bias the
    /// harness does not explain, never counted as 0.
    BelowNull(String),
}

/// The switch hook's part of figure 2, % of the unwatched CPU, from its
/// paired measurement and the same harness opening nothing (the null, with
/// its half-spread). A reading within the null's spread of the null is that
/// close to 0 and counts as what it read (at least 0: a hook cannot speed
/// the CPU up).
pub fn hook_part(hook: f64, null: f64, null_half_spread: f64) -> Result<f64, NoPart> {
    if !(hook.is_finite() && null.is_finite() && null_half_spread.is_finite() && null_half_spread >= 0.0) {
        return Err(NoPart::NotMeasured);
    }
    if hook < null - null_half_spread {
        return Err(NoPart::BelowNull(format!("reads {hook:+.2}% against a null of {null:+.2} ± {null_half_spread:.2}%")));
    }
    Ok(hook.max(0.0))
}

impl Results {
    /// The harness's reading of the hook this run took: the sched_switch
    /// program where it ran on the unwatched CPU, else the per-CPU event.
    pub fn taken_hook(&self) -> &super::spread::Spread {
        let m = &self.machine;
        if self.bpf.switch_everywhere() {
            &m.hook_tp_pct
        } else {
            &m.hook_pct
        }
    }

    /// That hook's part, from this run's spreads.
    pub fn hook(&self) -> Result<f64, NoPart> {
        let (h, n) = (self.taken_hook(), &self.machine.hook_null_pct);
        if h.n == 0 || n.n == 0 {
            return Err(NoPart::NotMeasured);
        }
        hook_part(h.median, n.median, (n.max - n.min) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_reading_below_its_null_is_unresolved_not_zero() {
        assert_eq!(hook_part(0.05, 0.0, 0.1), Ok(0.05));
        assert_eq!(hook_part(-0.05, 0.0, 0.1), Ok(0.0), "within the null: that close to 0");
        match hook_part(-0.9, 0.0, 0.1) {
            Err(NoPart::BelowNull(why)) => assert!(why.contains("-0.90%"), "{why}"),
            other => panic!("{other:?}"),
        }
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(hook_part(bad, 0.0, 0.1), Err(NoPart::NotMeasured));
            assert_eq!(hook_part(0.1, bad, 0.1), Err(NoPart::NotMeasured));
            assert_eq!(hook_part(0.1, 0.0, bad), Err(NoPart::NotMeasured));
        }
    }
}
