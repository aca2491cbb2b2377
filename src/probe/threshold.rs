//! The spin probe's threshold: the smallest gap it reports.
//!
//! By default `max(1 µs, 8 × the loop floor)`. Below a microsecond an idle
//! CPU's gaps are mostly the loop's own cache and TLB misses and the
//! host's small pauses, which no kernel event explains: at 8 × the floor
//! (80 ns with the TSC here) a run on an idle CPU reported thousands of
//! hiccups a second, most of them unexplained, and the culprits a user
//! came for were lost among them. rtla osnoise's default threshold is
//! 1 µs too. `--threshold auto` keeps the pure 8 × floor rule of hiccups
//! (sysjitter's tool) for whoever wants the sub-µs gaps; an explicit
//! duration is taken as given.

use crate::units::ns;

/// The default threshold is never under this.
pub const DEFAULT_MIN_NS: u64 = 1_000;
/// [`DEFAULT_MIN_NS`] as the start line writes it.
const DEFAULT_MIN: &str = "1µs";
/// The auto threshold, in loop floors (hiccups' rule).
pub const AUTO_FLOORS: u64 = 8;

/// How the threshold is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    /// `max(1 µs, 8 × the loop floor)`: no `--threshold`.
    Default,
    /// `8 × the loop floor`: `--threshold auto`.
    Auto,
    /// `--threshold DUR`, in ns.
    Given(u64),
}

impl Threshold {
    /// The threshold in ns for a loop floor of `floor_ns`.
    pub fn ns(self, floor_ns: u64) -> u64 {
        match self {
            Threshold::Default => (AUTO_FLOORS * floor_ns).max(DEFAULT_MIN_NS),
            Threshold::Auto => AUTO_FLOORS * floor_ns,
            Threshold::Given(t) => t,
        }
    }

    /// The duration the user gave, if any (the wake-up probe and passive
    /// mode have rules of their own for the others).
    pub fn given(self) -> Option<u64> {
        match self {
            Threshold::Given(t) => Some(t),
            Threshold::Default | Threshold::Auto => None,
        }
    }

    /// What the rule gave, in words, for the start line: e.g.
    /// `threshold 1.0µs (the default: max(1µs, 8 × the loop floor of 21ns);
    /// --threshold auto for 8 × floor = 168ns)`.
    /// A threshold of 0 is not known yet: the probe has not finished
    /// measuring its floor (a CPU others keep busy).
    pub fn describe(self, floor_ns: u64, threshold_ns: u64) -> String {
        let auto = AUTO_FLOORS.saturating_mul(floor_ns);
        let (thr, floor) = (ns(threshold_ns), ns(floor_ns));
        match self {
            _ if threshold_ns == 0 => format!(
                "threshold not known yet: the probe has not finished measuring its loop floor (is the CPU busy?); {}",
                match self {
                    Threshold::Default => format!("the default: max({DEFAULT_MIN}, {AUTO_FLOORS} × the loop floor)"),
                    Threshold::Auto => format!("--threshold auto: {AUTO_FLOORS} × the loop floor"),
                    Threshold::Given(t) => format!("{} as given", ns(t)),
                }
            ),
            Threshold::Default if auto < DEFAULT_MIN_NS => format!(
                "threshold {thr} (the default: max({DEFAULT_MIN}, {AUTO_FLOORS} × the loop floor of {floor}); --threshold auto for {AUTO_FLOORS} × floor = {})",
                ns(auto)
            ),
            Threshold::Default => {
                format!("threshold {thr} (the default: max({DEFAULT_MIN}, {AUTO_FLOORS} × the loop floor of {floor}))")
            }
            Threshold::Auto => format!("threshold {thr} (--threshold auto: {AUTO_FLOORS} × the loop floor of {floor})"),
            Threshold::Given(_) => format!("threshold {thr} (as given; the loop floor is {floor})"),
        }
    }
}

/// A gate on the run's stalls (`--fail-above`, `--stop-above`): the
/// smaller of the two. Stalls under the threshold are never seen, so a
/// gate under it could never close and its run would pass blind. A
/// threshold the user gave is refused under a gate; a default one (the
/// spin probe's rule, the wake-up probe's calibration, passive mode's
/// 1 µs) is lowered to the gate, said on the start line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// The flag, as the user wrote it.
    pub flag: &'static str,
    pub ns: u64,
}

impl Gate {
    pub fn of(fail_above: Option<u64>, stop_above: Option<u64>) -> Option<Gate> {
        let fail = fail_above.map(|ns| Gate { flag: "--fail-above", ns });
        let stop = stop_above.map(|ns| Gate { flag: "--stop-above", ns });
        match (fail, stop) {
            (Some(f), Some(s)) => Some(if s.ns < f.ns { s } else { f }),
            (f, s) => f.or(s),
        }
    }

    /// A given threshold above the gate: the one line that refuses it.
    pub fn refuses(&self, rule: Option<Threshold>) -> Option<String> {
        let given = rule.and_then(Threshold::given).filter(|&t| t > self.ns)?;
        Some(format!(
            "{} {} is under --threshold {}: stalls under the threshold are never seen, so the gate could never close; give a --threshold of at most {}, or leave it out (it is then lowered to the gate)",
            self.flag,
            ns(self.ns),
            ns(given),
            ns(self.ns)
        ))
    }

    /// `threshold_ns` lowered to the gate, where a gate is.
    pub fn cap(gate: Option<Gate>, threshold_ns: u64) -> u64 {
        gate.map_or(threshold_ns, |g| threshold_ns.min(g.ns))
    }

    /// What the start line adds when the gate lowered the rule's
    /// `rule_ns`: e.g. ` (lowered to --fail-above: the rule gives 50ms)`.
    pub fn lowered(gate: Option<Gate>, rule_ns: u64) -> String {
        match gate {
            Some(g) if g.ns < rule_ns => format!(", lowered to {} {} (the rule gives {})", g.flag, ns(g.ns), ns(rule_ns)),
            _ => String::new(),
        }
    }
}

/// `--threshold`'s value: `auto`, or a duration above 0 (`500ns`, `2us`).
pub fn parse(s: &str) -> Result<Threshold, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(Threshold::Auto);
    }
    match crate::duration::positive_ns(s) {
        Ok(t) => Ok(Threshold::Given(t)),
        Err(e) => Err(format!("{e}; or auto for {AUTO_FLOORS} × the probe's loop floor")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_microsecond_unless_the_loop_is_slow() {
        assert_eq!(Threshold::Default.ns(9), 1_000);
        assert_eq!(Threshold::Default.ns(125), 1_000);
        assert_eq!(Threshold::Default.ns(200), 1_600);
        assert_eq!(Threshold::Auto.ns(9), 72);
        assert_eq!(Threshold::Auto.ns(200), 1_600);
        assert_eq!(Threshold::Given(500).ns(9), 500);
        assert_eq!(Threshold::Given(500).given(), Some(500));
        assert_eq!((Threshold::Default.given(), Threshold::Auto.given()), (None, None));
    }

    #[test]
    fn a_gate_under_a_given_threshold_is_refused_and_lowers_a_default_one() {
        assert_eq!(Gate::of(None, None), None);
        let fail = Gate::of(Some(2_000), None).unwrap();
        assert_eq!(fail, Gate { flag: "--fail-above", ns: 2_000 });
        assert_eq!(Gate::of(Some(5_000), Some(3_000)), Some(Gate { flag: "--stop-above", ns: 3_000 }), "the smaller gate");
        assert_eq!(Gate::of(Some(3_000), Some(3_000)).unwrap().flag, "--fail-above");
        let e = fail.refuses(Some(Threshold::Given(50_000_000))).unwrap();
        assert!(e.starts_with("--fail-above 2.0µs is under --threshold 50.0ms: "), "{e}");
        assert_eq!(fail.refuses(Some(Threshold::Given(2_000))), None, "a gate at the threshold sees its stalls");
        assert_eq!(fail.refuses(Some(Threshold::Default)), None);
        assert_eq!(fail.refuses(None), None);
        assert_eq!(Gate::cap(Some(fail), 50_000), 2_000);
        assert_eq!(Gate::cap(Some(fail), 1_000), 1_000);
        assert_eq!(Gate::cap(None, 50_000), 50_000);
        assert_eq!(Gate::lowered(Some(fail), 10_000), ", lowered to --fail-above 2.0µs (the rule gives 10.0µs)");
        assert_eq!(Gate::lowered(Some(fail), 1_000), "");
    }

    #[test]
    fn auto_or_a_positive_duration() {
        assert_eq!(parse("auto"), Ok(Threshold::Auto));
        assert_eq!(parse("AUTO"), Ok(Threshold::Auto));
        assert_eq!(parse("500ns"), Ok(Threshold::Given(500)));
        assert_eq!(parse("2us"), Ok(Threshold::Given(2_000)));
        let e = parse("fast").unwrap_err();
        assert!(e.starts_with("malformed duration \"fast\"") && e.ends_with("or auto for 8 × the probe's loop floor"), "{e}");
        assert!(parse("0ns").unwrap_err().contains("\"0ns\" is zero"));
    }

    #[test]
    fn the_start_line_says_the_rule_in_words() {
        assert_eq!(
            Threshold::Default.describe(21, 1_000),
            "threshold 1.0µs (the default: max(1µs, 8 × the loop floor of 21ns); --threshold auto for 8 × floor = 168ns)"
        );
        assert_eq!(Threshold::Default.describe(200, 1_600), "threshold 1.6µs (the default: max(1µs, 8 × the loop floor of 200ns))");
        assert_eq!(Threshold::Auto.describe(9, 72), "threshold 72ns (--threshold auto: 8 × the loop floor of 9ns)");
        assert_eq!(Threshold::Given(500).describe(9, 500), "threshold 500ns (as given; the loop floor is 9ns)");
        // Not measured yet (the floor still at its start value).
        assert_eq!(
            Threshold::Default.describe(u64::MAX, 0),
            "threshold not known yet: the probe has not finished measuring its loop floor (is the CPU busy?); the default: max(1µs, 8 × the loop floor)"
        );
        assert!(Threshold::Given(500).describe(u64::MAX, 0).ends_with("; 500ns as given"));
    }
}
