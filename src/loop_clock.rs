//! The clock the probe's loop reads. `Vdso` is clock_gettime(CLOCK_MONOTONIC)
//! through the vDSO (≈20 ns here); `Tsc` reads the time-stamp counter
//! directly (≈10 ns), calibrated against CLOCK_MONOTONIC while the probe
//! measures its floor, so every figure the probe publishes (gaps, progress,
//! floor) is in CLOCK_MONOTONIC ns and lines up with BPF's timestamps as
//! before. The loop works in the clock's own units; conversions happen on
//! the cold paths (a gap, a publish every ~100 µs).

use std::path::Path;

use crate::clock::now_ns;

pub trait LoopClock: Copy {
    /// A reading, in the clock's units.
    fn read(self) -> u64;
    /// A reading as CLOCK_MONOTONIC ns.
    fn to_ns(self, t: u64) -> u64;
    /// A difference of readings as ns.
    fn delta_ns(self, d: u64) -> u64;
    /// ns as a difference of readings (at least 1).
    fn delta_units(self, ns: u64) -> u64;
    /// The clock re-anchored on CLOCK_MONOTONIC (called about once a
    /// second, off the per-iteration path), so it cannot drift away.
    fn refine(self) -> Self;
}

#[derive(Debug, Clone, Copy)]
pub struct Vdso;

impl LoopClock for Vdso {
    #[inline(always)]
    fn read(self) -> u64 {
        now_ns()
    }
    #[inline(always)]
    fn to_ns(self, t: u64) -> u64 {
        t
    }
    #[inline(always)]
    fn delta_ns(self, d: u64) -> u64 {
        d
    }
    #[inline(always)]
    fn delta_units(self, ns: u64) -> u64 {
        ns.max(1)
    }
    #[inline(always)]
    fn refine(self) -> Self {
        self
    }
}

/// ns = base_ns + (tsc - base_tsc) × mult / 2^32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tsc {
    /// The first calibration pair: the rate is measured from here, over an
    /// ever longer span.
    start: (u64, u64),
    base_tsc: u64,
    base_ns: u64,
    /// ns per tick, × 2^32.
    mult: u64,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64 (usable() checked the
    // TSC is invariant before this clock is chosen).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Elsewhere `tsc_usable` refuses the TSC, so no `Tsc` is ever made and the
/// loop reads the vDSO clock (reading arm64's CNTVCT_EL0 directly instead
/// is not done yet: issue #45).
#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    unreachable!("the TSC clock is x86_64's; tsc_usable() refuses it here")
}

/// A (tsc, ns) pair read as close together as this machine allows: the
/// TSC read between two clock reads, of the narrowest of a few tries.
fn pair() -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..16 {
        let a = now_ns();
        let t = rdtsc();
        let b = now_ns();
        if b - a < best.2 {
            best = (t, a + (b - a) / 2, b - a);
        }
    }
    (best.0, best.1)
}

impl Tsc {
    /// The start of a calibration: the finish comes at least a few ms later.
    pub fn begin() -> (u64, u64) {
        pair()
    }

    /// Completes a calibration begun with `begin`.
    pub fn finish(start: (u64, u64)) -> Option<Tsc> {
        Self::anchored(start, pair())
    }

    fn anchored(start: (u64, u64), now: (u64, u64)) -> Option<Tsc> {
        let ((t0, n0), (t1, n1)) = (start, now);
        let (dt, dn) = (t1.checked_sub(t0)?, n1.checked_sub(n0)?);
        if dt == 0 || dn < 1_000_000 {
            return None;
        }
        let mult = u64::try_from((u128::from(dn) << 32) / u128::from(dt)).ok()?;
        Some(Tsc { start, base_tsc: t1, base_ns: n1, mult })
    }

    /// How far the TSC, converted, is from CLOCK_MONOTONIC now, ns (+: ahead).
    pub fn drift_ns(self) -> i64 {
        let (t, n) = pair();
        self.to_ns(t) as i64 - n as i64
    }

    #[cfg(test)]
    fn with(base_tsc: u64, base_ns: u64, ghz: f64) -> Tsc {
        Tsc { start: (base_tsc, base_ns), base_tsc, base_ns, mult: ((1.0 / ghz) * 4_294_967_296.0) as u64 }
    }
}

impl LoopClock for Tsc {
    #[inline(always)]
    fn read(self) -> u64 {
        rdtsc()
    }
    fn to_ns(self, t: u64) -> u64 {
        if t >= self.base_tsc {
            self.base_ns + self.delta_ns(t - self.base_tsc)
        } else {
            self.base_ns.saturating_sub(self.delta_ns(self.base_tsc - t))
        }
    }
    fn delta_ns(self, d: u64) -> u64 {
        ((u128::from(d) * u128::from(self.mult)) >> 32) as u64
    }
    fn delta_units(self, ns: u64) -> u64 {
        (((u128::from(ns) << 32) / u128::from(self.mult.max(1))) as u64).max(1)
    }
    fn refine(self) -> Self {
        Self::anchored(self.start, pair()).unwrap_or(self)
    }
}

/// Whether the TSC can stand in for CLOCK_MONOTONIC here: x86_64, invariant
/// (constant_tsc and nonstop_tsc: one rate whatever the frequency and idle
/// state), and the kernel's own clocksource (so it agrees with BPF's
/// timestamps). Err says why not, in a few words.
pub fn tsc_usable(root: &Path) -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("not an x86_64 machine".into());
    }
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).map_err(|e| format!("cannot read /proc/cpuinfo: {e}"))?;
    let flags: Vec<&str> =
        cpuinfo.lines().find_map(|l| l.strip_prefix("flags")).map(|f| f.split_whitespace().collect()).unwrap_or_default();
    for need in ["constant_tsc", "nonstop_tsc"] {
        if !flags.contains(&need) {
            return Err(format!("the TSC is not invariant (no {need} flag)"));
        }
    }
    let cs = std::fs::read_to_string(root.join("sys/devices/system/clocksource/clocksource0/current_clocksource")).unwrap_or_default();
    match cs.trim() {
        "tsc" => Ok(()),
        "" => Err("the kernel's clocksource cannot be read".into()),
        other => Err(format!("the kernel's clocksource is {}, not tsc", crate::sanitize::visible(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_at_a_few_ghz() {
        let c = Tsc::with(1_000_000, 5_000_000_000, 2.5);
        assert_eq!(c.to_ns(1_000_000), 5_000_000_000);
        // 2.5 GHz: 2500 ticks are 1 µs (±1 ns of rounding).
        assert!(c.to_ns(1_002_500).abs_diff(5_000_001_000) <= 1);
        assert!(c.delta_ns(25).abs_diff(10) <= 1);
        assert!(c.delta_units(1_000).abs_diff(2_500) <= 1);
        assert_eq!(c.delta_units(0), 1);
        // Hours of ticks do not overflow.
        assert!(c.delta_ns(2_500_000_000 * 3_600).abs_diff(3_600_000_000_000) < 1_000);
        assert!(c.to_ns(0) < 5_000_000_000);
    }

    #[test]
    fn unusable_tscs_say_why() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/clocksource/clocksource0")).unwrap();
        std::fs::write(d.path().join("proc/cpuinfo"), "flags\t\t: fpu tsc constant_tsc\n").unwrap();
        assert_eq!(tsc_usable(d.path()), Err("the TSC is not invariant (no nonstop_tsc flag)".into()));
        std::fs::write(d.path().join("proc/cpuinfo"), "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n").unwrap();
        std::fs::write(d.path().join("sys/devices/system/clocksource/clocksource0/current_clocksource"), "kvm-clock\n").unwrap();
        assert_eq!(tsc_usable(d.path()), Err("the kernel's clocksource is kvm-clock, not tsc".into()));
        std::fs::write(d.path().join("sys/devices/system/clocksource/clocksource0/current_clocksource"), "tsc\n").unwrap();
        assert_eq!(tsc_usable(d.path()), Ok(()));
    }
}
