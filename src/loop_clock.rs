//! The clock the probe's loop reads. `Vdso` is clock_gettime(CLOCK_MONOTONIC)
//! through the vDSO (≈20 ns here); `Counter` reads the CPU's own counter
//! directly (x86_64's time-stamp counter, ≈10 ns; arm64's virtual counter
//! CNTVCT_EL0), calibrated against CLOCK_MONOTONIC while the probe
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

/// ns = base_ns + (counter - base_tsc) × mult / 2^32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
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
fn read_counter() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64 (counter_usable()
    // checked the TSC is invariant before this clock is chosen).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// arm64's virtual counter, read as the kernel's own vDSO reads it: an ISB
/// first, so the read is not hoisted above the loop's previous work (the
/// counter read is not ordered by itself; without it the loop would time
/// where the CPU speculated the read, not where it ran). Linux lets user
/// space read CNTVCT_EL0 (CNTKCTL_EL1.EL0VCTEN) wherever the vDSO does; a
/// kernel working round a timer erratum traps and emulates the read, which
/// the loop's floor then shows (µs, not ns).
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn read_counter() -> u64 {
    let v: u64;
    // SAFETY: reads a system register EL0 may read (see above); no memory
    // is touched.
    unsafe { core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

/// Elsewhere `counter_usable` refuses, so no `Counter` is ever made and the
/// loop reads the vDSO clock.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn read_counter() -> u64 {
    unreachable!("no counter clock on this architecture; counter_usable() refuses it")
}

/// A (counter, ns) pair read as close together as this machine allows:
/// the counter read between two clock reads, of the narrowest of a few tries.
fn pair() -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..16 {
        let a = now_ns();
        let t = read_counter();
        let b = now_ns();
        if b - a < best.2 {
            best = (t, a + (b - a) / 2, b - a);
        }
    }
    (best.0, best.1)
}

impl Counter {
    /// The start of a calibration: the finish comes at least a few ms later.
    pub fn begin() -> (u64, u64) {
        pair()
    }

    /// Completes a calibration begun with `begin`.
    pub fn finish(start: (u64, u64)) -> Option<Counter> {
        Self::anchored(start, pair())
    }

    fn anchored(start: (u64, u64), now: (u64, u64)) -> Option<Counter> {
        let ((t0, n0), (t1, n1)) = (start, now);
        let (dt, dn) = (t1.checked_sub(t0)?, n1.checked_sub(n0)?);
        if dt == 0 || dn < 1_000_000 {
            return None;
        }
        let mult = u64::try_from((u128::from(dn) << 32) / u128::from(dt)).ok()?;
        Some(Counter { start, base_tsc: t1, base_ns: n1, mult })
    }

    /// How far the counter, converted, is from CLOCK_MONOTONIC now, ns (+: ahead).
    pub fn drift_ns(self) -> i64 {
        let (t, n) = pair();
        self.to_ns(t) as i64 - n as i64
    }

    #[cfg(test)]
    fn with(base_tsc: u64, base_ns: u64, ghz: f64) -> Counter {
        Counter { start: (base_tsc, base_ns), base_tsc, base_ns, mult: ((1.0 / ghz) * 4_294_967_296.0) as u64 }
    }
}

impl LoopClock for Counter {
    #[inline(always)]
    fn read(self) -> u64 {
        read_counter()
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

/// Each architecture's counter, the one place that says it: the
/// architecture (as `std::env::consts::ARCH` names it), the counter's name
/// (its `--clock` value and the summary's `clock`), and the clocksource the
/// kernel must run for the counter to agree with BPF's timestamps.
const COUNTERS: [(&str, &str, &str); 2] = [("x86_64", "tsc", "tsc"), ("aarch64", "cntvct", "arch_sys_counter")];

/// The counter the loop can read on `arch`: its name and clocksource.
fn counter_of(arch: &str) -> Option<(&'static str, &'static str)> {
    COUNTERS.iter().find(|c| c.0 == arch).map(|&(_, name, source)| (name, source))
}

/// The counter the loop can read on `arch` (as `std::env::consts::ARCH`
/// names it): its name for `--clock` and the summary's `clock`.
pub fn counter_name(arch: &str) -> Option<&'static str> {
    counter_of(arch).map(|(name, _)| name)
}

/// Whether `name` is some architecture's counter (a `--clock` value).
#[cfg(test)]
pub fn is_counter(name: &str) -> bool {
    COUNTERS.iter().any(|c| c.1 == name)
}

/// Whether the CPU's counter can stand in for CLOCK_MONOTONIC on `arch`:
/// it must be the kernel's own clocksource (so it agrees with BPF's
/// timestamps) and, on x86_64, invariant (constant_tsc and nonstop_tsc:
/// one rate whatever the frequency and idle state; arm64's architected
/// counter always is). Ok: the counter's name; Err says why not, in a few
/// words.
pub fn counter_usable(root: &Path, arch: &str) -> Result<&'static str, String> {
    let Some((name, source)) = counter_of(arch) else {
        return Err(format!("no counter clock on {arch} (the TSC is x86_64's, CNTVCT_EL0 arm64's)"));
    };
    if arch == "x86_64" {
        let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).map_err(|e| format!("cannot read /proc/cpuinfo: {e}"))?;
        let flags: Vec<&str> =
            cpuinfo.lines().find_map(|l| l.strip_prefix("flags")).map(|f| f.split_whitespace().collect()).unwrap_or_default();
        for need in ["constant_tsc", "nonstop_tsc"] {
            if !flags.contains(&need) {
                return Err(format!("the TSC is not invariant (no {need} flag)"));
            }
        }
    }
    let cs = std::fs::read_to_string(root.join("sys/devices/system/clocksource/clocksource0/current_clocksource")).unwrap_or_default();
    match cs.trim() {
        c if c == source => Ok(name),
        "" => Err("the kernel's clocksource cannot be read".into()),
        other => Err(format!("the kernel's clocksource is {}, not {source}", crate::sanitize::visible(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_at_a_few_ghz() {
        let c = Counter::with(1_000_000, 5_000_000_000, 2.5);
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
    fn unusable_counters_say_why() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/clocksource/clocksource0")).unwrap();
        let source = |s: &str| std::fs::write(d.path().join("sys/devices/system/clocksource/clocksource0/current_clocksource"), s).unwrap();
        std::fs::write(d.path().join("proc/cpuinfo"), "flags\t\t: fpu tsc constant_tsc\n").unwrap();
        assert_eq!(counter_usable(d.path(), "x86_64"), Err("the TSC is not invariant (no nonstop_tsc flag)".into()));
        std::fs::write(d.path().join("proc/cpuinfo"), "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n").unwrap();
        source("kvm-clock\n");
        assert_eq!(counter_usable(d.path(), "x86_64"), Err("the kernel's clocksource is kvm-clock, not tsc".into()));
        source("tsc\n");
        assert_eq!(counter_usable(d.path(), "x86_64"), Ok("tsc"));
        // arm64: its cpuinfo has no such flags; the architected counter
        // must be the clocksource.
        std::fs::write(d.path().join("proc/cpuinfo"), "Features\t: fp asimd evtstrm\n").unwrap();
        assert_eq!(counter_usable(d.path(), "aarch64"), Err("the kernel's clocksource is tsc, not arch_sys_counter".into()));
        source("arch_sys_counter\n");
        assert_eq!(counter_usable(d.path(), "aarch64"), Ok("cntvct"));
        assert!(counter_usable(d.path(), "riscv64").unwrap_err().starts_with("no counter clock on riscv64"));
        assert_eq!(["x86_64", "aarch64", "riscv64"].map(counter_name), [Some("tsc"), Some("cntvct"), None]);
    }

    /// The counter this build reads, read for real: it moves with time and
    /// converts to about the time slept (x86_64's here; arm64's where the
    /// tests are run on one).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn the_counter_advances_and_converts_to_monotonic_time() {
        let start = Counter::begin();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let c = Counter::finish(start).expect("5 ms is enough to calibrate");
        let a = read_counter();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = read_counter();
        assert!(b > a);
        // 2 ms of sleep, converted: at least 2 ms, and not wildly more.
        let ns = c.delta_ns(b - a);
        assert!((2_000_000..2_000_000_000).contains(&ns), "{ns} ns");
    }
}
