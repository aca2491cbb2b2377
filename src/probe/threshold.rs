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
