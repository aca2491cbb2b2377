//! `--on-stall CMD`: a command of the user's run at a stall, as rtla's
//! `--on-threshold` actions are, with the stall's fields in its
//! environment (`JW_CPU`, `JW_GAP_NS`, `JW_CAUSE`, ...). It runs on a
//! thread of its own: the collector hands a stall over without waiting
//! (a full hand-off is a skipped stall, counted), so a slow, hung or
//! failing command never stalls the measuring.
//!
//! Which stalls: those at or over `--fail-above`, else `--stop-above`,
//! else every stall over the threshold. How often: one command at a time,
//! and at most one started per [`MIN_INTERVAL_NS`]; stalls that met the
//! rule meanwhile are counted and the next command sees how many
//! (`JW_SKIPPED`).

mod runner;

use std::ffi::OsString;

use crate::interval::Hiccup;

pub use runner::Runner;

/// At most one command started per second: a storm of stalls must not
/// become a storm of processes on the machine being measured.
pub const MIN_INTERVAL_NS: u64 = 1_000_000_000;

/// One stall's fields as the command's environment gets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub cpu: u32,
    pub time_ns: u64,
    pub offset_ns: u64,
    pub gap_ns: u64,
    /// The largest cause, `kind:name` as the CSV writes it (escaped).
    pub cause: String,
    pub cause_ns: u64,
    pub unexplained_ns: u64,
    pub source: &'static str,
    /// Passive mode: the watched thread, `comm[tid]` (escaped).
    pub thread: Option<(u32, String)>,
    pub skipped: u64,
    /// The bound it met (None: the threshold).
    pub bound_ns: Option<u64>,
}

impl Fields {
    pub fn of(h: &Hiccup, start_ns: u64, skipped: u64, bound_ns: Option<u64>) -> Self {
        let top = h.all_causes().next();
        Fields {
            cpu: h.cpu,
            time_ns: h.t0,
            offset_ns: h.t0.saturating_sub(start_ns),
            gap_ns: h.gap,
            cause: crate::export::cause_label(top.map_or(crate::cause::CauseId::UNEXPLAINED, |(c, _)| c)),
            cause_ns: top.map_or(0, |(_, ns)| ns),
            unexplained_ns: h.unexplained,
            source: h.source.as_str(),
            thread: h.victim.map(|v| (v.tid, v.name())),
            skipped,
            bound_ns,
        }
    }

    /// The environment the command gets.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut e: Vec<(&'static str, OsString)> = vec![
            ("JW_CPU", self.cpu.to_string().into()),
            ("JW_TIME_NS", self.time_ns.to_string().into()),
            ("JW_OFFSET_NS", self.offset_ns.to_string().into()),
            ("JW_GAP_NS", self.gap_ns.to_string().into()),
            ("JW_CAUSE", self.cause.clone().into()),
            ("JW_CAUSE_NS", self.cause_ns.to_string().into()),
            ("JW_UNEXPLAINED_NS", self.unexplained_ns.to_string().into()),
            ("JW_SOURCE", self.source.into()),
            ("JW_SKIPPED", self.skipped.to_string().into()),
        ];
        if let Some(b) = self.bound_ns {
            e.push(("JW_BOUND_NS", b.to_string().into()));
        }
        if let Some((tid, name)) = &self.thread {
            e.push(("JW_TID", tid.to_string().into()));
            e.push(("JW_THREAD", name.clone().into()));
        }
        e
    }
}

/// Whether a stall is handed to the command: the rule and the rate limit,
/// as pure logic (`now`: the collector's clock when it sees the stall).
#[derive(Debug, Default)]
pub struct Gate {
    pub bound_ns: Option<u64>,
    last_start: Option<u64>,
    skipped: u64,
}

impl Gate {
    pub fn new(bound_ns: Option<u64>) -> Self {
        Gate { bound_ns, last_start: None, skipped: 0 }
    }

    /// Some(stalls skipped before it) when `h` is to be handed over now;
    /// `idle`: no command runs. A stall that meets the rule but is not
    /// handed over is counted for the next.
    pub fn admit(&mut self, gap_ns: u64, now: u64, idle: bool) -> Option<u64> {
        if self.bound_ns.is_some_and(|b| gap_ns < b) {
            return None;
        }
        let soon = self.last_start.is_some_and(|t| now < t.saturating_add(MIN_INTERVAL_NS));
        if !idle || soon {
            self.skipped += 1;
            return None;
        }
        self.last_start = Some(now);
        Some(std::mem::take(&mut self.skipped))
    }

    /// A hand-off that failed after `admit` (the runner was busy after
    /// all): that stall and those before it are still to be told.
    pub fn refused(&mut self, skipped_before: u64) {
        self.skipped += skipped_before + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cause::Cause;
    use crate::interval::hiccup;

    #[test]
    fn the_gate_keeps_the_rule_and_the_rate() {
        let s = 1_000_000_000;
        let mut g = Gate::new(Some(100));
        assert_eq!(g.admit(99, 0, true), None, "under the bound: not even counted");
        assert_eq!(g.admit(100, 0, true), Some(0));
        assert_eq!(g.admit(150, s / 2, true), None, "within a second of the last start");
        assert_eq!(g.admit(150, s + 1, false), None, "a command still runs");
        assert_eq!(g.admit(99, s + 2, true), None);
        assert_eq!(g.admit(120, s + 3, true), Some(2), "the two skipped are told");
        g.refused(0);
        assert_eq!(g.admit(500, 3 * s, true), Some(1));
        // No bound: every stall over the threshold meets the rule.
        assert_eq!(Gate::new(None).admit(1, 0, true), Some(0));
    }

    #[test]
    fn the_fields_are_the_stalls_escaped() {
        let mut h = hiccup(3, 5_000, vec![(Cause::Softirq(1), 700)], 300);
        h.victim = Some(crate::interval::Victim { tid: 42, comm: *b"ev\x1b[2Jil\0\0\0\0\0\0\0\0" });
        let f = Fields::of(&h, 1_000, 7, Some(900));
        let env: std::collections::HashMap<_, _> = f.env().into_iter().collect();
        let get = |k: &str| env[k].to_str().unwrap().to_string();
        assert_eq!(get("JW_CPU"), "3");
        assert_eq!(get("JW_TIME_NS"), "5000");
        assert_eq!(get("JW_OFFSET_NS"), "4000");
        assert_eq!(get("JW_GAP_NS"), "1000");
        assert_eq!(get("JW_CAUSE"), "softirq:TIMER");
        // Escaped as the CSV's causes are: `;` and `=` too.
        let odd = Cause::Task { comm: *b"a;b=c\0\0\0\0\0\0\0\0\0\0\0", pid: Some(9) };
        let f = Fields::of(&hiccup(3, 5_000, vec![(odd, 700)], 0), 1_000, 0, None);
        assert_eq!(f.cause, "task:a\\;b\\=c[9]");
        assert_eq!(get("JW_CAUSE_NS"), "700");
        assert_eq!(get("JW_UNEXPLAINED_NS"), "300");
        assert_eq!(get("JW_SOURCE"), "probe");
        assert_eq!(get("JW_SKIPPED"), "7");
        assert_eq!(get("JW_BOUND_NS"), "900");
        assert_eq!(get("JW_TID"), "42");
        assert_eq!(get("JW_THREAD"), "ev\\x1b[2Jil[42]");
    }
}
